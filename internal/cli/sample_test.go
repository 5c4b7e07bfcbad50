package cli

import (
	"bytes"
	"encoding/json"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/dcdit/dcdit/internal/fixtures"
	"github.com/dcdit/dcdit/loaders/dtype"
	"github.com/dcdit/dcdit/loaders/safetensors"
)

// ditTiny is the dit-tiny fixture's weights (input 8, 4 channels, 10
// classes; heads are not stored, so every run passes --num-heads 4).
func ditTiny(t *testing.T) string {
	t.Helper()
	root, err := fixtures.Root()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(root, "dit-tiny", "weights.safetensors")
}

// tinyDiffusers lays the fixture's diffusers-named weights out as a
// diffusers model folder, with the config.json that tells heads and size.
func tinyDiffusers(t *testing.T) string {
	t.Helper()
	src := filepath.Dir(ditTiny(t))
	var fixture struct {
		Diffusers json.RawMessage `json:"diffusers_config"`
	}
	raw, err := os.ReadFile(filepath.Join(src, "config.json"))
	if err == nil {
		err = json.Unmarshal(raw, &fixture)
	}
	if err != nil {
		t.Fatal(err)
	}
	weights, err := os.ReadFile(filepath.Join(src, "weights-diffusers.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "dit-tiny-diffusers")
	tr := filepath.Join(dir, "transformer")
	if err := os.MkdirAll(tr, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{"config.json": fixture.Diffusers, "diffusion_pytorch_model.safetensors": weights} {
		if err := os.WriteFile(filepath.Join(tr, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// sampleRun runs `dcdit sample` writing to a fresh folder and returns the
// latents file's path with the outputs.
func sampleRun(t *testing.T, args ...string) (out string, code int, stdout, stderr string) {
	t.Helper()
	out = filepath.Join(t.TempDir(), "latents.safetensors")
	code, stdout, stderr = run(t, append([]string{"sample", "--out", out}, args...)...)
	return out, code, stdout, stderr
}

// readLatents returns the single "latents" tensor's shape and raw bytes and
// the file's metadata, checking the tensor is F32 and finite.
func readLatents(t *testing.T, path string) ([]int64, []byte, map[string]string) {
	t.Helper()
	f, err := safetensors.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if n := len(f.Tensors()); n != 1 {
		t.Fatalf("%s holds %d tensors, want 1 (latents)", path, n)
	}
	tn, ok := f.Tensor("latents")
	if !ok {
		t.Fatalf("%s has no tensor \"latents\"", path)
	}
	if tn.DType != dtype.F32 {
		t.Fatalf("latents dtype %v, want F32", tn.DType)
	}
	v, err := tn.Float32()
	if err != nil {
		t.Fatal(err)
	}
	for i, x := range v {
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			t.Fatalf("latents[%d] = %v", i, x)
		}
	}
	raw, err := tn.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	return slices.Clone(tn.Shape), bytes.Clone(raw), f.Metadata()
}

func TestSampleOutput(t *testing.T) {
	tiny := ditTiny(t)
	cases := []struct {
		name  string
		args  []string
		shape []int64
		meta  map[string]string
	}{
		{"defaults", []string{tiny, "--num-heads", "4", "--steps", "5"}, []int64{1, 4, 8, 8},
			map[string]string{"dcdit.classes": "0", "dcdit.num": "1", "dcdit.labels": "0", "dcdit.steps": "5", "dcdit.cfg": "4", "dcdit.cfg_channels": "3", "dcdit.seed": "0", "dcdit.sampler": "ddpm", "dcdit.checkpoint": tiny}},
		{"classes x num", []string{tiny, "--num-heads", "4", "--steps", "3", "--class", "1,7", "--num", "3", "--seed", "42"}, []int64{6, 4, 8, 8},
			map[string]string{"dcdit.classes": "1,7", "dcdit.num": "3", "dcdit.labels": "1,1,1,7,7,7", "dcdit.steps": "3", "dcdit.seed": "42"}},
		{"repeated --class", []string{tiny, "--num-heads", "4", "--steps", "2", "--class", "9", "--class", "2"}, []int64{2, 4, 8, 8},
			map[string]string{"dcdit.classes": "9,2", "dcdit.labels": "9,2"}},
		{"no guidance", []string{tiny, "--num-heads", "4", "--steps", "2", "--cfg", "1"}, []int64{1, 4, 8, 8},
			map[string]string{"dcdit.cfg": "1", "dcdit.cfg_channels": "0"}},
		{"all channels", []string{tiny, "--num-heads", "4", "--steps", "2", "--cfg", "1.5", "--cfg-all-channels"}, []int64{1, 4, 8, 8},
			map[string]string{"dcdit.cfg": "1.5", "dcdit.cfg_channels": "4"}},
		{"diffusers folder", []string{tinyDiffusers(t), "--steps", "2", "--class", "3"}, []int64{1, 4, 8, 8},
			map[string]string{"dcdit.labels": "3"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, code, stdout, stderr := sampleRun(t, c.args...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			if !strings.HasPrefix(stdout, "wrote "+out+": latents ") {
				t.Errorf("stdout = %q", stdout)
			}
			shape, _, md := readLatents(t, out)
			if !slices.Equal(shape, c.shape) {
				t.Errorf("shape %v, want %v", shape, c.shape)
			}
			if md["format"] != "pt" {
				t.Errorf("metadata format = %q, want pt", md["format"])
			}
			for k, want := range c.meta {
				if md[k] != want {
					t.Errorf("metadata %s = %q, want %q", k, md[k], want)
				}
			}
		})
	}
}

// The same seed and flags give bit-identical latents; anything that should
// change them does.
func TestSampleDeterminism(t *testing.T) {
	tiny := ditTiny(t)
	base := []string{tiny, "--num-heads", "4", "--steps", "4", "--class", "1,2", "--num", "2"}
	latents := func(extra ...string) []byte {
		t.Helper()
		out, code, _, stderr := sampleRun(t, append(slices.Clone(base), extra...)...)
		if code != 0 {
			t.Fatalf("exit %d: %s", code, stderr)
		}
		_, raw, _ := readLatents(t, out)
		return raw
	}
	ref := latents("--seed", "7")
	if again := latents("--seed", "7"); !bytes.Equal(ref, again) {
		t.Fatal("two runs with --seed 7 differ")
	}
	// The same weights under diffusers names load into the same model.
	out, code, _, stderr := sampleRun(t, append([]string{tinyDiffusers(t)}, append(base[1:], "--seed", "7")...)...)
	if code != 0 {
		t.Fatalf("diffusers naming: exit %d: %s", code, stderr)
	}
	if _, raw, _ := readLatents(t, out); !bytes.Equal(ref, raw) {
		t.Error("the diffusers naming of the same weights gave other latents")
	}
	cases := []struct {
		name string
		args []string
	}{
		{"seed", []string{"--seed", "8"}},
		{"cfg scale", []string{"--seed", "7", "--cfg", "2"}},
		{"cfg channels", []string{"--seed", "7", "--cfg-all-channels"}},
		{"steps", []string{"--seed", "7", "--steps", "5"}},
	}
	for _, c := range cases {
		if bytes.Equal(ref, latents(c.args...)) {
			t.Errorf("changing %s left the latents unchanged", c.name)
		}
	}
}

func TestSamplePNG(t *testing.T) {
	tiny := ditTiny(t)
	pngPath := filepath.Join(t.TempDir(), "preview.png")
	_, code, stdout, stderr := sampleRun(t, tiny, "--num-heads", "4", "--steps", "2", "--class", "1,2,3", "--num", "2", "--png", pngPath)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !strings.Contains(stdout, "wrote "+pngPath+": linear latent-to-RGB preview") || !strings.Contains(stdout, "not a VAE decode") {
		t.Errorf("stdout = %q", stdout)
	}
	f, err := os.Open(pngPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("%s is not a PNG: %v", pngPath, err)
	}
	// One row per class, --num columns, each 8×8 latent drawn at 8×.
	if b := img.Bounds(); b.Dx() != 2*64 || b.Dy() != 3*64 {
		t.Errorf("preview is %dx%d, want 128x192", b.Dx(), b.Dy())
	}
}

func TestSampleQuiet(t *testing.T) {
	_, code, stdout, stderr := sampleRun(t, ditTiny(t), "--num-heads", "4", "--steps", "2", "--quiet")
	if code != 0 || stdout != "" || stderr != "" {
		t.Errorf("exit %d, stdout %q, stderr %q; want 0 and silence", code, stdout, stderr)
	}
	// Without --num-heads the head count is assumed, and said so.
	_, code, _, stderr = sampleRun(t, ditTiny(t), "--steps", "1")
	if code != 0 || !strings.Contains(stderr, "warning: num_heads is not stored") || strings.Contains(stderr, "learned sigma") {
		t.Errorf("exit %d, stderr %q; want the head-count warning only", code, stderr)
	}
}

// Bad input exits 1 and usage mistakes exit 2, each with one line naming
// the culprit, and no output file is left behind.
func TestSampleErrors(t *testing.T) {
	tiny := ditTiny(t)
	dir := t.TempDir()
	aFile := filepath.Join(dir, "file")
	if err := os.WriteFile(aFile, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		args []string
		code int
		want []string
	}{
		{"missing checkpoint", []string{filepath.Join(dir, "nope.safetensors")}, 1, []string{"nope.safetensors"}},
		{"not a DiT", []string{filepath.Join(testdata, "checkpoints", "zimage-comfy.safetensors")}, 1, []string{"zimage-comfy.safetensors", "not a DiT"}},
		{"class out of range", []string{tiny, "--num-heads", "4", "--class", "3,10"}, 1, []string{"--class 10", "10 classes", "0..9"}},
		{"out folder missing", []string{tiny, "--num-heads", "4", "--out", filepath.Join(dir, "no", "x.safetensors")}, 1, []string{"--out", filepath.Join(dir, "no"), "does not exist"}},
		{"out under a file", []string{tiny, "--num-heads", "4", "--out", filepath.Join(aFile, "x.safetensors")}, 1, []string{"--out", aFile, "not a folder"}},
		{"out is a folder", []string{tiny, "--num-heads", "4", "--out", dir}, 1, []string{"--out", dir, "is a folder"}},
		{"png folder missing", []string{tiny, "--num-heads", "4", "--png", filepath.Join(dir, "no", "p.png")}, 1, []string{"--png", "does not exist"}},
		{"steps 0", []string{tiny, "--steps", "0"}, 2, []string{"--steps 0", "1..1000"}},
		{"steps 1001", []string{tiny, "--steps", "1001"}, 2, []string{"--steps 1001"}},
		{"num 0", []string{tiny, "--num", "0"}, 2, []string{"--num 0"}},
		{"negative class", []string{tiny, "--class", "-1"}, 2, []string{"--class -1"}},
		{"class not a number", []string{tiny, "--class", "cat"}, 2, []string{"--class", "cat"}},
		{"cfg not finite", []string{tiny, "--cfg", "inf"}, 2, []string{"--cfg"}},
		{"png is out", []string{tiny, "--png", filepath.Join(dir, "same"), "--out", filepath.Join(dir, "same")}, 2, []string{"--png and --out"}},
		{"no checkpoint", nil, 2, []string{"sample takes 1 argument(s), the CHECKPOINT; got 0"}},
		{"unknown flag", []string{tiny, "--vae", "x"}, 2, []string{"unknown flag: --vae"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "latents.safetensors")
			args := append([]string{"sample", "--out", out}, c.args...)
			code, stdout, stderr := run(t, args...)
			if code != c.code {
				t.Errorf("exit %d, want %d (stderr %q)", code, c.code, stderr)
			}
			if stdout != "" {
				t.Errorf("stdout = %q, want nothing", stdout)
			}
			lines := strings.Split(strings.TrimSpace(stderr), "\n")
			if len(lines) != 1 || !strings.HasPrefix(lines[0], "dcdit: ") || strings.Contains(stderr, "internal error") {
				t.Errorf("stderr is not one 'dcdit: ' line: %q", stderr)
			}
			for _, w := range c.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr %q lacks %q", stderr, w)
				}
			}
			if _, err := os.Stat(out); err == nil {
				t.Errorf("%s was written despite the error", out)
			}
		})
	}
}

func TestSampleHelp(t *testing.T) {
	code, out, _ := run(t, "sample", "--help")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	for _, want := range []string{"VAE is not supported yet", "comes later", "linear latent-to-RGB", "--cfg-all-channels", "--num-heads", "samples per --class label", "(default 250)", "(default 4)"} {
		if !strings.Contains(out, want) {
			t.Errorf("help lacks %q", want)
		}
	}
}

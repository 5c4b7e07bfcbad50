package cli

import (
	"bytes"
	"encoding/json"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/dcdit/dcdit/internal/fixtures"
	"github.com/dcdit/dcdit/loaders/dtype"
	"github.com/dcdit/dcdit/loaders/safetensors"
)

// tinyDiT is what the sample tests need to know of the first dit-tiny
// fixture case, read from its config.json: no size, head count or class
// count of a particular case is written into the tests, since other
// fixture sets of the same format run too.
type tinyDiT struct {
	weights  string // the original-naming weights file
	dir      string // the case folder
	heads    string // --num-heads (heads are not stored in the weights)
	channels int    // latent channels
	size     int    // latent side
	classes  int    // number of classes (the null class is one more)
}

// ditTinyCase reads the first dit-tiny case under the fixture root.
func ditTinyCase(t *testing.T) tinyDiT {
	t.Helper()
	root, err := fixtures.Root()
	if err != nil {
		t.Fatal(err)
	}
	cases, err := fixtures.Discover(root, "dit-tiny")
	if err != nil {
		t.Fatal(err)
	}
	if len(cases) == 0 {
		t.Fatalf("no dit-tiny fixture case under %s", root)
	}
	c := cases[0]
	get := func(key string) int { return c.PositiveInt(t, key) }
	return tinyDiT{weights: filepath.Join(c.Dir, "weights.safetensors"), dir: c.Dir, heads: strconv.Itoa(get("num_heads")),
		channels: get("in_channels"), size: get("input_size"), classes: get("num_classes")}
}

// ditTiny is the dit-tiny fixture's weights file.
func ditTiny(t *testing.T) string { return ditTinyCase(t).weights }

// shape is the latents shape of n samples.
func (d tinyDiT) shape(n int) []int64 {
	return []int64{int64(n), int64(d.channels), int64(d.size), int64(d.size)}
}

// class maps a label of the tests to one of the case's classes.
func (d tinyDiT) class(i int) string { return strconv.Itoa(i % d.classes) }

// tinyDiffusers lays the fixture's diffusers-named weights out as a
// diffusers model folder, with the config.json that tells heads and size.
func tinyDiffusers(t *testing.T) string {
	t.Helper()
	src := ditTinyCase(t).dir
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
	d := ditTinyCase(t)
	tiny, heads := d.weights, d.heads
	a, b, c9, c2, c3 := d.class(1), d.class(7), d.class(9), d.class(2), d.class(3)
	// DiT's forward_with_cfg guides 3 channels (all of them with
	// --cfg-all-channels): the reference's choice, not the case's.
	guided := strconv.Itoa(min(3, d.channels))
	cases := []struct {
		name  string
		args  []string
		shape []int64
		meta  map[string]string
	}{
		{"defaults", []string{tiny, "--num-heads", heads, "--steps", "5"}, d.shape(1),
			map[string]string{"dcdit.classes": "0", "dcdit.num": "1", "dcdit.labels": "0", "dcdit.steps": "5", "dcdit.cfg": "4", "dcdit.cfg_channels": guided, "dcdit.seed": "0", "dcdit.sampler": "ddpm", "dcdit.checkpoint": tiny}},
		{"classes x num", []string{tiny, "--num-heads", heads, "--steps", "3", "--class", a + "," + b, "--num", "3", "--seed", "42"}, d.shape(6),
			map[string]string{"dcdit.classes": a + "," + b, "dcdit.num": "3", "dcdit.labels": strings.Join([]string{a, a, a, b, b, b}, ","), "dcdit.steps": "3", "dcdit.seed": "42"}},
		{"repeated --class", []string{tiny, "--num-heads", heads, "--steps", "2", "--class", c9, "--class", c2}, d.shape(2),
			map[string]string{"dcdit.classes": c9 + "," + c2, "dcdit.labels": c9 + "," + c2}},
		{"no guidance", []string{tiny, "--num-heads", heads, "--steps", "2", "--cfg", "1"}, d.shape(1),
			map[string]string{"dcdit.cfg": "1", "dcdit.cfg_channels": "0"}},
		{"all channels", []string{tiny, "--num-heads", heads, "--steps", "2", "--cfg", "1.5", "--cfg-all-channels"}, d.shape(1),
			map[string]string{"dcdit.cfg": "1.5", "dcdit.cfg_channels": strconv.Itoa(d.channels)}},
		{"diffusers folder", []string{tinyDiffusers(t), "--steps", "2", "--class", c3}, d.shape(1),
			map[string]string{"dcdit.labels": c3}},
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
	d := ditTinyCase(t)
	base := []string{d.weights, "--num-heads", d.heads, "--steps", "4", "--class", d.class(1) + "," + d.class(2), "--num", "2"}
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
	d := ditTinyCase(t)
	pngPath := filepath.Join(t.TempDir(), "preview.png")
	_, code, stdout, stderr := sampleRun(t, d.weights, "--num-heads", d.heads, "--steps", "2", "--class", d.class(1)+","+d.class(2)+","+d.class(3), "--num", "2", "--png", pngPath)
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
	// One row per class, --num columns, each latent drawn at 8× (the
	// VAE's factor).
	tile := 8 * d.size
	if b := img.Bounds(); b.Dx() != 2*tile || b.Dy() != 3*tile {
		t.Errorf("preview is %dx%d, want %dx%d", b.Dx(), b.Dy(), 2*tile, 3*tile)
	}
}

func TestSampleQuiet(t *testing.T) {
	d := ditTinyCase(t)
	_, code, stdout, stderr := sampleRun(t, d.weights, "--num-heads", d.heads, "--steps", "2", "--quiet")
	if code != 0 || stdout != "" || stderr != "" {
		t.Errorf("exit %d, stdout %q, stderr %q; want 0 and silence", code, stdout, stderr)
	}
	// Without --num-heads the head count is assumed, and said so.
	_, code, _, stderr = sampleRun(t, d.weights, "--steps", "1")
	if code != 0 || !strings.Contains(stderr, "warning: num_heads is not stored") || strings.Contains(stderr, "learned sigma") {
		t.Errorf("exit %d, stderr %q; want the head-count warning only", code, stderr)
	}
}

// Bad input exits 1 and usage mistakes exit 2, each with one line naming
// the culprit, and no output file is left behind.
func TestSampleErrors(t *testing.T) {
	d := ditTinyCase(t)
	tiny, heads := d.weights, d.heads
	nc := strconv.Itoa(d.classes)
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
		{"class out of range", []string{tiny, "--num-heads", heads, "--class", d.class(3) + "," + nc}, 1, []string{"--class " + nc, nc + " classes", "0.." + strconv.Itoa(d.classes-1)}},
		{"out folder missing", []string{tiny, "--num-heads", heads, "--out", filepath.Join(dir, "no", "x.safetensors")}, 1, []string{"--out", filepath.Join(dir, "no"), "does not exist"}},
		{"out under a file", []string{tiny, "--num-heads", heads, "--out", filepath.Join(aFile, "x.safetensors")}, 1, []string{"--out", aFile, "not a folder"}},
		{"out is a folder", []string{tiny, "--num-heads", heads, "--out", dir}, 1, []string{"--out", dir, "is a folder"}},
		{"png folder missing", []string{tiny, "--num-heads", heads, "--png", filepath.Join(dir, "no", "p.png")}, 1, []string{"--png", "does not exist"}},
		{"steps 0", []string{tiny, "--steps", "0"}, 2, []string{"--steps 0", "1..1000"}},
		{"steps 1001", []string{tiny, "--steps", "1001"}, 2, []string{"--steps 1001"}},
		{"num 0", []string{tiny, "--num", "0"}, 2, []string{"--num 0"}},
		{"negative class", []string{tiny, "--class", "-1"}, 2, []string{"--class -1"}},
		{"class not a number", []string{tiny, "--class", "cat"}, 2, []string{"--class", "cat"}},
		{"cfg not finite", []string{tiny, "--cfg", "inf"}, 2, []string{"--cfg"}},
		{"png is out", []string{tiny, "--png", filepath.Join(dir, "same"), "--out", filepath.Join(dir, "same")}, 2, []string{"--png and --out"}},
		{"no checkpoint", nil, 2, []string{"sample takes 1 argument(s), the CHECKPOINT; got 0"}},
		{"unknown flag", []string{tiny, "--vea", "x"}, 2, []string{"unknown flag: --vea"}},
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
	for _, want := range []string{"decoded into pictures by the VAE", "--vae", "linear latent-to-RGB", "--cfg-all-channels", "--num-heads", "samples per --class label", "(default 250)", "(default 4)"} {
		if !strings.Contains(out, want) {
			t.Errorf("help lacks %q", want)
		}
	}
}

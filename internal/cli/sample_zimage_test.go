package cli

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/dcdit/dcdit/datasets/shapes"
	"github.com/dcdit/dcdit/internal/fixtures"
	"github.com/dcdit/dcdit/internal/testckpt"
	"github.com/dcdit/dcdit/loaders/dtype"
	"github.com/dcdit/dcdit/loaders/safetensors"
	"github.com/dcdit/dcdit/zimage"
)

// tinyZImage is what the Z-Image sample tests need to know of the first
// zimage-tiny fixture case, read from its config.json, so that other
// cases of the same format run too.
type tinyZImage struct {
	weights, config string
	channels        int // latent channels
	patch           int // patch side
	capDim          int // cap_feat_dim
}

func zimageTinyCase(t *testing.T) tinyZImage {
	t.Helper()
	root, err := fixtures.Root()
	if err != nil {
		t.Fatal(err)
	}
	cases, err := fixtures.Discover(root, "zimage-tiny")
	if err != nil {
		t.Fatal(err)
	}
	if len(cases) == 0 {
		t.Fatalf("no zimage-tiny fixture case under %s", root)
	}
	c := cases[0]
	patches, _ := c.Config["all_patch_size"].([]any)
	p, _ := func() (float64, bool) {
		if len(patches) == 0 {
			return 0, false
		}
		v, ok := patches[0].(float64)
		return v, ok
	}()
	if !(p >= 1) {
		t.Fatalf("%s: config.json has no all_patch_size", c.Dir)
	}
	return tinyZImage{weights: filepath.Join(c.Dir, "weights.safetensors"), config: filepath.Join(c.Dir, "config.json"),
		channels: c.PositiveInt(t, "in_channels"), patch: int(p), capDim: c.PositiveInt(t, "cap_feat_dim")}
}

// size is a latent grid of rows×cols patches, as --size takes it.
func (z tinyZImage) size(rows, cols int) string {
	return fmt.Sprintf("%dx%d", rows*z.patch, cols*z.patch)
}

// capsFile describes a captions file to write: cap_feats [n, L, dim] of
// seeded random features and cap_lens; mutate may break it.
type capsFile struct {
	n, L, dim int
	lens      []int64
	seed      uint64
	// shape, when set, replaces cap_feats' shape (same values).
	shape []int64
	// nan puts a NaN at this flat index of cap_feats when ≥ 0.
	nan int
	// noFeats and noLens leave the tensors out.
	noFeats, noLens bool
}

func (f capsFile) write(t *testing.T, path string) string {
	t.Helper()
	rng := rand.New(rand.NewPCG(f.seed, 1))
	feats := make([]float32, f.n*f.L*f.dim)
	for i := range feats {
		feats[i] = float32(rng.NormFloat64())
	}
	if f.nan >= 0 {
		feats[f.nan] = float32(math.NaN())
	}
	shape := f.shape
	if shape == nil {
		shape = []int64{int64(f.n), int64(f.L), int64(f.dim)}
	}
	lens := make([]byte, 8*len(f.lens))
	for i, v := range f.lens {
		binary.LittleEndian.PutUint64(lens[8*i:], uint64(v))
	}
	var ts []safetensors.WriteTensor
	if !f.noFeats {
		ts = append(ts, safetensors.WriteTensor{Name: "cap_feats", DType: dtype.F32, Shape: shape, Data: dtype.F32Bytes(feats)})
	}
	if !f.noLens {
		ts = append(ts, safetensors.WriteTensor{Name: "cap_lens", DType: dtype.I64, Shape: []int64{int64(len(f.lens))}, Data: lens})
	}
	if err := safetensors.Write(path, ts, nil); err != nil {
		t.Fatal(err)
	}
	return path
}

// zimageCaps writes the standard two captions of different lengths (one
// shorter than a padding multiple, one longer) and one negative.
func zimageCaps(t *testing.T, z tinyZImage) (caps, neg string) {
	t.Helper()
	dir := t.TempDir()
	caps = capsFile{n: 2, L: 40, dim: z.capDim, lens: []int64{7, 40}, seed: 1, nan: -1}.write(t, filepath.Join(dir, "caps.safetensors"))
	neg = capsFile{n: 2, L: 5, dim: z.capDim, lens: []int64{3, 5}, seed: 2, nan: -1}.write(t, filepath.Join(dir, "neg.safetensors"))
	return caps, neg
}

func TestSampleZImage(t *testing.T) {
	z := zimageTinyCase(t)
	caps, neg := zimageCaps(t, z)
	base := []string{z.weights, "--config", z.config, "--captions", caps, "--size", z.size(4, 3), "--steps", "3"}
	latents := func(extra ...string) ([]int64, []byte, map[string]string) {
		t.Helper()
		out, code, stdout, stderr := sampleRun(t, append(slices.Clone(base), extra...)...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", extra, code, stderr)
		}
		if !strings.HasPrefix(stdout, "wrote "+out+": latents ") {
			t.Errorf("stdout = %q", stdout)
		}
		return readLatents(t, out)
	}
	shape, ref, md := latents("--seed", "7")
	if want := []int64{2, int64(z.channels), int64(4 * z.patch), int64(3 * z.patch)}; !slices.Equal(shape, want) {
		t.Errorf("shape %v, want %v", shape, want)
	}
	for k, want := range map[string]string{"dcdit.sampler": "flowmatch-euler", "dcdit.architecture": "zimage", "dcdit.steps": "3",
		"dcdit.seed": "7", "dcdit.cap_lens": "7,40", "dcdit.schedule": "tongyi", "dcdit.guided": "false", "format": "pt"} {
		if md[k] != want {
			t.Errorf("metadata %s = %q, want %q", k, md[k], want)
		}
	}
	if _, again, _ := latents("--seed", "7"); !bytes.Equal(ref, again) {
		t.Fatal("two runs with --seed 7 differ")
	}
	// Under Tongyi's rule a scale of 1 does not guide: with a negative
	// given, the run is the unguided loop, bit for bit.
	if _, raw, md := latents("--seed", "7", "--cfg", "1", "--negative", neg); !bytes.Equal(ref, raw) || md["dcdit.guided"] != "false" {
		t.Error("--cfg 1 under the tongyi schedule differs from the unguided run")
	}
	cases := []struct {
		name string
		args []string
	}{
		{"seed", []string{"--seed", "8"}},
		{"steps", []string{"--seed", "7", "--steps", "2"}},
		{"guidance", []string{"--seed", "7", "--cfg", "2", "--negative", neg}},
		{"diffusers schedule", []string{"--seed", "7", "--schedule", "diffusers"}},
		{"shift", []string{"--seed", "7", "--shift", "6"}},
	}
	for _, c := range cases {
		if _, raw, _ := latents(c.args...); bytes.Equal(ref, raw) {
			t.Errorf("changing %s left the latents unchanged", c.name)
		}
	}
	// One negative serves every caption, as the pipelines repeat a single
	// negative prompt.
	one := capsFile{n: 1, L: 5, dim: z.capDim, lens: []int64{3}, seed: 2, nan: -1}.write(t, filepath.Join(t.TempDir(), "one.safetensors"))
	if _, _, md := latents("--cfg", "2", "--negative", one, "--cfg-truncation", "0.5", "--cfg-normalization", "1"); md["dcdit.guided"] != "true" || md["dcdit.cfg_truncation"] != "0.5" {
		t.Errorf("guided run metadata %v", md)
	}
}

// Bad captions and sizes exit 1 with one line naming the file, the tensor,
// and what was expected and found; usage mistakes exit 2. No output file
// is left behind.
func TestSampleZImageErrors(t *testing.T) {
	z := zimageTinyCase(t)
	caps, _ := zimageCaps(t, z)
	dir := t.TempDir()
	file := func(name string, f capsFile) string { return f.write(t, filepath.Join(dir, name)) }
	ok := capsFile{n: 2, L: 9, dim: z.capDim, lens: []int64{3, 9}, seed: 3, nan: -1}
	mut := func(change func(*capsFile)) capsFile { f := ok; f.lens = slices.Clone(ok.lens); change(&f); return f }
	noFeats := file("nofeats.safetensors", mut(func(f *capsFile) { f.noFeats = true }))
	noLens := file("nolens.safetensors", mut(func(f *capsFile) { f.noLens = true }))
	rank2 := file("rank2.safetensors", mut(func(f *capsFile) { f.shape = []int64{2, int64(9 * z.capDim)} }))
	wideDim := file("wide.safetensors", mut(func(f *capsFile) { f.dim = z.capDim + 1 }))
	long := file("long.safetensors", mut(func(f *capsFile) { f.lens = []int64{3, 10} }))
	empty := file("empty.safetensors", mut(func(f *capsFile) { f.lens = []int64{0, 9} }))
	lensN := file("lensn.safetensors", mut(func(f *capsFile) { f.lens = []int64{3, 9, 9} }))
	nan := file("nan.safetensors", mut(func(f *capsFile) { f.nan = 9*z.capDim + 2*z.capDim + 5 })) // caption 1, row 2, feature 5
	nanPad := file("nanpad.safetensors", mut(func(f *capsFile) { f.nan = 5 * z.capDim }))          // caption 0, row 5: padding
	three := file("three.safetensors", capsFile{n: 3, L: 4, dim: z.capDim, lens: []int64{1, 2, 3}, seed: 4, nan: -1})
	base := []string{z.weights, "--config", z.config, "--size", z.size(2, 2), "--steps", "2"}
	cdim := fmt.Sprint(z.capDim)
	cases := []struct {
		name string
		args []string
		code int
		want []string
	}{
		{"no --captions", nil, 1, []string{"Z-Image checkpoint", "--captions"}},
		{"missing cap_feats", []string{"--captions", noFeats}, 1, []string{noFeats, `no tensor "cap_feats"`, "[N, L, cap_feat_dim]", "cap_lens"}},
		{"missing cap_lens", []string{"--captions", noLens}, 1, []string{noLens, `no tensor "cap_lens"`, "I64 [2]"}},
		{"wrong rank", []string{"--captions", rank2}, 1, []string{rank2, `"cap_feats"`, fmt.Sprintf("[2 %d] (rank 2)", 9*z.capDim), "[N, L, cap_feat_dim] (rank 3)"}},
		{"cap_feat_dim", []string{"--captions", wideDim}, 1, []string{wideDim, `"cap_feats"`, fmt.Sprintf("%d features per token", z.capDim+1), "cap_feat_dim is " + cdim}},
		{"cap_lens > L", []string{"--captions", long}, 1, []string{long, "cap_lens[1] = 10", "want 1..9"}},
		{"cap_lens < 1", []string{"--captions", empty}, 1, []string{empty, "cap_lens[0] = 0", "want 1..9"}},
		{"cap_lens count", []string{"--captions", lensN}, 1, []string{lensN, `"cap_lens" has shape [3]`, "want [2]"}},
		{"NaN", []string{"--captions", nan}, 1, []string{nan, "cap_feats[1] row 2 feature 5 is NaN"}},
		{"negative count", []string{"--captions", caps, "--negative", three, "--cfg", "2"}, 1, []string{three, "3 captions", caps, "has 2", "want 2 (one per caption) or 1"}},
		{"bad negative", []string{"--captions", caps, "--negative", rank2, "--cfg", "2"}, 1, []string{"--negative " + rank2, "rank 2"}},
		{"size not a multiple of the patch", []string{"--captions", caps, "--size", fmt.Sprintf("%dx%d", 2*z.patch+1, 2*z.patch)}, 1,
			[]string{"--size", fmt.Sprintf("%d×%d patches", z.patch, z.patch), fmt.Sprintf("multiples of %d", z.patch)}},
		{"guidance without negative", []string{"--captions", caps, "--cfg", "3"}, 1, []string{"--negative"}},
		{"missing captions file", []string{"--captions", filepath.Join(dir, "nope.safetensors")}, 1, []string{"--captions", "nope.safetensors"}},
		{"size syntax", []string{"--captions", caps, "--size", "8by8"}, 2, []string{"--size \"8by8\"", "HxW"}},
		{"schedule", []string{"--captions", caps, "--schedule", "ddim"}, 2, []string{"--schedule \"ddim\"", "tongyi or diffusers"}},
		{"cfg-normalization", []string{"--captions", caps, "--cfg-normalization", "-1"}, 2, []string{"--cfg-normalization -1"}},
		{"class on Z-Image", []string{"--captions", caps, "--class", "3"}, 2, []string{"--class applies to DiT and DC checkpoints", "Z-Image"}},
		{"captions on DiT", []string{"--captions", caps}, 2, []string{"--captions applies to Z-Image checkpoints"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			args := append(slices.Clone(base), c.args...)
			if c.name == "captions on DiT" {
				args[0] = ditTiny(t)
			}
			out := filepath.Join(t.TempDir(), "latents.safetensors")
			code, stdout, stderr := run(t, append([]string{"sample", "--out", out}, args...)...)
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
	// Rows past cap_lens are padding: whatever they hold is ignored.
	if _, code, _, stderr := sampleRun(t, append(slices.Clone(base), "--captions", nanPad)...); code != 0 {
		t.Errorf("NaN in padding rows: exit %d: %s", code, stderr)
	}
}

func TestSampleZImageHelp(t *testing.T) {
	code, out, _ := run(t, "sample", "--help")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	for _, want := range []string{"--prompt (repeated, one sample each) runs the text encoder", "--captions", "cap_feats", "cap_lens", "--negative", "--size",
		"--cfg-truncation", "--cfg-normalization", "--schedule", `(default "tongyi")`, `(default "128x128")`, "encode-prompts", "--negative-prompt", "--text-encoder"} {
		if !strings.Contains(out, want) {
			t.Errorf("help lacks %q", want)
		}
	}
}

// A Z-Image trained by dcdit on the shapes captions records its caption
// table, and --prompt samples it from text, the empty prompt guiding;
// prompts outside its vocabulary, a model without a table, and --prompt
// beside --captions or --negative are refused.
func TestSampleZImagePrompt(t *testing.T) {
	dir := t.TempDir()
	cfg := testckpt.SmallZImageConfig()
	m, err := zimage.Init(cfg, 1)
	if err != nil {
		t.Fatal(err)
	}
	for i := range m.Params.Data {
		m.Params.Data[i] += float32(i%11) / 100 // a nonzero output
	}
	info, err := json.Marshal(shapes.NewCaptionTable(cfg.CapFeatDim, 3))
	if err != nil {
		t.Fatal(err)
	}
	model, plain := filepath.Join(dir, "model"), filepath.Join(dir, "plain")
	if err := zimage.Save(model, m, nil, map[string]string{shapes.CaptionTableKey: string(info)}); err != nil {
		t.Fatal(err)
	}
	if err := zimage.Save(plain, m, nil, nil); err != nil {
		t.Fatal(err)
	}
	args := []string{model, "--prompt", "a red disc", "--prompt", "a large blue square on left", "--size", "4x4", "--steps", "3", "--cfg", "2"}
	out, code, _, stderr := sampleRun(t, args...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	shape, _, md := readLatents(t, out)
	if !slices.Equal(shape, []int64{2, int64(cfg.InChannels), 4, 4}) || md["dcdit.guided"] != "true" || md["dcdit.cap_lens"] != "3,6" {
		t.Errorf("shape %v, metadata %v", shape, md)
	}
	for _, c := range []struct {
		name  string
		args  []string
		code  int
		parts []string
	}{
		{"an unknown word", []string{model, "--prompt", "a purple disc", "--size", "4x4"}, 1, []string{`--prompt "a purple disc"`, `word "purple"`, "the vocabulary: a small"}},
		{"no table", []string{plain, "--prompt", "a red disc", "--size", "4x4"}, 1, []string{"records no caption table", "--captions"}},
		{"with --negative", []string{model, "--prompt", "a red disc", "--negative", "x.safetensors"}, 2, []string{"--negative takes caption features"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			out, code, _, stderr := sampleRun(t, c.args...)
			if code != c.code {
				t.Fatalf("exit %d, want %d: %s", code, c.code, stderr)
			}
			for _, p := range c.parts {
				if !strings.Contains(stderr, p) {
					t.Errorf("stderr %q lacks %q", stderr, p)
				}
			}
			if _, err := os.Stat(out); !os.IsNotExist(err) {
				t.Errorf("output %s left behind", out)
			}
		})
	}
}

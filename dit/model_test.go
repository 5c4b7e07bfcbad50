package dit

import (
	"path/filepath"
	"testing"

	"github.com/nlpodyssey/spago/mat"

	"github.com/dcdit/dcdit/cond"
	"github.com/dcdit/dcdit/diffusion/ddpm"
	"github.com/dcdit/dcdit/internal/fixtures"
	"github.com/dcdit/dcdit/ops"
	"github.com/dcdit/dcdit/posembed"
)

const forwardTol = 5e-5

func loadFixtureModel(t *testing.T, c fixtures.Case, file string) *Model {
	t.Helper()
	heads, _ := c.Int("num_heads")
	path := filepath.Join(c.Dir, file)
	if file == "weights-diffusers.safetensors" {
		path = diffusersFolder(t, c)
		heads = 0 // the diffusers config says it
	}
	w, err := Load(path, LoadOptions{NumHeads: heads})
	if err != nil {
		t.Fatal(err)
	}
	m, err := New(w)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func floats(ints []int) []float32 {
	out := make([]float32, len(ints))
	for i, v := range ints {
		out[i] = float32(v)
	}
	return out
}

// ditInputs are the inputs of a dit-tiny io.safetensors (its README's
// table): every other tensor of the file is an output or an intermediate
// of the reference and must be compared.
var ditInputs = []string{"x", "t", "y", "cfg_x", "cfg_t", "cfg_y", "cfg_scale"}

// ditGuidedChannels is how many leading output channels DiT's
// forward_with_cfg guides (eps[:, :3], "for exact reproducibility"): a
// property of the reference code, not of a fixture case.
const ditGuidedChannels = 3

// computeDiT runs the model loaded from the case's weight file on the
// case's inputs and records every output and intermediate the reference
// provides: the conditioning and its two parts, the tokens, block 0, the
// output, and forward_with_cfg with the raw batch it combines.
func computeDiT(t *testing.T, c fixtures.Case, file string) *fixtures.Got {
	t.Helper()
	io := c.Open(t, "io.safetensors")
	m := loadFixtureModel(t, c, file)
	cfg := m.Config
	got := fixtures.NewGot()
	x, ts, y := io.F32("x"), floats(io.Ints("t")), io.Ints("y")
	B := len(ts)

	// t_embedder and y_embedder separately: Condition returns their sum.
	f := cfg.FrequencySize
	freq := make([]float32, B*f)
	// The reference's vectorised float32 exp is not correctly rounded: 15
	// of its 128 frequencies differ from ours by one ulp, which at t ≈ 1000
	// moves a sinusoid by up to ~3e-5. That is the forward tolerance, and
	// it moves the model output by ~4e-6.
	posembed.TimestepFrequencies(freq, ts, f)
	got.F32("t_freq", freq, forwardTol)
	h := ops.Linear(constant(B, f, freq), m.p("t_embedder.mlp.0.weight"), m.p("t_embedder.mlp.0.bias"))
	temb := ops.Linear(ops.SiLU(h), m.p("t_embedder.mlp.2.weight"), m.p("t_embedder.mlp.2.bias"))
	got.F32("t_emb", mat.Data[float32](temb.Value()), forwardTol)
	yemb := ops.GatherRows(m.p("y_embedder.embedding_table.weight"), y)
	got.F32("y_emb", mat.Data[float32](yemb.Value()), forwardTol)

	cv, err := m.Condition(cond.Input{T: ts, Labels: y})
	if err != nil {
		t.Fatal(err)
	}
	cvec := cv.Vector()
	got.F32("c", mat.Data[float32](cvec.Value()), forwardTol)
	tokens, offsets := m.Embed(x, B)
	got.F32("tokens_in", mat.Data[float32](tokens.Value()), forwardTol)
	got.F32("block0_out", mat.Data[float32](m.Block(0, tokens, cvec, offsets).Value()), forwardTol)
	image := func(out mat.Tensor, batch int) []float32 {
		img := make([]float32, batch*cfg.OutChannels()*cfg.InputSize*cfg.InputSize)
		Unpatchify(img, mat.Data[float32](out.Value()), batch, cfg.OutChannels(), cfg.InputSize, cfg.PatchSize, false)
		return img
	}
	got.F32("out", image(m.ForwardLatents(x, ts, y), B), forwardTol)

	// forward_with_cfg: only the first half of cfg_x is used; the raw
	// batch is [half; half] with labels cfg_y as given.
	cx, ct, cy := io.F32("cfg_x"), io.Ints("cfg_t"), io.Ints("cfg_y")
	half := len(ct) / 2
	halfX := cx[:len(cx)/2]
	raw := image(m.ForwardLatents(append(append([]float32(nil), halfX...), halfX...), floats(ct), cy), len(ct))
	got.F32("cfg_raw_out", raw, forwardTol)
	null, _ := c.Int("null_class")
	sh := ddpm.Shape{B: half, C: cfg.InChannels, HW: cfg.InputSize * cfg.InputSize}
	g := ddpm.Guidance{Scale: io.F32("cfg_scale")[0], NullClass: null}
	res, err := g.Guided(m.Denoiser(), sh)(halfX, ct[:half], cy[:half])
	if err != nil {
		t.Fatal(err)
	}
	// The reference returns both halves: each carries the guided channels,
	// and its own raw values on the others. Guided returns the conditional
	// half; the unconditional one is built from it and the raw batch.
	full := append(append([]float32(nil), res...), raw[len(res):]...)
	per := cfg.OutChannels() * sh.HW
	for b := range half {
		copy(full[(half+b)*per:(half+b)*per+ditGuidedChannels*sh.HW], res[b*per:])
	}
	got.F32("cfg_out", full, forwardTol)
	return got
}

// compareDiT checks a dit-tiny case's io.safetensors against got: every
// tensor must be an input or compared.
func compareDiT(c fixtures.Case, got *fixtures.Got, logf func(string, ...any)) []error {
	return fixtures.Compare(filepath.Join(c.Dir, "io.safetensors"), ditInputs, got, logf)
}

// The model reproduces the reference forward, its intermediates and
// forward_with_cfg, from either naming.
func TestFixtureForward(t *testing.T) {
	fixtures.Run(t, "dit-tiny", func(t *testing.T, c fixtures.Case) {
		for _, file := range []string{"weights.safetensors", "weights-diffusers.safetensors"} {
			t.Run(file, func(t *testing.T) {
				fixtures.Report(t, compareDiT(c, computeDiT(t, c, file), t.Logf))
			})
		}
	})
}

// A corrupted expected tensor (NaN, or one element 10% off) or a NaN input
// in a copy of the case fails the comparison of TestFixtureForward.
func TestFixtureForwardMutations(t *testing.T) {
	fixtures.Run(t, "dit-tiny", func(t *testing.T, c fixtures.Case) {
		got := computeDiT(t, c, "weights.safetensors")
		fixtures.CheckMutations(t, c, "io.safetensors", ditInputs, func(mc fixtures.Case) []error {
			return compareDiT(mc, got, nil)
		})
	})
}

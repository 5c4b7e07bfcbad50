package zimage

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/nlpodyssey/spago/mat"

	"github.com/dcdit/dcdit/internal/fixtures"
	"github.com/dcdit/dcdit/ops"
)

// Tolerances (the zimage-tiny README): forward tensors within 5e-5
// max-abs relative (the timestep sinusoid of t·1000 inherits DiT's
// one-ulp float32 exp differences, ~3e-5); RoPE tables and factors within
// 1e-6 absolute (float64 angles rounded to float32, float32 cos/sin).
const (
	forwardTol = 5e-5
	ropeTol    = 1e-6
	ioFile     = "io.safetensors"
)

// zimageInputs are the inputs of a zimage-tiny io.safetensors (its
// README's table); every other tensor is computed and compared.
var zimageInputs = []string{"x", "t", "cap_feats.*", "rope_probe.ids"}

// fixtureModel loads the case's weights with its config.json, which
// supplies what shapes cannot tell (axes_dims, rope_theta, t_scale, …).
func fixtureModel(t *testing.T, c fixtures.Case, path string) *Model {
	t.Helper()
	w, err := Load(path, LoadOptions{Config: c.Config})
	if err != nil {
		t.Fatal(err)
	}
	m, err := New(w)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// fixtureBatch reads the case's inputs: x [B, C, F, H, W] (item i is
// x[i]), t [B] and the captions cap_feats.i.
func fixtureBatch(t *testing.T, c fixtures.Case, io *fixtures.File) ([]Latent, []float32, [][]float32) {
	t.Helper()
	shape := io.Shape("x")
	if len(shape) != 5 {
		t.Fatalf("%s: x has shape %v, want [B, C, F, H, W]", c.Dir, shape)
	}
	B, C, F, H, W := int(shape[0]), int(shape[1]), int(shape[2]), int(shape[3]), int(shape[4])
	x := io.F32("x")
	per := C * F * H * W
	lats := make([]Latent, B)
	caps := make([][]float32, B)
	for i := range B {
		lats[i] = Latent{Data: x[i*per : (i+1)*per], F: F, H: H, W: W}
		caps[i] = io.F32(fmt.Sprintf("cap_feats.%d", i))
	}
	return lats, io.F32("t"), caps
}

func values(x mat.Tensor) []float32 { return mat.Data[float32](x.Value()) }

// padded is the reference's batch-padded view of a packed stream: the
// valid rows of each item, then copies of that item's padding row.
// Batch-padding rows are zero on input and are queries but never keys;
// their rotary factors are zero, so their queries are zero and they attend
// uniformly to the item's valid keys. All of an item's padding rows are
// therefore equal, and one row per item (pad) carries them.
type padded struct {
	x, pad mat.Tensor
	items  []int // items with padding rows, one pad row each
}

func newPadded(m *Model, x mat.Tensor, offsets []int) *padded {
	longest := 0
	for s := 0; s+1 < len(offsets); s++ {
		longest = max(longest, offsets[s+1]-offsets[s])
	}
	p := &padded{x: x}
	for s := 0; s+1 < len(offsets); s++ {
		if offsets[s+1]-offsets[s] < longest {
			p.items = append(p.items, s)
		}
	}
	D := m.Config.Dim
	p.pad = m.constant(len(p.items), D, make([]float32, len(p.items)*D))
	return p
}

// block applies a block to the valid rows and to the padding rows as the
// reference computes them.
func (p *padded) block(m *Model, prefix string, adaln mat.Tensor, s Stream) {
	var qkv mat.Tensor
	p.x = m.blockWith(prefix, p.x, adaln, s.Offsets, func(q mat.Tensor) mat.Tensor {
		qkv = q
		return m.attend(prefix, q, s)
	})
	if len(p.items) == 0 {
		return
	}
	D := m.Config.Dim
	meanV := ops.GatherRows(ops.MeanRows(ops.SliceCols(qkv, 2*D, 3*D), s.Offsets), p.items)
	var ada mat.Tensor
	if adaln != nil {
		ada = ops.GatherRows(adaln, p.items)
	}
	offs := make([]int, len(p.items)+1)
	for i := range offs {
		offs[i] = i
	}
	p.pad = m.blockWith(prefix, p.pad, ada, offs, func(mat.Tensor) mat.Tensor { return meanV })
}

// dense returns [B, longest, D] with each item's padding rows filled.
func (p *padded) dense(D int, offsets []int) []float32 {
	longest := 0
	for s := 0; s+1 < len(offsets); s++ {
		longest = max(longest, offsets[s+1]-offsets[s])
	}
	B := len(offsets) - 1
	x, pad := values(p.x), values(p.pad)
	out := make([]float32, B*longest*D)
	k := 0
	for s := range B {
		n := offsets[s+1] - offsets[s]
		copy(out[s*longest*D:], x[offsets[s]*D:offsets[s+1]*D])
		if n < longest {
			for r := n; r < longest; r++ {
				copy(out[(s*longest+r)*D:], pad[k*D:(k+1)*D])
			}
			k++
		}
	}
	return out
}

// mask is the reference's batch mask [B, longest]: 1 on each item's rows.
func mask(offsets []int) []int {
	longest := 0
	for s := 0; s+1 < len(offsets); s++ {
		longest = max(longest, offsets[s+1]-offsets[s])
	}
	var out []int
	for s := 0; s+1 < len(offsets); s++ {
		for r := range longest {
			out = append(out, b2i(r < offsets[s+1]-offsets[s]))
		}
	}
	return out
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

func ints(v []float64) []int {
	out := make([]int, len(v))
	for i, x := range v {
		out[i] = int(x)
	}
	return out
}

// computeZImage runs the model loaded from weights on the case's inputs
// and records every tensor the reference provides.
func computeZImage(t *testing.T, c fixtures.Case, weights string) *fixtures.Got {
	t.Helper()
	io := c.Open(t, ioFile)
	m := fixtureModel(t, c, weights)
	cfg := m.Config
	D := cfg.Dim
	got := fixtures.NewGot()
	lats, ts, caps := fixtureBatch(t, c, io)
	b, err := m.Prepare(lats, ts, caps)
	if err != nil {
		t.Fatal(err)
	}
	l := b.Layout
	got.Ints("cap_lens", l.CaptionLen)

	// Timestep conditioning.
	got.F32("t_freq", m.TimestepFrequencies(ts), forwardTol)
	adaln := m.Timestep(ts)
	got.F32("adaln_input", values(adaln), forwardTol)

	// Per-item padding masks, position ids and tokens.
	per := cfg.FPatchSize * cfg.PatchSize * cfg.PatchSize * cfg.InChannels
	realRow := 0
	for s := range lats {
		capMask := make([]int, l.CaptionPadded[s])
		for k := range capMask {
			capMask[k] = b2i(k >= l.CaptionLen[s])
		}
		got.Ints(fmt.Sprintf("cap_pad_mask.%d", s), capMask)
		got.Ints(fmt.Sprintf("cap_pos_ids.%d", s), ints(l.CaptionPos[3*l.CaptionOffsets[s]:3*l.CaptionOffsets[s+1]]))
		xMask := make([]int, l.ImagePadded[s])
		for k := range xMask {
			xMask[k] = b2i(k >= l.ImageLen[s])
		}
		got.Ints(fmt.Sprintf("x_pad_mask.%d", s), xMask)
		got.Ints(fmt.Sprintf("x_pos_ids.%d", s), ints(l.ImagePos[3*l.ImageOffsets[s]:3*l.ImageOffsets[s+1]]))
		if name := fmt.Sprintf("img_tokens.%d", s); io.Has(name) {
			// The reference pads by repeating the last real row; those
			// rows are replaced by x_pad_token after embedding.
			n := l.ImageLen[s]
			tok := append([]float32(nil), b.Patches[realRow*per:(realRow+n)*per]...)
			for range l.ImagePadded[s] - n {
				tok = append(tok, b.Patches[(realRow+n-1)*per:(realRow+n)*per]...)
			}
			got.F32(name, tok, 0)
		}
		realRow += l.ImageLen[s]
	}

	// RoPE: the per-axis tables, a probe, the unified stream's factors.
	for i, n := range cfg.AxesLens {
		got.Abs32(fmt.Sprintf("rope_table.%d", i), m.Rope.AxisTable(i, int(n)), ropeTol)
	}
	probeIDs := io.Ints("rope_probe.ids")
	probePos := make([]float64, len(probeIDs))
	for i, v := range probeIDs {
		probePos[i] = float64(v)
	}
	hd := m.Rope.HeadDim()
	probe := make([]float32, len(probeIDs)/3*hd)
	m.Rope.Freqs(probe, probePos)
	got.Abs32("rope_probe.freqs_cis", probe, ropeTol)
	unifiedStream := m.NewStream(l.UnifiedOffsets, l.UnifiedPos())
	got.Abs32("unified.freqs_cis", denseZero(values(unifiedStream.Freqs), hd, l.UnifiedOffsets), ropeTol)

	// Batch masks.
	got.Ints("noise_refiner.attn_mask", mask(l.ImageOffsets))
	got.Ints("context_refiner.attn_mask", mask(l.CaptionOffsets))
	got.Ints("unified.attn_mask", mask(l.UnifiedOffsets))

	// The streams, with the reference's batch-padding rows.
	img := newPadded(m, m.EmbedImage(b.Patches, l), l.ImageOffsets)
	imgStream := m.NewStream(l.ImageOffsets, l.ImagePos)
	for i := range cfg.NRefinerLayers {
		img.block(m, fmt.Sprintf("noise_refiner.%d.", i), adaln, imgStream)
	}
	got.F32("noise_refiner.out", img.dense(D, l.ImageOffsets), forwardTol)
	txt := newPadded(m, m.EmbedCaption(b.Captions, l), l.CaptionOffsets)
	txtStream := m.NewStream(l.CaptionOffsets, l.CaptionPos)
	for i := range cfg.NRefinerLayers {
		txt.block(m, fmt.Sprintf("context_refiner.%d.", i), nil, txtStream)
	}
	got.F32("context_refiner.out", txt.dense(D, l.CaptionOffsets), forwardTol)
	uni := newPadded(m, m.Unify(img.x, txt.x, l), l.UnifiedOffsets)
	uni.block(m, "layers.0.", adaln, unifiedStream)
	got.F32("layer0.out", uni.dense(D, l.UnifiedOffsets), forwardTol)

	// The whole forward pass, stacked as the reference stacks its list.
	outs, err := m.Forward(lats, ts, caps)
	if err != nil {
		t.Fatal(err)
	}
	var out []float32
	for _, o := range outs {
		out = append(out, o...)
	}
	got.F32("out", out, forwardTol)
	return got
}

// denseZero is dense with zero padding rows (the reference pads RoPE
// factors with zeros).
func denseZero(x []float32, D int, offsets []int) []float32 {
	longest := 0
	for s := 0; s+1 < len(offsets); s++ {
		longest = max(longest, offsets[s+1]-offsets[s])
	}
	out := make([]float32, (len(offsets)-1)*longest*D)
	for s := 0; s+1 < len(offsets); s++ {
		copy(out[s*longest*D:], x[offsets[s]*D:offsets[s+1]*D])
	}
	return out
}

func compareZImage(c fixtures.Case, got *fixtures.Got, logf func(string, ...any)) []error {
	return fixtures.Compare(filepath.Join(c.Dir, ioFile), zimageInputs, got, logf)
}

// The model reproduces the reference forward pass and every intermediate
// the fixture provides.
func TestFixtureForward(t *testing.T) {
	fixtures.Run(t, "zimage-tiny", func(t *testing.T, c fixtures.Case) {
		fixtures.Report(t, compareZImage(c, computeZImage(t, c, filepath.Join(c.Dir, "weights.safetensors")), t.Logf))
	})
}

// A corrupted expected tensor (NaN, or one element 10% off) or a NaN input
// in a copy of the case fails the comparison of TestFixtureForward.
func TestFixtureForwardMutations(t *testing.T) {
	fixtures.Run(t, "zimage-tiny", func(t *testing.T, c fixtures.Case) {
		got := computeZImage(t, c, filepath.Join(c.Dir, "weights.safetensors"))
		fixtures.CheckMutations(t, c, ioFile, zimageInputs, func(mc fixtures.Case) []error {
			return compareZImage(mc, got, nil)
		})
	})
}

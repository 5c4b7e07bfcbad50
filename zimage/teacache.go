package zimage

import (
	"errors"
	"fmt"

	"github.com/nlpodyssey/spago/mat"

	"github.com/dcdit/dcdit/cond"
	"github.com/dcdit/dcdit/family"
	"github.com/dcdit/dcdit/loaders/arch"
	"github.com/dcdit/dcdit/ops"
)

// errF64 refuses a step cache on a model computing in float64.
var errF64 = errors.New("zimage: a step cache runs models computing in float32 only")

// layerStages is the Stages of a forward whose main layers run over the
// unified stream u under adaln and s: the step cache's blocks are the
// main layers (the refiners run at every step, as TeaCache runs Lumina's),
// its signal the first layer's attention_norm1(x)·(1 + scale_msa).
func layerStages[O any](m *Model, u, adaln mat.Tensor, s Stream, finish func(h mat.Tensor) (O, error)) *family.Stages[O] {
	D := m.Config.Dim
	S := len(s.Offsets) - 1
	mod := m.linear(adaln, "layers.0.adaLN_modulation.0.weight", m.p("layers.0.adaLN_modulation.0.bias"))
	signal := ops.Modulate(ops.RMSNorm(u, m.p("layers.0.attention_norm1.weight"), m.Config.NormEps),
		m.constant(S, D, make([]float32, S*D)), ops.SliceCols(mod, 0, D), s.Offsets)
	blocks := func(x mat.Tensor, lo, hi int, offsets []int) mat.Tensor {
		if lo == 0 && hi == S {
			return m.Layers(x, adaln, s)
		}
		rows := make([]int, s.Offsets[hi]-s.Offsets[lo])
		for i := range rows {
			rows[i] = s.Offsets[lo] + i
		}
		samples := make([]int, hi-lo)
		for i := range samples {
			samples[i] = lo + i
		}
		return m.Layers(x, ops.GatherRows(adaln, samples), Stream{Offsets: offsets, Freqs: ops.GatherRows(s.Freqs, rows)})
	}
	return family.NewStages(u, signal, s.Offsets, blocks, finish)
}

var _ family.StagedTeacher = Teacher{}

// PredictStages is Predict split around the main layers (family.Stages).
// The parameters must not track gradients.
func (t Teacher) PredictStages(xt []float32, in cond.Input, h, w int) (*family.Stages[[]float32], error) {
	m := t.Model
	if m.f64 {
		return nil, errF64
	}
	lats, caps, err := m.items(xt, in, h, w)
	if err != nil {
		return nil, fmt.Errorf("zimage: teacher: %w", err)
	}
	b, err := m.Prepare(lats, in.T, caps)
	if err != nil {
		return nil, fmt.Errorf("zimage: teacher: %w", err)
	}
	u, adaln, s := m.unified(b)
	finish := func(x mat.Tensor) ([]float32, error) {
		out := m.FinalLayer(ops.GatherRows(x, b.Layout.OutputRows), adaln, b.Layout.OutputOffsets())
		return concat(m.Images(out, b), len(xt)), nil
	}
	return layerStages(m, u, adaln, s, finish), nil
}

// StepFLOPs splits one forward's cost (ForwardFLOPs with CaptionLen) for
// a step cache.
func (t Teacher) StepFLOPs(rows, cols int) family.StepFLOPs {
	n := t.CaptionLen
	if n == 0 {
		n = TypicalCaptionLen
	}
	return t.CaptionStepFLOPs(rows, cols, n)
}

var _ family.CaptionStepCosted = Teacher{}

// CaptionStepFLOPs is StepFLOPs under a caption of captionLen tokens.
func (t Teacher) CaptionStepFLOPs(rows, cols, captionLen int) family.StepFLOPs {
	return stepFLOPs(t.Model.Config, []int{t.Tokens(rows, cols)}, captionLen, t.Model.Config.SeqMultiple())
}

// stepFLOPs splits the cost of items of the given image tokens with
// captions of captionLen tokens, image tokens padded to imageMultiple:
// the main layers are the blocks, the noise refiner what runs before
// them over the image tokens.
func stepFLOPs(c *arch.ZImageConfig, lengths []int, captionLen, imageMultiple int) family.StepFLOPs {
	noLayers := *c
	noLayers.NLayers = 0
	var f family.StepFLOPs
	for _, n := range lengths {
		with, without := forwardFLOPs(c, n, captionLen, imageMultiple), forwardFLOPs(&noLayers, n, captionLen, imageMultiple)
		captionOnly := forwardFLOPs(&noLayers, 0, captionLen, imageMultiple)
		f.Blocks += with.Total() - without.Total()
		f.Before += without.Refiners + without.Attention - captionOnly.Refiners - captionOnly.Attention
		f.Modulation += 2 * float64(c.AdaLNDim) * 4 * float64(c.Dim)
	}
	return f
}

var _ family.StagedBackbone = (*Backbone)(nil)

// ForwardStages is Forward split around the main layers
// (family.Stages). The parameters must not track gradients.
func (b *Backbone) ForwardStages(x mat.Tensor, c cond.Value, offsets []int, pos []float64) (*family.Stages[mat.Tensor], error) {
	if b.Model.f64 {
		return nil, errF64
	}
	u, zc, l, err := b.unified(x, c, offsets, pos)
	if err != nil {
		return nil, err
	}
	finish := func(h mat.Tensor) (mat.Tensor, error) { return ops.GatherRows(h, l.OutputRows), nil }
	return layerStages(b.Model, u, zc.adaln, b.Model.NewStream(l.UnifiedOffsets, l.UnifiedPos()), finish), nil
}

// StepFLOPs splits FLOPs for a step cache.
func (b *Backbone) StepFLOPs(lengths []int) family.StepFLOPs {
	lc := b.CaptionLen
	if lc == 0 {
		lc = TypicalCaptionLen
	}
	return stepFLOPs(b.Model.Config, lengths, lc, b.imageMultiple())
}

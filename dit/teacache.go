package dit

import (
	"fmt"

	"github.com/nlpodyssey/spago/mat"

	"github.com/dcdit/dcdit/adaln"
	"github.com/dcdit/dcdit/cond"
	"github.com/dcdit/dcdit/family"
)

var _ family.StagedTeacher = Teacher{}

// PredictStages is Predict split around the blocks (family.Stages): the
// embedded patches, the blocks, and the final layer with the unpatchify.
// The parameters must not track gradients.
func (t Teacher) PredictStages(xt []float32, in cond.Input, h, w int) (*family.Stages[[]float32], error) {
	m, c := t.Model, t.Model.Config
	if err := in.CheckLabels(c.NumClasses); err != nil {
		return nil, fmt.Errorf("dit: teacher: %w", err)
	}
	B := len(in.T)
	if h != c.InputSize || w != c.InputSize || len(xt) != B*c.InChannels*h*w {
		return nil, fmt.Errorf("dit: the teacher takes %d×%d latents, got %d values for %d samples of %d×%d", c.InputSize, c.InputSize, len(xt), B, h, w)
	}
	tokens, offsets := m.Embed(xt, B)
	cv := m.condition(in.T, in.Labels)
	blocks := func(x mat.Tensor, lo, hi int, offsets []int) mat.Tensor {
		return m.Blocks(x, adaln.SampleRows(cv, lo, hi), offsets)
	}
	finish := func(x mat.Tensor) ([]float32, error) {
		out := m.FinalLayer(x, cv, offsets)
		img := make([]float32, B*c.OutChannels()*h*w)
		Unpatchify(img, mat.Data[float32](out.Value()), B, c.OutChannels(), c.InputSize, c.PatchSize, false)
		return img, nil
	}
	mod := adaln.ModulatedInput(m.Params, m.names+"blocks.0.", tokens, cv, offsets)
	return family.NewStages(tokens, mod, offsets, blocks, finish), nil
}

// StepFLOPs splits one forward's cost (ForwardFLOPs) for a step cache.
func (t Teacher) StepFLOPs(rows, cols int) family.StepFLOPs {
	f := ForwardFLOPs(t.Model.Config, t.Tokens(rows, cols))
	return family.StepFLOPs{Blocks: f.Blocks + f.Attention, Modulation: adaln.ModulationFLOPs(1, t.Model.Config.HiddenSize)}
}

var _ family.StagedBackbone = (*Model)(nil)

// ForwardStages is Forward split around the blocks (family.Stages); DiT
// has nothing after them. The parameters must not track gradients.
func (m *Model) ForwardStages(x mat.Tensor, c cond.Value, offsets []int, pos []float64) (*family.Stages[mat.Tensor], error) {
	h, v, err := m.positioned(x, c, offsets, pos)
	if err != nil {
		return nil, err
	}
	blocks := func(x mat.Tensor, lo, hi int, offsets []int) mat.Tensor {
		return m.Blocks(x, adaln.SampleRows(v, lo, hi), offsets)
	}
	finish := func(x mat.Tensor) (mat.Tensor, error) { return x, nil }
	return family.NewStages(h, adaln.ModulatedInput(m.Params, m.names+"blocks.0.", h, v, offsets), offsets, blocks, finish), nil
}

// StepFLOPs splits FLOPs for a step cache: the blocks are all but the
// conditioning.
func (m *Model) StepFLOPs(lengths []int) family.StepFLOPs {
	c := m.Config
	cond := adaln.PackedFLOPs(adaln.Sizes{Width: c.HiddenSize, Heads: 1, FrequencySize: c.FrequencySize}, lengths)
	return family.StepFLOPs{Blocks: m.FLOPs(lengths) - cond, Modulation: adaln.ModulationFLOPs(len(lengths), c.HiddenSize)}
}

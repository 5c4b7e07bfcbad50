package hnet

import (
	"fmt"

	"github.com/nlpodyssey/spago/mat"

	"github.com/dcdit/dcdit/adaln"
	"github.com/dcdit/dcdit/cond"
	"github.com/dcdit/dcdit/family"
	"github.com/dcdit/dcdit/ops"
	"github.com/dcdit/dcdit/posembed"
)

var _ family.StagedBackbone = (*Network)(nil)

// ForwardStages is Forward split around the blocks (family.Stages): the
// position embedding before them, the final RMSNorm after. The
// parameters must not track gradients.
func (n *Network) ForwardStages(x mat.Tensor, cv cond.Value, offsets []int, pos []float64) (*family.Stages[mat.Tensor], error) {
	D := n.Config.Width
	N := x.Shape()[0]
	c := cv.Vector()
	if err := family.CheckPacked(N, c.Shape()[0], offsets, pos); err != nil {
		return nil, fmt.Errorf("hnet: %w", err)
	}
	pe := posembed.Packed(pos, D, n.Config.PatchSize)
	h := ops.Add(x, mat.NewDense[float32](mat.WithShape(N, D), mat.WithBacking(pe)))
	blocks := func(x mat.Tensor, lo, hi int, offsets []int) mat.Tensor {
		cs := adaln.SampleRows(c, lo, hi)
		for i := range n.Config.Depth {
			x = adaln.ApplyBlock(n.Params, fmt.Sprintf("%slayers.%d.", Prefix, i), n.Config.Heads, x, cs, offsets)
		}
		return x
	}
	finish := func(x mat.Tensor) (mat.Tensor, error) {
		return ops.RMSNorm(x, n.Params.Get(Prefix+"rmsnorm.weight"), rmsNormEps), nil
	}
	mod := adaln.ModulatedInput(n.Params, Prefix+"layers.0.", h, c, offsets)
	return family.NewStages(h, mod, offsets, blocks, finish), nil
}

// StepFLOPs splits FLOPs for a step cache: the blocks are all but the
// conditioning.
func (n *Network) StepFLOPs(lengths []int) family.StepFLOPs {
	c := n.Config
	cond := adaln.PackedFLOPs(adaln.Sizes{Width: c.Width, Heads: 1, FrequencySize: c.FrequencySize}, lengths)
	return family.StepFLOPs{Blocks: n.FLOPs(lengths) - cond, Modulation: adaln.ModulationFLOPs(len(lengths), c.Width)}
}

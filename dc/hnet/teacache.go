package hnet

import (
	"fmt"

	"github.com/nlpodyssey/spago/mat"

	"github.com/dcdit/dcdit/adaln"
	"github.com/dcdit/dcdit/cond"
	"github.com/dcdit/dcdit/family"
)

var _ family.StagedBackbone = (*Network)(nil)

// ForwardStages is Forward split around the blocks (family.Stages): the
// position embedding before them, the final RMSNorm after. The
// parameters must not track gradients.
func (n *Network) ForwardStages(x mat.Tensor, cv cond.Value, offsets []int, pos []float64) (*family.Stages[mat.Tensor], error) {
	if n.Config.WidthGates {
		return nil, fmt.Errorf("hnet: a width-gated network (DyDiT's routers) does not split its forward for a step cache yet")
	}
	h, c, err := n.embed(x, cv, offsets, pos)
	if err != nil {
		return nil, err
	}
	blocks := func(x mat.Tensor, lo, hi int, offsets []int) mat.Tensor {
		return n.blocks(x, adaln.SampleRows(c, lo, hi), offsets, nil)
	}
	finish := func(x mat.Tensor) (mat.Tensor, error) { return n.finish(x), nil }
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

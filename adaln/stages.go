package adaln

import (
	"github.com/nlpodyssey/spago/mat"

	"github.com/dcdit/dcdit/ops"
	"github.com/dcdit/dcdit/params"
)

// ModulatedInput is the modulated input of the DiT block named prefix
// (ApplyBlock's parameters) on packed tokens x [N, D] under c [S, D]:
// modulate(norm1(x), shift_msa, scale_msa), the signal a step cache
// watches (family.Stages).
func ModulatedInput(set *params.Set, prefix string, x, c mat.Tensor, offsets []int) mat.Tensor {
	D := x.Shape()[1]
	mod := ops.Linear(ops.SiLU(c), set.Get(prefix+"adaLN_modulation.1.weight"), set.Get(prefix+"adaLN_modulation.1.bias"))
	return ops.Modulate(ops.LayerNorm(x, NormEps), ops.SliceCols(mod, 0, D), ops.SliceCols(mod, D, 2*D), offsets)
}

// SampleRows returns rows lo … hi−1 of a per-sample tensor c [S, D]: the
// conditioning of a range of samples (c itself for all of them).
func SampleRows(c mat.Tensor, lo, hi int) mat.Tensor {
	if lo == 0 && hi == c.Shape()[0] {
		return c
	}
	idx := make([]int, hi-lo)
	for i := range idx {
		idx[i] = lo + i
	}
	return ops.GatherRows(c, idx)
}

// ModulationFLOPs is the first block's adaLN projection for S samples of
// width D: what a step cache's signal costs.
func ModulationFLOPs(samples, width int) float64 {
	return 2 * float64(samples) * float64(width) * 6 * float64(width)
}

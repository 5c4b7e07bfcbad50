package dc

import (
	"github.com/dcdit/dcdit/ops"
	"github.com/dcdit/dcdit/params"
	"github.com/nlpodyssey/spago/mat"
)

// grid describes a batch of cell-major grids: sample b owns rows
// b·rows·cols … (b+1)·rows·cols − 1 in raster order (r·cols + c); a cell
// holds a patch×patch latent patch.
type grid struct {
	batch, rows, cols, patch int
}

// latent maps a cell coordinate to the latent-grid coordinate of the
// cell's centre, the unit of positions and of the de-chunk's σ.
func (g grid) latent(v int) float64 {
	if g.patch <= 1 {
		return float64(v)
	}
	return (float64(v)+0.5)*float64(g.patch) - 0.5
}

func (g grid) tokens() int { return g.rows * g.cols }

// offsets are the per-sample row offsets of the batch.
func (g grid) offsets() []int {
	off := make([]int, g.batch+1)
	for b := range off {
		off[b] = b * g.tokens()
	}
	return off
}

// conv3x3 is a 3×3 convolution with padding 1 over the batch of grids.
func (g grid) conv3x3(x, w, b mat.Tensor) mat.Tensor {
	return ops.Conv3x3(x, w, b, g.batch, g.rows, g.cols)
}

// convBlock applies one HNetConvBlock (an SD ResBlock) to tokens x
// [B·L, in] with conditioning c [B, cond]; the parameters are named
// prefix + "norm1.weight" etc.:
//
//	h = conv1(SiLU(GroupNorm(x)))            (3×3, in → inner = min(in, out))
//	h = h + Linear(SiLU(c))                  (per sample, broadcast over the grid)
//	h = conv2(SiLU(GroupNorm(h)))            (3×3, inner → out)
//	y = h + (skip_proj(x) if in ≠ out else x) (1×1)
//
// With idle set the residual branch is left out (idleBranch says when
// that changes neither y nor any gradient wanted).
func convBlock(p *params.Set, prefix string, x, c mat.Tensor, g grid, groups int, idle bool) mat.Tensor {
	w := func(name string) mat.Tensor { return p.Get(prefix + name) }
	skip := x
	if proj, ok := p.Lookup(prefix + "skip_proj.weight"); ok {
		skip = ops.Conv1x1(x, proj, w("skip_proj.bias"))
	}
	if idle {
		return skip
	}
	h := ops.GroupNormSiLU(x, w("norm1.weight"), w("norm1.bias"), g.batch, groups, GroupNormEps)
	h = g.conv3x3(h, w("conv1.weight"), w("conv1.bias"))
	temb := ops.Linear(ops.SiLU(c), w("cond_proj.1.weight"), w("cond_proj.1.bias")) // [B, inner]
	h = ops.AddPerSample(h, temb, g.offsets())
	h = ops.GroupNormSiLU(h, w("norm2.weight"), w("norm2.bias"), g.batch, groups, GroupNormEps)
	h = g.conv3x3(h, w("conv2.weight"), w("conv2.bias"))
	return ops.Add(h, skip)
}

// branchParams are the tensors of a conv block's residual branch.
var branchParams = [...]string{"norm1.weight", "norm1.bias", "conv1.weight", "conv1.bias",
	"cond_proj.1.weight", "cond_proj.1.bias", "norm2.weight", "norm2.bias", "conv2.weight", "conv2.bias"}

// idleBranch reports whether the residual branch of the conv block named
// prefix is exactly zero and trains nothing, so that leaving it out is
// exact: conv2's weight and bias are all zero (upcycle.EncoderPrior starts
// the encoder's blocks so, and a frozen encoder stays so), and either the
// pass keeps no gradients (inference) or none of the branch's tensors
// tracks one. The branch's gradients to x and c are then zero too. While
// the branch trains it runs, zero or not: conv2's gradient reads its
// activations.
func idleBranch(p *params.Set, prefix string, inference bool) bool {
	if !inference {
		for _, name := range branchParams {
			if p.Get(prefix + name).RequiresGrad() {
				return false
			}
		}
	}
	for _, name := range branchParams[len(branchParams)-2:] {
		for _, v := range p.Get(prefix + name).Values() {
			if v != 0 {
				return false
			}
		}
	}
	return true
}

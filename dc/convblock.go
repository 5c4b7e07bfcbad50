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
func convBlock(p *params.Set, prefix string, x, c mat.Tensor, g grid, groups int) mat.Tensor {
	w := func(name string) mat.Tensor { return p.Get(prefix + name) }
	h := ops.GroupNormSiLU(x, w("norm1.weight"), w("norm1.bias"), g.batch, groups, GroupNormEps)
	h = g.conv3x3(h, w("conv1.weight"), w("conv1.bias"))
	temb := ops.Linear(ops.SiLU(c), w("cond_proj.1.weight"), w("cond_proj.1.bias")) // [B, inner]
	h = ops.AddPerSample(h, temb, g.offsets())
	h = ops.GroupNormSiLU(h, w("norm2.weight"), w("norm2.bias"), g.batch, groups, GroupNormEps)
	h = g.conv3x3(h, w("conv2.weight"), w("conv2.bias"))
	if skip, ok := p.Lookup(prefix + "skip_proj.weight"); ok {
		return ops.Add(h, ops.Conv1x1(x, skip, w("skip_proj.bias")))
	}
	return ops.Add(h, x)
}

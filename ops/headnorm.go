package ops

import (
	"fmt"

	"github.com/nlpodyssey/spago/ag"
	"github.com/nlpodyssey/spago/mat"
	"github.com/nlpodyssey/spago/mat/float"

	"github.com/dcdit/dcdit/kernels"
)

// RMSNormHeads applies RMSNorm (x·rsqrt(mean(x²) + eps)·w) to each head of
// x [N, heads·hd] separately, with one weight vector w of hd elements shared
// by the heads: the per-head query/key norm of Z-Image's attention
// (norm_q, norm_k). A row-major [N, heads·hd] matrix is [N·heads, hd], so
// this is RMSNorm over that view.
func RMSNormHeads(x, w mat.Tensor, heads int, eps float64) mat.Tensor {
	return run(newRMSNormHeads(x, w, heads, eps))
}

type rmsNormHeadsSpec struct {
	x, w              mat.Tensor
	rows, heads, cols int // cols: the head width
	eps               float64
}

type rmsNormHeads[T float.DType] struct {
	rmsNormHeadsSpec
	rstd []T // per (row, head), saved by Forward
}

func newRMSNormHeads(x, w mat.Tensor, heads int, eps float64) ag.AutoGradFunction {
	rows, cols := dims("RMSNormHeads", "x", x)
	if heads < 1 || cols%heads != 0 {
		panic(fmt.Sprintf("ops: RMSNormHeads: x has %d columns, want heads·hd with %d heads", cols, heads))
	}
	needVector("RMSNormHeads", "w", w, cols/heads, " (the head width)")
	needEps("RMSNormHeads", eps)
	s := rmsNormHeadsSpec{x, w, rows, heads, cols / heads, eps}
	return pick("RMSNormHeads", &rmsNormHeads[float32]{rmsNormHeadsSpec: s}, &rmsNormHeads[float64]{rmsNormHeadsSpec: s},
		named{"x", x}, named{"w", w})
}

func (f *rmsNormHeads[T]) Operands() []mat.Tensor { return []mat.Tensor{f.x, f.w} }

func (f *rmsNormHeads[T]) Forward() (mat.Tensor, error) {
	n := f.rows * f.heads
	y := getBuffer[T](n * f.cols)
	f.rstd = getBuffer[T](n)
	kernels.RMSNormForward(y, f.rstd, data[T](f.x), data[T](f.w), n, f.cols, T(f.eps))
	return output(f.rows, f.heads*f.cols, y, f.rstd), nil
}

func (f *rmsNormHeads[T]) Backward(gy mat.Tensor) error {
	dx, dw := gradBuffer[T](f.x), gradBuffer[T](f.w)
	kernels.RMSNormBackward(dx, dw, data[T](gy), data[T](f.x), data[T](f.w), f.rstd, f.rows*f.heads, f.cols)
	accGrad(f.x, dx)
	accGrad(f.w, dw)
	return nil
}

package ops

import (
	"fmt"

	"github.com/nlpodyssey/spago/ag"
	"github.com/nlpodyssey/spago/mat"
	"github.com/nlpodyssey/spago/mat/float"

	"github.com/dcdit/dcdit/kernels"
)

// LayerNorm normalises each row of x [N, D] to zero mean and unit variance
// without an affine transform, with eps inside the square root (DiT's
// nn.LayerNorm(D, elementwise_affine=False, eps=1e-6)).
func LayerNorm(x mat.Tensor, eps float64) mat.Tensor {
	return run(newLayerNorm(x, eps))
}

type layerNormSpec struct {
	x          mat.Tensor
	rows, cols int
	eps        float64
}

type layerNorm[T float.DType] struct {
	layerNormSpec
	mean, rstd []T // per row, saved by Forward for Backward
}

func newLayerNorm(x mat.Tensor, eps float64) ag.AutoGradFunction {
	rows, cols := dims("LayerNorm", "x", x)
	needEps("LayerNorm", eps)
	s := layerNormSpec{x, rows, cols, eps}
	return pickOn("LayerNorm", &layerNorm[float32]{layerNormSpec: s}, &layerNorm[float64]{layerNormSpec: s},
		&layerNormDevice{layerNorm: layerNorm[float32]{layerNormSpec: s}}, named{"x", x})
}

// needEps rejects a negative or NaN eps, which would make rstd NaN for
// constant rows.
func needEps(op string, eps float64) {
	if !(eps >= 0) {
		panic(fmt.Sprintf("ops: %s: eps = %v, want ≥ 0", op, eps))
	}
}

func (f *layerNorm[T]) Operands() []mat.Tensor { return []mat.Tensor{f.x} }

func (f *layerNorm[T]) Forward() (mat.Tensor, error) {
	y := getBuffer[T](f.rows * f.cols)
	f.mean, f.rstd = getBuffer[T](f.rows), getBuffer[T](f.rows)
	kernels.LayerNormForward(y, f.mean, f.rstd, data[T](f.x), f.rows, f.cols, T(f.eps))
	return output(f.rows, f.cols, y, f.mean, f.rstd), nil
}

func (f *layerNorm[T]) Backward(gy mat.Tensor) error {
	dx := gradBuffer[T](f.x)
	if dx != nil {
		kernels.LayerNormBackward(dx, data[T](gy), data[T](f.x), f.mean, f.rstd, f.rows, f.cols)
	}
	accGrad(f.x, dx)
	return nil
}

// RMSNorm returns y = x·rsqrt(mean(x²) + eps)·w per row of x [N, D], with a
// weight vector w of D elements and no bias: PyTorch's and Z-Image's
// RMSNorm, not spago's (which puts eps outside the root and adds a bias).
func RMSNorm(x, w mat.Tensor, eps float64) mat.Tensor {
	return run(newRMSNorm(x, w, eps))
}

type rmsNormSpec struct {
	x, w       mat.Tensor
	rows, cols int
	eps        float64
}

type rmsNorm[T float.DType] struct {
	rmsNormSpec
	rstd []T // per row, saved by Forward
}

func newRMSNorm(x, w mat.Tensor, eps float64) ag.AutoGradFunction {
	colocate("RMSNorm", &x, &w)
	rows, cols := dims("RMSNorm", "x", x)
	needVector("RMSNorm", "w", w, cols, " (the columns of x)")
	needEps("RMSNorm", eps)
	s := rmsNormSpec{x, w, rows, cols, eps}
	return pickOn("RMSNorm", &rmsNorm[float32]{rmsNormSpec: s}, &rmsNorm[float64]{rmsNormSpec: s},
		&rmsNormDevice{rmsNorm: rmsNorm[float32]{rmsNormSpec: s}}, named{"x", x}, named{"w", w})
}

func (f *rmsNorm[T]) Operands() []mat.Tensor { return []mat.Tensor{f.x, f.w} }

func (f *rmsNorm[T]) Forward() (mat.Tensor, error) {
	y := getBuffer[T](f.rows * f.cols)
	f.rstd = getBuffer[T](f.rows)
	kernels.RMSNormForward(y, f.rstd, data[T](f.x), data[T](f.w), f.rows, f.cols, T(f.eps))
	return output(f.rows, f.cols, y, f.rstd), nil
}

func (f *rmsNorm[T]) Backward(gy mat.Tensor) error {
	dx, dw := gradBuffer[T](f.x), gradBuffer[T](f.w)
	kernels.RMSNormBackward(dx, dw, data[T](gy), data[T](f.x), data[T](f.w), f.rstd, f.rows, f.cols)
	accGrad(f.x, dx)
	accGrad(f.w, dw)
	return nil
}

// GroupNorm applies PyTorch's nn.GroupNorm(groups, C, eps) with affine
// weight w and bias b (vectors of C elements) to x [batch·L, C]: batch
// token-major grids of L = N/batch rows each (sample s owns rows s·L to
// (s+1)·L − 1). Statistics are per (sample, group) over L × C/groups
// values.
func GroupNorm(x, w, b mat.Tensor, batch, groups int, eps float64) mat.Tensor {
	return run(newGroupNorm(x, w, b, batch, groups, eps))
}

type groupNormSpec struct {
	x, w, b                         mat.Tensor
	batch, tokens, channels, groups int
	eps                             float64
}

type groupNorm[T float.DType] struct {
	groupNormSpec
	mean, rstd []T // per (sample, group), saved by Forward
}

func newGroupNorm(x, w, b mat.Tensor, batch, groups int, eps float64) ag.AutoGradFunction {
	colocate("GroupNorm", &x, &w, &b)
	rows, cols := dims("GroupNorm", "x", x)
	if batch < 0 || (batch == 0 && rows != 0) || (batch > 0 && rows%batch != 0) {
		panic(fmt.Sprintf("ops: GroupNorm: %d rows of x do not split into %d samples", rows, batch))
	}
	if groups <= 0 || cols%groups != 0 {
		panic(fmt.Sprintf("ops: GroupNorm: %d channels (columns of x) do not split into %d groups", cols, groups))
	}
	needVector("GroupNorm", "w", w, cols, " (the channels of x)")
	needVector("GroupNorm", "b", b, cols, " (the channels of x)")
	needEps("GroupNorm", eps)
	tokens := 0
	if batch > 0 {
		tokens = rows / batch
	}
	s := groupNormSpec{x, w, b, batch, tokens, cols, groups, eps}
	return pickOn("GroupNorm", &groupNorm[float32]{groupNormSpec: s}, &groupNorm[float64]{groupNormSpec: s},
		&groupNormDevice{groupNorm: groupNorm[float32]{groupNormSpec: s}}, named{"x", x}, named{"w", w}, named{"b", b})
}

func (f *groupNorm[T]) Operands() []mat.Tensor { return []mat.Tensor{f.x, f.w, f.b} }

func (f *groupNorm[T]) Forward() (mat.Tensor, error) {
	rows := f.batch * f.tokens
	y := getBuffer[T](rows * f.channels)
	f.mean, f.rstd = getBuffer[T](f.batch*f.groups), getBuffer[T](f.batch*f.groups)
	kernels.GroupNormForward(y, f.mean, f.rstd, data[T](f.x), data[T](f.w), data[T](f.b),
		f.batch, f.tokens, f.channels, f.groups, T(f.eps))
	return output(rows, f.channels, y, f.mean, f.rstd), nil
}

func (f *groupNorm[T]) Backward(gy mat.Tensor) error {
	dx, dw, db := gradBuffer[T](f.x), gradBuffer[T](f.w), gradBuffer[T](f.b)
	kernels.GroupNormBackward(dx, dw, db, data[T](gy), data[T](f.x), f.mean, f.rstd, data[T](f.w),
		f.batch, f.tokens, f.channels, f.groups)
	accGrad(f.x, dx)
	accGrad(f.w, dw)
	accGrad(f.b, db)
	return nil
}

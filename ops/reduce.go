package ops

import (
	"github.com/nlpodyssey/spago/ag"
	"github.com/nlpodyssey/spago/mat"
	"github.com/nlpodyssey/spago/mat/float"

	"github.com/dcdit/dcdit/kernels"
)

// Sum returns Σ x as a 1×1 matrix (accumulated in float64).
func Sum(x mat.Tensor) mat.Tensor { return run(newTotal("Sum", totSum, x, nil)) }

// Mean returns the mean of all elements of x as a 1×1 matrix (0 for an
// empty x).
func Mean(x mat.Tensor) mat.Tensor { return run(newTotal("Mean", totMean, x, nil)) }

// MSE returns mean((a − b)²) over all elements as a 1×1 matrix: PyTorch's
// MSELoss with reduction "mean" (the DiT and flow-matching losses, and the
// distillation regression). b is typically a target that does not require
// gradients.
func MSE(a, b mat.Tensor) mat.Tensor {
	colocate("MSE", &a, &b)
	return run(newTotal("MSE", totMSE, a, b))
}

type totKind int

const (
	totSum totKind = iota
	totMean
	totMSE
)

type totalSpec struct {
	kind totKind
	a, b mat.Tensor // b only for MSE
	n    int
}

// total is a whole-tensor reduction to a scalar.
type total[T float.DType] struct{ totalSpec }

func newTotal(op string, kind totKind, a, b mat.Tensor) ag.AutoGradFunction {
	rows, cols := dims(op, "a", a)
	ops := []named{{"a", a}}
	if kind == totMSE {
		needShape(op, "b", b, rows, cols, " (the shape of a)")
		ops = append(ops, named{"b", b})
	}
	s := totalSpec{kind, a, b, rows * cols}
	return pickOn(op, &total[float32]{s}, &total[float64]{s}, &totalDevice{total[float32]{s}}, ops...)
}

func (f *total[T]) Operands() []mat.Tensor {
	if f.kind == totMSE {
		return []mat.Tensor{f.a, f.b}
	}
	return []mat.Tensor{f.a}
}

// perElement is 1/n for the means (0 when empty, so that an empty batch
// contributes nothing rather than NaN).
func (f *total[T]) perElement() float64 {
	if f.kind == totSum {
		return 1
	}
	if f.n == 0 {
		return 0
	}
	return 1 / float64(f.n)
}

func (f *total[T]) Forward() (mat.Tensor, error) {
	a := data[T](f.a)
	var v T
	switch f.kind {
	case totSum, totMean:
		v = kernels.Sum(a)
	case totMSE:
		v = kernels.SumSquaredDiff(a, data[T](f.b))
	}
	return newMatrix(1, 1, []T{T(float64(v) * f.perElement())}), nil
}

func (f *total[T]) Backward(gy mat.Tensor) error {
	g := float64(data[T](gy)[0]) * f.perElement()
	if f.kind != totMSE {
		if da := gradBuffer[T](f.a); da != nil {
			kernels.Fill(da, T(g))
			accGrad(f.a, da)
		}
		return nil
	}
	da, db := gradBuffer[T](f.a), gradBuffer[T](f.b)
	if da != nil || db != nil {
		kernels.SquaredDiffBackward(da, db, data[T](f.a), data[T](f.b), T(2*g))
	}
	accGrad(f.a, da)
	accGrad(f.b, db)
	return nil
}

// MeanRows returns the per-sample mean of x [N, D] over each sample's rows
// (packed by offsets, S+1 entries) as [S, D]; an empty sample's mean is 0.
func MeanRows(x mat.Tensor, offsets []int) mat.Tensor {
	return run(newMeanRows(x, offsets))
}

type meanRowsSpec struct {
	perSampleSpec
	x mat.Tensor
}

type meanRows[T float.DType] struct{ meanRowsSpec }

func newMeanRows(x mat.Tensor, offsets []int) ag.AutoGradFunction {
	s := meanRowsSpec{newPerSampleSpec("MeanRows", x, offsets), x}
	return pickOn("MeanRows", &meanRows[float32]{s}, &meanRows[float64]{s}, &meanRowsDevice{meanRows[float32]{s}}, named{"x", x})
}

func (f *meanRows[T]) Operands() []mat.Tensor { return []mat.Tensor{f.x} }

func (f *meanRows[T]) Forward() (mat.Tensor, error) {
	samples := len(f.offsets) - 1
	y := getBuffer[T](samples * f.cols)
	kernels.MeanRows(y, data[T](f.x), f.offsets, f.cols)
	return output(samples, f.cols, y), nil
}

func (f *meanRows[T]) Backward(gy mat.Tensor) error {
	if dx := gradBuffer[T](f.x); dx != nil {
		kernels.MeanRowsBackward(dx, data[T](gy), f.offsets, f.cols)
		accGrad(f.x, dx)
	}
	return nil
}

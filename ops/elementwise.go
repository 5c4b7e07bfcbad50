package ops

import (
	"github.com/nlpodyssey/spago/ag"
	"github.com/nlpodyssey/spago/mat"
	"github.com/nlpodyssey/spago/mat/float"

	"github.com/dcdit/dcdit/kernels"
)

// Add returns a + b for matrices of the same shape.
func Add(a, b mat.Tensor) mat.Tensor {
	colocate("Add", &a, &b)
	return run(newBinary("Add", binAdd, a, b))
}

// Sub returns a − b for matrices of the same shape.
func Sub(a, b mat.Tensor) mat.Tensor {
	colocate("Sub", &a, &b)
	return run(newBinary("Sub", binSub, a, b))
}

// Mul returns the elementwise product a∘b of matrices of the same shape
// (spago's ag.Prod; ag.Mul is the matrix product).
func Mul(a, b mat.Tensor) mat.Tensor {
	colocate("Mul", &a, &b)
	return run(newBinary("Mul", binMul, a, b))
}

type binKind int

const (
	binAdd binKind = iota
	binSub
	binMul
)

type binarySpec struct {
	kind       binKind
	a, b       mat.Tensor
	rows, cols int
}

type binary[T float.DType] struct{ binarySpec }

func newBinary(op string, kind binKind, a, b mat.Tensor) ag.AutoGradFunction {
	rows, cols := dims(op, "a", a)
	needShape(op, "b", b, rows, cols, " (the shape of a)")
	s := binarySpec{kind, a, b, rows, cols}
	return pickOn(op, &binary[float32]{s}, &binary[float64]{s}, &binaryDevice{binary[float32]{s}}, named{"a", a}, named{"b", b})
}

func (f *binary[T]) Operands() []mat.Tensor { return []mat.Tensor{f.a, f.b} }

func (f *binary[T]) Forward() (mat.Tensor, error) {
	a, b := data[T](f.a), data[T](f.b)
	y := getBuffer[T](len(a))
	switch f.kind {
	case binAdd:
		kernels.Add(y, a, b)
	case binSub:
		kernels.Sub(y, a, b)
	case binMul:
		kernels.Mul(y, a, b)
	}
	return output(f.rows, f.cols, y), nil
}

func (f *binary[T]) Backward(gy mat.Tensor) error {
	dy := data[T](gy)
	switch f.kind {
	case binAdd, binSub:
		if f.a.RequiresGrad() {
			f.a.AccGrad(gy) // da = dy, passed on without a copy
		}
		if f.kind == binAdd {
			if f.b.RequiresGrad() {
				f.b.AccGrad(gy)
			}
		} else if db := gradBuffer[T](f.b); db != nil {
			kernels.Scale(db, dy, -1)
			accGrad(f.b, db)
		}
	case binMul:
		if da := gradBuffer[T](f.a); da != nil {
			kernels.Mul(da, dy, data[T](f.b))
			accGrad(f.a, da)
		}
		if db := gradBuffer[T](f.b); db != nil {
			kernels.Mul(db, dy, data[T](f.a))
			accGrad(f.b, db)
		}
	}
	return nil
}

// Scale returns alpha·x.
func Scale(x mat.Tensor, alpha float64) mat.Tensor {
	return run(newScale(x, alpha))
}

type scaleSpec struct {
	x          mat.Tensor
	alpha      float64
	rows, cols int
}

type scale[T float.DType] struct{ scaleSpec }

func newScale(x mat.Tensor, alpha float64) ag.AutoGradFunction {
	rows, cols := dims("Scale", "x", x)
	s := scaleSpec{x, alpha, rows, cols}
	return pickOn("Scale", &scale[float32]{s}, &scale[float64]{s}, &scaleDevice{scale[float32]{s}}, named{"x", x})
}

func (f *scale[T]) Operands() []mat.Tensor { return []mat.Tensor{f.x} }

func (f *scale[T]) Forward() (mat.Tensor, error) {
	y := getBuffer[T](f.rows * f.cols)
	kernels.Scale(y, data[T](f.x), T(f.alpha))
	return output(f.rows, f.cols, y), nil
}

func (f *scale[T]) Backward(gy mat.Tensor) error {
	if dx := gradBuffer[T](f.x); dx != nil {
		kernels.Scale(dx, data[T](gy), T(f.alpha))
		accGrad(f.x, dx)
	}
	return nil
}

// AddRowVector returns x + v with the vector v (D elements) added to every
// row of x [N, D]: a bias broadcast, such as a positional embedding row.
func AddRowVector(x, v mat.Tensor) mat.Tensor {
	colocate("AddRowVector", &x, &v)
	return run(newAddRowVector(x, v))
}

type addRowVectorSpec struct {
	x, v       mat.Tensor
	rows, cols int
}

type addRowVector[T float.DType] struct{ addRowVectorSpec }

func newAddRowVector(x, v mat.Tensor) ag.AutoGradFunction {
	rows, cols := dims("AddRowVector", "x", x)
	needVector("AddRowVector", "v", v, cols, " (the columns of x)")
	s := addRowVectorSpec{x, v, rows, cols}
	return pickOn("AddRowVector", &addRowVector[float32]{s}, &addRowVector[float64]{s}, &addRowVectorDevice{addRowVector[float32]{s}}, named{"x", x}, named{"v", v})
}

func (f *addRowVector[T]) Operands() []mat.Tensor { return []mat.Tensor{f.x, f.v} }

func (f *addRowVector[T]) Forward() (mat.Tensor, error) {
	y := getBuffer[T](f.rows * f.cols)
	kernels.AddRowVector(y, data[T](f.x), data[T](f.v), f.cols)
	return output(f.rows, f.cols, y), nil
}

func (f *addRowVector[T]) Backward(gy mat.Tensor) error {
	if f.x.RequiresGrad() {
		f.x.AccGrad(gy)
	}
	if dv := gradBuffer[T](f.v); dv != nil {
		kernels.ColSum(dv, data[T](gy), f.rows, f.cols)
		accGrad(f.v, dv)
	}
	return nil
}

// ScaleRows returns y with y[r, :] = s[r]·x[r, :] for x [N, D] and a vector
// s of N elements: a per-token multiplier, such as DC-DiT's
// straight-through confidence.
func ScaleRows(x, s mat.Tensor) mat.Tensor {
	colocate("ScaleRows", &x, &s)
	return run(newScaleRows(x, s))
}

type scaleRowsSpec struct {
	x, s       mat.Tensor
	rows, cols int
}

type scaleRows[T float.DType] struct{ scaleRowsSpec }

func newScaleRows(x, s mat.Tensor) ag.AutoGradFunction {
	rows, cols := dims("ScaleRows", "x", x)
	needVector("ScaleRows", "s", s, rows, " (the rows of x)")
	sp := scaleRowsSpec{x, s, rows, cols}
	return pickOn("ScaleRows", &scaleRows[float32]{sp}, &scaleRows[float64]{sp}, &scaleRowsDevice{scaleRows[float32]{sp}}, named{"x", x}, named{"s", s})
}

func (f *scaleRows[T]) Operands() []mat.Tensor { return []mat.Tensor{f.x, f.s} }

func (f *scaleRows[T]) Forward() (mat.Tensor, error) {
	y := getBuffer[T](f.rows * f.cols)
	kernels.ScaleRows(y, data[T](f.x), data[T](f.s), f.cols)
	return output(f.rows, f.cols, y), nil
}

func (f *scaleRows[T]) Backward(gy mat.Tensor) error {
	dx, ds := gradBuffer[T](f.x), gradBuffer[T](f.s)
	kernels.ScaleRowsBackward(dx, ds, data[T](gy), data[T](f.x), data[T](f.s), f.cols)
	accGrad(f.x, dx)
	accGrad(f.s, ds)
	return nil
}

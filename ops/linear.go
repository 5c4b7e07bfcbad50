package ops

import (
	"github.com/nlpodyssey/spago/ag"
	"github.com/nlpodyssey/spago/mat"
	"github.com/nlpodyssey/spago/mat/float"

	"github.com/dcdit/dcdit/kernels"
)

// Linear returns y = x·Wᵀ + b for x [N, in], W [out, in] (PyTorch's
// nn.Linear layout) and b a vector of out elements, or nil for no bias;
// y is [N, out].
func Linear(x, w, b mat.Tensor) mat.Tensor {
	colocate("Linear", &x, &w, &b)
	return run(newLinear(x, w, b))
}

type linearSpec struct {
	x, w, b       mat.Tensor // b may be nil
	rows, in, out int
}

type linear[T float.DType] struct{ linearSpec }

func newLinear(x, w, b mat.Tensor) ag.AutoGradFunction {
	rows, in := dims("Linear", "x", x)
	out, _ := dims("Linear", "w", w)
	needShape("Linear", "w", w, out, in, " (in = columns of x)")
	ops := []named{{"x", x}, {"w", w}}
	if b != nil {
		needVector("Linear", "b", b, out, " (out = rows of w)")
		ops = append(ops, named{"b", b})
	}
	s := linearSpec{x, w, b, rows, in, out}
	return pickOn("Linear", &linear[float32]{s}, &linear[float64]{s}, &linearDevice{linear[float32]{s}}, ops...)
}

func (f *linear[T]) Operands() []mat.Tensor {
	if f.b == nil {
		return []mat.Tensor{f.x, f.w}
	}
	return []mat.Tensor{f.x, f.w, f.b}
}

func (f *linear[T]) Forward() (mat.Tensor, error) {
	y := getBuffer[T](f.rows * f.out)
	var b []T
	if f.b != nil {
		b = data[T](f.b)
	}
	kernels.LinearForward(y, data[T](f.x), data[T](f.w), b, f.rows, f.in, f.out)
	return output(f.rows, f.out, y), nil
}

func (f *linear[T]) Backward(gy mat.Tensor) error {
	dx, dw, db := gradBuffer[T](f.x), gradBuffer[T](f.w), gradBuffer[T](f.b)
	kernels.LinearBackward(dx, dw, db, data[T](gy), data[T](f.x), data[T](f.w), f.rows, f.in, f.out)
	accGrad(f.x, dx)
	accGrad(f.w, dw)
	accGrad(f.b, db)
	return nil
}

package ops

import (
	"github.com/nlpodyssey/spago/ag"
	"github.com/nlpodyssey/spago/mat"
	"github.com/nlpodyssey/spago/mat/float"
)

// STE returns a matrix of ones shaped like x whose backward pass hands the
// upstream gradient to x unchanged: H-Net's straight-through estimator
// (forward ones_like(x), backward identity). DC-DiT multiplies the
// de-chunked tokens by STE(c) of the router confidence c, so the forward
// value is untouched while dL/dc receives ⟨dL/dy, tokens⟩ per row
// (ScaleRows(tokens, STE(c))).
func STE(x mat.Tensor) mat.Tensor { return node(newSTE(x)) }

type steSpec struct {
	x          mat.Tensor
	rows, cols int
}

type ste[T float.DType] struct{ steSpec }

func newSTE(x mat.Tensor) ag.AutoGradFunction {
	rows, cols := dims("STE", "x", x)
	s := steSpec{x, rows, cols}
	return pickOn("STE", &ste[float32]{s}, &ste[float64]{s}, &steDevice{ste[float32]{s}}, named{"x", x})
}

func (f *ste[T]) Operands() []mat.Tensor { return []mat.Tensor{f.x} }

func (f *ste[T]) Forward() (mat.Tensor, error) {
	y := getBuffer[T](f.rows * f.cols)
	for i := range y {
		y[i] = 1
	}
	return output(f.rows, f.cols, y), nil
}

func (f *ste[T]) Backward(gy mat.Tensor) error {
	if f.x.RequiresGrad() {
		f.x.AccGrad(gy)
	}
	return nil
}

package ops

import (
	"github.com/nlpodyssey/spago/ag"
	"github.com/nlpodyssey/spago/mat"
	"github.com/nlpodyssey/spago/mat/float"

	"github.com/dcdit/dcdit/kernels"
)

// GELU returns the tanh-approximated GELU of x elementwise (PyTorch's
// approximate="tanh", DiT's MLP activation).
func GELU(x mat.Tensor) mat.Tensor { return run(newActivation("GELU", actGELU, x)) }

// SiLU returns x·σ(x) elementwise (DiT's conditioning activation).
func SiLU(x mat.Tensor) mat.Tensor { return run(newActivation("SiLU", actSiLU, x)) }

// Sigmoid returns σ(x) = 1/(1 + e^{−x}) elementwise (DC-DiT's router
// probabilities).
func Sigmoid(x mat.Tensor) mat.Tensor {
	return run(newActivation("Sigmoid", actSigmoid, x))
}

// Tanh returns tanh(x) elementwise.
func Tanh(x mat.Tensor) mat.Tensor { return run(newActivation("Tanh", actTanh, x)) }

type actKind int

const (
	actGELU actKind = iota
	actSiLU
	actSigmoid
	actTanh
)

type activationSpec struct {
	kind       actKind
	x          mat.Tensor
	rows, cols int
}

// activation is one elementwise activation node. Its backward pass uses
// the output y, which the graph keeps anyway: σ = y/x spares GELU and SiLU
// an exponential per element, and Sigmoid and Tanh need nothing else.
type activation[T float.DType] struct {
	activationSpec
	y []T
}

func newActivation(op string, kind actKind, x mat.Tensor) ag.AutoGradFunction {
	rows, cols := dims(op, "x", x)
	s := activationSpec{kind, x, rows, cols}
	var dev ag.AutoGradFunction
	if kind != actTanh { // no device kernel for tanh yet
		dev = &activationDevice{activation: activation[float32]{activationSpec: s}}
	}
	return pickOn(op, &activation[float32]{activationSpec: s}, &activation[float64]{activationSpec: s}, dev, named{"x", x})
}

func (f *activation[T]) Operands() []mat.Tensor { return []mat.Tensor{f.x} }

func (f *activation[T]) Forward() (mat.Tensor, error) {
	x := data[T](f.x)
	y := getBuffer[T](len(x))
	switch f.kind {
	case actGELU:
		kernels.GELUForward(y, x)
	case actSiLU:
		kernels.SiLUForward(y, x)
	case actSigmoid:
		kernels.SigmoidForward(y, x)
	case actTanh:
		kernels.TanhForward(y, x)
	}
	f.y = y
	return output(f.rows, f.cols, y), nil
}

func (f *activation[T]) Backward(gy mat.Tensor) error {
	dx := gradBuffer[T](f.x)
	if dx == nil {
		return nil
	}
	dy := data[T](gy)
	switch f.kind {
	case actGELU:
		kernels.GELUBackwardFromOutput(dx, dy, data[T](f.x), f.y)
	case actSiLU:
		kernels.SiLUBackwardFromOutput(dx, dy, data[T](f.x), f.y)
	case actSigmoid:
		kernels.SigmoidBackward(dx, dy, f.y)
	case actTanh:
		kernels.TanhBackward(dx, dy, f.y)
	}
	accGrad(f.x, dx)
	return nil
}

package ops

import (
	"fmt"
	"math"
	"testing"

	"github.com/nlpodyssey/spago/ag"
	"github.com/nlpodyssey/spago/mat"
)

func elementwiseRef(f func(float64) float64) func(d [][]float64) []float64 {
	return func(d [][]float64) []float64 {
		y := make([]float64, len(d[0]))
		for i, v := range d[0] {
			y[i] = f(v)
		}
		return y
	}
}

func geluRef(x float64) float64 {
	return 0.5 * x * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(x+0.044715*x*x*x)))
}

func sigmoidRef(x float64) float64 { return 1 / (1 + math.Exp(-x)) }

var activations = []struct {
	name  string
	op    func(mat.Tensor) mat.Tensor
	ref   func(float64) float64
	spago func(mat.Tensor) mat.Tensor
	// spagoTol: spago's GELU derivative uses 6-digit constants.
	spagoTol float64
}{
	{"GELU", GELU, geluRef, ag.GELU, 2e-6},
	{"SiLU", SiLU, func(x float64) float64 { return x * sigmoidRef(x) }, ag.SiLU, 1e-12},
	{"Sigmoid", Sigmoid, sigmoidRef, ag.Sigmoid, 1e-12},
	{"Tanh", Tanh, math.Tanh, ag.Tanh, 1e-12},
}

func TestActivations(t *testing.T) {
	var cases []opCase
	for _, a := range activations {
		for _, sh := range [][2]int{{1, 1}, {3, 7}, {0, 2}} {
			cases = append(cases, opCase{
				name:  fmt.Sprintf("%s/%dx%d", a.name, sh[0], sh[1]),
				ins:   []input{{name: "x", rows: sh[0], cols: sh[1], scale: 4}},
				build: func(x []mat.Tensor) mat.Tensor { return a.op(x[0]) },
				ref:   elementwiseRef(a.ref),
				shape: sh,
			})
		}
	}
	runOpCases(t, cases)
}

func TestActivationsVsSpago(t *testing.T) {
	for _, a := range activations {
		t.Run(a.name, func(t *testing.T) {
			compareWithSpago(t, []input{{name: "x", rows: 4, cols: 9, scale: 4}},
				func(x []mat.Tensor) mat.Tensor { return a.op(x[0]) },
				func(x []mat.Tensor) mat.Tensor { return a.spago(x[0]) },
				a.spagoTol)
		})
	}
}

// TestActivationOfOperator: an activation of an intermediate result, with
// a constant input upstream, back-propagates into the variable only.
func TestActivationOfOperator(t *testing.T) {
	ins := []input{{name: "x", rows: 3, cols: 4}, {name: "c", rows: 3, cols: 4, noGrad: true}}
	checkGrad(t, 9, ins, func(x []mat.Tensor) mat.Tensor { return GELU(Mul(SiLU(x[0]), Sigmoid(x[1]))) }, gradCheckOptions{})
}

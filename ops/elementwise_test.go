package ops

import (
	"fmt"
	"testing"

	"github.com/nlpodyssey/spago/ag"
	"github.com/nlpodyssey/spago/mat"
)

var binaries = []struct {
	name  string
	op    func(a, b mat.Tensor) mat.Tensor
	ref   func(a, b float64) float64
	spago func(a, b mat.Tensor) mat.Tensor
}{
	{"Add", Add, func(a, b float64) float64 { return a + b }, ag.Add},
	{"Sub", Sub, func(a, b float64) float64 { return a - b }, ag.Sub},
	{"Mul", Mul, func(a, b float64) float64 { return a * b }, ag.Prod},
}

func TestElementwiseBinary(t *testing.T) {
	var cases []opCase
	for _, bin := range binaries {
		for _, tc := range []struct {
			rows, cols     int
			aConst, bConst bool
		}{{1, 1, false, false}, {3, 7, false, false}, {2, 5, true, false}, {4, 3, false, true}, {0, 3, false, false}} {
			cases = append(cases, opCase{
				name:  fmt.Sprintf("%s/%dx%d/const=%v,%v", bin.name, tc.rows, tc.cols, tc.aConst, tc.bConst),
				ins:   []input{{name: "a", rows: tc.rows, cols: tc.cols, noGrad: tc.aConst}, {name: "b", rows: tc.rows, cols: tc.cols, noGrad: tc.bConst}},
				build: func(x []mat.Tensor) mat.Tensor { return bin.op(x[0], x[1]) },
				ref: func(d [][]float64) []float64 {
					y := make([]float64, len(d[0]))
					for i := range y {
						y[i] = bin.ref(d[0][i], d[1][i])
					}
					return y
				},
				shape: [2]int{tc.rows, tc.cols},
			})
		}
	}
	runOpCases(t, cases)
}

func TestElementwiseVsSpago(t *testing.T) {
	for _, bin := range binaries {
		t.Run(bin.name, func(t *testing.T) {
			compareWithSpago(t, []input{{name: "a", rows: 4, cols: 6}, {name: "b", rows: 4, cols: 6}},
				func(x []mat.Tensor) mat.Tensor { return bin.op(x[0], x[1]) },
				func(x []mat.Tensor) mat.Tensor { return bin.spago(x[0], x[1]) }, 1e-15)
		})
	}
	t.Run("Scale", func(t *testing.T) {
		compareWithSpago(t, []input{{name: "x", rows: 3, cols: 5}},
			func(x []mat.Tensor) mat.Tensor { return Scale(x[0], -2.5) },
			func(x []mat.Tensor) mat.Tensor { return ag.ProdScalar(x[0], mat.Scalar(-2.5)) }, 1e-15)
	})
}

// TestElementwiseSharedOperand: x∘x and x + x accumulate two gradients
// into one operand (spago counts pending gradients per occurrence).
func TestElementwiseSharedOperand(t *testing.T) {
	ins := []input{{name: "x", rows: 3, cols: 4}}
	checkGrad(t, 1, ins, func(x []mat.Tensor) mat.Tensor { return Mul(x[0], x[0]) }, gradCheckOptions{})
	checkGrad(t, 2, ins, func(x []mat.Tensor) mat.Tensor { return Add(x[0], Sub(x[0], Scale(x[0], 3))) }, gradCheckOptions{})
}

func TestElementwiseScale(t *testing.T) {
	runOpCases(t, []opCase{{
		name:  "3x4",
		ins:   []input{{name: "x", rows: 3, cols: 4}},
		build: func(x []mat.Tensor) mat.Tensor { return Scale(x[0], 0.125) },
		ref:   elementwiseRef(func(v float64) float64 { return 0.125 * v }),
		shape: [2]int{3, 4},
	}})
}

func TestElementwiseAddRowVector(t *testing.T) {
	var cases []opCase
	for _, tc := range []struct{ rows, cols, vr, vc int }{{1, 1, 1, 1}, {4, 3, 3, 1}, {5, 2, 1, 2}, {0, 3, 3, 1}} {
		cases = append(cases, opCase{
			name:  fmt.Sprintf("%dx%d+[%d %d]", tc.rows, tc.cols, tc.vr, tc.vc),
			ins:   []input{{name: "x", rows: tc.rows, cols: tc.cols}, {name: "v", rows: tc.vr, cols: tc.vc}},
			build: func(x []mat.Tensor) mat.Tensor { return AddRowVector(x[0], x[1]) },
			ref: func(d [][]float64) []float64 {
				y := make([]float64, len(d[0]))
				for i := range y {
					y[i] = d[0][i] + d[1][i%tc.cols]
				}
				return y
			},
			shape: [2]int{tc.rows, tc.cols},
		})
	}
	runOpCases(t, cases)
}

func TestElementwiseScaleRows(t *testing.T) {
	var cases []opCase
	for _, tc := range []struct {
		rows, cols int
		sConst     bool
	}{{1, 1, false}, {4, 3, false}, {5, 2, true}} {
		cases = append(cases, opCase{
			name:  fmt.Sprintf("%dx%d", tc.rows, tc.cols),
			ins:   []input{{name: "x", rows: tc.rows, cols: tc.cols}, {name: "s", rows: tc.rows, cols: 1, noGrad: tc.sConst}},
			build: func(x []mat.Tensor) mat.Tensor { return ScaleRows(x[0], x[1]) },
			ref: func(d [][]float64) []float64 {
				y := make([]float64, len(d[0]))
				for i := range y {
					y[i] = d[0][i] * d[1][i/tc.cols]
				}
				return y
			},
			shape: [2]int{tc.rows, tc.cols},
		})
	}
	runOpCases(t, cases)
}

func TestElementwisePanics(t *testing.T) {
	a := mat.NewDense[float32](mat.WithShape(2, 3))
	mustPanic(t, func() { Add(a, mat.NewDense[float32](mat.WithShape(3, 2))) }, "ops: Add: b has shape [3 2], want [2 3]")
	mustPanic(t, func() { Mul(a, mat.NewDense[float64](mat.WithShape(2, 3))) }, "ops: Mul: b is float64, want float32 like a")
	mustPanic(t, func() { AddRowVector(a, mat.NewDense[float32](mat.WithShape(2, 1))) }, "ops: AddRowVector: v has shape [2 1]")
	mustPanic(t, func() { ScaleRows(a, mat.NewDense[float32](mat.WithShape(3, 1))) }, "ops: ScaleRows: s has shape [3 1]", "rows of x")
}

package ops

import (
	"fmt"
	"testing"

	"github.com/nlpodyssey/spago/ag"
	"github.com/nlpodyssey/spago/mat"
)

func linearRef(rows, in, out int, bias bool) func(x [][]float64) []float64 {
	return func(d [][]float64) []float64 {
		y := make([]float64, rows*out)
		for r := range rows {
			for o := range out {
				var s float64
				if bias {
					s = d[2][o]
				}
				for i := range in {
					s += d[0][r*in+i] * d[1][o*in+i]
				}
				y[r*out+o] = s
			}
		}
		return y
	}
}

func TestLinear(t *testing.T) {
	var cases []opCase
	for _, tc := range []struct {
		rows, in, out  int
		bias, rowBias  bool
		xConst, wConst bool
	}{
		{1, 1, 1, true, false, false, false},
		{3, 5, 4, true, false, false, false},
		{4, 3, 2, false, false, false, false},
		{7, 6, 5, true, true, false, false},  // bias given as [1, out]
		{2, 3, 4, true, false, true, false},  // x is a constant
		{3, 2, 2, true, false, false, true},  // frozen weight
		{0, 3, 2, true, false, false, false}, // no tokens
	} {
		ins := []input{{name: "x", rows: tc.rows, cols: tc.in, noGrad: tc.xConst}, {name: "w", rows: tc.out, cols: tc.in, noGrad: tc.wConst}}
		if tc.bias {
			b := input{name: "b", rows: tc.out, cols: 1}
			if tc.rowBias {
				b.rows, b.cols = 1, tc.out
			}
			ins = append(ins, b)
		}
		bias := tc.bias
		cases = append(cases, opCase{
			name: fmt.Sprintf("%dx%dx%d/bias=%v", tc.rows, tc.in, tc.out, tc.bias),
			ins:  ins,
			build: func(x []mat.Tensor) mat.Tensor {
				if bias {
					return Linear(x[0], x[1], x[2])
				}
				return Linear(x[0], x[1], nil)
			},
			ref:   linearRef(tc.rows, tc.in, tc.out, tc.bias),
			shape: [2]int{tc.rows, tc.out},
		})
	}
	runOpCases(t, cases)
}

// TestLinearVsSpago: without bias, Linear is spago's x·Wᵀ.
func TestLinearVsSpago(t *testing.T) {
	ins := []input{{name: "x", rows: 5, cols: 4}, {name: "w", rows: 3, cols: 4}}
	compareWithSpago(t, ins,
		func(x []mat.Tensor) mat.Tensor { return Linear(x[0], x[1], nil) },
		func(x []mat.Tensor) mat.Tensor { return ag.Mul(x[0], ag.T(x[1])) },
		1e-12)
}

func TestLinearPanics(t *testing.T) {
	x := mat.NewDense[float32](mat.WithShape(2, 3))
	mustPanic(t, func() { Linear(x, mat.NewDense[float32](mat.WithShape(4, 2)), nil) }, "ops: Linear: w has shape [4 2], want [4 3]")
	mustPanic(t, func() {
		Linear(x, mat.NewDense[float32](mat.WithShape(4, 3)), mat.NewDense[float32](mat.WithShape(3, 1)))
	},
		"ops: Linear: b has shape [3 1]", "[4 1]")
	mustPanic(t, func() { Linear(x, mat.NewDense[float64](mat.WithShape(4, 3)), nil) }, "ops: Linear: w is float64, want float32 like x")
	mustPanic(t, func() { Linear(nil, x, nil) }, "ops: Linear: x is nil")
}

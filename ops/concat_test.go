package ops

import (
	"fmt"
	"testing"

	"github.com/nlpodyssey/spago/mat"
)

func TestConcatCols(t *testing.T) {
	var cases []opCase
	for _, tc := range []struct {
		rows   int
		cols   []int
		const1 bool
	}{{1, []int{1}, false}, {3, []int{2, 4, 1}, true}, {2, []int{3, 0, 2}, false}, {0, []int{2, 3}, false}} {
		total := 0
		ins := make([]input, len(tc.cols))
		for i, c := range tc.cols {
			ins[i] = input{name: fmt.Sprintf("x%d", i), rows: tc.rows, cols: c, noGrad: tc.const1 && i == 1}
			total += c
		}
		cases = append(cases, opCase{
			name:  fmt.Sprintf("N%d_cols%v", tc.rows, tc.cols),
			ins:   ins,
			build: func(x []mat.Tensor) mat.Tensor { return ConcatCols(x...) },
			ref: func(d [][]float64) []float64 {
				var y []float64
				for r := range tc.rows {
					for i, c := range tc.cols {
						y = append(y, d[i][r*c:(r+1)*c]...)
					}
				}
				return y
			},
			shape: [2]int{tc.rows, total},
		})
	}
	runOpCases(t, cases)
}

func TestConcatRows(t *testing.T) {
	var cases []opCase
	for _, tc := range []struct {
		rows   []int
		cols   int
		const0 bool
	}{{[]int{1}, 1, false}, {[]int{2, 3, 1}, 4, true}, {[]int{3, 0, 2}, 2, false}} {
		total := 0
		ins := make([]input, len(tc.rows))
		for i, r := range tc.rows {
			ins[i] = input{name: fmt.Sprintf("x%d", i), rows: r, cols: tc.cols, noGrad: tc.const0 && i == 0}
			total += r
		}
		cases = append(cases, opCase{
			name:  fmt.Sprintf("rows%v_D%d", tc.rows, tc.cols),
			ins:   ins,
			build: func(x []mat.Tensor) mat.Tensor { return ConcatRows(x...) },
			ref: func(d [][]float64) []float64 {
				var y []float64
				for i := range tc.rows {
					y = append(y, d[i]...)
				}
				return y
			},
			shape: [2]int{total, tc.cols},
		})
	}
	runOpCases(t, cases)
}

// A tensor given twice receives the sum of both gradients.
func TestConcatSharedOperand(t *testing.T) {
	ins := []input{{name: "x", rows: 3, cols: 2}}
	checkGrad(t, 1, ins, func(x []mat.Tensor) mat.Tensor { return ConcatCols(x[0], x[0]) }, gradCheckOptions{})
	checkGrad(t, 2, ins, func(x []mat.Tensor) mat.Tensor { return ConcatRows(x[0], x[0]) }, gradCheckOptions{})
}

func TestConcatPanics(t *testing.T) {
	a := mat.NewDense[float32](mat.WithShape(2, 3))
	mustPanic(t, func() { ConcatCols() }, "ops: ConcatCols: no operands")
	mustPanic(t, func() { ConcatCols(a, mat.NewDense[float32](mat.WithShape(3, 3))) }, "ops: ConcatCols: xs[1] has 3 rows, want 2")
	mustPanic(t, func() { ConcatRows(a, mat.NewDense[float32](mat.WithShape(2, 2))) }, "ops: ConcatRows: xs[1] has 2 columns, want 3")
	mustPanic(t, func() { ConcatRows(a, mat.NewDense[float64](mat.WithShape(2, 3))) }, "ops: ConcatRows: xs[1] is float64")
}

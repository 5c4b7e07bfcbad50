package ops

import (
	"fmt"
	"testing"

	"github.com/nlpodyssey/spago/mat"
)

func TestGatherRows(t *testing.T) {
	var cases []opCase
	for _, tc := range []struct {
		rows, cols int
		idx        []int
	}{
		{1, 1, []int{0}}, {5, 3, []int{4, 0, 2}}, {4, 2, []int{1, 1, 3, 1, 0, 1}}, {3, 2, []int{}},
	} {
		cases = append(cases, opCase{
			name:  fmt.Sprintf("%dx%d/idx=%v", tc.rows, tc.cols, tc.idx),
			ins:   []input{{name: "x", rows: tc.rows, cols: tc.cols}},
			build: func(x []mat.Tensor) mat.Tensor { return GatherRows(x[0], tc.idx) },
			ref: func(d [][]float64) []float64 {
				var y []float64
				for _, j := range tc.idx {
					y = append(y, d[0][j*tc.cols:(j+1)*tc.cols]...)
				}
				return y
			},
			shape: [2]int{len(tc.idx), tc.cols},
		})
	}
	runOpCases(t, cases)
}

func TestScatterRows(t *testing.T) {
	var cases []opCase
	for _, tc := range []struct {
		rows, cols int
		idx        []int
	}{
		{1, 1, []int{0}}, {5, 3, []int{4, 0, 2}}, {3, 2, []int{}}, {4, 2, []int{3, 2, 1, 0}},
	} {
		cases = append(cases, opCase{
			name:  fmt.Sprintf("%dx%d/idx=%v", tc.rows, tc.cols, tc.idx),
			ins:   []input{{name: "x", rows: len(tc.idx), cols: tc.cols}},
			build: func(x []mat.Tensor) mat.Tensor { return ScatterRows(x[0], tc.idx, tc.rows) },
			ref: func(d [][]float64) []float64 {
				y := make([]float64, tc.rows*tc.cols)
				for i, j := range tc.idx {
					copy(y[j*tc.cols:(j+1)*tc.cols], d[0][i*tc.cols:(i+1)*tc.cols])
				}
				return y
			},
			shape: [2]int{tc.rows, tc.cols},
		})
	}
	runOpCases(t, cases)
}

func TestGatherSliceCols(t *testing.T) {
	var cases []opCase
	for _, tc := range []struct{ rows, cols, from, to int }{{1, 1, 0, 1}, {2, 6, 2, 4}, {3, 12, 0, 2}, {3, 12, 10, 12}} {
		cases = append(cases, opCase{
			name:  fmt.Sprintf("%dx%d[%d:%d]", tc.rows, tc.cols, tc.from, tc.to),
			ins:   []input{{name: "x", rows: tc.rows, cols: tc.cols}},
			build: func(x []mat.Tensor) mat.Tensor { return SliceCols(x[0], tc.from, tc.to) },
			ref: func(d [][]float64) []float64 {
				var y []float64
				for r := range tc.rows {
					y = append(y, d[0][r*tc.cols+tc.from:r*tc.cols+tc.to]...)
				}
				return y
			},
			shape: [2]int{tc.rows, tc.to - tc.from},
		})
	}
	runOpCases(t, cases)
}

// TestGatherAdaLNChunks: DiT splits c [S, 6D] into six [S, D] vectors; the
// gradients of all six slices add up in c.
func TestGatherAdaLNChunks(t *testing.T) {
	const S, D = 2, 3
	ins := []input{{name: "c", rows: S, cols: 6 * D}, {name: "x", rows: 5, cols: D}}
	off := []int{0, 2, 5}
	checkGrad(t, 4, ins, func(x []mat.Tensor) mat.Tensor {
		c := x[0]
		h := Modulate(x[1], SliceCols(c, 0, D), SliceCols(c, D, 2*D), off)
		h = GatedResidual(x[1], SliceCols(c, 2*D, 3*D), h, off)
		return Modulate(h, SliceCols(c, 3*D, 4*D), SliceCols(c, 4*D, 5*D), off)
	}, gradCheckOptions{})
}

func TestGatherPanics(t *testing.T) {
	x := mat.NewDense[float32](mat.WithShape(3, 2))
	mustPanic(t, func() { GatherRows(x, []int{0, 3}) }, "ops: GatherRows: idx[1] = 3 out of range [0, 3)")
	mustPanic(t, func() { ScatterRows(x, []int{0, 2, 0}, 4) }, "ops: ScatterRows: idx[2] = 0 repeats")
	mustPanic(t, func() { ScatterRows(x, []int{0, 2}, 4) }, "ops: ScatterRows: x has 3 rows, want one per index (2)")
	mustPanic(t, func() { SliceCols(x, 1, 3) }, "ops: SliceCols: columns [1, 3) out of the 2 columns")
}

package ops

import (
	"fmt"
	"testing"

	"github.com/nlpodyssey/spago/ag"
	"github.com/nlpodyssey/spago/mat"
)

func TestReduceWhole(t *testing.T) {
	var cases []opCase
	for _, sh := range [][2]int{{1, 1}, {3, 7}, {0, 4}} {
		rows, cols := sh[0], sh[1]
		n := float64(rows * cols)
		cases = append(cases,
			opCase{
				name:  fmt.Sprintf("Sum/%dx%d", rows, cols),
				ins:   []input{{name: "x", rows: rows, cols: cols}},
				build: func(x []mat.Tensor) mat.Tensor { return Sum(x[0]) },
				ref: func(d [][]float64) []float64 {
					var s float64
					for _, v := range d[0] {
						s += v
					}
					return []float64{s}
				},
				shape: [2]int{1, 1},
			},
			opCase{
				name:  fmt.Sprintf("Mean/%dx%d", rows, cols),
				ins:   []input{{name: "x", rows: rows, cols: cols}},
				build: func(x []mat.Tensor) mat.Tensor { return Mean(x[0]) },
				ref: func(d [][]float64) []float64 {
					var s float64
					for _, v := range d[0] {
						s += v
					}
					if n == 0 {
						return []float64{0}
					}
					return []float64{s / n}
				},
				shape: [2]int{1, 1},
			},
			opCase{
				name:  fmt.Sprintf("MSE/%dx%d", rows, cols),
				ins:   []input{{name: "pred", rows: rows, cols: cols}, {name: "target", rows: rows, cols: cols, noGrad: true}},
				build: func(x []mat.Tensor) mat.Tensor { return MSE(x[0], x[1]) },
				ref: func(d [][]float64) []float64 {
					var s float64
					for i, v := range d[0] {
						s += (v - d[1][i]) * (v - d[1][i])
					}
					if n == 0 {
						return []float64{0}
					}
					return []float64{s / n}
				},
				shape: [2]int{1, 1},
			},
			opCase{
				name:  fmt.Sprintf("MSE/both/%dx%d", rows, cols),
				ins:   []input{{name: "a", rows: rows, cols: cols}, {name: "b", rows: rows, cols: cols}},
				build: func(x []mat.Tensor) mat.Tensor { return MSE(x[0], x[1]) },
				ref: func(d [][]float64) []float64 {
					var s float64
					for i, v := range d[0] {
						s += (v - d[1][i]) * (v - d[1][i])
					}
					if n == 0 {
						return []float64{0}
					}
					return []float64{s / n}
				},
				shape: [2]int{1, 1},
			})
	}
	runOpCases(t, cases)
}

func TestReduceVsSpago(t *testing.T) {
	// spago's ReduceSum/ReduceMean give a column-vector gradient whatever
	// the input shape, so compare on a column vector.
	ins := []input{{name: "x", rows: 7, cols: 1}}
	compareWithSpago(t, ins, func(x []mat.Tensor) mat.Tensor { return Sum(x[0]) },
		func(x []mat.Tensor) mat.Tensor { return ag.ReduceSum(x[0]) }, 1e-14)
	compareWithSpago(t, ins, func(x []mat.Tensor) mat.Tensor { return Mean(x[0]) },
		func(x []mat.Tensor) mat.Tensor { return ag.ReduceMean(x[0]) }, 1e-14)
	two := []input{{name: "a", rows: 6, cols: 1}, {name: "b", rows: 6, cols: 1}}
	compareWithSpago(t, two, func(x []mat.Tensor) mat.Tensor { return MSE(x[0], x[1]) },
		func(x []mat.Tensor) mat.Tensor { return ag.ReduceMean(ag.Square(ag.Sub(x[0], x[1]))) }, 1e-14)
}

func TestReduceMeanRows(t *testing.T) {
	var cases []opCase
	for _, off := range opOffsets {
		rows, S, cols := off[len(off)-1], len(off)-1, 3
		cases = append(cases, opCase{
			name:  fmt.Sprint(off),
			ins:   []input{{name: "x", rows: rows, cols: cols}},
			build: func(x []mat.Tensor) mat.Tensor { return MeanRows(x[0], off) },
			ref: func(d [][]float64) []float64 {
				y := make([]float64, S*cols)
				for r, s := range sampleOfRows(off) {
					for c := range cols {
						y[s*cols+c] += d[0][r*cols+c] / float64(off[s+1]-off[s])
					}
				}
				return y
			},
			shape: [2]int{S, cols},
		})
	}
	runOpCases(t, cases)
}

func TestReducePanics(t *testing.T) {
	a := mat.NewDense[float32](mat.WithShape(2, 3))
	mustPanic(t, func() { MSE(a, mat.NewDense[float32](mat.WithShape(3, 2))) }, "ops: MSE: b has shape [3 2], want [2 3]")
	mustPanic(t, func() { MeanRows(a, []int{0, 3}) }, "ops: MeanRows: offsets run from 0 to 3, want 0 to 2")
}

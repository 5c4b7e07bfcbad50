package ops

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/nlpodyssey/spago/mat"
)

// sampleOfRows lists the sample of every row.
func sampleOfRows(offsets []int) []int {
	var s []int
	for i := 0; i+1 < len(offsets); i++ {
		for r := offsets[i]; r < offsets[i+1]; r++ {
			s = append(s, i)
		}
	}
	return s
}

// opOffsets: one single-row sample, ragged samples, empty samples.
var opOffsets = [][]int{{0, 1}, {0, 3, 4, 6}, {0, 0, 2, 2, 5}}

func TestModulate(t *testing.T) {
	var cases []opCase
	for _, off := range opOffsets {
		for _, cols := range []int{1, 4} {
			rows, S := off[len(off)-1], len(off)-1
			cases = append(cases, opCase{
				name:  fmt.Sprintf("%v/cols=%d", off, cols),
				ins:   []input{{name: "x", rows: rows, cols: cols, scale: 2}, {name: "shift", rows: S, cols: cols}, {name: "scale", rows: S, cols: cols}},
				build: func(x []mat.Tensor) mat.Tensor { return Modulate(x[0], x[1], x[2], off) },
				ref: func(d [][]float64) []float64 {
					y := make([]float64, rows*cols)
					for r, s := range sampleOfRows(off) {
						for c := range cols {
							y[r*cols+c] = d[0][r*cols+c]*(1+d[2][s*cols+c]) + d[1][s*cols+c]
						}
					}
					return y
				},
				shape: [2]int{rows, cols},
			})
		}
	}
	runOpCases(t, cases)
}

func TestGatedResidual(t *testing.T) {
	var cases []opCase
	for _, off := range opOffsets {
		for _, constX := range []bool{false, true} {
			rows, S, cols := off[len(off)-1], len(off)-1, 3
			cases = append(cases, opCase{
				name: fmt.Sprintf("%v/constX=%v", off, constX),
				ins: []input{{name: "x", rows: rows, cols: cols, noGrad: constX}, {name: "gate", rows: S, cols: cols},
					{name: "h", rows: rows, cols: cols, scale: 2}},
				build: func(x []mat.Tensor) mat.Tensor { return GatedResidual(x[0], x[1], x[2], off) },
				ref: func(d [][]float64) []float64 {
					y := make([]float64, rows*cols)
					for r, s := range sampleOfRows(off) {
						for c := range cols {
							y[r*cols+c] = d[0][r*cols+c] + d[1][s*cols+c]*d[2][r*cols+c]
						}
					}
					return y
				},
				shape: [2]int{rows, cols},
			})
		}
	}
	runOpCases(t, cases)
}

func TestModulateAddPerSample(t *testing.T) {
	var cases []opCase
	for _, off := range opOffsets {
		rows, S, cols := off[len(off)-1], len(off)-1, 3
		cases = append(cases, opCase{
			name:  fmt.Sprint(off),
			ins:   []input{{name: "x", rows: rows, cols: cols}, {name: "v", rows: S, cols: cols}},
			build: func(x []mat.Tensor) mat.Tensor { return AddPerSample(x[0], x[1], off) },
			ref: func(d [][]float64) []float64 {
				y := make([]float64, rows*cols)
				for r, s := range sampleOfRows(off) {
					for c := range cols {
						y[r*cols+c] = d[0][r*cols+c] + d[1][s*cols+c]
					}
				}
				return y
			},
			shape: [2]int{rows, cols},
		})
	}
	runOpCases(t, cases)
}

// TestModulateCopiesOffsets: the caller may reuse its offsets slice before
// the backward pass runs.
func TestModulateCopiesOffsets(t *testing.T) {
	ins := []input{{name: "x", rows: 3, cols: 2}, {name: "shift", rows: 2, cols: 2}, {name: "scale", rows: 2, cols: 2}}
	grads := func(reuse bool) [][]float64 {
		xs := makeInputs(rand.New(rand.NewPCG(1, 1)), ins)
		off := []int{0, 1, 3}
		y := Modulate(xs[0], xs[1], xs[2], off)
		if reuse {
			off[1] = 2
		}
		r := makeInputs(rand.New(rand.NewPCG(2, 2)), []input{{rows: 3, cols: 2, noGrad: true}})[0]
		if err := seedBackward(y, r); err != nil {
			t.Fatal(err)
		}
		var g [][]float64
		for _, x := range xs {
			g = append(g, mat.Data[float64](x.Grad()))
		}
		return g
	}
	want, got := grads(false), grads(true)
	for i := range want {
		compareData(t, ins[i].name, got[i], want[i], 0)
	}
}

func TestModulatePanics(t *testing.T) {
	x := mat.NewDense[float32](mat.WithShape(5, 3))
	v := mat.NewDense[float32](mat.WithShape(2, 3))
	mustPanic(t, func() { Modulate(x, v, v, []int{0, 2, 4}) }, "ops: Modulate: offsets run from 0 to 4, want 0 to 5")
	mustPanic(t, func() { Modulate(x, v, v, []int{0, 1, 3, 5}) }, "ops: Modulate: shift has shape [2 3], want [3 3]")
	mustPanic(t, func() { Modulate(x, v, v, []int{0, 3, 2}) }, "ops: Modulate: offsets run from 0 to 2")
	mustPanic(t, func() { Modulate(x, v, v, []int{0, 4, 3, 5}) }, "ops: Modulate: offsets decrease at 2")
	mustPanic(t, func() { Modulate(x, v, v, nil) }, "ops: Modulate: empty offsets")
	mustPanic(t, func() { GatedResidual(x, v, v, []int{0, 2, 5}) }, "ops: GatedResidual: h has shape [2 3], want [5 3]")
}

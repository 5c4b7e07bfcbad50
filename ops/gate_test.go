package ops

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/nlpodyssey/spago/mat"
)

func TestGateGroups(t *testing.T) {
	var cases []opCase
	for _, off := range opOffsets {
		for _, shape := range [][2]int{{4, 1}, {6, 3}, {8, 2}} {
			cols, groups := shape[0], shape[1]
			rows, S := off[len(off)-1], len(off)-1
			cases = append(cases, opCase{
				name:  fmt.Sprintf("%v/cols=%d/groups=%d", off, cols, groups),
				ins:   []input{{name: "x", rows: rows, cols: cols, scale: 2}, {name: "g", rows: S, cols: groups}},
				build: func(x []mat.Tensor) mat.Tensor { return GateGroups(x[0], x[1], off) },
				ref: func(d [][]float64) []float64 {
					y := make([]float64, rows*cols)
					for r, s := range sampleOfRows(off) {
						for c := range cols {
							y[r*cols+c] = d[0][r*cols+c] * d[1][s*groups+c/(cols/groups)]
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

// HardGate's forward is exactly 0 or 1 (1 in the forced columns), and its
// backward is the gradient of the soft path σ(z), checked by finite
// differences of Σ R∘σ(z), with none for the forced columns.
func TestHardGate(t *testing.T) {
	for _, tc := range []struct{ rows, cols, on int }{{1, 4, 1}, {3, 5, 1}, {2, 3, 0}, {2, 2, 2}} {
		t.Run(fmt.Sprintf("%dx%d/on=%d", tc.rows, tc.cols, tc.on), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(tc.rows*tc.cols), 3))
			z := makeInputs(rng, []input{{rows: tc.rows, cols: tc.cols, scale: 3}})[0]
			y := HardGate(z, tc.on)
			zd, yd := mat.Data[float64](z), mat.Data[float64](y.Value())
			for i, v := range zd {
				want := 0.0
				if i%tc.cols < tc.on || 1/(1+math.Exp(-v)) >= 0.5 {
					want = 1
				}
				if yd[i] != want {
					t.Fatalf("gate[%d] of logit %g = %g, want %g", i, v, yd[i], want)
				}
			}
			r := make([]float64, len(zd))
			for i := range r {
				r[i] = 2*rng.Float64() - 1
			}
			if err := seedBackward(y, mat.NewDense[float64](mat.WithShape(tc.rows, tc.cols), mat.WithBacking(r))); err != nil {
				t.Fatal(err)
			}
			g := mat.Data[float64](z.Grad())
			soft := func() float64 {
				var s float64
				for i, v := range zd {
					s += r[i] / (1 + math.Exp(-v))
				}
				return s
			}
			for i, v := range zd {
				want := 0.0
				if i%tc.cols >= tc.on {
					h := 1e-6
					zd[i] = v + h
					lp := soft()
					zd[i] = v - h
					lm := soft()
					zd[i] = v
					want = (lp - lm) / (2 * h)
				}
				if e := math.Abs(g[i] - want); !(e <= 1e-8) {
					t.Errorf("gradient of logit %d = %.10g, the soft path's %.10g", i, g[i], want)
				}
			}
		})
	}
}

// A gate of exactly 1 leaves its group's values as they were, bit for bit.
func TestGateGroupsOnesAreIdentity(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 5))
	x := makeInputs(rng, []input{{rows: 5, cols: 6, noGrad: true}})[0]
	x32 := to32([]*mat.Dense[float64]{x})[0]
	ones := mat.NewDense[float32](mat.WithShape(2, 3), mat.WithBacking([]float32{1, 1, 1, 1, 1, 1}))
	y := mat.Data[float32](GateGroups(x32, ones, []int{0, 2, 5}).Value())
	for i, v := range mat.Data[float32](x32) {
		if y[i] != v {
			t.Fatalf("y[%d] = %g, want %g", i, y[i], v)
		}
	}
}

func TestGatePanics(t *testing.T) {
	x := mat.NewDense[float64](mat.WithShape(4, 6))
	mustPanic(t, func() { GateGroups(x, mat.NewDense[float64](mat.WithShape(2, 4)), []int{0, 1, 4}) }, "GateGroups", "dividing the 6 columns")
	mustPanic(t, func() { GateGroups(x, mat.NewDense[float64](mat.WithShape(3, 3)), []int{0, 1, 4}) }, "GateGroups", "want [2 G]")
	mustPanic(t, func() { HardGate(x, 7) }, "HardGate", "7 columns always on")
}

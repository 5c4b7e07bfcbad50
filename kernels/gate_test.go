package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// GateGroups against its reference loop, its backward against finite
// differences, float32 against float64, over the per-sample layouts of
// the modulation kernels.
func TestGateGroups(t *testing.T) {
	for _, off := range modOffsets {
		for _, cols := range modCols(off) {
			for _, groups := range []int{1, cols} {
				t.Run(fmt.Sprintf("offsets=%v/cols=%d/groups=%d", off, cols, groups), func(t *testing.T) {
					rows, S, w := off[len(off)-1], len(off)-1, cols/groups
					rng := rand.New(rand.NewPCG(uint64(rows), uint64(cols+groups)))
					x, g := fdRand(rng, rows*cols, 2), fdRand(rng, S*groups, 1)
					xb := append([]float64(nil), x...)
					y := make([]float64, len(x))
					fdPoison(y)
					GateGroups(y, x, g, off, cols, groups)
					fdUnchanged(t, "x", x, xb)
					want := make([]float64, len(x))
					for r, s := range modSampleRef(off) {
						for c := range cols {
							want[r*cols+c] = x[r*cols+c] * g[s*groups+c/w]
						}
					}
					fdCompare(t, "y", y, want, 0, 1)
					y32 := make([]float32, len(x))
					GateGroups(y32, fdF32(x), fdF32(g), off, cols, groups)
					fdCompare(t, "float32 y", y32, want, 1e-6, 1)

					gx, gg := make([]float64, len(x)), make([]float64, S*groups)
					fdCheck(t, len(x), []fdParam{{"x", x, gx}, {"g", g, gg}},
						func(y []float64) { GateGroups(y, x, g, off, cols, groups) },
						func(dy []float64) { GateGroupsBackward(gx, gg, dy, x, g, off, cols, groups) },
						fdOptions{Seed: 7})
				})
			}
		}
	}
}

// HardGate is exactly 0 or 1 (the first on columns 1), and its backward
// is the sigmoid's slope times dy, 0 in the forced columns.
func TestHardGate(t *testing.T) {
	const rows, cols, on = 3, 5, 1
	rng := rand.New(rand.NewPCG(9, 9))
	z, dy := fdRand(rng, rows*cols, 3), fdRand(rng, rows*cols, 1)
	z[3] = math.NaN()
	y, dz := make([]float64, len(z)), make([]float64, len(z))
	fdPoison(y)
	HardGateForward(y, z, cols, on)
	HardGateBackward(dz, dy, z, cols, on)
	for i, v := range z {
		want, slope := 0.0, 0.0
		if i%cols < on || v >= 0 {
			want = 1
		}
		if i%cols >= on {
			s := 1 / (1 + math.Exp(-v))
			slope = s * (1 - s) * dy[i]
		}
		if y[i] != want {
			t.Errorf("gate %d of logit %g: %g, want %g", i, v, y[i], want)
		}
		if dz[i] != slope && !(math.IsNaN(dz[i]) && math.IsNaN(slope)) {
			t.Errorf("gradient %d: %g, want %g", i, dz[i], slope)
		}
	}
}

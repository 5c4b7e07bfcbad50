package kernels

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

var ewSizes = []int{0, 1, 7, 33, 3*ewGrain + 3}

func TestElementwiseBinary(t *testing.T) {
	for _, op := range []struct {
		name string
		f64  func(y, a, b []float64)
		f32  func(y, a, b []float32)
		ref  func(a, b float64) float64
	}{
		{"Add", Add[float64], Add[float32], func(a, b float64) float64 { return a + b }},
		{"Sub", Sub[float64], Sub[float32], func(a, b float64) float64 { return a - b }},
		{"Mul", Mul[float64], Mul[float32], func(a, b float64) float64 { return a * b }},
	} {
		for _, n := range ewSizes {
			t.Run(fmt.Sprintf("%s/n=%d", op.name, n), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(uint64(n), 1))
				a, b := fdRand(rng, n, 3), fdRand(rng, n, 3)
				y := make([]float64, n)
				fdPoison(y)
				op.f64(y, a, b)
				want := make([]float64, n)
				for i := range want {
					want[i] = op.ref(a[i], b[i])
				}
				fdCompare(t, "y", y, want, 0, 1)
				a32, b32 := fdF32(a), fdF32(b)
				y32 := make([]float32, n)
				op.f32(y32, a32, b32)
				fdCompare(t, "float32 y", y32, want, 1e-6, 1)
				// In place: y aliases a.
				op.f32(a32, a32, b32)
				fdCompare(t, "in place", a32, fdF64(y32), 0, 1)
			})
		}
	}
}

func TestElementwiseScaleFill(t *testing.T) {
	for _, n := range ewSizes {
		rng := rand.New(rand.NewPCG(uint64(n), 2))
		x, y0 := fdRand(rng, n, 3), fdRand(rng, n, 3)
		y := make([]float64, n)
		Scale(y, x, -1.5)
		want := make([]float64, n)
		for i := range want {
			want[i] = -1.5 * x[i]
		}
		fdCompare(t, "Scale", y, want, 0, 1)
		copy(y, y0)
		AddScaled(y, x, 0.25)
		for i := range want {
			want[i] = y0[i] + 0.25*x[i]
		}
		fdCompare(t, "AddScaled", y, want, 0, 1)
		Fill(y, 7)
		for i := range want {
			want[i] = 7
		}
		fdCompare(t, "Fill", y, want, 0, 1)
	}
}

func TestElementwiseAddRowVector(t *testing.T) {
	for _, sh := range [][2]int{{1, 1}, {3, 5}, {0, 4}, {300, 200}} {
		rows, cols := sh[0], sh[1]
		t.Run(fmt.Sprintf("%dx%d", rows, cols), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(rows), uint64(cols)))
			x, v := fdRand(rng, rows*cols, 1), fdRand(rng, cols, 1)
			y := make([]float64, len(x))
			fdPoison(y)
			AddRowVector(y, x, v, cols)
			want := make([]float64, len(x))
			for i := range want {
				want[i] = x[i] + v[i%cols]
			}
			fdCompare(t, "y", y, want, 0, 1)
			gv := make([]float64, cols)
			fdCheck(t, len(x), []fdParam{{"v", v, gv}},
				func(y []float64) { AddRowVector(y, x, v, cols) },
				func(dy []float64) { ColSum(gv, dy, rows, cols) },
				fdOptions{Seed: 13})
		})
	}
}

func TestElementwiseScaleRows(t *testing.T) {
	for _, sh := range [][2]int{{1, 1}, {3, 5}, {0, 4}, {4, 0}, {300, 200}} {
		rows, cols := sh[0], sh[1]
		t.Run(fmt.Sprintf("%dx%d", rows, cols), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(rows), uint64(cols)))
			x, s := fdRand(rng, rows*cols, 1), fdRand(rng, rows, 2)
			y := make([]float64, len(x))
			fdPoison(y)
			ScaleRows(y, x, s, cols)
			want := make([]float64, len(x))
			for i := range want {
				want[i] = x[i] * s[i/cols]
			}
			fdCompare(t, "y", y, want, 0, 1)
			gx, gs := make([]float64, len(x)), make([]float64, rows)
			fdCheck(t, len(x), []fdParam{{"x", x, gx}, {"s", s, gs}},
				func(y []float64) { ScaleRows(y, x, s, cols) },
				func(dy []float64) { ScaleRowsBackward(gx, gs, dy, x, s, cols) },
				fdOptions{Seed: 14})
			y32 := make([]float32, len(x))
			ScaleRows(y32, fdF32(x), fdF32(s), cols)
			fdCompare(t, "float32 y", y32, want, 1e-6, 1)
		})
	}
}

func TestElementwisePanics(t *testing.T) {
	fdPanics(t, "kernels: Add: len(b) = 2, want 3", func() { Add(make([]float32, 3), make([]float32, 3), make([]float32, 2)) })
	fdPanics(t, "kernels: AddRowVector: len(y) = 5 is not a multiple", func() {
		AddRowVector(make([]float32, 5), make([]float32, 5), make([]float32, 2), 2)
	})
	fdPanics(t, "kernels: ScaleRows: len(x)", func() { ScaleRows(make([]float32, 4), make([]float32, 3), make([]float32, 2), 2) })
}

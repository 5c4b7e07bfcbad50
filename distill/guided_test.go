package distill

import (
	"math"
	"math/rand/v2"
	"testing"
)

// guidedDistance's gradient is its finite difference, for both distances,
// with and without per-sample weights; and it is zero where the guided
// predictions agree although the conditional ones do not.
func TestGuidedDistance(t *testing.T) {
	const samples, cells, cols, k, s = 4, 3, 5, 3, 4.0
	half := samples / 2 * cells
	tests := []struct {
		name string
		l1   bool
		ws   []float64
	}{
		{"l1", true, nil},
		{"l2", false, nil},
		{"l1 weighted", true, []float64{0.5, 2, 0.5, 2}},
		{"l2 weighted", false, []float64{0.5, 2, 0.5, 2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(3, 4))
			out, target := make([]float32, samples*cells*cols), make([]float32, samples*cells*cols)
			for i := range out {
				out[i], target[i] = float32(rng.NormFloat64()), float32(rng.NormFloat64())
			}
			grad := make([]float32, len(out))
			f := func() float64 {
				return guidedDistance(make([]float32, len(out)), out, target, tt.ws, half, cols, k, s, tt.l1)
			}
			guidedDistance(grad, out, target, tt.ws, half, cols, k, s, tt.l1)
			const h = 1e-3
			for i := range out {
				v := out[i]
				out[i] = v + h
				up := f()
				out[i] = v - h
				down := f()
				out[i] = v
				num := (up - down) / (2 * h)
				if !(math.Abs(num-float64(grad[i])) <= 1e-3*(1+math.Abs(num))) {
					t.Fatalf("value %d (row %d, column %d): gradient %g, finite difference %g", i, i/cols, i%cols, grad[i], num)
				}
				if i%cols >= k && grad[i] != 0 {
					t.Fatalf("value %d: column %d is not guided, gradient %g", i, i%cols, grad[i])
				}
			}
		})
	}
	// A student whose conditional and unconditional errors cancel in the
	// guided prediction ((1 − s)·e_u + s·e_c = 0) pays nothing.
	out, target := make([]float32, samples*cells*cols), make([]float32, samples*cells*cols)
	for r := range half {
		for j := range k {
			out[r*cols+j] = -(s - 1) / s // e_c = (s − 1)/s · e_u with e_u = −1
			out[(half+r)*cols+j] = -1
		}
	}
	if d := guidedDistance(make([]float32, len(out)), out, target, nil, half, cols, k, s, true); !(math.Abs(d) < 1e-6) {
		t.Errorf("cancelling errors: guided distance %g, want 0", d)
	}
}

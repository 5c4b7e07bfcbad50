package distill

import (
	"math"
	"math/rand/v2"
	"testing"
)

// keepTargets labels the cells where the teacher's clean estimate
// changes — a square's outline on a flat background — whatever the noise
// level's scale, and never the forced first and last cells.
func TestKeepTargets(t *testing.T) {
	const rows, cols, k = 6, 6, 2
	// A 2×2 square of clean value 1 at rows 2–3, cols 2–3 on background 0.
	inSquare := func(l int) bool { r, c := l/cols, l%cols; return r >= 2 && r <= 3 && c >= 2 && c <= 3 }
	// Cells whose 4-neighbourhood crosses the outline.
	outline := func(l int) bool {
		r, c := l/cols, l%cols
		for _, d := range [4][2]int{{-1, 0}, {1, 0}, {0, -1}, {0, 1}} {
			rn, cn := r+d[0], c+d[1]
			if rn >= 0 && rn < rows && cn >= 0 && cn < cols && inSquare(rn*cols+cn) != inSquare(l) {
				return true
			}
		}
		return false
	}
	nOutline := 0
	for l := range rows * cols {
		if outline(l) {
			nOutline++
		}
	}
	tests := []struct {
		name  string
		flow  bool    // flow matching's velocity, else DDPM's ε
		sig   float64 // DDPM's √(1−ᾱ_t), flow matching's σ
		scale float64 // DDPM: u = −scale·x̂0
	}{
		{"low noise", false, 0.05, 0.02},
		{"high noise", false, 0.99, 7},
		{"flow matching, low noise", true, 0.05, 0},
		{"flow matching, high noise", true, 0.99, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(1, 2))
			L := rows * cols
			eps, x := make([]float32, L*(k+3)), make([]float32, L*k)
			for l := range L {
				clean := 0.0
				if inSquare(l) {
					clean = 1
				}
				for j := range k {
					x[l*k+j] = float32(rng.NormFloat64())
					if tt.flow {
						// Any noisy input: v̂ is built so that x + σ·v̂ = x̂0.
						eps[l*(k+3)+j] = float32((clean - float64(x[l*k+j])) / tt.sig)
					} else {
						// Any noisy input: ε̂ is built so that ε̂ − x/σ = −scale·x̂0.
						eps[l*(k+3)+j] = float32(float64(x[l*k+j])/tt.sig - tt.scale*clean)
					}
				}
				eps[l*(k+3)+k] = float32(rng.NormFloat64()) // σ channels: not read
			}
			a, c := []float64{1}, []float64{-1 / tt.sig}
			if tt.flow {
				a, c = []float64{tt.sig}, []float64{1}
			}
			label, mask := keepTargets(eps, x, k+3, k, a, c, rows, cols, nOutline+2)
			got := 0
			for l := range L {
				if label[l] {
					got++
					if !outline(l) {
						t.Errorf("cell %d kept, off the outline", l)
					}
				}
				if mask[l] == (l == 0 || l == L-1) {
					t.Errorf("cell %d: mask %v", l, mask[l])
				}
			}
			if got != nOutline {
				t.Fatalf("%d cells labelled keep, want the %d of the outline", got, nOutline)
			}
		})
	}
}

// keepLoss's gradient is the derivative of its mean cross-entropy, and a
// NaN logit makes the loss NaN (the trainer refuses it).
func TestKeepLossGradient(t *testing.T) {
	logit := []float32{-3, 0.5, 2, -0.2, 40, -40}
	label := []bool{true, false, true, false, false, true}
	mask := []bool{true, true, true, false, true, true}
	grad := make([]float32, len(logit))
	keepLoss(grad, logit, label, mask)
	const h = 1e-3
	for i := range logit {
		up, down := append([]float32(nil), logit...), append([]float32(nil), logit...)
		up[i] += h
		down[i] -= h
		g := make([]float32, len(logit))
		num := (keepLoss(g, up, label, mask) - keepLoss(g, down, label, mask)) / (2 * h)
		if !(math.Abs(num-float64(grad[i])) <= 1e-3) {
			t.Errorf("logit %d: gradient %g, finite difference %g", i, grad[i], num)
		}
	}
	if grad[3] != 0 {
		t.Errorf("a masked-out cell got gradient %g", grad[3])
	}
	if l := keepLoss(grad, []float32{float32(math.NaN()), 0}, []bool{true, false}, []bool{true, true}); !math.IsNaN(l) {
		t.Fatalf("NaN logit gave loss %g", l)
	}
}

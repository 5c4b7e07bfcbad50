package distill

import (
	"math"
	"math/rand/v2"
	"slices"
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
	checkLogitGradient(t, func(g, z []float32) float64 { return keepLoss(g, z, label, mask) }, logit, grad)
	if grad[3] != 0 {
		t.Errorf("a masked-out cell got gradient %g", grad[3])
	}
	if l := keepLoss(grad, []float32{float32(math.NaN()), 0}, []bool{true, false}, []bool{true, true}); !math.IsNaN(l) {
		t.Fatalf("NaN logit gave loss %g", l)
	}
}

// rankLoss's gradient is the derivative of its Plackett–Luce likelihood,
// the forced cells and unordered samples get none, and a shift of a
// sample's logits leaves the loss as it was.
func TestRankLossGradient(t *testing.T) {
	logit := []float32{9, -1, 0.5, 2, -0.3, 9, 1, 1, 1, 1, 1, 1, 4, 30, -30, 0.1, 2, 7}
	orders := [][]int{{0, 5, 3, 2, 1, 4}, nil, {0, 5, 2, 1, 4, 3}}
	grad := make([]float32, len(logit))
	loss := rankLoss(grad, logit, orders)
	checkLogitGradient(t, func(g, z []float32) float64 { return rankLoss(g, z, orders) }, logit, grad)
	for _, i := range []int{0, 5, 6, 7, 8, 9, 10, 11, 12, 17} {
		if grad[i] != 0 {
			t.Errorf("logit %d (forced or unordered) got gradient %g", i, grad[i])
		}
	}
	shifted := append([]float32(nil), logit...)
	for i := range shifted {
		shifted[i] += 3
	}
	if got := rankLoss(make([]float32, len(logit)), shifted, orders); !(math.Abs(got-loss) <= 1e-6) {
		t.Errorf("shifted logits: loss %g, want %g", got, loss)
	}
}

// spreadOrders keeps cells far apart first and follows the router's
// logits among equally far cells: every cell once, the forced ones
// first, the cells picked before any at less than spreadCap pairwise that
// far apart, the router's favourite third when no kept cell is near it.
func TestSpreadOrders(t *testing.T) {
	const rows, cols = 8, 8
	L := rows * cols
	rng := rand.New(rand.NewPCG(5, 6))
	tests := []struct {
		name string
		top  int // a cell given the largest logit, or −1
	}{
		{"random logits", -1},
		{"a favourite in the middle", 3*cols + 4},
		{"a favourite next to a forced cell", 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			logit := make([]float32, 2*L)
			for i := range logit {
				logit[i] = float32(rng.NormFloat64())
			}
			if tt.top >= 0 {
				logit[tt.top] = 10
			}
			orders := spreadOrders(logit, rows, cols, []bool{true, false})
			if orders[1] != nil {
				t.Errorf("a sample not routed got an order %v", orders[1])
			}
			order := orders[0]
			seen := map[int]bool{}
			for _, l := range order {
				seen[l] = true
			}
			if len(order) != L || len(seen) != L || order[0] != 0 || order[1] != L-1 {
				t.Fatalf("order %v: want every cell once, the forced ones first", order)
			}
			d2 := func(a, b int) int { dr, dc := a/cols-b/cols, a%cols-b%cols; return dr*dr + dc*dc }
			spaced := 0 // the prefix whose cells are pairwise spreadCap apart
			for i, c := range order {
				ok := true
				for _, j := range order[:i] {
					ok = ok && d2(c, j) >= spreadCap
				}
				if !ok {
					break
				}
				spaced++
			}
			if spaced < L/9 {
				t.Errorf("only the first %d cells spaced %d apart: %v", spaced, spreadCap, order)
			}
			switch tt.top {
			case 3*cols + 4:
				if order[2] != tt.top {
					t.Errorf("third cell %d, want the favourite %d", order[2], tt.top)
				}
			case 1:
				if slices.Index(order, 1) < spaced {
					t.Errorf("the favourite next to a forced cell kept at %d, before the spaced prefix of %d ends", slices.Index(order, 1), spaced)
				}
			}
		})
	}
}

// checkLogitGradient compares grad, a loss's gradient at logit, with the
// loss's central differences.
func checkLogitGradient(t *testing.T, loss func(grad, logit []float32) float64, logit, grad []float32) {
	t.Helper()
	const h = 1e-3
	for i := range logit {
		up, down := append([]float32(nil), logit...), append([]float32(nil), logit...)
		up[i] += h
		down[i] -= h
		g := make([]float32, len(logit))
		num := (loss(g, up) - loss(g, down)) / (2 * h)
		if !(math.Abs(num-float64(grad[i])) <= 1e-3) {
			t.Errorf("logit %d: gradient %g, finite difference %g", i, grad[i], num)
		}
	}
}

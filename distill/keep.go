package distill

import (
	"math"
	"slices"

	"github.com/dcdit/dcdit/dc"
)

// keepTargets labels the cells a router should keep: in each sample of a
// grid of rows×cols cells, the keep cells of largest drop cost (true), the
// others false. The first and last cell of a sample are forced boundaries
// and are left out (mask false); keep counts them.
//
// A dropped cell takes its token's prediction, its own noise carried by
// the latent skip. What that cannot carry is the difference of the
// teacher's clean estimates. A cell's drop cost (dc.DropCost) is the mean
// of |u_l − u_n|² over its grid neighbours n (its token is one of them),
// u = a_b·pred + c_b·x an affine map of the cell's clean estimate in
// sample b: large where the teacher's picture changes — at shape edges
// at low noise, along the coarse outline at high noise — and zero on
// flat background. Only the ranks within a sample matter, so the map's
// per-sample scale drops out. DDPM: u = ε̂ − x/√(1−ᾱ_t) =
// −√ᾱ_t/√(1−ᾱ_t)·x̂0 (a = 1, c = −1/√(1−ᾱ_t)); flow matching's data-ward
// velocity v̂: u = x + σ·v̂ = x̂0 (a = σ, c = 1).
//
// pred holds the teacher's prediction and x the noisy input, both
// [B·rows·cols, k] in the cell layout (pred rows stride wide); a and c
// have one entry per sample.
func keepTargets(pred, x []float32, stride, k int, a, c []float64, rows, cols, keep int) (label, mask []bool) {
	L := rows * cols
	B := len(a)
	label, mask = make([]bool, B*L), make([]bool, B*L)
	u := make([]float64, L*k)
	cost := make([]float64, L)
	order := make([]int, 0, L)
	for b := range B {
		for l := range L {
			r := (b*L + l) * stride
			for j := range k {
				u[l*k+j] = a[b]*float64(pred[r+j]) + c[b]*float64(x[(b*L+l)*k+j])
			}
		}
		order = order[:0]
		for l := range L {
			cost[l] = dc.DropCost(u, l, k, rows, cols)
			if l != 0 && l != L-1 {
				mask[b*L+l] = true
				order = append(order, l)
			}
		}
		// Largest cost first; ties to the lower index, so labels are
		// deterministic.
		slices.SortStableFunc(order, func(i, j int) int {
			switch {
			case cost[i] > cost[j]:
				return -1
			case cost[i] < cost[j]:
				return 1
			}
			return 0
		})
		for _, l := range order[:min(max(keep-2, 0), len(order))] {
			label[b*L+l] = true
		}
	}
	return label, mask
}

// keepLoss writes into grad the gradient, with respect to the router's
// logits, of the mean binary cross-entropy between sigmoid(logit) and the
// labels over the masked cells, and returns that mean.
func keepLoss(grad, logit []float32, label, mask []bool) float64 {
	n := 0
	for _, m := range mask {
		if m {
			n++
		}
	}
	if n == 0 {
		return 0
	}
	var s float64
	for i, z := range logit {
		if !mask[i] {
			grad[i] = 0
			continue
		}
		zf := float64(z)
		y := 0.0
		if label[i] {
			y = 1
		}
		// softplus(z) − y·z, stable for large |z|.
		s += math.Max(zf, 0) + math.Log1p(math.Exp(-math.Abs(zf))) - y*zf
		grad[i] = float32((1/(1+math.Exp(-zf)) - y) / float64(n))
	}
	return s / float64(n)
}

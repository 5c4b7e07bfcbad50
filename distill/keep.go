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

// spreadOrders orders the cells of every routed sample as tail dropping
// should keep them: the first and last cell (forced), then, greedily, a
// cell as far from the kept ones as the grid allows up to spreadCap
// (squared grid distance), the router's own highest logit among those.
// Every prefix of the order is a kept set spread over the picture, as
// close to a lattice as its count allows: a dropped cell copies a token
// at most a cell or two away, where a random choice of the same count
// leaves holes and clumps. Within that constraint the order is the
// router's, so the targets ask only for what a router that reads a
// neighbourhood can give — to rank a cell above its close neighbours or
// below them — and nothing it cannot see: at the noisy steps that route,
// the teacher's picture is not yet in the input. Samples not routed
// (routed[b] false) get no order.
func spreadOrders(logit []float32, rows, cols int, routed []bool) [][]int {
	L := rows * cols
	orders := make([][]int, len(routed))
	far := make([]int, L) // squared distance to the nearest kept cell, capped
	for b, on := range routed {
		if !on {
			continue
		}
		z := logit[b*L : (b+1)*L]
		order := make([]int, 0, L)
		for l := range L {
			far[l] = spreadCap
		}
		keep := func(c int) {
			order = append(order, c)
			far[c] = -1
			for l := range L {
				if far[l] < 0 {
					continue
				}
				dr, dc := l/cols-c/cols, l%cols-c%cols
				far[l] = min(far[l], dr*dr+dc*dc)
			}
		}
		keep(0)
		keep(L - 1)
		for len(order) < L {
			best := -1
			for l := range L {
				// Farther first, then the larger logit; ties to the lower
				// cell, so that orders are deterministic.
				if far[l] >= 0 && (best < 0 || far[l] > far[best] || far[l] == far[best] && z[l] > z[best]) {
					best = l
				}
			}
			keep(best)
		}
		orders[b] = order
	}
	return orders
}

// spreadCap is the squared grid distance beyond which spreadOrders counts
// every cell as far: two cells apart, so that the router's order decides
// among the cells no kept cell neighbours.
const spreadCap = 4

// rankLoss writes into grad the gradient, with respect to the router's
// logits [B·L], of the Plackett–Luce negative log-likelihood of every
// ordered sample's order (nil: no term) under its logits, the forced
// first two entries left out, per ranked cell; it returns that mean. The
// loss is blind to a shift of a sample's logits, so the ratio loss alone
// sets how many cells are boundaries, and this one which come first.
// The orders are targets: no gradient flows through them.
func rankLoss(grad, logit []float32, orders [][]int) float64 {
	clear(grad)
	L := len(logit) / len(orders)
	n := 0
	for _, o := range orders {
		if o != nil {
			n += len(o) - 2
		}
	}
	if n == 0 {
		return 0
	}
	var s float64
	for b, o := range orders {
		if o == nil {
			continue
		}
		z := make([]float64, len(o)-2)
		for i, l := range o[2:] {
			z[i] = float64(logit[b*L+l])
		}
		// suffix[i] = log Σ_{j ≥ i} exp z_j.
		suffix := make([]float64, len(z)+1)
		suffix[len(z)] = math.Inf(-1)
		for i := len(z) - 1; i >= 0; i-- {
			suffix[i] = logAddExp(suffix[i+1], z[i])
		}
		acc := math.Inf(-1) // log Σ_{i ≤ m} exp(−suffix_i)
		for m, zm := range z {
			s += suffix[m] - zm
			acc = logAddExp(acc, -suffix[m])
			grad[b*L+o[m+2]] = float32((math.Exp(zm+acc) - 1) / float64(n))
		}
	}
	return s / float64(n)
}

// logAddExp is log(eᵃ + eᵇ), exact where either is −∞.
func logAddExp(a, b float64) float64 {
	hi, lo := max(a, b), min(a, b)
	if math.IsInf(lo, -1) {
		return hi
	}
	return hi + math.Log1p(math.Exp(lo-hi))
}

package dc

import (
	"container/heap"
	"fmt"
	"math"
)

// CoverKeep is a Chooser that keeps in every sample as many cells as the
// router kept, chosen on the clean estimate x0 ([samples, channels,
// rows·patch, cols·patch], the latent layout) to cover it: the first and
// last cell, then one at a time the cell whose keeping lowers the cover
// cost most. A cell's cost is that of the best kept cell m for it,
// |u_l − u_m|² + spacing·d²(l, m), u a cell's values and d the distance
// between the cells in cells; the cover cost is their sum. Ties go to the
// cell served worst, then to the lower cell. The first n cells of that
// order are the ones kept, so every count is a prefix of one ranking.
// Batch row b takes sample b mod samples, so a guided batch's two halves
// choose alike.
//
// Why: ChangeKeep ranks by local change and then keeps the cells apart
// by a radius set by the count alone, so at a sparse budget it spends
// tokens on every stretch of edge alike. The cover is greedy facility
// location: a token serves the cells around it whose values it shares,
// the farther the worse (the decoder reads a dropped cell's features from
// the tokens beside it), so a flat region takes a token within reach and
// an edge, a corner or a small shape as many as their values need.
// spacing (> 0) is what one cell² of distance costs in squared latent
// units of value.
func CoverKeep(x0 []float32, samples, channels, rows, cols, patch int, spacing float64) (Chooser, error) {
	L := rows * cols
	h, w := rows*patch, cols*patch
	if samples < 1 || channels < 1 || L < 1 || patch < 1 || len(x0) != samples*channels*h*w {
		return nil, fmt.Errorf("dc: cover keep: %d values for %d samples of %d×%d×%d (cells %d×%d of %d×%d)",
			len(x0), samples, channels, h, w, rows, cols, patch, patch)
	}
	if !(spacing > 0) || math.IsInf(spacing, 1) {
		return nil, fmt.Errorf("dc: cover keep: spacing %g, want a finite value > 0", spacing)
	}
	k := channels * patch * patch
	u := make([]float64, L*k)
	cv := &coverer{rows: rows, cols: cols, spacing: spacing, cost: make([]float64, L)}
	orders := make([][]int, samples)
	for s := range samples {
		cellValues(u, x0[s*channels*h*w:(s+1)*channels*h*w], channels, rows, cols, patch)
		orders[s] = cv.order(make([]int, 0, L), u, k)
	}
	return func(kept []bool, batch int) ([]bool, error) {
		if len(kept) != batch*L {
			return nil, fmt.Errorf("dc: cover keep: a mask of %d cells for %d grids of %d", len(kept), batch, L)
		}
		out := make([]bool, len(kept))
		for b := range batch {
			n := countKept(kept[b*L : (b+1)*L])
			for _, l := range orders[b%samples][:n] {
				out[b*L+l] = true
			}
		}
		return out, nil
	}, nil
}

// coverer computes CoverKeep's order on a rows×cols grid, its scratch
// reused from sample to sample.
type coverer struct {
	rows, cols int
	spacing    float64
	cost       []float64 // each cell's cost under the kept cells
	queue      coverQueue
}

// order appends to order (emptied) every cell in the order CoverKeep
// keeps them, u [L, k] the cells' values. The cover cost's fall is
// submodular — keeping more cells never makes keeping another one worth
// more — and a cell's own cost only falls, so a key computed earlier
// bounds the key now: the greedy re-evaluates only the cell on top of the queue
// until its fresh key still tops every other (lazy greedy), which picks
// exactly the cells the full scan would.
func (cv *coverer) order(order []int, u []float64, k int) []int {
	L := cv.rows * cv.cols
	order = order[:0]
	for l := range cv.cost {
		cv.cost[l] = math.Inf(1)
	}
	order = append(order, 0)
	cv.add(0, u, k)
	if L > 1 {
		order = append(order, L-1)
		cv.add(L-1, u, k)
	}
	q := cv.queue[:0]
	for c := 1; c < L-1; c++ {
		q = append(q, coverKey{cell: c, gain: cv.gain(c, cv.rows+cv.cols, u, k), cost: cv.cost[c]})
	}
	heap.Init(&q)
	for q.Len() > 0 {
		// Only a cell nearer than √(cost/spacing) can serve a cell better.
		worst := 0.0
		for _, c := range cv.cost {
			worst = max(worst, c)
		}
		reach := int(math.Ceil(math.Sqrt(worst / cv.spacing)))
		for {
			c := q[0].cell
			q[0].gain, q[0].cost = cv.gain(c, reach, u, k), cv.cost[c]
			heap.Fix(&q, 0)
			if q[0].cell == c {
				break
			}
		}
		c := heap.Pop(&q).(coverKey).cell
		order = append(order, c)
		cv.add(c, u, k)
	}
	cv.queue = q
	return order
}

// coverKey is a cell's place in the greedy's queue: the fall in cover
// cost its keeping would bring, then its own cost, then the lower cell.
type coverKey struct {
	cell       int
	gain, cost float64
}

// coverQueue is a max-queue of coverKeys (container/heap).
type coverQueue []coverKey

func (q coverQueue) Len() int { return len(q) }
func (q coverQueue) Less(i, j int) bool {
	a, b := q[i], q[j]
	if a.gain != b.gain {
		return a.gain > b.gain
	}
	if a.cost != b.cost {
		return a.cost > b.cost
	}
	return a.cell < b.cell
}
func (q coverQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *coverQueue) Push(x any)   { *q = append(*q, x.(coverKey)) }
func (q *coverQueue) Pop() any {
	old := *q
	x := old[len(old)-1]
	*q = old[:len(old)-1]
	return x
}

// gain is how much keeping cell c lowers the cover cost of the cells
// within reach of it.
func (cv *coverer) gain(c, reach int, u []float64, k int) float64 {
	rc, cc := c/cv.cols, c%cv.cols
	var g float64
	for r := max(0, rc-reach); r <= min(cv.rows-1, rc+reach); r++ {
		for col := max(0, cc-reach); col <= min(cv.cols-1, cc+reach); col++ {
			l := r*cv.cols + col
			if v := cv.serve(l, c, u, k); v < cv.cost[l] {
				g += cv.cost[l] - v
			}
		}
	}
	return g
}

// add keeps cell c.
func (cv *coverer) add(c int, u []float64, k int) {
	for l := range cv.cost {
		cv.cost[l] = min(cv.cost[l], cv.serve(l, c, u, k))
	}
}

// serve is cell l's cost when kept cell m serves it.
func (cv *coverer) serve(l, m int, u []float64, k int) float64 {
	dr, dc := l/cv.cols-m/cv.cols, l%cv.cols-m%cv.cols
	s := cv.spacing * float64(dr*dr+dc*dc)
	for v := range k {
		e := u[l*k+v] - u[m*k+v]
		s += e * e
	}
	return s
}

// LookbackKeep is the Chooser a budget keeps on the clean estimate x0 of
// its samples (sampling's previous step, or in training the teacher's):
// CoverKeep at spacing > 0, else ChangeKeep.
func LookbackKeep(x0 []float32, samples, channels, rows, cols, patch int, spacing float64) (Chooser, error) {
	if spacing == 0 {
		return ChangeKeep(x0, samples, channels, rows, cols, patch)
	}
	return CoverKeep(x0, samples, channels, rows, cols, patch, spacing)
}

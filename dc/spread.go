package dc

import (
	"fmt"
	"slices"
	"sort"
)

// SpreadDrop is elastic tail dropping that keeps apart whichever of the
// kept and the dropped boundaries are fewer. Each sample keeps as many
// boundaries as TailDrop would. When at most half stay, it picks them
// greedily in descending probability, skipping a boundary closer than r
// to one already kept; when more than half stay, it picks the ones to
// drop greedily in ascending probability, skipping one closer than r to
// one already dropped (the first and last cell, which the router always
// keeps, stay). r starts at the spacing of that many cells laid evenly on
// the grid (r² = ⌊cells / count⌋ in cell units) and shrinks one unit of
// r² per pass until the count is reached (at r² = 1 every candidate
// qualifies). Why: on fine cells the lowest-probability boundaries lie in
// blobs, and a cell whose nearest kept token is several cells away takes
// far features (docs/results.md, "the first DiT-256 study", "the spread
// drop"); spreading the drops leaves every dropped cell beside kept ones
// while most stay, where spreading the kept ones could not (r² = 1). A
// sample without a drop (ρ = 0) or running dense is TailDrop's. rows×cols
// is the cell grid of each of the batch's samples.
func SpreadDrop(prob []float32, natural []bool, batch, rows, cols int, frac []float32) ([]bool, error) {
	kept, err := TailDrop(prob, natural, batch, frac)
	if err != nil {
		return nil, err
	}
	fr, err := perSample(frac, batch)
	if err != nil {
		return nil, err
	}
	L := len(prob) / batch
	if rows*cols != L {
		return nil, fmt.Errorf("dc: spread drop: a %d×%d cell grid for %d cells a sample", rows, cols, L)
	}
	var idx []int
	sp := newSpreader(rows, cols)
	for b := range batch {
		if fr[b] == Dense {
			continue
		}
		idx = idx[:0]
		m := 0
		for l := range L {
			if natural[b*L+l] {
				idx = append(idx, l)
			}
			if kept[b*L+l] {
				m++
			}
		}
		if m == len(idx) { // nothing dropped
			continue
		}
		// TailDrop's order reversed: the highest probability first, ties
		// to the higher index (the one TailDrop drops last).
		p := prob[b*L : (b+1)*L]
		sort.SliceStable(idx, func(i, j int) bool { return p[idx[i]] < p[idx[j]] })
		slices.Reverse(idx)
		sp.keep(idx, m, kept[b*L:(b+1)*L])
	}
	return kept, nil
}

// spreader keeps cells of a rows×cols grid apart, as SpreadDrop does,
// with its scratch reused from grid to grid.
type spreader struct {
	rows, cols int
	minD       []int
	dropped    []bool
	low        []int
}

func newSpreader(rows, cols int) *spreader {
	L := rows * cols
	return &spreader{rows: rows, cols: cols, minD: make([]int, L), dropped: make([]bool, L), low: make([]int, 0, L)}
}

// keep sets keep [rows·cols] to the n cells of order (the candidates,
// highest priority first; every other cell is dropped already) that stay
// apart: while at most half the grid stays, the kept cells, picked from
// the top of order (pickApart); else the dropped ones, picked from its
// bottom apart from each other and from the cells outside order, the
// first and last cell never among them.
func (s *spreader) keep(order []int, n int, keep []bool) {
	L := len(keep)
	clear(keep)
	d := len(order) - n
	switch {
	case n < 1:
	case d <= 0:
		for _, l := range order {
			keep[l] = true
		}
	case L-n >= n:
		pickApart(order, n, L/n, s.rows, s.cols, keep, s.minD)
	default:
		for l := range s.dropped {
			s.dropped[l] = true
		}
		s.low = s.low[:0]
		for _, l := range order {
			s.dropped[l] = false
		}
		for _, l := range slices.Backward(order) {
			if !l0(l, L) {
				s.low = append(s.low, l)
			}
		}
		pickApart(s.low, d, L/(L-n), s.rows, s.cols, s.dropped, s.minD)
		for _, l := range order {
			keep[l] = !s.dropped[l]
		}
	}
}

// pickApart marks n more cells of order in mark, taken in that order,
// each at squared distance at least r2 from every cell marked before it
// (those marked on entry too) on the rows×cols grid; r2 shrinks by one
// per pass over order until n are marked, or order has no unmarked cell
// left. minD is scratch of one entry a cell.
func pickApart(order []int, n, r2, rows, cols int, mark []bool, minD []int) {
	far := rows*rows + cols*cols
	for l := range minD {
		minD[l] = far
	}
	near := func(l int) {
		lr, lc := l/cols, l%cols
		for q := range minD {
			dr, dc := q/cols-lr, q%cols-lc
			minD[q] = min(minD[q], dr*dr+dc*dc)
		}
	}
	for l, m := range mark {
		if m {
			near(l)
		}
	}
	for got := 0; got < n; r2-- {
		for _, l := range order {
			if got == n {
				break
			}
			if mark[l] || minD[l] < r2 {
				continue
			}
			mark[l] = true
			got++
			near(l)
		}
		if r2 <= 1 {
			return // every unmarked cell qualified: none is left
		}
	}
}

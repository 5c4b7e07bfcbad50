package dc

import (
	"fmt"
	"slices"
	"sort"
)

// SpreadDrop is elastic tail dropping that keeps the surviving boundaries
// apart. Each sample keeps as many boundaries as TailDrop would, but picks
// them greedily in descending probability, skipping a boundary closer than
// r to one already kept; r starts at the spacing of that many cells laid
// evenly on the grid (r² = ⌊cells / kept⌋ in cell units) and shrinks one
// unit of r² per pass until the count is reached (at r² = 1 every
// boundary qualifies). Why: on fine cells the lowest-probability boundaries
// lie in blobs, and a cell whose nearest kept token is several cells away
// takes far features (docs/results.md, "the first DiT-256 study"); a
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
	minD := make([]int, L)
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
		// TailDrop's order reversed: the highest probability first, ties to
		// the higher index (the one TailDrop drops last).
		p := prob[b*L : (b+1)*L]
		sort.SliceStable(idx, func(i, j int) bool { return p[idx[i]] < p[idx[j]] })
		slices.Reverse(idx)
		sample := kept[b*L : (b+1)*L]
		clear(sample)
		for l := range minD {
			minD[l] = rows*rows + cols*cols
		}
		n := 0
		for r2 := L / m; n < m; r2-- {
			for _, l := range idx {
				if n == m {
					break
				}
				if sample[l] || minD[l] < r2 {
					continue
				}
				sample[l] = true
				n++
				lr, lc := l/cols, l%cols
				for q := range minD {
					dr, dc := q/cols-lr, q%cols-lc
					minD[q] = min(minD[q], dr*dr+dc*dc)
				}
			}
		}
	}
	return kept, nil
}

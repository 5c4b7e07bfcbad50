package dc

import (
	"fmt"
	"math/rand/v2"
)

// Chooser picks the cells a forward keeps in place of the router's
// choice (Model.PredictChoosing): given the mask tail dropping left, kept
// [B·L] for a batch of B grids, it returns the mask to keep instead, with
// the same count in every sample. The router still runs, and its
// probabilities still weigh the de-chunk: the k-th chosen token of a
// sample (raster order) takes the probability of the router's k-th kept
// token, so that only the positions change. The router's probability at a
// cell it did not mark (below ½) would blend that token into its
// neighbours, and a hard 1 would switch the smoothing off; either would
// change the model beside the choice of cells.
type Chooser func(kept []bool, batch int) ([]bool, error)

// apply runs c on the router's kept mask and checks the counts; it returns
// the chosen mask and the router's kept rows in raster order, whose
// probabilities the de-chunk reads.
func (c Chooser) apply(kept []bool, batch int) ([]bool, []int, error) {
	chosen, err := c(kept, batch)
	if err != nil {
		return nil, nil, fmt.Errorf("dc: choosing the kept cells: %w", err)
	}
	if len(chosen) != len(kept) {
		return nil, nil, fmt.Errorf("dc: choosing the kept cells: a mask of %d cells for a batch of %d cells", len(chosen), len(kept))
	}
	var rows []int
	L := len(kept) / batch
	for b := range batch {
		want, got := 0, 0
		for l := b * L; l < (b+1)*L; l++ {
			if kept[l] {
				rows = append(rows, l)
				want++
			}
			if chosen[l] {
				got++
			}
		}
		if got != want {
			return nil, nil, fmt.Errorf("dc: choosing the kept cells: sample %d keeps %d cells, the router kept %d", b, got, want)
		}
	}
	return chosen, rows, nil
}

// RandomKeep is the random router: a Chooser that keeps in every sample
// as many cells as the router kept, drawn from rng — the sample's first
// and last cell (which the router always marks: they are no choice of
// its) and a uniformly random subset of the others. It shuffles all of a
// sample's other cells whatever the count, so its draws depend on rng and
// the batches' sizes alone, never on the router's scores. A count of one
// keeps the last cell, as tail dropping's tie order does.
func RandomKeep(rng *rand.Rand) Chooser {
	return func(kept []bool, batch int) ([]bool, error) {
		L := len(kept) / batch
		if L < 2 {
			return kept, nil
		}
		out := make([]bool, len(kept))
		order := make([]int, L)
		for b := range batch {
			n := countKept(kept[b*L : (b+1)*L])
			randomOrder(order, rng)
			for _, l := range order[:n] {
				out[b*L+l] = true
			}
		}
		return out, nil
	}
}

// SpreadRandomKeep is the random router kept apart: a Chooser that keeps
// in every sample of a rows×cols grid as many cells as the router kept,
// the first and last cell (one: the last, as RandomKeep) and then cells
// in a uniformly random order, kept apart as SpreadDrop and ChangeKeep
// keep theirs. Against RandomKeep it measures what spacing alone is
// worth; against ChangeKeep or the router, what their ranking adds to it.
func SpreadRandomKeep(rng *rand.Rand, rows, cols int) Chooser {
	L := rows * cols
	sp := newSpreader(rows, cols)
	order := make([]int, L)
	return func(kept []bool, batch int) ([]bool, error) {
		if len(kept) != batch*L {
			return nil, fmt.Errorf("dc: spread random keep: a mask of %d cells for %d grids of %d×%d", len(kept), batch, rows, cols)
		}
		out := make([]bool, len(kept))
		if L < 2 {
			copy(out, kept)
			return out, nil
		}
		for b := range batch {
			n := countKept(kept[b*L : (b+1)*L])
			randomOrder(order, rng)
			sp.keep(order, n, out[b*L:(b+1)*L])
		}
		return out, nil
	}
}

// randomOrder fills order (one entry a cell) with the last cell, the
// first, then the others in a uniformly random order: the random
// routers' priorities, the cells the router always marks first.
func randomOrder(order []int, rng *rand.Rand) {
	L := len(order)
	order[0], order[1] = L-1, 0
	for l := 1; l < L-1; l++ {
		order[l+1] = l
	}
	rest := order[2:]
	rng.Shuffle(len(rest), func(i, j int) { rest[i], rest[j] = rest[j], rest[i] })
}

// countKept is the number of cells mask keeps.
func countKept(mask []bool) int {
	n := 0
	for _, k := range mask {
		if k {
			n++
		}
	}
	return n
}

// ChangeKeep is a Chooser that keeps in every sample as many cells as the
// router kept, ranked as an ideal router ranks them for the clean
// estimate x0 ([samples, channels, rows·patch, cols·patch], the latent
// layout): the first and last cell, then by DropCost, where the picture
// changes (IdealDrop's ranking); and kept apart as SpreadDrop keeps them
// (the kept cells spread while at most half stay, else the dropped ones).
// Batch row b takes sample b mod samples, so a guided batch's two halves
// choose alike. A sampler that passes the previous step's clean estimate
// lets a routed step keep the cells that step found edges in, which a
// router reading only the noisy latents of its own step cannot see at mid
// noise. Ranked alone, without the spreading, the kept cells crowd onto
// the edges and leave flat regions far from any token.
func ChangeKeep(x0 []float32, samples, channels, rows, cols, patch int) (Chooser, error) {
	L := rows * cols
	h, w := rows*patch, cols*patch
	if samples < 1 || channels < 1 || L < 1 || patch < 1 || len(x0) != samples*channels*h*w {
		return nil, fmt.Errorf("dc: change keep: %d values for %d samples of %d×%d×%d (cells %d×%d of %d×%d)",
			len(x0), samples, channels, h, w, rows, cols, patch, patch)
	}
	k := channels * patch * patch
	orders := make([][]int, samples)
	u := make([]float64, L*k)
	cost := make([]float64, L)
	for s := range samples {
		cellValues(u, x0[s*channels*h*w:(s+1)*channels*h*w], channels, rows, cols, patch)
		orders[s] = changeOrder(make([]int, 0, L), cost, u, k, rows, cols)
	}
	sp := newSpreader(rows, cols)
	return func(kept []bool, batch int) ([]bool, error) {
		if len(kept) != batch*L {
			return nil, fmt.Errorf("dc: change keep: a mask of %d cells for %d grids of %d", len(kept), batch, L)
		}
		out := make([]bool, len(kept))
		for b := range batch {
			sp.keep(orders[b%samples], countKept(kept[b*L:(b+1)*L]), out[b*L:(b+1)*L])
		}
		return out, nil
	}, nil
}

// BudgetsOnly is choose for the samples whose drop fraction frac (one per
// sample) is a budget (> 0) and the router's choice for the others (nil:
// nil): ρ 0 is the model at its best, whose cells are the router's, and a
// dense sample keeps every cell whoever chooses.
func BudgetsOnly(choose Chooser, frac []float32) Chooser {
	if choose == nil {
		return nil
	}
	return func(kept []bool, batch int) ([]bool, error) {
		chosen, err := choose(kept, batch)
		if err != nil || len(chosen) != len(kept) || len(frac) != batch {
			return chosen, err
		}
		L := len(kept) / batch
		for b, f := range frac {
			if f == 0 {
				copy(chosen[b*L:(b+1)*L], kept[b*L:(b+1)*L])
			}
		}
		return chosen, nil
	}
}

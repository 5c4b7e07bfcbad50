package dc

import (
	"fmt"
	"sort"
)

// Dense, given as a sample's drop fraction, makes every cell of the
// sample a token: the backbone sees the whole grid, as the teacher did.
// Elastic inference can spend that at the low-noise steps, where a cell
// without a token cannot know its clean value precisely enough
// (docs/design.md); the router still runs and its natural mask still
// feeds the ratio loss.
const Dense float32 = -1

// FracAt is the drop fraction of a sample at model time t under elastic
// inference that runs the steps below denseBelow on every cell: Dense
// there, rho elsewhere (denseBelow 0: never dense).
func FracAt(rho, t, denseBelow float32) float32 {
	if t < denseBelow {
		return Dense
	}
	return rho
}

// Schedule is how elastic inference spends a sampling run's steps by
// their timestep t (DDPM's t, flow matching's σ·T): the steps below
// DenseBelow on every cell, as FracAt; in a sample with a budget (ρ > 0)
// those at or above CoarseFrom dropping at least CoarseRho of their
// boundaries, since the noisiest steps only block out the picture and
// need few tokens (the paper's router keeps fewer there by itself); the
// rest at the sample's ρ. ρ 0 keeps the router's own boundaries at every
// routed step: it is the model at its best, not a budget. Zero fields
// turn their part off.
type Schedule struct {
	DenseBelow, CoarseFrom, CoarseRho float32
}

// Frac is the drop fraction of a sample at timestep t when its row
// drops rho.
func (s Schedule) Frac(rho, t float32) float32 {
	if rho > 0 && s.CoarseFrom > 0 && t >= s.CoarseFrom && t >= s.DenseBelow {
		return max(rho, s.CoarseRho)
	}
	return FracAt(rho, t, s.DenseBelow)
}

// TailDrop applies elastic tail dropping to the natural boundaries of a
// batch (prob and natural are [B·L]): in sample b, the floor(n_b·ρ_b)
// boundaries with the lowest probability are dropped, n_b being its
// natural boundary count. The product n_b·ρ_b is taken in float32 and
// truncated, as the reference does; ties in probability go to the lower
// token index (dropped first). frac holds one ρ for the whole batch or one
// per sample (Lite-CFG); empty means ρ = 0. Each ρ must lie in [0, 1) or
// be Dense (every cell of the sample kept, whatever the router marked),
// and at least one token must stay in every sample.
func TailDrop(prob []float32, natural []bool, batch int, frac []float32) ([]bool, error) {
	if batch < 1 || len(prob) != len(natural) || len(prob)%batch != 0 {
		return nil, fmt.Errorf("dc: tail drop: %d probabilities and %d mask entries for a batch of %d", len(prob), len(natural), batch)
	}
	fr, err := perSample(frac, batch)
	if err != nil {
		return nil, err
	}
	L := len(prob) / batch
	kept := append([]bool(nil), natural...)
	for b := range batch {
		if fr[b] == Dense {
			for l := range L {
				kept[b*L+l] = true
			}
			continue
		}
		var idx []int
		for l := range L {
			if natural[b*L+l] {
				idx = append(idx, b*L+l)
			}
		}
		nDrop := dropCount(len(idx), fr[b])
		if nDrop == 0 {
			continue
		}
		if nDrop >= len(idx) {
			return nil, fmt.Errorf("dc: tail drop: sample %d: ρ = %v drops all %d boundaries", b, fr[b], len(idx))
		}
		sort.SliceStable(idx, func(i, j int) bool { return prob[idx[i]] < prob[idx[j]] })
		for _, i := range idx[:nDrop] {
			kept[i] = false
		}
	}
	return kept, nil
}

// perSample expands a drop fraction list to one value per sample.
func perSample(frac []float32, batch int) ([]float32, error) {
	out := make([]float32, batch)
	switch len(frac) {
	case 0:
	case 1:
		for i := range out {
			out[i] = frac[0]
		}
	case batch:
		copy(out, frac)
	default:
		return nil, fmt.Errorf("dc: %d drop fractions for a batch of %d, want 0, 1 or %d", len(frac), batch, batch)
	}
	for b, f := range out {
		if !(f >= 0 && f < 1) && f != Dense {
			return nil, fmt.Errorf("dc: drop fraction %v for sample %d, want 0 ≤ ρ < 1 (or Dense)", f, b)
		}
	}
	return out, nil
}

// Chunks describes the kept tokens of a batch packed into one ragged
// sequence, and how to put them back on the grid.
type Chunks struct {
	// Kept marks the tokens that survive tail dropping, [B·L].
	Kept []bool
	// NumKept is M_b, the kept count of each sample.
	NumKept []int
	// Offsets delimit the samples in the packed sequence (B+1 entries):
	// sample b owns packed rows Offsets[b] … Offsets[b+1]−1.
	Offsets []int
	// Index maps packed row k to its grid row b·L + l; within a sample the
	// kept tokens are in raster order (ChunkLayer's order).
	Index []int
	// Pos holds the latent-grid row and column of packed row k's cell
	// (its centre, for cells of more than one latent position) at Pos[2k]
	// and Pos[2k+1].
	Pos []float64
	// PlugBack maps every grid position b·L + l to j < M_b, the sample's
	// kept token nearest to it by squared 2-D distance (ties to the lowest
	// j): compute_spatial_nearest_boundary_idx.
	PlugBack []int
}

// chunk packs the kept tokens of a batch of grids.
func chunk(kept []bool, g grid) (*Chunks, error) {
	L := g.tokens()
	c := &Chunks{Kept: kept, NumKept: make([]int, g.batch), Offsets: make([]int, g.batch+1), PlugBack: make([]int, g.batch*L)}
	for b := range g.batch {
		start := len(c.Index)
		for l := range L {
			if kept[b*L+l] {
				c.Index = append(c.Index, b*L+l)
				c.Pos = append(c.Pos, g.latent(l/g.cols), g.latent(l%g.cols))
			}
		}
		m := len(c.Index) - start
		if m == 0 {
			return nil, fmt.Errorf("dc: chunk: sample %d keeps no token", b)
		}
		c.NumKept[b], c.Offsets[b+1] = m, len(c.Index)
		rows, cols := make([]int, m), make([]int, m)
		for j, i := range c.Index[start:] {
			rows[j], cols[j] = (i-b*L)/g.cols, (i-b*L)%g.cols
		}
		for l := range L {
			r, col := l/g.cols, l%g.cols
			best, bestD := 0, -1
			for j := range m {
				dr, dc := r-rows[j], col-cols[j]
				if d := dr*dr + dc*dc; bestD < 0 || d < bestD {
					best, bestD = j, d
				}
			}
			c.PlugBack[b*L+l] = best
		}
	}
	return c, nil
}

// plugBackRows maps every grid position to its packed row.
func (c *Chunks) plugBackRows() []int {
	L := len(c.PlugBack) / len(c.NumKept)
	out := make([]int, len(c.PlugBack))
	for i, j := range c.PlugBack {
		out[i] = c.Offsets[i/L] + j
	}
	return out
}

// plugBackCells maps every grid position to the grid row of the kept
// token it takes its features from.
func (c *Chunks) plugBackCells() []int {
	rows := c.plugBackRows()
	for i, r := range rows {
		rows[i] = c.Index[r]
	}
	return rows
}

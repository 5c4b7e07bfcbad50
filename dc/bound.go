package dc

import (
	"fmt"
	"slices"
)

// IdealDrop measures the ideal-router bound of a batch of clean estimates:
// how much of a picture is lost when each sample keeps, as tokens, the
// keep[i] cells of largest drop cost and every other cell takes the clean
// estimate of the kept cell nearest to it (the model's plug-back, ties
// to the lowest kept cell in raster order). It returns, per kept count,
// the squared error summed over every sample's values.
//
// A cell is a patch×patch block of x ([batch, channels, rows·patch,
// cols·patch], the data sets' layout). Its drop cost is the mean of
// |u_l − u_n|² over its grid neighbours n, u a cell's values: large where
// the picture changes, zero inside flat regions. The first and last cell
// are kept whatever their cost, as the router's forced boundaries are,
// and ties go to the lower cell. It is the best a router can do with
// that many tokens when a dropped cell can only copy a kept one: the
// ranking is by local change, not by the error it finally causes, so it
// bounds the mechanism, not every possible router.
//
// With x the data itself the bound is free of noise levels; with a
// teacher's clean estimate at σ (flow matching: x + σ·v̂) and ε known, the
// error is exactly the velocity error of an oracle that gives every
// dropped cell its token's clean estimate and its own noise.
func IdealDrop(x []float32, batch, channels, rows, cols, patch int, keep []int) ([]float64, error) {
	L := rows * cols
	h, w := rows*patch, cols*patch
	if batch < 1 || channels < 1 || L < 1 || patch < 1 || len(x) != batch*channels*h*w {
		return nil, fmt.Errorf("dc: ideal drop: %d values for %d samples of %d×%d×%d (cells %d×%d of %d×%d)",
			len(x), batch, channels, h, w, rows, cols, patch, patch)
	}
	for _, k := range keep {
		if k < 1 || k > L {
			return nil, fmt.Errorf("dc: ideal drop: keep %d of %d cells, want 1..%d", k, L, L)
		}
	}
	k := channels * patch * patch
	u := make([]float64, L*k)
	cost := make([]float64, L)
	order := make([]int, 0, L)
	kept := make([]bool, L)
	out := make([]float64, len(keep))
	g := grid{batch: 1, rows: rows, cols: cols, patch: patch}
	for b := range batch {
		cellValues(u, x[b*channels*h*w:(b+1)*channels*h*w], channels, rows, cols, patch)
		order = changeOrder(order, cost, u, k, rows, cols)
		for i, n := range keep {
			clear(kept)
			for _, l := range order[:n] {
				kept[l] = true
			}
			c, err := chunk(kept, g)
			if err != nil {
				return nil, err
			}
			var s float64
			for l, j := range c.PlugBack {
				m := c.Index[j]
				for v := range k {
					d := u[l*k+v] - u[m*k+v]
					s += d * d
				}
			}
			out[i] += s
		}
	}
	return out, nil
}

// changeOrder returns, in order (reused), the cells of a rows×cols grid
// whose values are u [rows·cols, k] in the order an ideal router keeps
// them: the first and last cell, then by descending DropCost (cost, one
// entry a cell, receives it), ties to the lower cell.
func changeOrder(order []int, cost, u []float64, k, rows, cols int) []int {
	L := rows * cols
	order = order[:0]
	for l := range L {
		cost[l] = DropCost(u, l, k, rows, cols)
		order = append(order, l)
	}
	slices.SortStableFunc(order, func(i, j int) int {
		switch {
		case l0(i, L) != l0(j, L):
			// The forced boundaries first.
			if l0(i, L) {
				return -1
			}
			return 1
		case cost[i] > cost[j]:
			return -1
		case cost[i] < cost[j]:
			return 1
		}
		return 0
	})
	return order
}

// l0 reports whether cell l is one of the forced boundaries of L cells.
func l0(l, L int) bool { return l == 0 || l == L-1 }

// cellValues gathers x ([channels, rows·patch, cols·patch]) into u [L, k],
// cell by cell in raster order.
func cellValues(u []float64, x []float32, channels, rows, cols, patch int) {
	w := cols * patch
	hw := rows * patch * w
	k := channels * patch * patch
	for r := range rows {
		for c := range cols {
			l := r*cols + c
			v := 0
			for ch := range channels {
				for i := range patch {
					for j := range patch {
						u[l*k+v] = float64(x[ch*hw+(r*patch+i)*w+c*patch+j])
						v++
					}
				}
			}
		}
	}
}

// DropCost is cell l's drop cost on a rows×cols grid of cells whose
// values are u [rows·cols, k]: the mean over its grid neighbours of the
// squared distance between their values — large where the picture
// changes, zero inside a flat region. It ranks the cells an ideal router
// keeps (IdealDrop) and the cells router targets label.
func DropCost(u []float64, l, k, rows, cols int) float64 {
	r, c := l/cols, l%cols
	var s float64
	n := 0
	for _, d := range [4][2]int{{-1, 0}, {1, 0}, {0, -1}, {0, 1}} {
		rn, cn := r+d[0], c+d[1]
		if rn < 0 || rn >= rows || cn < 0 || cn >= cols {
			continue
		}
		m := rn*cols + cn
		for v := range k {
			e := u[l*k+v] - u[m*k+v]
			s += e * e
		}
		n++
	}
	if n == 0 {
		return 0
	}
	return s / float64(n)
}

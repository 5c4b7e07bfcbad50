package dc

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// CoverKeep's cells: every count a prefix of one order, each half of a
// guided batch alike, a flat picture covered evenly, a picture of squares
// covered at a lower cost than ChangeKeep's cells leave, with a token
// inside every square.
func TestCoverKeep(t *testing.T) {
	const rows, cols = 16, 16
	L := rows * cols
	rng := rand.New(rand.NewPCG(3, 4))
	x0 := make([]float32, 2*2*L)                          // sample 0 flat; sample 1 squares
	for i, at := range [][2]int{{1, 1}, {1, 9}, {9, 4}} { // apart, of values 1, 2, 3
		r0, c0, size := at[0]+rng.IntN(3), at[1]+rng.IntN(3), 3+rng.IntN(3)
		for r := r0; r < r0+size; r++ {
			for c := c0; c < c0+size; c++ {
				for ch := range 2 {
					x0[2*L+ch*L+r*cols+c] = float32(i + 1)
				}
			}
		}
	}
	const spacing = 0.5
	cover, err := CoverKeep(x0, 2, 2, rows, cols, 1, spacing)
	if err != nil {
		t.Fatal(err)
	}
	change, err := ChangeKeep(x0, 2, 2, rows, cols, 1)
	if err != nil {
		t.Fatal(err)
	}
	u := make([]float64, 2*L)
	cellValues(u, x0[2*L:], 2, rows, cols, 1)
	var prev []bool
	for n := 1; n <= L; n++ {
		kept := make([]bool, 4*L) // grids of samples 0, 1, 0, 1
		for b := range 4 {
			for l := range n {
				kept[b*L+l] = true
			}
		}
		got, err := cover(kept, 4)
		if err != nil {
			t.Fatal(err)
		}
		for s := range 2 {
			if g := countKept(got[s*L : (s+1)*L]); g != n {
				t.Fatalf("%d kept: sample %d keeps %d", n, s, g)
			}
			if !slices.Equal(got[s*L:(s+1)*L], got[(s+2)*L:(s+3)*L]) {
				t.Fatalf("%d kept: the two grids of sample %d chose differently", n, s)
			}
		}
		if !got[0] || n > 1 && !got[L-1] {
			t.Fatalf("%d kept: the first or last cell dropped", n)
		}
		if prev != nil {
			for l, k := range prev {
				if k && !got[l] {
					t.Fatalf("%d kept: cell %d, kept at %d, dropped", n, l%L, n-1)
				}
			}
		}
		prev = got
		switch n {
		case 16:
			// Flat: a token every 4 cells or so; 16 cells drawn at
			// random almost always have two touching.
			if d := minApart(got[:L], cols); d < 5 {
				t.Errorf("flat, 16 kept: two cells %d apart (squared), want ≥ 5", d)
			}
		case 24, 48, 96:
			ch, err := change(kept, 4)
			if err != nil {
				t.Fatal(err)
			}
			a := coverCost(got[L:2*L], u, 2, cols, spacing)
			b := coverCost(ch[L:2*L], u, 2, cols, spacing)
			if !(a < b) {
				t.Errorf("squares, %d kept: cover cost %.4g, ChangeKeep's cells %.4g", n, a, b)
			}
			// A token inside every square: its cells copy their own value.
			for l := range L {
				if u[2*l] == 0 {
					continue
				}
				inside := false
				for m := range L {
					inside = inside || got[L+m] && u[2*m] == u[2*l]
				}
				if !inside {
					t.Errorf("squares, %d kept: no token of value %.3g (cell %d's)", n, u[2*l], l)
					break
				}
			}
		}
	}
	for _, bad := range []struct {
		name    string
		x0      []float32
		spacing float64
	}{
		{"short estimate", x0[:7], spacing},
		{"zero spacing", x0, 0},
		{"NaN spacing", x0, math.NaN()},
		{"infinite spacing", x0, math.Inf(1)},
	} {
		if _, err := CoverKeep(bad.x0, 2, 2, rows, cols, 1, bad.spacing); err == nil {
			t.Errorf("%s accepted", bad.name)
		}
	}
	if _, err := cover(make([]bool, 5), 1); err == nil {
		t.Error("a mask of the wrong size accepted")
	}
}

// The lazy greedy picks the cells a full scan picks, ties included: on
// flat pictures (every gain tied at first), on pictures of few values
// (ties everywhere) and on noise.
func TestCoverOrderIsTheGreedy(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, tc := range []struct {
		name       string
		rows, cols int
		levels     int // values drawn from this many levels; 0: continuous
	}{
		{"flat", 6, 9, 1},
		{"two levels", 8, 8, 2},
		{"noise", 16, 16, 0},
		{"one row", 1, 12, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			L, k := tc.rows*tc.cols, 3
			u := make([]float64, L*k)
			for i := range u {
				if tc.levels > 0 {
					u[i] = float64(rng.IntN(tc.levels))
				} else {
					u[i] = rng.NormFloat64()
				}
			}
			for _, spacing := range []float64{0.25, 4} {
				cv := &coverer{rows: tc.rows, cols: tc.cols, spacing: spacing, cost: make([]float64, L)}
				got := cv.order(nil, u, k)
				if want := scanCoverOrder(u, k, tc.rows, tc.cols, spacing); !slices.Equal(got, want) {
					t.Errorf("spacing %g: order %v, the full scan's %v", spacing, got, want)
				}
			}
		})
	}
}

// scanCoverOrder is CoverKeep's order the slow way: every pick scans
// every cell's gain over the whole grid.
func scanCoverOrder(u []float64, k, rows, cols int, spacing float64) []int {
	L := rows * cols
	cv := &coverer{rows: rows, cols: cols, spacing: spacing}
	cost := make([]float64, L)
	kept := make([]bool, L)
	for l := range cost {
		cost[l] = math.Inf(1)
	}
	var order []int
	keep := func(c int) {
		order, kept[c] = append(order, c), true
		for l := range cost {
			cost[l] = min(cost[l], cv.serve(l, c, u, k))
		}
	}
	keep(0)
	if L > 1 {
		keep(L - 1)
	}
	for len(order) < L {
		best, bestGain := -1, 0.0
		for c := range L {
			if kept[c] {
				continue
			}
			var g float64
			for l := range L {
				if v := cv.serve(l, c, u, k); v < cost[l] {
					g += cost[l] - v
				}
			}
			if best < 0 || g > bestGain || g == bestGain && cost[c] > cost[best] {
				best, bestGain = c, g
			}
		}
		keep(best)
	}
	return order
}

// minApart is the least squared distance between two kept cells of a
// grid cols wide.
func minApart(kept []bool, cols int) int {
	best := math.MaxInt
	for a, ka := range kept {
		for b := a + 1; b < len(kept); b++ {
			if ka && kept[b] {
				dr, dc := a/cols-b/cols, a%cols-b%cols
				best = min(best, dr*dr+dc*dc)
			}
		}
	}
	return best
}

// coverCost is CoverKeep's cost of the cells kept: Σ_l min over kept m of
// |u_l − u_m|² + spacing·d²(l, m).
func coverCost(kept []bool, u []float64, k, cols int, spacing float64) float64 {
	cv := &coverer{rows: len(kept) / cols, cols: cols, spacing: spacing}
	var s float64
	for l := range kept {
		best := math.Inf(1)
		for m, km := range kept {
			if km {
				best = min(best, cv.serve(l, m, u, k))
			}
		}
		s += best
	}
	return s
}

// BenchmarkLookbackKeep times the choosers of lookback on one 16×16 grid
// of 4 channels (a DiT-256 sample): ChangeKeep (spacing 0) and CoverKeep.
func BenchmarkLookbackKeep(b *testing.B) {
	const rows, cols, ch = 16, 16, 4
	rng := rand.New(rand.NewPCG(1, 2))
	x0 := make([]float32, ch*rows*cols)
	for i := range x0 {
		x0[i] = float32(rng.NormFloat64())
	}
	for _, spacing := range []float64{0, 4} {
		b.Run(fmt.Sprintf("spacing=%g", spacing), func(b *testing.B) {
			for b.Loop() {
				if _, err := LookbackKeep(x0, 1, ch, rows, cols, 1, spacing); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

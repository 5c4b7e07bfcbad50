package dc

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

func TestSpreadDrop(t *testing.T) {
	// One 4×4 sample whose probabilities fall off from the top-left corner:
	// the lowest-probability boundaries form one blob at the bottom right.
	const rows, cols = 4, 4
	prob := make([]float32, rows*cols)
	natural := make([]bool, rows*cols)
	for l := range prob {
		prob[l] = 1 - float32(l/cols+l%cols)/16 - float32(l)/1024
		natural[l] = true
	}
	natural[5] = false // a cell the router did not mark is never kept
	for _, tc := range []struct {
		name string
		frac []float32
		want []int // kept cells; nil: TailDrop's mask
	}{
		{name: "ρ 0 is the tail drop", frac: []float32{0}},
		{name: "dense is the tail drop", frac: []float32{Dense}},
		// 15 boundaries, floor(15·0.75) = 11 dropped, 4 kept: r² = 16/4 = 4
		// keeps 0 (the highest), then 2, 8 and 10 — two cells apart — where
		// TailDrop keeps 0, 1, 4 and 2.
		{name: "4 kept", frac: []float32{0.75}, want: []int{0, 2, 8, 10}},
		// 8 kept, 8 dropped (5 among them): no more stay than go, so the
		// kept ones are spread. At r² = 16/8 = 2, 0, 2, 8 (5 is no
		// boundary), then 7, 10, 13 and 15, each at distance² ≥ 2 from the
		// others; the pass at r² = 1 adds the highest left, 1. TailDrop
		// keeps 0, 1, 4, 2, 8 and 3, 6, 9.
		{name: "8 kept", frac: []float32{0.5}, want: []int{0, 1, 2, 7, 8, 10, 13, 15}},
		// 12 kept, 4 dropped: more stay than go, so the drops are spread,
		// apart from 5 (no boundary) too. At r² = 16/4 = 4, in ascending
		// probability (0 and 15 always stay): 14; 11, 13 and 10 lie beside
		// it; 7 and 12 lie far enough from 5 and 14. TailDrop drops 15, 14
		// and 11.
		{name: "12 kept", frac: []float32{0.25}, want: []int{0, 1, 2, 3, 4, 6, 8, 9, 10, 11, 13, 15}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := SpreadDrop(prob, natural, 1, rows, cols, tc.frac)
			if err != nil {
				t.Fatal(err)
			}
			want, err := TailDrop(prob, natural, 1, tc.frac)
			if err != nil {
				t.Fatal(err)
			}
			if tc.want != nil {
				want = make([]bool, len(prob))
				for _, l := range tc.want {
					want[l] = true
				}
			}
			if !slices.Equal(got, want) {
				t.Errorf("kept %v, want %v", cellsOf(got), cellsOf(want))
			}
		})
	}
	if _, err := SpreadDrop(prob, natural, 1, 3, 5, []float32{0.5}); err == nil || !strings.Contains(err.Error(), "3×5 cell grid for 16 cells") {
		t.Errorf("a wrong grid: error %v", err)
	}
	if _, err := SpreadDrop(prob, natural, 1, rows, cols, []float32{1}); err == nil {
		t.Error("ρ = 1 accepted")
	}
}

// The spread drop keeps TailDrop's count in every sample and only
// boundaries, the first and last cell while more than half stay, and a
// sample at ρ 0 keeps TailDrop's cells.
func TestSpreadDropKeepsTheCount(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	const batch, rows, cols = 3, 8, 6
	L := rows * cols
	for trial := range 50 {
		prob := make([]float32, batch*L)
		natural := make([]bool, batch*L)
		for i := range prob {
			prob[i] = rng.Float32()
			natural[i] = prob[i] >= 0.3
		}
		frac := []float32{0.8 * rng.Float32(), 0, 0.6}
		got, err := SpreadDrop(prob, natural, batch, rows, cols, frac)
		if err != nil {
			t.Fatal(err)
		}
		want, err := TailDrop(prob, natural, batch, frac)
		if err != nil {
			t.Fatal(err)
		}
		for b := range batch {
			g, w := got[b*L:(b+1)*L], want[b*L:(b+1)*L]
			if count(g) != count(w) {
				t.Fatalf("trial %d sample %d: kept %d cells, the tail drop %d", trial, b, count(g), count(w))
			}
			if n := count(w); 2*n > L {
				for _, l := range []int{0, L - 1} {
					if natural[b*L+l] && !g[l] {
						t.Fatalf("trial %d sample %d: %d of %d kept, and cell %d, a boundary, dropped", trial, b, n, L, l)
					}
				}
			}
			for l, k := range g {
				if k && !natural[b*L+l] {
					t.Fatalf("trial %d sample %d: kept cell %d, which is no boundary", trial, b, l)
				}
			}
		}
		if !slices.Equal(got[L:2*L], want[L:2*L]) {
			t.Fatalf("trial %d: at ρ 0 the spread drop differs from the tail drop", trial)
		}
	}
}

func cellsOf(mask []bool) []int {
	var out []int
	for l, k := range mask {
		if k {
			out = append(out, l)
		}
	}
	return out
}

func count(mask []bool) int { return len(cellsOf(mask)) }

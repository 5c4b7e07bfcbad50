package dc

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// TestRandomKeep: the random router keeps the router's count in every
// sample (one, two, some, all of 9 cells), the first and last cell among
// them from two on; the same seed draws the same cells and another seed
// others.
func TestRandomKeep(t *testing.T) {
	const L = 9
	// Four samples keeping 1, 2, 5 and 9 cells; the router's own choice
	// is the cells 0..n−1 (which cells does not matter, only how many).
	counts := []int{1, 2, 5, L}
	kept := make([]bool, len(counts)*L)
	for b, n := range counts {
		for l := range n {
			kept[b*L+l] = true
		}
	}
	draw := func(seed uint64) []bool {
		out, err := RandomKeep(rand.New(rand.NewPCG(seed, 0)))(kept, len(counts))
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	a := draw(1)
	for b, n := range counts {
		got := 0
		for _, k := range a[b*L : (b+1)*L] {
			if k {
				got++
			}
		}
		first, last := a[b*L], a[b*L+L-1]
		switch {
		case got != n:
			t.Errorf("sample %d keeps %d cells, the router %d", b, got, n)
		case n == 1 && !last:
			t.Errorf("sample %d keeps one cell, not the last (tail dropping's tie order)", b)
		case n >= 2 && !(first && last):
			t.Errorf("sample %d: first cell kept %v, last %v; want both (the router always marks them)", b, first, last)
		}
	}
	if !slices.Equal(a, draw(1)) {
		t.Error("the same seed drew other cells")
	}
	// The middle sample (5 of 9: 35 subsets) alone can repeat by chance;
	// ten seeds cannot all repeat it.
	same := 0
	for seed := uint64(2); seed < 12; seed++ {
		if slices.Equal(a[2*L:3*L], draw(seed)[2*L:3*L]) {
			same++
		}
	}
	if same == 10 {
		t.Error("ten other seeds drew the same cells as seed 1")
	}
}

// TestSpreadRandomKeep: the random router kept apart keeps the router's
// count in every sample, the last cell among them and from two on the
// first; on an 8×8 grid 16 kept cells (or 8 dropped ones) never touch,
// which a uniform draw of 16 almost never achieves; seeds change the
// cells, not the spacing.
func TestSpreadRandomKeep(t *testing.T) {
	const rows, cols = 8, 8
	const L = rows * cols
	counts := []int{2, 16, 56, L, 1}
	kept := make([]bool, len(counts)*L)
	for b, n := range counts {
		for l := range n {
			kept[b*L+l] = true
		}
	}
	touching := func(mask []bool, want bool) bool {
		for l, m := range mask {
			r, c := l/cols, l%cols
			if m == want && ((c+1 < cols && mask[l+1] == want) || (r+1 < rows && mask[l+cols] == want)) {
				return true
			}
		}
		return false
	}
	var first []bool
	differ := false
	for seed := range uint64(20) {
		out, err := SpreadRandomKeep(rand.New(rand.NewPCG(seed, 0)), rows, cols)(kept, len(counts))
		if err != nil {
			t.Fatal(err)
		}
		for b, n := range counts {
			g := out[b*L : (b+1)*L]
			if got := len(cellsOf(g)); got != n || (n > 1 && !g[0]) || !g[L-1] {
				t.Fatalf("seed %d sample %d: kept %d cells (first %v, last %v), want %d with the last and, from two on, the first", seed, b, got, g[0], g[L-1], n)
			}
		}
		if touching(out[L:2*L], true) {
			t.Errorf("seed %d: two of 16 kept cells touch: %v", seed, cellsOf(out[L:2*L]))
		}
		if touching(out[2*L:3*L], false) {
			t.Errorf("seed %d: two of 8 dropped cells touch: %v", seed, cellsOf(out[2*L:3*L]))
		}
		if first == nil {
			first = out
		} else if !slices.Equal(first[L:2*L], out[L:2*L]) {
			differ = true
		}
	}
	if !differ {
		t.Error("twenty seeds kept the same 16 cells")
	}
	uniform := 0
	for seed := range uint64(20) {
		out, err := RandomKeep(rand.New(rand.NewPCG(seed, 0)))(kept, len(counts))
		if err != nil {
			t.Fatal(err)
		}
		if !touching(out[L:2*L], true) {
			uniform++
		}
	}
	if uniform > 2 {
		t.Errorf("the uniform draw kept 16 cells apart in %d of 20 seeds: the test cannot tell spacing from chance", uniform)
	}
	if _, err := SpreadRandomKeep(rand.New(rand.NewPCG(0, 0)), rows, cols)(kept[:5], 1); err == nil {
		t.Error("a mask of the wrong size accepted")
	}
}

// TestChooserCount: a Chooser that keeps another count than the router
// is refused with the sample named.
func TestChooserCount(t *testing.T) {
	kept := []bool{true, false, true, true, true, false}
	for _, tc := range []struct {
		name   string
		choose Chooser
		want   string
	}{
		{"one more", func(k []bool, _ int) ([]bool, error) {
			return []bool{true, true, true, true, true, false}, nil
		}, "sample 0 keeps 3 cells, the router kept 2"},
		{"short", func(k []bool, _ int) ([]bool, error) { return k[:3], nil }, "a mask of 3 cells"},
	} {
		_, _, err := tc.choose.apply(kept, 2)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want %q", tc.name, err, tc.want)
		}
	}
	chosen, rows, err := Chooser(func(k []bool, _ int) ([]bool, error) {
		return []bool{false, true, true, true, false, true}, nil
	}).apply(kept, 2)
	if err != nil || !slices.Equal(rows, []int{0, 2, 3, 4}) || !chosen[1] {
		t.Errorf("apply = %v, %v, %v; want the chosen mask and the router's rows 0 2 3 4", chosen, rows, err)
	}
}

// ChangeKeep keeps the forced cells, then the cells along the estimate's
// edge, apart as the spread drop keeps them, as many per grid as the
// router kept, each half of a guided batch from its sample.
func TestChangeKeep(t *testing.T) {
	const rows, cols = 4, 4
	// Sample 0: a vertical edge between columns 1 and 2. Sample 1: flat
	// but for cell 5. Edge cells on the top and bottom row have 3
	// neighbours, one across (drop cost 1/3); inner ones 4 (1/4). So
	// sample 0 ranks 0, 15, then 1, 2, 13, 14, then 5, 6, 9, 10, then
	// the flat cells; sample 1 ranks 0, 15, 5, then its neighbours.
	x0 := make([]float32, 2*rows*cols)
	for l := range rows * cols {
		if l%cols >= 2 {
			x0[l] = 1
		}
	}
	x0[rows*cols+5] = 2
	choose, err := ChangeKeep(x0, 2, 1, rows, cols, 1)
	if err != nil {
		t.Fatal(err)
	}
	counts := []int{6, 3, 8, 1, 14} // grids of samples 0, 1, 0, 1, 0
	kept := make([]bool, len(counts)*rows*cols)
	for b, n := range counts {
		for l := range n {
			kept[b*rows*cols+l] = true
		}
	}
	got, err := choose(kept, len(counts))
	if err != nil {
		t.Fatal(err)
	}
	for b, want := range [][]int{
		// 6 kept at r² = 16/6 = 2: 1 and 14 lie beside 0 and 13, 6 and 9
		// beside 2 and 5.
		{0, 2, 5, 10, 13, 15},
		// 3 at r² = 5: 5 and its ranked neighbours lie near 0; 6 does not.
		{0, 6, 15},
		// 8 at r² = 2: the edge's 0, 15, 2, 13, 5, 10, then the flat 7 and 8.
		{0, 2, 5, 7, 8, 10, 13, 15},
		{0},
		// 14 kept, so the 2 drops spread, lowest rank first: 12, then 11
		// (distance² 10 ≥ 16/2).
		{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 13, 14, 15},
	} {
		if g := cellsOf(got[b*rows*cols : (b+1)*rows*cols]); !slices.Equal(g, want) {
			t.Errorf("grid %d: kept %v, want %v", b, g, want)
		}
	}
	if _, err := choose(kept[:5], 1); err == nil {
		t.Error("a mask of the wrong size accepted")
	}
	if _, err := ChangeKeep(x0[:7], 2, 1, rows, cols, 1); err == nil {
		t.Error("a short estimate accepted")
	}
}

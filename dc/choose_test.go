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

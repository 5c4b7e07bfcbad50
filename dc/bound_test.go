package dc

import (
	"slices"
	"strings"
	"testing"
)

func TestIdealDrop(t *testing.T) {
	for _, tc := range []struct {
		name                     string
		x                        []float32
		batch, rows, cols, patch int
		keep                     []int
		want                     []float64
	}{
		// One row of 4 cells, the last different: the forced boundaries
		// come first (the last, of larger change, before the first), then
		// the cell next to the change.
		{"row", []float32{0, 0, 0, 5}, 1, 1, 4, 1, []int{1, 2, 3, 4}, []float64{75, 25, 0, 0}},
		// Cells of 2×2 latents: cell 1 (top right) is the odd one out; with
		// the forced cells only it copies cell 0 (a tie with cell 3 goes to
		// the lower kept cell), four values off by 1.
		{"cells", []float32{0, 0, 1, 1, 0, 0, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0}, 1, 2, 2, 2, []int{2, 3}, []float64{4, 0}},
		// Samples add up; a flat one costs nothing.
		{"batch", []float32{0, 0, 0, 5, 3, 3, 3, 3}, 2, 1, 4, 1, []int{2}, []float64{25}},
	} {
		got, err := IdealDrop(tc.x, tc.batch, 1, tc.rows, tc.cols, tc.patch, tc.keep)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: errors %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestIdealDropErrors(t *testing.T) {
	for _, tc := range []struct {
		x    []float32
		keep []int
		msg  string
	}{
		{make([]float32, 15), []int{1}, "15 values for 1 samples"},
		{make([]float32, 16), []int{0}, "keep 0 of 4 cells"},
		{make([]float32, 16), []int{5}, "keep 5 of 4 cells"},
	} {
		_, err := IdealDrop(tc.x, 1, 1, 2, 2, 2, tc.keep)
		if err == nil || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("keep %v on %d values: error %v, want %q", tc.keep, len(tc.x), err, tc.msg)
		}
	}
}

package kernels

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

func TestGatherRows(t *testing.T) {
	for _, tc := range []struct {
		rowsX, cols int
		idx         []int
	}{
		{1, 1, []int{0}},
		{5, 3, []int{4, 0, 2}},
		{4, 2, []int{1, 1, 3, 1, 0}}, // repeats: the backward must add
		{3, 4, nil},
		{0, 3, nil},
		{400, 150, nil}, // filled below: large, with repeats, parallel paths
	} {
		if tc.rowsX == 400 {
			rng := rand.New(rand.NewPCG(9, 9))
			for range 500 {
				tc.idx = append(tc.idx, rng.IntN(tc.rowsX))
			}
		}
		t.Run(fmt.Sprintf("%dx%d/n=%d", tc.rowsX, tc.cols, len(tc.idx)), func(t *testing.T) {
			rows, cols, idx := tc.rowsX, tc.cols, tc.idx
			rng := rand.New(rand.NewPCG(uint64(rows), uint64(cols)))
			x := fdRand(rng, rows*cols, 1)
			y := make([]float64, len(idx)*cols)
			fdPoison(y)
			GatherRows(y, x, idx, cols)
			want := make([]float64, len(y))
			for i, j := range idx {
				copy(want[i*cols:(i+1)*cols], x[j*cols:(j+1)*cols])
			}
			fdCompare(t, "y", y, want, 0, 1)
			y32 := make([]float32, len(y))
			GatherRows(y32, fdF32(x), idx, cols)
			fdCompare(t, "float32 y", y32, want, 1e-7, 1)

			gx := make([]float64, len(x))
			fdCheck(t, len(y), []fdParam{{"x", x, gx}},
				func(y []float64) { GatherRows(y, x, idx, cols) },
				func(dy []float64) { GatherRowsBackward(gx, dy, idx, cols) },
				fdOptions{Seed: 10})
		})
	}
}

func TestScatterRows(t *testing.T) {
	for _, tc := range []struct {
		rowsY, cols int
		idx         []int
	}{
		{1, 1, []int{0}},
		{5, 3, []int{4, 0, 2}},
		{4, 2, nil},
		{600, 100, nil}, // filled below: a permutation of a subset
	} {
		if tc.rowsY == 600 {
			tc.idx = rand.New(rand.NewPCG(3, 3)).Perm(tc.rowsY)[:450]
		}
		t.Run(fmt.Sprintf("%dx%d/n=%d", tc.rowsY, tc.cols, len(tc.idx)), func(t *testing.T) {
			rows, cols, idx := tc.rowsY, tc.cols, tc.idx
			rng := rand.New(rand.NewPCG(uint64(rows), uint64(cols)))
			x := fdRand(rng, len(idx)*cols, 1)
			y := make([]float64, rows*cols)
			fdPoison(y)
			ScatterRows(y, x, idx, cols)
			want := make([]float64, len(y))
			for i, j := range idx {
				copy(want[j*cols:(j+1)*cols], x[i*cols:(i+1)*cols])
			}
			fdCompare(t, "y", y, want, 0, 1)
			gx := make([]float64, len(x))
			fdCheck(t, len(y), []fdParam{{"x", x, gx}},
				func(y []float64) { ScatterRows(y, x, idx, cols) },
				func(dy []float64) { ScatterRowsBackward(gx, dy, idx, cols) },
				fdOptions{Seed: 11})
		})
	}
}

func TestGatherSliceCols(t *testing.T) {
	for _, tc := range []struct{ rows, cols, from, to int }{
		{1, 1, 0, 1}, {3, 6, 2, 4}, {2, 5, 0, 0}, {4, 5, 5, 5}, {7, 9, 0, 9}, {300, 240, 40, 200},
	} {
		t.Run(fmt.Sprintf("%dx%d[%d:%d]", tc.rows, tc.cols, tc.from, tc.to), func(t *testing.T) {
			rows, cols, from, to := tc.rows, tc.cols, tc.from, tc.to
			rng := rand.New(rand.NewPCG(uint64(rows), uint64(cols)))
			x := fdRand(rng, rows*cols, 1)
			w := to - from
			y := make([]float64, rows*w)
			fdPoison(y)
			SliceCols(y, x, cols, from, to)
			want := make([]float64, len(y))
			for r := range rows {
				for c := from; c < to; c++ {
					want[r*w+c-from] = x[r*cols+c]
				}
			}
			fdCompare(t, "y", y, want, 0, 1)
			gx := make([]float64, len(x))
			fdCheck(t, len(y), []fdParam{{"x", x, gx}},
				func(y []float64) { SliceCols(y, x, cols, from, to) },
				func(dy []float64) { SliceColsBackward(gx, dy, cols, from, to) },
				fdOptions{Seed: 12})
		})
	}
}

func TestGatherPanics(t *testing.T) {
	fdPanics(t, "kernels: GatherRows: idx[1] = 3 out of range [0, 3)", func() {
		GatherRows(make([]float32, 4), make([]float32, 6), []int{0, 3}, 2)
	})
	fdPanics(t, "kernels: ScatterRows: idx[0] = -1", func() {
		ScatterRows(make([]float32, 6), make([]float32, 2), []int{-1}, 2)
	})
	fdPanics(t, "kernels: GatherRowsBackward: len(dx) = 5 is not a multiple", func() {
		GatherRowsBackward(make([]float32, 5), make([]float32, 2), []int{0}, 2)
	})
	fdPanics(t, "kernels: SliceCols: columns [3, 2)", func() {
		SliceCols(make([]float32, 0), make([]float32, 4), 4, 3, 2)
	})
}

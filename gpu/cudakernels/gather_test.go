package cudakernels

import (
	"fmt"
	"math/rand/v2"
	"testing"

	cpu "github.com/dcdit/dcdit/kernels"
)

// checkExact requires got to equal want element for element: gathers and
// scatters move values, and the scatter-add adds them in the CPU's order.
func checkExact(t *testing.T, what string, got, want []float32) {
	t.Helper()
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("%s[%d] = %v, want %v", what, i, got[i], want[i])
			return
		}
	}
	t.Logf("%s: bit-identical (%d values)", what, len(want))
}

// TestGatherScatterRows compares GatherRows, GatherRowsBackward,
// ScatterRows and ScatterRowsBackward with the CPU kernels, including
// repeated indices (the backward adds), an empty index, and large random
// indices; ScatterRows runs where the index has no repeats and must refuse
// otherwise.
func TestGatherScatterRows(t *testing.T) {
	r, sc := openScaffold(t)
	rng := rand.New(rand.NewPCG(47, 48))
	for _, tc := range []struct {
		name       string
		rows, cols int
		idx        []int
	}{
		{"one", 1, 1, []int{0}},
		{"permuted subset", 5, 3, []int{4, 0, 2}},
		{"repeats", 4, 2, []int{1, 1, 3, 1, 0}},
		{"empty", 3, 4, nil},
		{"random with repeats", 400, 150, randIdx(rng, 500, 400)},
		{"kept tokens", 32 * 256, 1152, keptIdx(rng, 32*256, 0.4)},
		{"plug-back", 1000, 96, randIdx(rng, 4096, 1000)},
	} {
		t.Run(fmt.Sprintf("%s/%dx%d/n=%d", tc.name, tc.rows, tc.cols, len(tc.idx)), func(t *testing.T) {
			n := len(tc.idx)
			ri, err := sc.NewRowIndex(tc.idx, tc.rows)
			if err != nil {
				t.Fatal(err)
			}
			defer ri.Free()
			x, dy := randSlice(rng, tc.rows*tc.cols, 1, 0), randSlice(rng, n*tc.cols, 1, 0)
			gx, gdy := upload(t, r, x), upload(t, r, dy)

			y := make([]float32, n*tc.cols)
			cpu.GatherRows(y, x, tc.idx, tc.cols)
			gy := nanBuf(t, r, n*tc.cols)
			if err := sc.GatherRows(gy, gx, ri, tc.cols); err != nil {
				t.Fatal(err)
			}
			checkExact(t, "GatherRows", download(t, gy), y)

			dx := make([]float32, tc.rows*tc.cols)
			cpu.GatherRowsBackward(dx, dy, tc.idx, tc.cols)
			gdx := nanBuf(t, r, tc.rows*tc.cols)
			if err := sc.GatherRowsBackward(gdx, gdy, ri, tc.cols); err != nil {
				t.Fatal(err)
			}
			checkExact(t, "GatherRowsBackward", download(t, gdx), dx)

			if !ri.Unique() {
				if err := sc.ScatterRows(gdx, gdy, ri, tc.cols); err == nil {
					t.Error("ScatterRows with repeated indices: no error")
				}
				return
			}
			// Scatter the n rows of dy onto the grid, and back.
			ys := make([]float32, tc.rows*tc.cols)
			cpu.ScatterRows(ys, dy, tc.idx, tc.cols)
			gys := nanBuf(t, r, tc.rows*tc.cols)
			if err := sc.ScatterRows(gys, gdy, ri, tc.cols); err != nil {
				t.Fatal(err)
			}
			checkExact(t, "ScatterRows", download(t, gys), ys)
			dxs := make([]float32, n*tc.cols)
			cpu.ScatterRowsBackward(dxs, x, tc.idx, tc.cols)
			gdxs := nanBuf(t, r, n*tc.cols)
			if err := sc.ScatterRowsBackward(gdxs, gx, ri, tc.cols); err != nil {
				t.Fatal(err)
			}
			checkExact(t, "ScatterRowsBackward", download(t, gdxs), dxs)
		})
	}
}

// randIdx is n indices drawn from [0, rows), repeats allowed.
func randIdx(rng *rand.Rand, n, rows int) []int {
	idx := make([]int, n)
	for i := range idx {
		idx[i] = rng.IntN(rows)
	}
	return idx
}

// keptIdx is each row of [0, rows) kept with probability keep, in
// increasing order (chunking's packed index).
func keptIdx(rng *rand.Rand, rows int, keep float64) []int {
	var idx []int
	for i := range rows {
		if rng.Float64() < keep {
			idx = append(idx, i)
		}
	}
	return idx
}

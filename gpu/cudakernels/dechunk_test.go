package cudakernels

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/dcdit/dcdit/gpu/cuda"
	cpu "github.com/dcdit/dcdit/kernels"
)

// deChunkDpTol bounds dp's error: it is a sum over the row's columns and
// the sample's tokens of terms that largely cancel, summed in another
// order than the CPU's.
const deChunkDpTol = 1e-4

// keptPositions returns m distinct cells of a side×side grid in raster
// order, as (row, column) pairs: the positions of one sample's kept tokens.
func keptPositions(rng *rand.Rand, m, side int) []float64 {
	cells := rng.Perm(side * side)[:m]
	mark := make([]bool, side*side)
	for _, c := range cells {
		mark[c] = true
	}
	pos := make([]float64, 0, 2*m)
	for c, k := range mark {
		if k {
			pos = append(pos, float64(c/side), float64(c%side))
		}
	}
	return pos
}

// TestDeChunk compares DeChunkForward (y, q, z, s) and DeChunkBackward
// (dh, dp) with kernels.DeChunkForward/Backward on packs with empty and
// single-token samples, samples longer than a tile of tokens (128), widths
// of one, several and partial column blocks, and probabilities on both
// sides of the clamp.
func TestDeChunk(t *testing.T) {
	r, sc := openScaffold(t)
	rng := rand.New(rand.NewPCG(49, 50))
	for _, tc := range []struct {
		lengths    []int
		side, cols int
		sigma      float64
		timeIt     bool
	}{
		{[]int{1}, 4, 1, 1, false},
		{[]int{180, 97}, 16, 48, 1, false},
		{[]int{3, 0, 17, 130}, 16, 5, 2.5, false},
		{[]int{256, 200, 1, 77}, 16, 300, 1, false},
		// DC-DiT-XL at ρ ≈ 0.4: 32 samples of ~100 kept tokens of 256, 1152 wide.
		{nil, 16, 1152, 1, true},
	} {
		if tc.lengths == nil {
			for range 32 {
				tc.lengths = append(tc.lengths, 80+rng.IntN(40))
			}
		}
		t.Run(fmt.Sprintf("S%d/cols%d/sigma%g", len(tc.lengths), tc.cols, tc.sigma), func(t *testing.T) {
			offsets := offsetsOf(tc.lengths)
			rows := offsets[len(offsets)-1]
			var pos []float64
			for _, m := range tc.lengths {
				pos = append(pos, keptPositions(rng, m, tc.side)...)
			}
			h, dy := randSlice(rng, rows*tc.cols, 1, 0), randSlice(rng, rows*tc.cols, 1, 0)
			p := make([]float32, rows)
			for i := range p {
				p[i] = rng.Float32()
			}
			const pmin, pmax = 0.05, 0.95
			ws := make([]float32, cpu.DeChunkScratch(offsets, tc.cols))
			y, q, z, s := make([]float32, rows*tc.cols), make([]float32, rows), make([]float32, rows), make([]float32, rows*tc.cols)
			start := time.Now()
			cpu.DeChunkForward(y, q, z, s, h, p, pos, offsets, rows, tc.cols, tc.sigma, pmin, pmax, ws)
			cpuFwd := time.Since(start)
			dh, dp := make([]float32, rows*tc.cols), make([]float32, rows)
			start = time.Now()
			cpu.DeChunkBackward(dh, dp, dy, h, p, q, z, s, pos, offsets, rows, tc.cols, tc.sigma, pmin, pmax, ws)
			cpuBwd := time.Since(start)

			pk, err := sc.Set().NewPacking(offsets)
			if err != nil {
				t.Fatal(err)
			}
			defer pk.Free()
			gpos, err := cuda.Upload(r, pos)
			if err != nil {
				t.Fatal(err)
			}
			defer gpos.Free()
			gh, gp, gdy := upload(t, r, h), upload(t, r, p), upload(t, r, dy)
			gy, gq, gz, gs := nanBuf(t, r, rows*tc.cols), nanBuf(t, r, rows), nanBuf(t, r, rows), nanBuf(t, r, rows*tc.cols)
			fwd := func() error {
				return sc.DeChunkForward(gy, gq, gz, gs, gh, gp, gpos, pk, tc.cols, tc.sigma, pmin, pmax)
			}
			if err := fwd(); err != nil {
				t.Fatal(err)
			}
			check(t, "y", download(t, gy), y)
			check(t, "q", download(t, gq), q)
			check(t, "z", download(t, gz), z)
			check(t, "s", download(t, gs), s)

			gws, err := r.Alloc(DeChunkWorkspaceBytes(rows, tc.cols))
			if err != nil {
				t.Fatal(err)
			}
			defer gws.Free()
			// The CPU's saved q, z, s, so that the backward pass alone is compared.
			cq, cz, cs := upload(t, r, q), upload(t, r, z), upload(t, r, s)
			gdh, gdp := nanBuf(t, r, rows*tc.cols), nanBuf(t, r, rows)
			bwd := func() error {
				return sc.DeChunkBackward(gdh, gdp, gdy, gh, gp, cq, cz, cs, gpos, pk, tc.cols, tc.sigma, pmin, pmax, gws)
			}
			if err := bwd(); err != nil {
				t.Fatal(err)
			}
			check(t, "dh", download(t, gdh), dh)
			checkTol(t, "dp", download(t, gdp), dp, deChunkDpTol)
			// dp alone (dh empty) gives the same dp.
			gdp2 := nanBuf(t, r, rows)
			if err := sc.DeChunkBackward(cuda.Buffer{}, gdp2, gdy, gh, gp, cq, cz, cs, gpos, pk, tc.cols, tc.sigma, pmin, pmax, gws); err != nil {
				t.Fatal(err)
			}
			checkExact(t, "dp without dh", download(t, gdp2), download(t, gdp))
			if !tc.timeIt {
				return
			}
			for _, k := range []struct {
				name string
				run  func() error
			}{{"forward", fwd}, {"backward", bwd}} {
				if err := r.Synchronize(); err != nil {
					t.Fatal(err)
				}
				const iters = 20
				start := time.Now()
				for range iters {
					if err := k.run(); err != nil {
						t.Fatal(err)
					}
				}
				if err := r.Synchronize(); err != nil {
					t.Fatal(err)
				}
				t.Logf("%s: GPU %v", k.name, time.Since(start)/iters)
			}
			t.Logf("CPU forward %v, backward %v", cpuFwd, cpuBwd)
		})
	}
}

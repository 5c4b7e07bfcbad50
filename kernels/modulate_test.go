package kernels

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// modOffsets: one row, ragged samples, empty samples (including first and
// last), no samples at all, and two cases large enough to run in parallel:
// few samples (column blocks) and many ragged ones (split by sample).
var modOffsets = [][]int{{0, 1}, {0, 3, 4, 9}, {0, 0, 2, 2, 5, 5}, {0}, {0, 100, 101, 300},
	{0, 50, 51, 120, 200, 200, 260, 300, 400}}

func modCols(offsets []int) []int {
	if offsets[len(offsets)-1] >= 300 {
		return []int{200}
	}
	return []int{1, 5}
}

// modSampleRef returns the sample of each row, by linear scan.
func modSampleRef(offsets []int) []int {
	var s []int
	for i := 0; i+1 < len(offsets); i++ {
		for r := offsets[i]; r < offsets[i+1]; r++ {
			s = append(s, i)
		}
	}
	return s
}

func TestModulate(t *testing.T) {
	for _, off := range modOffsets {
		for _, cols := range modCols(off) {
			t.Run(fmt.Sprintf("offsets=%v/cols=%d", off, cols), func(t *testing.T) {
				rows, S := off[len(off)-1], len(off)-1
				rng := rand.New(rand.NewPCG(uint64(rows), uint64(cols)))
				x, shift, scale := fdRand(rng, rows*cols, 2), fdRand(rng, S*cols, 1), fdRand(rng, S*cols, 1)
				xb := append([]float64(nil), x...)
				y := make([]float64, len(x))
				fdPoison(y)
				ModulateForward(y, x, shift, scale, off, cols)
				fdUnchanged(t, "x", x, xb)
				want := make([]float64, len(x))
				for r, s := range modSampleRef(off) {
					for c := range cols {
						want[r*cols+c] = x[r*cols+c]*(1+scale[s*cols+c]) + shift[s*cols+c]
					}
				}
				fdCompare(t, "y", y, want, 1e-15, 1)
				y32 := make([]float32, len(x))
				x32, sh32, sc32 := fdF32(x), fdF32(shift), fdF32(scale)
				ModulateForward(y32, x32, sh32, sc32, off, cols)
				fdCompare(t, "float32 y", y32, want, 1e-6, 1)

				gx, gsh, gsc := make([]float64, len(x)), make([]float64, S*cols), make([]float64, S*cols)
				fdCheck(t, len(x), []fdParam{{"x", x, gx}, {"shift", shift, gsh}, {"scale", scale, gsc}},
					func(y []float64) { ModulateForward(y, x, shift, scale, off, cols) },
					func(dy []float64) { ModulateBackward(gx, gsh, gsc, dy, x, scale, off, cols) },
					fdOptions{Seed: 6})

				// Only dx (the row-parallel path) and float32 agreement.
				dy := fdRand(rng, len(x), 1)
				ModulateBackward(gx, gsh, gsc, dy, x, scale, off, cols)
				dx := make([]float64, len(x))
				ModulateBackward(dx, nil, nil, dy, nil, scale, off, cols)
				fdCompare(t, "dx alone", dx, gx, 0, 1)
				dx32, dsh32, dsc32 := make([]float32, len(x)), make([]float32, S*cols), make([]float32, S*cols)
				ModulateBackward(dx32, dsh32, dsc32, fdF32(dy), x32, sc32, off, cols)
				fdCompare(t, "float32 dx", dx32, gx, 1e-5, 1)
				fdCompare(t, "float32 dshift", dsh32, gsh, 1e-5, 1)
				fdCompare(t, "float32 dscale", dsc32, gsc, 1e-5, 1)
			})
		}
	}
}

func TestGatedResidual(t *testing.T) {
	for _, off := range modOffsets {
		for _, cols := range modCols(off) {
			t.Run(fmt.Sprintf("offsets=%v/cols=%d", off, cols), func(t *testing.T) {
				rows, S := off[len(off)-1], len(off)-1
				rng := rand.New(rand.NewPCG(uint64(rows)+1, uint64(cols)))
				x, gate, h := fdRand(rng, rows*cols, 2), fdRand(rng, S*cols, 1), fdRand(rng, rows*cols, 2)
				y := make([]float64, len(x))
				fdPoison(y)
				GatedResidualForward(y, x, gate, h, off, cols)
				want := make([]float64, len(x))
				for r, s := range modSampleRef(off) {
					for c := range cols {
						want[r*cols+c] = x[r*cols+c] + gate[s*cols+c]*h[r*cols+c]
					}
				}
				fdCompare(t, "y", y, want, 1e-15, 1)
				y32 := make([]float32, len(x))
				GatedResidualForward(y32, fdF32(x), fdF32(gate), fdF32(h), off, cols)
				fdCompare(t, "float32 y", y32, want, 1e-6, 1)

				gx, gg, gh := make([]float64, len(x)), make([]float64, S*cols), make([]float64, len(x))
				fdCheck(t, len(x), []fdParam{{"x", x, gx}, {"gate", gate, gg}, {"h", h, gh}},
					func(y []float64) { GatedResidualForward(y, x, gate, h, off, cols) },
					func(dy []float64) { GatedResidualBackward(gx, gg, gh, dy, gate, h, off, cols) },
					fdOptions{Seed: 7})

				dy := fdRand(rng, len(x), 1)
				GatedResidualBackward(gx, gg, gh, dy, gate, h, off, cols)
				dh := make([]float64, len(x))
				GatedResidualBackward(nil, nil, dh, dy, gate, nil, off, cols)
				fdCompare(t, "dh alone", dh, gh, 0, 1)
			})
		}
	}
}

func TestModulateAddPerSample(t *testing.T) {
	for _, off := range modOffsets {
		for _, cols := range modCols(off) {
			t.Run(fmt.Sprintf("offsets=%v/cols=%d", off, cols), func(t *testing.T) {
				rows, S := off[len(off)-1], len(off)-1
				rng := rand.New(rand.NewPCG(uint64(rows)+2, uint64(cols)))
				x, v := fdRand(rng, rows*cols, 2), fdRand(rng, S*cols, 1)
				y := make([]float64, len(x))
				fdPoison(y)
				AddPerSample(y, x, v, off, cols)
				want := make([]float64, len(x))
				for r, s := range modSampleRef(off) {
					for c := range cols {
						want[r*cols+c] = x[r*cols+c] + v[s*cols+c]
					}
				}
				fdCompare(t, "y", y, want, 0, 1)
				gv := make([]float64, S*cols)
				fdCheck(t, len(x), []fdParam{{"v", v, gv}},
					func(y []float64) { AddPerSample(y, x, v, off, cols) },
					func(dy []float64) { SumRows(gv, dy, off, cols) },
					fdOptions{Seed: 8})
			})
		}
	}
}

func TestModulatePanics(t *testing.T) {
	fdPanics(t, "kernels: ModulateForward: offsets end at 3, want 2 rows", func() {
		ModulateForward(make([]float32, 4), make([]float32, 4), make([]float32, 4), make([]float32, 4), []int{0, 1, 3}, 2)
	})
	fdPanics(t, "kernels: ModulateForward: offsets decrease", func() {
		ModulateForward(make([]float32, 4), make([]float32, 4), make([]float32, 4), make([]float32, 4), []int{0, 2, 1, 2}, 2)
	})
	fdPanics(t, "kernels: GatedResidualForward: len(per-sample vector)", func() {
		GatedResidualForward(make([]float32, 4), make([]float32, 4), make([]float32, 2), make([]float32, 4), []int{0, 1, 2}, 2)
	})
	fdPanics(t, "kernels: ModulateBackward: offsets[0] = 1", func() {
		ModulateBackward(nil, nil, nil, make([]float32, 4), nil, make([]float32, 2), []int{1, 2}, 2)
	})
}

func BenchmarkModulate(b *testing.B) {
	for _, sh := range [][2]int{{2048, 384}, {2048, 1536}} {
		rows, cols := sh[0], sh[1]
		n := rows * cols
		offsets := make([]int, 9) // batch 8 of 256 tokens, DiT-S/2 at 256²
		for s := range offsets {
			offsets[s] = s * rows / 8
		}
		rng := rand.New(rand.NewPCG(1, 2))
		x, dy := fdF32(fdRand(rng, n, 2)), fdF32(fdRand(rng, n, 1))
		shift, scale := fdF32(fdRand(rng, 8*cols, 1)), fdF32(fdRand(rng, 8*cols, 1))
		y := make([]float32, n)
		dsh, dsc := make([]float32, 8*cols), make([]float32, 8*cols)
		name := fmt.Sprintf("%dx%d", rows, cols)
		b.Run(name+"/forward", func(b *testing.B) {
			b.SetBytes(int64(8 * n))
			for b.Loop() {
				ModulateForward(y, x, shift, scale, offsets, cols)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/elem")
		})
		b.Run(name+"/backward", func(b *testing.B) {
			b.SetBytes(int64(12 * n))
			for b.Loop() {
				ModulateBackward(y, dsh, dsc, dy, x, scale, offsets, cols)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/elem")
		})
	}
}

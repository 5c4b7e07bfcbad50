package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"testing"
)

func TestReduceWhole(t *testing.T) {
	for _, n := range []int{0, 1, 2, 3, 17, 5*ewGrain + 11, 65*ewGrain + 1} {
		t.Run(fmt.Sprintf("n=%d", n), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(n), 3))
			a, b := fdRand(rng, n, 2), fdRand(rng, n, 2)
			var s, ss, sd float64
			for i := range a {
				s += a[i]
				ss += a[i] * a[i]
				sd += (a[i] - b[i]) * (a[i] - b[i])
			}
			tol := 1e-12 * math.Sqrt(float64(n)+1)
			fdCompare(t, "Sum", []float64{Sum(a)}, []float64{s}, tol, 1)
			fdCompare(t, "SumSquares", []float64{SumSquares(a)}, []float64{ss}, tol, 1)
			fdCompare(t, "SumSquaredDiff", []float64{SumSquaredDiff(a, b)}, []float64{sd}, tol, 1)
			// float32 inputs, float64 accumulation: only the final rounding.
			a32, b32 := fdF32(a), fdF32(b)
			s, ss, sd = 0, 0, 0
			for i := range a32 {
				x, y := float64(a32[i]), float64(b32[i])
				s += x
				ss += x * x
				sd += (x - y) * (x - y)
			}
			fdCompare(t, "float32 Sum", []float32{Sum(a32)}, []float64{s}, 1e-6, 1)
			fdCompare(t, "float32 SumSquares", []float32{SumSquares(a32)}, []float64{ss}, 1e-6, 1)
			fdCompare(t, "float32 SumSquaredDiff", []float32{SumSquaredDiff(a32, b32)}, []float64{sd}, 1e-6, 1)

			m := min(n, 50)
			am, bm := a[:m], b[:m]
			ga, gb := make([]float64, m), make([]float64, m)
			fdCheck(t, 1, []fdParam{{"a", am, ga}, {"b", bm, gb}},
				func(y []float64) { y[0] = SumSquaredDiff(am, bm) },
				func(dy []float64) { SquaredDiffBackward(ga, gb, am, bm, 2*dy[0]) },
				fdOptions{Seed: 15})
			ga2 := make([]float64, m)
			SquaredDiffBackward(ga2, nil, am, bm, 2)
			gb2 := make([]float64, m)
			SquaredDiffBackward(nil, gb2, am, bm, 2)
			for i := range ga2 {
				if ga2[i] != -gb2[i] {
					t.Fatalf("da and db alone disagree at %d", i)
				}
			}
		})
	}
}

// TestReduceDeterministic: the partial-sum blocks do not depend on the
// number of cores, so results are bit-identical with 1 and 2 workers.
func TestReduceDeterministic(t *testing.T) {
	x := fdF32(fdRand(rand.New(rand.NewPCG(5, 5)), 40*ewGrain+7, 1))
	prev := runtime.GOMAXPROCS(1)
	one := Sum(x)
	runtime.GOMAXPROCS(max(2, prev))
	many := Sum(x)
	runtime.GOMAXPROCS(prev)
	if one != many {
		t.Errorf("Sum with 1 core %v, with several %v", one, many)
	}
}

func TestReduceColSum(t *testing.T) {
	for _, sh := range [][2]int{{1, 1}, {3, 5}, {0, 4}, {4, 0}, {1000, 100}} {
		rows, cols := sh[0], sh[1]
		rng := rand.New(rand.NewPCG(uint64(rows), uint64(cols)))
		x := fdRand(rng, rows*cols, 1)
		out := make([]float64, cols)
		fdPoison(out)
		ColSum(out, x, rows, cols)
		want := make([]float64, cols)
		for i, v := range x {
			want[i%cols] += v
		}
		fdCompare(t, fmt.Sprintf("ColSum %dx%d", rows, cols), out, want, 1e-13, 1)
	}
}

func TestReduceRows(t *testing.T) {
	for _, off := range modOffsets {
		for _, cols := range modCols(off) {
			t.Run(fmt.Sprintf("offsets=%v/cols=%d", off, cols), func(t *testing.T) {
				rows, S := off[len(off)-1], len(off)-1
				rng := rand.New(rand.NewPCG(uint64(rows), uint64(cols)))
				x := fdRand(rng, rows*cols, 1)
				sum, mean := make([]float64, S*cols), make([]float64, S*cols)
				fdPoison(sum)
				fdPoison(mean)
				SumRows(sum, x, off, cols)
				MeanRows(mean, x, off, cols)
				wsum, wmean := make([]float64, S*cols), make([]float64, S*cols)
				for r, s := range modSampleRef(off) {
					for c := range cols {
						wsum[s*cols+c] += x[r*cols+c]
					}
				}
				for s := range S {
					if n := off[s+1] - off[s]; n > 0 {
						for c := range cols {
							wmean[s*cols+c] = wsum[s*cols+c] / float64(n)
						}
					}
				}
				fdCompare(t, "SumRows", sum, wsum, 1e-13, 1)
				fdCompare(t, "MeanRows", mean, wmean, 1e-13, 1)
				m32 := make([]float32, S*cols)
				MeanRows(m32, fdF32(x), off, cols)
				fdCompare(t, "float32 MeanRows", m32, wmean, 1e-5, 1)
				gx := make([]float64, len(x))
				fdCheck(t, S*cols, []fdParam{{"x", x, gx}},
					func(y []float64) { MeanRows(y, x, off, cols) },
					func(dy []float64) { MeanRowsBackward(gx, dy, off, cols) },
					fdOptions{Seed: 16})
			})
		}
	}
}

func TestReducePanics(t *testing.T) {
	fdPanics(t, "kernels: SumSquaredDiff: len(b)", func() { SumSquaredDiff(make([]float32, 3), make([]float32, 2)) })
	fdPanics(t, "kernels: ColSum: len(out)", func() { ColSum(make([]float32, 2), make([]float32, 6), 2, 3) })
	fdPanics(t, "kernels: MeanRows: empty offsets", func() { MeanRows(make([]float32, 2), make([]float32, 6), nil, 3) })
}

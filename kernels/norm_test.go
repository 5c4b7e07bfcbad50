package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/dcdit/dcdit/internal/fixtures"
)

// normLayerRef is DiT's LayerNorm(elementwise_affine=False) in float64.
func normLayerRef(x []float64, rows, cols int, eps float64) (y, mean, rstd []float64) {
	y, mean, rstd = make([]float64, rows*cols), make([]float64, rows), make([]float64, rows)
	for r := range rows {
		row := x[r*cols : (r+1)*cols]
		var m, v float64
		for _, e := range row {
			m += e
		}
		m /= float64(cols)
		for _, e := range row {
			v += (e - m) * (e - m)
		}
		v /= float64(cols)
		rs := 1 / math.Sqrt(v+eps)
		for i, e := range row {
			y[r*cols+i] = (e - m) * rs
		}
		mean[r], rstd[r] = m, rs
	}
	return y, mean, rstd
}

// normShapes: single elements, odd sizes, an empty matrix and one large
// enough for the parallel path.
var normShapes = [][2]int{{1, 1}, {1, 7}, {3, 5}, {17, 33}, {0, 4}, {130, 384}}

func TestLayerNorm(t *testing.T) {
	const eps = 1e-6
	for _, sh := range normShapes {
		rows, cols := sh[0], sh[1]
		t.Run(fmt.Sprintf("%dx%d", rows, cols), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(rows), uint64(cols)))
			x := fdRand(rng, rows*cols, 2)
			for i := range x {
				x[i] += 3 // a mean far from 0 exposes one-pass variance
			}
			xb := append([]float64(nil), x...)
			y, mean, rstd := make([]float64, len(x)), make([]float64, rows), make([]float64, rows)
			fdPoison(y)
			LayerNormForward(y, mean, rstd, x, rows, cols, eps)
			fdUnchanged(t, "x", x, xb)
			wy, wm, wr := normLayerRef(x, rows, cols, eps)
			fdCompare(t, "y", y, wy, 1e-12, 1)
			fdCompare(t, "mean", mean, wm, 1e-13, 1)
			fdCompare(t, "rstd", rstd, wr, 1e-12, 1)

			x32 := fdF32(x)
			y32, m32, r32 := make([]float32, len(x)), make([]float32, rows), make([]float32, rows)
			LayerNormForward(y32, m32, r32, x32, rows, cols, eps)
			wy, _, _ = normLayerRef(fdF64(x32), rows, cols, eps)
			fdCompare(t, "float32 y", y32, wy, 2e-5, 1)
			LayerNormForward(y32, nil, nil, x32, rows, cols, eps) // statistics are optional

			gx := make([]float64, len(x))
			fdCheck(t, len(x), []fdParam{{"x", x, gx}},
				func(y []float64) { LayerNormForward(y, nil, nil, x, rows, cols, eps) },
				func(dy []float64) {
					LayerNormForward(y, mean, rstd, x, rows, cols, eps)
					LayerNormBackward(gx, dy, x, mean, rstd, rows, cols)
				}, fdOptions{Seed: 3})

			dy := fdRand(rng, len(x), 1)
			LayerNormBackward(gx, dy, x, mean, rstd, rows, cols)
			dx32 := make([]float32, len(x))
			LayerNormBackward(dx32, fdF32(dy), x32, m32, r32, rows, cols)
			fdCompare(t, "float32 dx", dx32, gx, 1e-4, 1)
		})
	}
}

// TestLayerNormEps checks that eps is added to the variance inside the
// square root (PyTorch), with DiT's value 1e-6.
func TestLayerNormEps(t *testing.T) {
	x := []float64{5, 5, 5, -1e-3, 1e-3}
	y, mean, rstd := make([]float64, 5), make([]float64, 2), make([]float64, 2)
	LayerNormForward(y[:3], mean[:1], rstd[:1], x[:3], 1, 3, 1e-6)
	LayerNormForward(y[3:], mean[1:], rstd[1:], x[3:], 1, 2, 1e-6)
	if rstd[0] != 1/math.Sqrt(1e-6) || y[0] != 0 {
		t.Errorf("constant row: rstd %v y %v, want %v and 0", rstd[0], y[0], 1/math.Sqrt(1e-6))
	}
	if want := 1 / math.Sqrt(1e-6+1e-6); !fixtures.Within(math.Abs(rstd[1]-want), 1e-12*want) {
		t.Errorf("rstd of ±1e-3 = %v, want 1/sqrt(var+eps) = %v", rstd[1], want)
	}
}

func normRMSRef(x, w []float64, rows, cols int, eps float64) []float64 {
	y := make([]float64, rows*cols)
	for r := range rows {
		var ms float64
		for _, e := range x[r*cols : (r+1)*cols] {
			ms += e * e
		}
		rs := 1 / math.Sqrt(ms/float64(cols)+eps)
		for i := range cols {
			y[r*cols+i] = x[r*cols+i] * rs * w[i]
		}
	}
	return y
}

func TestRMSNorm(t *testing.T) {
	const eps = 1e-5
	for _, sh := range normShapes {
		rows, cols := sh[0], sh[1]
		t.Run(fmt.Sprintf("%dx%d", rows, cols), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(rows), uint64(cols)+1))
			x, w := fdRand(rng, rows*cols, 2), fdRand(rng, cols, 1.5)
			xb, wb := append([]float64(nil), x...), append([]float64(nil), w...)
			y, rstd := make([]float64, len(x)), make([]float64, rows)
			fdPoison(y)
			RMSNormForward(y, rstd, x, w, rows, cols, eps)
			fdUnchanged(t, "x", x, xb)
			fdUnchanged(t, "w", w, wb)
			fdCompare(t, "y", y, normRMSRef(x, w, rows, cols, eps), 1e-12, 1)

			x32, w32 := fdF32(x), fdF32(w)
			y32, r32 := make([]float32, len(x)), make([]float32, rows)
			RMSNormForward(y32, r32, x32, w32, rows, cols, eps)
			fdCompare(t, "float32 y", y32, normRMSRef(fdF64(x32), fdF64(w32), rows, cols, eps), 2e-5, 1)

			gx, gw := make([]float64, len(x)), make([]float64, cols)
			fdCheck(t, len(x), []fdParam{{"x", x, gx}, {"w", w, gw}},
				func(y []float64) { RMSNormForward(y, nil, x, w, rows, cols, eps) },
				func(dy []float64) {
					RMSNormForward(y, rstd, x, w, rows, cols, eps)
					RMSNormBackward(gx, gw, dy, x, w, rstd, rows, cols)
				}, fdOptions{Seed: 4})

			dy := fdRand(rng, len(x), 1)
			RMSNormBackward(gx, gw, dy, x, w, rstd, rows, cols)
			dx32, dw32 := make([]float32, len(x)), make([]float32, cols)
			RMSNormBackward(dx32, dw32, fdF32(dy), x32, w32, r32, rows, cols)
			fdCompare(t, "float32 dx", dx32, gx, 1e-4, 1)
			fdCompare(t, "float32 dw", dw32, gw, 1e-4, 1)
			RMSNormBackward(nil, gw, dy, x, nil, rstd, rows, cols) // dx not needed: w unused
		})
	}
}

// TestRMSNormEps: eps inside the square root, no bias (Z-Image), unlike
// spago's x/(sqrt(mean(x²)) + 1e-10)·w + b.
func TestRMSNormEps(t *testing.T) {
	x, w := []float64{0, 0, 1e-3}, []float64{2}
	y, rstd := make([]float64, 3), make([]float64, 3)
	RMSNormForward(y, rstd, x, w[:1], 3, 1, 1e-5)
	if rstd[0] != 1/math.Sqrt(1e-5) || y[0] != 0 {
		t.Errorf("zero row: rstd %v, y %v", rstd[0], y[0])
	}
	if want := 1e-3 / math.Sqrt(1e-6+1e-5) * 2; !fixtures.Within(math.Abs(y[2]-want), 1e-15) {
		t.Errorf("y = %v, want %v", y[2], want)
	}
}

func normGroupRef(x, w, b []float64, batch, tokens, channels, groups int, eps float64) []float64 {
	y := make([]float64, len(x))
	cpg := channels / groups
	for s := range batch {
		for g := range groups {
			var m, v float64
			n := float64(tokens * cpg)
			for r := s * tokens; r < (s+1)*tokens; r++ {
				for c := g * cpg; c < (g+1)*cpg; c++ {
					m += x[r*channels+c]
				}
			}
			m /= n
			for r := s * tokens; r < (s+1)*tokens; r++ {
				for c := g * cpg; c < (g+1)*cpg; c++ {
					d := x[r*channels+c] - m
					v += d * d
				}
			}
			rs := 1 / math.Sqrt(v/n+eps)
			for r := s * tokens; r < (s+1)*tokens; r++ {
				for c := g * cpg; c < (g+1)*cpg; c++ {
					y[r*channels+c] = (x[r*channels+c]-m)*rs*w[c] + b[c]
				}
			}
		}
	}
	return y
}

func TestGroupNorm(t *testing.T) {
	const eps = 1e-5
	for _, tc := range []struct{ batch, tokens, channels, groups int }{
		{1, 1, 1, 1}, {2, 3, 4, 2}, {3, 5, 6, 3}, {2, 7, 8, 1}, {2, 4, 12, 12}, {0, 3, 4, 2}, {8, 64, 96, 8},
	} {
		t.Run(fmt.Sprintf("B%d_T%d_C%d_G%d", tc.batch, tc.tokens, tc.channels, tc.groups), func(t *testing.T) {
			B, L, C, G := tc.batch, tc.tokens, tc.channels, tc.groups
			rng := rand.New(rand.NewPCG(uint64(B*L), uint64(C*G)))
			x, w, b := fdRand(rng, B*L*C, 2), fdRand(rng, C, 1.5), fdRand(rng, C, 1)
			for i := range x {
				x[i] += float64(i%C) * 0.5 // per-channel offsets
			}
			xb := append([]float64(nil), x...)
			y, mean, rstd := make([]float64, len(x)), make([]float64, B*G), make([]float64, B*G)
			fdPoison(y)
			GroupNormForward(y, mean, rstd, x, w, b, B, L, C, G, eps)
			fdUnchanged(t, "x", x, xb)
			fdCompare(t, "y", y, normGroupRef(x, w, b, B, L, C, G, eps), 1e-12, 1)

			x32, w32, b32 := fdF32(x), fdF32(w), fdF32(b)
			y32, m32, r32 := make([]float32, len(x)), make([]float32, B*G), make([]float32, B*G)
			GroupNormForward(y32, m32, r32, x32, w32, b32, B, L, C, G, eps)
			fdCompare(t, "float32 y", y32, normGroupRef(fdF64(x32), fdF64(w32), fdF64(b32), B, L, C, G, eps), 2e-5, 1)

			gx, gw, gb := make([]float64, len(x)), make([]float64, C), make([]float64, C)
			fdCheck(t, len(x), []fdParam{{"x", x, gx}, {"w", w, gw}, {"b", b, gb}},
				func(y []float64) { GroupNormForward(y, nil, nil, x, w, b, B, L, C, G, eps) },
				func(dy []float64) {
					GroupNormForward(y, mean, rstd, x, w, b, B, L, C, G, eps)
					GroupNormBackward(gx, gw, gb, dy, x, mean, rstd, w, B, L, C, G)
				}, fdOptions{Seed: 5})

			dy := fdRand(rng, len(x), 1)
			GroupNormBackward(gx, gw, gb, dy, x, mean, rstd, w, B, L, C, G)
			dx32, dw32, db32 := make([]float32, len(x)), make([]float32, C), make([]float32, C)
			GroupNormBackward(dx32, dw32, db32, fdF32(dy), x32, m32, r32, w32, B, L, C, G)
			fdCompare(t, "float32 dx", dx32, gx, 1e-4, 1)
			fdCompare(t, "float32 dw", dw32, gw, 1e-4, 1)
			fdCompare(t, "float32 db", db32, gb, 1e-4, 1)
		})
	}
}

func TestNormPanics(t *testing.T) {
	fdPanics(t, "kernels: GroupNormForward: 6 channels do not split into 4 groups", func() {
		GroupNormForward(make([]float32, 6), nil, nil, make([]float32, 6), make([]float32, 6), make([]float32, 6), 1, 1, 6, 4, 1e-5)
	})
	fdPanics(t, "kernels: LayerNormForward: len(mean)", func() {
		LayerNormForward(make([]float32, 6), make([]float32, 3), nil, make([]float32, 6), 2, 3, 1e-6)
	})
	fdPanics(t, "kernels: RMSNormForward: len(w)", func() {
		RMSNormForward(make([]float32, 6), nil, make([]float32, 6), make([]float32, 2), 2, 3, 1e-6)
	})
	fdPanics(t, "kernels: LayerNormBackward: len(rstd)", func() {
		LayerNormBackward(make([]float32, 6), make([]float32, 6), make([]float32, 6), make([]float32, 2), make([]float32, 1), 2, 3)
	})
}

func BenchmarkLayerNorm(b *testing.B) {
	for _, sh := range [][2]int{{2048, 384}, {2048, 1536}} {
		rows, cols := sh[0], sh[1]
		n := rows * cols
		rng := rand.New(rand.NewPCG(1, 2))
		x := fdF32(fdRand(rng, n, 2))
		dy := fdF32(fdRand(rng, n, 1))
		y, dx := make([]float32, n), make([]float32, n)
		mean, rstd := make([]float32, rows), make([]float32, rows)
		name := fmt.Sprintf("%dx%d", rows, cols)
		b.Run(name+"/forward", func(b *testing.B) {
			b.SetBytes(int64(8 * n))
			for b.Loop() {
				LayerNormForward(y, mean, rstd, x, rows, cols, 1e-6)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/elem")
		})
		b.Run(name+"/backward", func(b *testing.B) {
			b.SetBytes(int64(12 * n))
			for b.Loop() {
				LayerNormBackward(dx, dy, x, mean, rstd, rows, cols)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/elem")
		})
	}
}

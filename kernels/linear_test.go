package kernels

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// linRef is y = x·Wᵀ + b in float64, written for clarity.
func linRef(x, w, b []float64, rows, in, out int) []float64 {
	y := make([]float64, rows*out)
	for r := range rows {
		for o := range out {
			var s float64
			if b != nil {
				s = b[o]
			}
			for i := range in {
				s += x[r*in+i] * w[o*in+i]
			}
			y[r*out+o] = s
		}
	}
	return y
}

func TestLinear(t *testing.T) {
	for _, tc := range []struct {
		rows, in, out int
		bias          bool
	}{
		{1, 1, 1, true}, {1, 1, 1, false}, {3, 5, 7, true}, {17, 33, 9, false},
		{0, 4, 3, true}, {5, 0, 3, true}, {300, 16, 128, true},
	} {
		t.Run(fmt.Sprintf("%dx%dx%d/bias=%v", tc.rows, tc.in, tc.out, tc.bias), func(t *testing.T) {
			rows, in, out := tc.rows, tc.in, tc.out
			rng := rand.New(rand.NewPCG(uint64(rows), uint64(in*100+out)))
			x, w := fdRand(rng, rows*in, 1), fdRand(rng, out*in, 1)
			var b []float64
			if tc.bias {
				b = fdRand(rng, out, 1)
			}
			xb, wb := append([]float64(nil), x...), append([]float64(nil), w...)

			y := make([]float64, rows*out)
			fdPoison(y)
			LinearForward(y, x, w, b, rows, in, out)
			fdUnchanged(t, "x", x, xb)
			fdUnchanged(t, "w", w, wb)
			fdCompare(t, "float64 forward", y, linRef(x, w, b, rows, in, out), 1e-12, 1)

			x32, w32, b32 := fdF32(x), fdF32(w), []float32(nil)
			if b != nil {
				b32 = fdF32(b)
			}
			y32 := make([]float32, rows*out)
			LinearForward(y32, x32, w32, b32, rows, in, out)
			fdCompare(t, "float32 forward", y32, y, 1e-5, 1)

			gx, gw := make([]float64, len(x)), make([]float64, len(w))
			params := []fdParam{{"x", x, gx}, {"w", w, gw}}
			var gb []float64
			if b != nil {
				gb = make([]float64, out)
				params = append(params, fdParam{"b", b, gb})
			}
			fdCheck(t, rows*out, params,
				func(y []float64) { LinearForward(y, x, w, b, rows, in, out) },
				func(dy []float64) { LinearBackward(gx, gw, gb, dy, x, w, rows, in, out) },
				fdOptions{Seed: uint64(rows + in)})

			// float32 backward agrees; nil gradients are skipped.
			dy := fdRand(rng, rows*out, 1)
			LinearBackward(gx, gw, gb, dy, x, w, rows, in, out)
			gx32, gw32 := make([]float32, len(x)), make([]float32, len(w))
			LinearBackward(gx32, gw32, nil, fdF32(dy), x32, w32, rows, in, out)
			fdCompare(t, "float32 dx", gx32, gx, 1e-5, 1)
			fdCompare(t, "float32 dw", gw32, gw, 1e-5, 1)
			LinearBackward[float64](nil, nil, nil, dy, nil, nil, rows, in, out)
		})
	}
}

func TestLinearPanics(t *testing.T) {
	fdPanics(t, "kernels: LinearForward: len(w)", func() {
		LinearForward(make([]float32, 6), make([]float32, 4), make([]float32, 5), nil, 2, 2, 3)
	})
	fdPanics(t, "kernels: LinearForward: len(b)", func() {
		LinearForward(make([]float32, 6), make([]float32, 4), make([]float32, 6), make([]float32, 2), 2, 2, 3)
	})
	fdPanics(t, "kernels: LinearBackward: len(dx)", func() {
		LinearBackward(make([]float32, 3), nil, nil, make([]float32, 6), nil, make([]float32, 6), 2, 2, 3)
	})
	fdPanics(t, "kernels: LinearForward: negative", func() {
		LinearForward[float32](nil, nil, nil, nil, -1, 2, 3)
	})
}

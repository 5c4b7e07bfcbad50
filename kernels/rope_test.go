package kernels

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// RoPEForward and RoPEBackward give, over rows split among workers, what
// one complex multiplication per pair gives (forward) and its conjugate and
// the summed factor gradient (backward), bit for bit.
func TestRoPEKernels(t *testing.T) {
	for _, tc := range []struct{ rows, heads, dim int }{{1, 1, 2}, {3, 2, 4}, {600, 4, 64}} {
		rng := rand.New(rand.NewPCG(uint64(tc.rows), 9))
		width := tc.heads * tc.dim
		rnd := func(n int) []float32 {
			v := make([]float32, n)
			for i := range v {
				v[i] = float32(rng.NormFloat64())
			}
			return v
		}
		x, fr, dy := rnd(tc.rows*width), rnd(tc.rows*tc.dim), rnd(tc.rows*width)
		wantY, wantDx, wantDf := make([]float32, len(x)), make([]float32, len(x)), make([]float32, len(fr))
		for r := range tc.rows {
			for h := range tc.heads {
				for i := 0; i < tc.dim; i += 2 {
					o, f := r*width+h*tc.dim+i, r*tc.dim+i
					a, b, c, s := x[o], x[o+1], fr[f], fr[f+1]
					wantY[o], wantY[o+1] = a*c-b*s, a*s+b*c
					g0, g1 := dy[o], dy[o+1]
					wantDx[o], wantDx[o+1] = g0*c+g1*s, g1*c-g0*s
					wantDf[f] += g0*a + g1*b
					wantDf[f+1] += g1*a - g0*b
				}
			}
		}
		y, dx, df := make([]float32, len(x)), make([]float32, len(x)), rnd(len(fr)) // df is overwritten
		RoPEForward(y, x, fr, tc.rows, tc.heads, tc.dim)
		RoPEBackward(dx, df, dy, x, fr, tc.rows, tc.heads, tc.dim)
		for _, c := range []struct {
			name      string
			got, want []float32
		}{{"y", y, wantY}, {"dx", dx, wantDx}, {"dfreqs", df, wantDf}} {
			if !slices.Equal(c.got, c.want) {
				t.Errorf("%d×%d×%d: %s differs from the reference loop", tc.rows, tc.heads, tc.dim, c.name)
			}
		}
		// Either gradient may be skipped.
		RoPEBackward(nil, df, dy, x, fr, tc.rows, tc.heads, tc.dim)
		RoPEBackward(dx, nil, dy, x, fr, tc.rows, tc.heads, tc.dim)
		if !slices.Equal(df, wantDf) || !slices.Equal(dx, wantDx) {
			t.Errorf("%d×%d×%d: a skipped gradient changed the other", tc.rows, tc.heads, tc.dim)
		}
	}
}

package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/dcdit/dcdit/internal/fixtures"
)

var gnSiLUCases = []struct{ batch, tokens, channels, groups int }{
	{1, 3, 2, 1}, {3, 7, 6, 3}, {2, 5, 20, 4}, {2, 64, 96, 32}, {1, 9, 33, 11}, {0, 4, 8, 2},
}

// The fused kernel is GroupNormForward then SiLUForward: statistics and
// outputs, in float64 to rounding and in float32 to float32 rounding.
func TestGroupNormSiLUForward(t *testing.T) {
	for _, c := range gnSiLUCases {
		t.Run(fmt.Sprintf("b%d_t%d_c%d_g%d", c.batch, c.tokens, c.channels, c.groups), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(31, uint64(c.channels)))
			n := c.batch * c.tokens * c.channels
			x := acRandn(rng, n)
			for i := range x {
				x[i] = 3*x[i] + 1 // a mean and a scale to remove
			}
			w, b := acRandn(rng, c.channels), acRandn(rng, c.channels)
			const eps = 1e-5
			z, m0, r0 := make([]float64, n), make([]float64, c.batch*c.groups), make([]float64, c.batch*c.groups)
			GroupNormForward(z, m0, r0, x, w, b, c.batch, c.tokens, c.channels, c.groups, eps)
			want := make([]float64, n)
			SiLUForward(want, z)

			y, m, r := acNaNs[float64](n), acNaNs[float64](len(m0)), acNaNs[float64](len(r0))
			GroupNormSiLUForward(y, m, r, x, w, b, c.batch, c.tokens, c.channels, c.groups, eps)
			if e := acRelErr(y, want); !fixtures.Within(e, 1e-13) {
				t.Errorf("float64: relative error %.3g", e)
			}
			if e := max(acRelErr(m, m0), acRelErr(r, r0)); !fixtures.Within(e, 1e-14) {
				t.Errorf("statistics differ from GroupNormForward's by %.3g", e)
			}
			y32 := acNaNs[float32](n)
			GroupNormSiLUForward(y32, nil, nil, acToF32(x), acToF32(w), acToF32(b), c.batch, c.tokens, c.channels, c.groups, float32(eps))
			if e := acRelErr(y32, want); !fixtures.Within(e, 2e-6) {
				t.Errorf("float32: relative error %.3g", e)
			}
		})
	}
}

// The AVX2 loop is the Go loop bit for bit, saturation and NaN included.
func TestSiLUAffineMatchesGo(t *testing.T) {
	rng := rand.New(rand.NewPCG(32, 32))
	for n := 0; n <= 40; n++ {
		x, m, s, b := make([]float32, n), make([]float32, n), make([]float32, n), make([]float32, n)
		for i := range n {
			x[i], m[i] = float32(rng.NormFloat64()*50), float32(rng.NormFloat64())
			s[i], b[i] = float32(rng.NormFloat64()*3), float32(rng.NormFloat64())
		}
		if n > 5 {
			x[1], x[2], x[3] = float32(math.NaN()), 1e30, -1e30
		}
		got := acNaNs[float32](n)
		siluAffine(got, x, m, s, b)
		for i := range n {
			z := (x[i]-m[i])*s[i] + b[i]
			e, q := actExp2f(-math.Log2E * z)
			want := z / (1 + e*(1+q))
			if math.Float32bits(got[i]) != math.Float32bits(want) && !(want != want && got[i] != got[i]) {
				t.Fatalf("n %d, element %d (z = %v): %v, want %v", n, i, z, got[i], want)
			}
		}
	}
}

// Backward: central differences in float64, and float32 against float64.
func TestGroupNormSiLUBackward(t *testing.T) {
	for _, c := range gnSiLUCases[:5] {
		t.Run(fmt.Sprintf("b%d_t%d_c%d_g%d", c.batch, c.tokens, c.channels, c.groups), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(33, uint64(c.channels)))
			n := c.batch * c.tokens * c.channels
			x, w, b, r := acRandn(rng, n), acRandn(rng, c.channels), acRandn(rng, c.channels), acRandn(rng, n)
			const eps = 1e-5
			mean, rstd := make([]float64, c.batch*c.groups), make([]float64, c.batch*c.groups)
			y := make([]float64, n)
			GroupNormSiLUForward(y, mean, rstd, x, w, b, c.batch, c.tokens, c.channels, c.groups, eps)
			dx, dw, db := acNaNs[float64](n), acNaNs[float64](c.channels), acNaNs[float64](c.channels)
			GroupNormSiLUBackward(dx, dw, db, r, x, mean, rstd, w, b, c.batch, c.tokens, c.channels, c.groups)
			loss := func() float64 {
				GroupNormSiLUForward(y, nil, nil, x, w, b, c.batch, c.tokens, c.channels, c.groups, eps)
				return acWeighted(r, y)
			}
			acGradCheck(t, "dx", x, dx, loss, 60, rng)
			acGradCheck(t, "dw", w, dw, loss, 60, rng)
			acGradCheck(t, "db", b, db, loss, 60, rng)

			// Without dx, dw and db are the same; float32 tracks float64.
			dw2, db2 := acNaNs[float64](c.channels), acNaNs[float64](c.channels)
			GroupNormSiLUBackward(nil, dw2, db2, r, x, mean, rstd, w, b, c.batch, c.tokens, c.channels, c.groups)
			if acRelErr(dw2, dw) != 0 || acRelErr(db2, db) != 0 {
				t.Error("dw, db differ when dx is not asked for")
			}
			dx32, dw32, db32 := acNaNs[float32](n), acNaNs[float32](c.channels), acNaNs[float32](c.channels)
			GroupNormSiLUBackward(dx32, dw32, db32, acToF32(r), acToF32(x), acToF32(mean), acToF32(rstd), acToF32(w), acToF32(b),
				c.batch, c.tokens, c.channels, c.groups)
			if e := max(acRelErr(dx32, dx), acRelErr(dw32, dw), acRelErr(db32, db)); !fixtures.Within(e, 1e-5) {
				t.Errorf("float32 gradients: relative error %.3g", e)
			}
		})
	}
}

func TestGroupNormSiLUPanics(t *testing.T) {
	x, w := make([]float32, 2*4*8), make([]float32, 8)
	acExpectPanic(t, "groups", func() { GroupNormSiLUForward(x, nil, nil, x, w, w, 2, 4, 8, 3, 1e-5) })
	acExpectPanic(t, "short y", func() { GroupNormSiLUForward(x[:5], nil, nil, x, w, w, 2, 4, 8, 2, 1e-5) })
	acExpectPanic(t, "short mean", func() { GroupNormSiLUForward(x, w[:3], nil, x, w, w, 2, 4, 8, 2, 1e-5) })
	acExpectPanic(t, "short dw", func() {
		GroupNormSiLUBackward(nil, w[:3], nil, x, x, w[:4], w[:4], w, w, 2, 4, 8, 2)
	})
}

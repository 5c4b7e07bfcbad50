package kernels

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/dcdit/dcdit/internal/fixtures"
)

// withActAsm runs f with the activation assembly on or off.
func withActAsm(on bool, f func()) {
	old := actAsm
	actAsm = on
	defer func() { actAsm = old }()
	f()
}

// asmInputs are values across the ranges the loops branch on: zero, signed
// tiny and huge values, the clamps of the exponentials, NaN and ±Inf,
// then random ones.
func asmInputs(n int, seed uint64) []float32 {
	special := []float32{0, float32(math.Copysign(0, -1)), 1e-30, -1e-30, 1, -1, 3, -3, 10, -10, 30, -30, 87, -87,
		-87.5, -100, 100, 1e30, -1e30, float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)), 0.5, -0.5}
	rng := rand.New(rand.NewPCG(seed, 7))
	x := make([]float32, n)
	for i := range x {
		if i < len(special) && seed == 1 {
			x[i] = special[i]
		} else {
			x[i] = float32(rng.NormFloat64() * 4)
		}
	}
	return x
}

func sameBits(t *testing.T, what string, got, want []float32) {
	t.Helper()
	for i := range want {
		g, w := got[i], want[i]
		if math.Float32bits(g) != math.Float32bits(w) && !(g != g && w != w) {
			t.Fatalf("%s[%d] = %g (%#08x), Go loop %g (%#08x)", what, i, g, math.Float32bits(g), w, math.Float32bits(w))
		}
	}
}

// TestActAsmMatchesGo: the AVX2 GELU, sigmoid and SiLU loops and softmax
// exponentials give the Go loops' values bit for bit, at every length
// around the vector width (tails included).
func TestActAsmMatchesGo(t *testing.T) {
	if !actAsm {
		t.Skip("no AVX2 activation loops in this build or environment")
	}
	for _, n := range []int{1, 7, 8, 9, 16, 23, 24, 25, 64, 1000} {
		for seed := uint64(1); seed <= 2; seed++ {
			x := asmInputs(n, seed)
			dy := asmInputs(n, seed+10)
			var sig, silu []float32
			run := func() (y, dx, e []float32, sum, m float32) {
				y, dx = make([]float32, n), make([]float32, n)
				geluBlock(y, x)
				sig, silu = make([]float32, n), make([]float32, n)
				sigmoidBlock(sig, x, false)
				sigmoidBlock(silu, x, true)
				GELUBackwardFromOutput(dx, dy, x, y)
				// Softmax arguments: scores shifted by at least their maximum.
				e = make([]float32, n)
				for i, v := range x {
					if v == v && !math.IsInf(float64(v), 0) {
						e[i] = v
					}
				}
				m = rowMax(e)
				sum = expShiftRow32(e, m+0.25)
				// The softmax's backward step, into dx's second half.
				softmaxGradRow(dx[n/2:], e[n/2:], 0.375)
				return y, dx, e, sum, m
			}
			var yg, dxg, eg []float32
			var sg, mg float32
			withActAsm(false, func() { yg, dxg, eg, sg, mg = run() })
			sigg, silug := sig, silu
			ya, dxa, ea, sa, ma := run()
			sameBits(t, "GELU", ya, yg)
			sameBits(t, "sigmoid", sig, sigg)
			sameBits(t, "SiLU", silu, silug)
			sameBits(t, "GELU backward, softmax gradient", dxa, dxg)
			sameBits(t, "exp", ea, eg)
			if ma != mg {
				t.Fatalf("n=%d: row maximum %g, Go loop %g", n, ma, mg)
			}
			// The sum only changes its association.
			if !fixtures.Within(math.Abs(float64(sa-sg)), 1e-6*math.Abs(float64(sg))) {
				t.Fatalf("n=%d: sum of exponentials %g, Go loop %g", n, sa, sg)
			}
		}
	}
}

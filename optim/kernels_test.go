package optim

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/dcdit/dcdit/internal/fixtures"
)

// The assembly must give exactly the generic loops' bits, for every length
// (vector bodies and tails) and alignment, without writing past its slices.
func TestKernelsMatchGeneric(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	k := &AdamWScalars{Decay: 0.999, Beta1: 0.9, C1: 0.1, Beta2: 0.999, C2: 0.001, SqrtBc2: 0.0447, Eps: 1e-8, NegStep: -3e-3}
	const guard = 7
	guarded := func(x []float32, off, n int) []float32 {
		buf := make([]float32, off+n+guard)
		for i := range buf {
			buf[i] = float32(math.NaN())
		}
		copy(buf[off:], x)
		return buf
	}
	checkGuards := func(t *testing.T, what string, buf []float32, off, n int) {
		for i, v := range buf {
			if (i < off || i >= off+n) && !math.IsNaN(float64(v)) {
				t.Fatalf("%s: element %d outside [%d,%d) was written", what, i, off, off+n)
			}
		}
	}
	for _, ks := range kernelSets[1:] {
		t.Run(ks.name, func(t *testing.T) {
			for n := 0; n <= 133; n++ {
				off := n % 5
				p0, g0, m0, v0 := randn(r, n, 1), randn(r, n, 0.1), randn(r, n, 0.01), randn(r, n, 0.001)
				for i := range v0 {
					v0[i] = float32(math.Abs(float64(v0[i])))
				}
				if n > 3 {
					g0[3] = 0 // v stays tiny: the eps-dominated branch
					v0[3] = 0
				}
				want := [4][]float32{append([]float32(nil), p0...), append([]float32(nil), g0...), append([]float32(nil), m0...), append([]float32(nil), v0...)}
				adamwGeneric(want[0], want[1], want[2], want[3], k)
				bufs := [4][]float32{guarded(p0, off, n), guarded(g0, off, n), guarded(m0, off, n), guarded(v0, off, n)}
				ks.adamw(bufs[0][off:off+n], bufs[1][off:off+n], bufs[2][off:off+n], bufs[3][off:off+n], k)
				for j, name := range []string{"p", "g", "m", "v"} {
					checkGuards(t, "adamw "+name, bufs[j], off, n)
					if i := sameBits(bufs[j][off:off+n], want[j]); i >= 0 {
						t.Fatalf("adamw n=%d: %s[%d] = %v, generic gives %v", n, name, i, bufs[j][off+i], want[j][i])
					}
				}

				e0 := randn(r, n, 1)
				wantE := append([]float32(nil), e0...)
				emaGeneric(wantE, p0, 0.9999, float32(1-0.9999))
				e := guarded(e0, off, n)
				ks.ema(e[off:off+n], p0, 0.9999, float32(1-0.9999))
				checkGuards(t, "ema", e, off, n)
				if i := sameBits(e[off:off+n], wantE); i >= 0 {
					t.Fatalf("ema n=%d: e[%d] = %v, generic gives %v", n, i, e[off+i], wantE[i])
				}

				x := guarded(g0, off, n)
				ks.scale(x[off:off+n], 0.37)
				wantX := append([]float32(nil), g0...)
				scaleGeneric(wantX, 0.37)
				checkGuards(t, "scale", x, off, n)
				if i := sameBits(x[off:off+n], wantX); i >= 0 {
					t.Fatalf("scale n=%d: x[%d] = %v, generic gives %v", n, i, x[off+i], wantX[i])
				}

				got, ref := ks.sumSquares(g0), sumSquaresGeneric(g0)
				if !fixtures.Within(math.Abs(got-ref), 1e-14*ref) {
					t.Fatalf("sumSquares n=%d = %v, generic gives %v", n, got, ref)
				}
			}
		})
	}
}

func TestSumSquaresAccuracy(t *testing.T) {
	// Ten million terms of 1e-3² plus one large one: float32 running sums
	// would drop the small ones entirely (an error of 1e-5 relative).
	x := make([]float32, 10_000_001)
	for i := range x {
		x[i] = 1e-3
	}
	x[0] = 1e3
	want := 1e6 + 1e7*float64(float32(1e-3))*float64(float32(1e-3))
	eachKernels(t, func(t *testing.T) {
		if got := active.sumSquares(x); !fixtures.Within(math.Abs(got-want), 1e-9*want) {
			t.Errorf("sumSquares = %.15g, want %.15g", got, want)
		}
	})
}

func TestSelectKernels(t *testing.T) {
	prev := active
	defer func() { active = prev }()
	t.Setenv(KernelsEnv, "generic")
	selectKernels()
	if Kernels() != "generic" {
		t.Errorf("%s=generic: Kernels() = %q", KernelsEnv, Kernels())
	}
	t.Setenv(KernelsEnv, "no-such-kernels")
	selectKernels()
	if want := kernelSets[len(kernelSets)-1].name; Kernels() != want {
		t.Errorf("%s=no-such-kernels: Kernels() = %q, want the fastest, %q", KernelsEnv, Kernels(), want)
	}
}

package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/dcdit/dcdit/internal/fixtures"
)

// actGELURef is PyTorch's formula for GELU(approximate="tanh"), verbatim.
func actGELURef(x float64) float64 {
	return 0.5 * x * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(x+0.044715*x*x*x)))
}

func actSigmoidRef(x float64) float64 { return 1 / (1 + math.Exp(-x)) }

// actSizes covers empty, single elements, odd sizes and a size above
// actGrain·2 so that the parallel path runs (under -race too).
var actSizes = []int{0, 1, 7, 255, 256, 257, 3*actGrain + 5}

// actInputs returns n values: mostly uniform in [−scale, scale], with
// zeros, tiny, large and negative-large values mixed in.
func actInputs(rng *rand.Rand, n int, scale float64) []float64 {
	x := fdRand(rng, n, scale)
	special := []float64{0, 1e-30, -1e-30, 1e-7, -1e-7, 0.5, -0.5, 3, -3, 9, -9, 30, -30, 100, -100}
	for i := 0; i < n && i < len(special); i++ {
		x[(i*7919)%n] = special[i]
	}
	return x
}

func TestActConstants(t *testing.T) {
	if got, want := float64(geluK), math.Sqrt(2/math.Pi); !fixtures.Within(math.Abs(got-want), 1e-16) {
		t.Errorf("√(2/π) = %.17g, want %.17g", got, want)
	}
	if geluC != 0.044715 {
		t.Errorf("GELU cubic coefficient = %v, want 0.044715", geluC)
	}
	// z = −2u·log₂e must expand to x·(geluA + geluB·x²).
	for _, x := range []float64{-3, -0.5, 0.25, 2} {
		u := math.Sqrt(2/math.Pi) * (x + 0.044715*x*x*x)
		if got, want := x*(geluA+geluB*x*x), -2*u*math.Log2E; !fixtures.Within(math.Abs(got-want), 1e-14*math.Abs(want)) {
			t.Errorf("GELU exponent at %v = %.17g, want %.17g", x, got, want)
		}
	}
	// The minimax polynomials stay close to the Taylor series they improve
	// on (a typo in a coefficient would not).
	for i, c := range [][2]float64{{actP1, actT1}, {actP2, actT2}, {actP3, actT3}, {actQ1, actT1}, {actQ2, actT2}, {actQ3, actT3}, {actQ4, actT4}} {
		if !fixtures.Within(math.Abs(c[0]-c[1]), 0.01*c[1]) {
			t.Errorf("minimax coefficient %d = %v, Taylor %v", i, c[0], c[1])
		}
	}
	if got, want := float64(actT13), math.Pow(math.Ln2, 13)/6227020800; !fixtures.Within(math.Abs(got-want), 1e-15*want) {
		t.Errorf("Taylor coefficient ln2¹³/13! = %.17g, want %.17g", got, want)
	}
	if math.Float32bits(actRound32) != 0x4B400000 || math.Float64bits(actRound64) != 0x4338000000000000 {
		t.Errorf("rounding constants are not 1.5·2^23 and 1.5·2^52")
	}
}

// TestActExp2Accuracy checks the exponential behind every activation:
// 2^z = s·(1 + q) against math.Exp2 over the clamped range, and
// 2^z − 1 = s·q + (s − 1) (tanh's polynomial in float32) against
// math.Expm1 near 0, in both precisions.
func TestActExp2Accuracy(t *testing.T) {
	const n = 200001
	var worst32, worst64, worstM32, worstM64 float64
	for i := range n {
		z := -126 + 252*float64(i)/(n-1)
		s, q := actExp2d(z)
		worst64 = max(worst64, math.Abs(s*(1+q)-math.Exp2(z))/math.Exp2(z))
		z32 := float32(z)
		s32, q32 := actExp2f(z32)
		want := math.Exp2(float64(z32))
		worst32 = max(worst32, math.Abs(float64(s32*(1+q32))-want)/want)
	}
	for i := range 2001 {
		z := math.Copysign(math.Pow(2, -40+42*float64(i/2)/1000), float64(i%2)-0.5)
		s, q := actExp2d(z)
		want := math.Expm1(z * math.Ln2)
		worstM64 = max(worstM64, math.Abs(s*q+(s-1)-want)/math.Abs(want))
		z32 := float32(z)
		s32, r32 := actSplit2f(z32)
		q32 := actExpm1Polyf(r32)
		want = math.Expm1(float64(z32) * math.Ln2)
		worstM32 = max(worstM32, math.Abs(float64(s32*q32+(s32-1))-want)/math.Abs(want))
	}
	t.Logf("max relative error: exp2 float32 %.3g float64 %.3g; expm1 float32 %.3g float64 %.3g", worst32, worst64, worstM32, worstM64)
	if !fixtures.Within(worst32, 3e-7) || !fixtures.Within(worstM32, 2.5e-7) {
		t.Errorf("float32 relative error: exp2 %.3g (want ≤ 3e-7), expm1 %.3g (want ≤ 2.5e-7)", worst32, worstM32)
	}
	if !fixtures.Within(worst64, 5e-16) || !fixtures.Within(worstM64, 5e-16) {
		t.Errorf("float64 relative error: exp2 %.3g, expm1 %.3g, want ≤ 5e-16", worst64, worstM64)
	}
	if s, q := actExp2f(float32(math.NaN())); s*(1+q) == s*(1+q) {
		t.Errorf("exp2f(NaN) = %v, want NaN", s*(1+q))
	}
}

// TestActTanhAccuracy is the brief's requirement: the float32 tanh within
// 1e-6 relative of math.Tanh everywhere (including tiny arguments, where
// 1 − 2/(e^{2x}+1) would lose everything), float64 within a few ulps.
func TestActTanhAccuracy(t *testing.T) {
	var xs []float64
	for i := -4000; i <= 4000; i++ {
		xs = append(xs, float64(i)/200) // [−20, 20]
	}
	for e := -40; e <= 1; e++ {
		xs = append(xs, math.Pow(2, float64(e)), -math.Pow(2, float64(e))*1.37)
	}
	xs = append(xs, 0, 25, -25, 1e6, -1e6)
	y64 := make([]float64, len(xs))
	TanhForward(y64, xs)
	x32 := fdF32(xs)
	y32 := make([]float32, len(xs))
	TanhForward(y32, x32)
	var worst32, worst64 float64
	for i, v := range xs {
		want := math.Tanh(v)
		if want != 0 {
			worst64 = max(worst64, math.Abs(y64[i]-want)/math.Abs(want))
		} else if y64[i] != 0 {
			worst64 = math.Inf(1)
		}
		want32 := math.Tanh(float64(x32[i]))
		if want32 != 0 {
			worst32 = max(worst32, math.Abs(float64(y32[i])-want32)/math.Abs(want32))
		} else if y32[i] != 0 {
			worst32 = math.Inf(1)
		}
	}
	if !fixtures.Within(worst32, 1e-6) {
		t.Errorf("float32 tanh relative error %.3g > 1e-6", worst32)
	}
	if !fixtures.Within(worst64, 1e-15) {
		t.Errorf("float64 tanh relative error %.3g > 1e-15", worst64)
	}
	t.Logf("max relative error: float32 %.3g, float64 %.3g", worst32, worst64)
}

// actCase describes one activation for the table-driven tests.
type actCase struct {
	name  string
	ref   func(float64) float64 // forward reference
	scale float64               // input range
	fwd64 func(y, x []float64)
	fwd32 func(y, x []float32)
	// bwd64 writes dx given dy, x and the forward output y.
	bwd64 func(dx, dy, x, y []float64)
	bwd32 func(dx, dy, x, y []float32)
	tol32 float64 // float32 forward relative tolerance
	// btol32 is the float32 backward tolerance: backward from y inherits
	// the cancellation of 1 − y when y → 1, as in PyTorch.
	btol32 float64
}

var actCases = []actCase{
	{
		name: "GELU", ref: actGELURef, scale: 6,
		fwd64: GELUForward[float64], fwd32: GELUForward[float32],
		bwd64: func(dx, dy, x, _ []float64) { GELUBackward(dx, dy, x) },
		bwd32: func(dx, dy, x, _ []float32) { GELUBackward(dx, dy, x) },
		tol32: 2e-6, btol32: 2e-5,
	},
	{
		name: "GELU/from-output", ref: actGELURef, scale: 6,
		fwd64: GELUForward[float64], fwd32: GELUForward[float32],
		bwd64: func(dx, dy, x, y []float64) { GELUBackwardFromOutput(dx, dy, x, y) },
		bwd32: func(dx, dy, x, y []float32) { GELUBackwardFromOutput(dx, dy, x, y) },
		tol32: 2e-6, btol32: 5e-6,
	},
	{
		name: "SiLU/from-output", ref: func(x float64) float64 { return x * actSigmoidRef(x) }, scale: 10,
		fwd64: SiLUForward[float64], fwd32: SiLUForward[float32],
		bwd64: func(dx, dy, x, y []float64) { SiLUBackwardFromOutput(dx, dy, x, y) },
		bwd32: func(dx, dy, x, y []float32) { SiLUBackwardFromOutput(dx, dy, x, y) },
		tol32: 2e-6, btol32: 5e-6,
	},
	{
		name: "SiLU", ref: func(x float64) float64 { return x * actSigmoidRef(x) }, scale: 10,
		fwd64: SiLUForward[float64], fwd32: SiLUForward[float32],
		bwd64: func(dx, dy, x, _ []float64) { SiLUBackward(dx, dy, x) },
		bwd32: func(dx, dy, x, _ []float32) { SiLUBackward(dx, dy, x) },
		tol32: 2e-6, btol32: 2e-5,
	},
	{
		name: "Sigmoid", ref: actSigmoidRef, scale: 10,
		fwd64: SigmoidForward[float64], fwd32: SigmoidForward[float32],
		bwd64: func(dx, dy, _, y []float64) { SigmoidBackward(dx, dy, y) },
		bwd32: func(dx, dy, _, y []float32) { SigmoidBackward(dx, dy, y) },
		tol32: 2e-6, btol32: 2e-5,
	},
	{
		name: "Tanh", ref: math.Tanh, scale: 4,
		fwd64: TanhForward[float64], fwd32: TanhForward[float32],
		bwd64: func(dx, dy, _, y []float64) { TanhBackward(dx, dy, y) },
		bwd32: func(dx, dy, _, y []float32) { TanhBackward(dx, dy, y) },
		tol32: 2e-6, btol32: 1e-4,
	},
}

func TestActForwardBackward(t *testing.T) {
	for _, ac := range actCases {
		for _, n := range actSizes {
			t.Run(fmt.Sprintf("%s/n=%d", ac.name, n), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(uint64(n), 7))
				x := actInputs(rng, n, ac.scale)
				xBefore := append([]float64(nil), x...)

				// Forward against the float64 reference formula.
				y := make([]float64, n)
				fdPoison(y)
				ac.fwd64(y, x)
				fdUnchanged(t, "x", x, xBefore)
				want := make([]float64, n)
				for i, v := range x {
					want[i] = ac.ref(v)
				}
				fdCompare(t, "float64 forward", y, want, 1e-12, 1e-3)

				// float32 against the reference at the same (rounded) inputs.
				x32 := fdF32(x)
				y32 := make([]float32, n)
				ac.fwd32(y32, x32)
				want32 := make([]float64, n)
				for i, v := range x32 {
					want32[i] = ac.ref(float64(v))
				}
				fdCompare(t, "float32 forward", y32, want32, ac.tol32, 1e-3)

				// Backward: float32 agrees with float64 at the same inputs.
				dy := fdRand(rng, n, 1)
				dx := make([]float64, n)
				x64 := fdF64(x32)
				y64 := make([]float64, n)
				ac.fwd64(y64, x64)
				ac.bwd64(dx, dy, x64, y64)
				dx32 := make([]float32, n)
				ac.bwd32(dx32, fdF32(dy), x32, y32)
				fdCompare(t, "float32 backward", dx32, dx, ac.btol32, 1e-2)

				// Gradient check on a subset (the finite differences are
				// exact enough only away from the huge-argument tails).
				m := min(n, 300)
				xs := fdRand(rng, m, ac.scale/2)
				gx := make([]float64, m)
				ys := make([]float64, m)
				fdCheck(t, m, []fdParam{{"x", xs, gx}},
					func(y []float64) { ac.fwd64(y, xs) },
					func(dy []float64) { ac.fwd64(ys, xs); ac.bwd64(gx, dy, xs, ys) },
					fdOptions{Seed: uint64(n)})
			})
		}
	}
}

func TestActNaNPropagates(t *testing.T) {
	for _, ac := range actCases {
		x := []float64{math.NaN(), 1}
		y := make([]float64, 2)
		ac.fwd64(y, x)
		dx := make([]float64, 2)
		ac.bwd64(dx, []float64{1, 1}, x, y)
		y32 := make([]float32, 2)
		ac.fwd32(y32, fdF32(x))
		if !math.IsNaN(y[0]) || !math.IsNaN(dx[0]) || y32[0] == y32[0] {
			t.Errorf("%s(NaN) = %v (float32 %v), gradient %v, want NaN", ac.name, y[0], y32[0], dx[0])
		}
	}
}

func TestActPanicsOnLengthMismatch(t *testing.T) {
	fdPanics(t, "kernels: GELUForward", func() { GELUForward(make([]float32, 3), make([]float32, 4)) })
	fdPanics(t, "kernels: SiLUBackward", func() { SiLUBackward(make([]float32, 3), make([]float32, 3), make([]float32, 2)) })
	fdPanics(t, "kernels: SigmoidBackward", func() { SigmoidBackward(make([]float64, 3), make([]float64, 2), make([]float64, 3)) })
}

// TestActNoAllocation: an activation on one chunk allocates nothing but
// its parallel.For closure (the exponential must stay inlined and
// allocation-free).
func TestActNoAllocation(t *testing.T) {
	x := make([]float32, actGrain/2) // one chunk: no goroutines either
	y := make([]float32, len(x))
	for name, f := range map[string]func(){
		"GELUForward":            func() { GELUForward(y, x) },
		"GELUBackward":           func() { GELUBackward(y, x, x) },
		"SiLUForward":            func() { SiLUForward(y, x) },
		"SiLUBackward":           func() { SiLUBackward(y, x, x) },
		"GELUBackwardFromOutput": func() { GELUBackwardFromOutput(y, x, x, x) },
		"Sigmoid":                func() { SigmoidForward(y, x) },
		"Tanh":                   func() { TanhForward(y, x) },
	} {
		if a := testing.AllocsPerRun(10, f); !(a <= 1) {
			t.Errorf("%s allocates %.0f times per call, want at most 1 (the closure)", name, a)
		}
	}
}

func BenchmarkGELU(b *testing.B) {
	for _, shape := range [][2]int{{2048, 384}, {2048, 1536}} {
		n := shape[0] * shape[1]
		rng := rand.New(rand.NewPCG(1, 2))
		x := fdF32(fdRand(rng, n, 4))
		y := make([]float32, n)
		dy := fdF32(fdRand(rng, n, 1))
		name := fmt.Sprintf("%dx%d", shape[0], shape[1])
		b.Run(name+"/forward", func(b *testing.B) {
			b.SetBytes(int64(8 * n)) // read x, write y
			for b.Loop() {
				GELUForward(y, x)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/elem")
		})
		b.Run(name+"/backward", func(b *testing.B) {
			b.SetBytes(int64(12 * n)) // read dy, x, write dx
			for b.Loop() {
				GELUBackward(y, dy, x)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/elem")
		})
		GELUForward(y, x)
		dx := make([]float32, n)
		b.Run(name+"/backward-from-output", func(b *testing.B) {
			b.SetBytes(int64(16 * n)) // read dy, x, y, write dx
			for b.Loop() {
				GELUBackwardFromOutput(dx, dy, x, y)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/elem")
		})
	}
}

// BenchmarkGELUMathTanh is the naive baseline: math.Tanh per element in
// float64, on one core.
func BenchmarkGELUMathTanh(b *testing.B) {
	n := 2048 * 1536
	x := fdF32(fdRand(rand.New(rand.NewPCG(1, 2)), n, 4))
	y := make([]float32, n)
	b.SetBytes(int64(8 * n))
	for b.Loop() {
		for i, v := range x {
			y[i] = float32(actGELURef(float64(v)))
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/elem")
}

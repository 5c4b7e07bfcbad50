package kernels

import (
	"math"
	"math/rand/v2"
	"strings"
	"syscall"
	"testing"

	"github.com/dcdit/dcdit/internal/fixtures"
)

// Helpers shared by the attention and convolution tests.

func acRandn(rng *rand.Rand, n int) []float64 {
	s := make([]float64, n)
	for i := range s {
		s[i] = rng.NormFloat64()
	}
	return s
}

func acToF32(s []float64) []float32 {
	r := make([]float32, len(s))
	for i, v := range s {
		r[i] = float32(v)
	}
	return r
}

// acNaNs returns n NaNs: outputs start as garbage so that a kernel that
// accumulates into, or skips, part of its output is caught.
func acNaNs[T float32 | float64](n int) []T {
	s := make([]T, n)
	for i := range s {
		s[i] = T(math.NaN())
	}
	return s
}

// acRelErr is fixtures.RelErr for a result and a reference of possibly
// different precisions: max|got − want| / max|want|, an error relative to
// the scale of the whole result, so that entries near zero do not
// dominate; +Inf when either side holds NaN or an infinity.
func acRelErr[A, B float32 | float64](got []A, want []B) float64 {
	g, w := make([]float64, len(got)), make([]float64, len(want))
	for i, v := range got {
		g[i] = float64(v)
	}
	for i, v := range want {
		w[i] = float64(v)
	}
	return fixtures.RelErr(g, w)
}

// acGradCheck compares analytic, the gradient of loss with respect to x, with
// central finite differences. loss reads x, which acGradCheck perturbs in
// place and restores. With more than probes elements it checks a random
// subset of probes of them.
func acGradCheck(t *testing.T, name string, x, analytic []float64, loss func() float64, probes int, rng *rand.Rand) {
	t.Helper()
	if len(analytic) != len(x) {
		t.Fatalf("%s: gradient has %d elements, input %d", name, len(analytic), len(x))
	}
	idx := make([]int, len(x))
	for i := range idx {
		idx[i] = i
	}
	if len(idx) > probes {
		rng.Shuffle(len(idx), func(i, j int) { idx[i], idx[j] = idx[j], idx[i] })
		idx = idx[:probes]
	}
	const h = 1e-5
	num := make([]float64, len(idx))
	ana := make([]float64, len(idx))
	for n, i := range idx {
		v := x[i]
		x[i] = v + h
		lp := loss()
		x[i] = v - h
		lm := loss()
		x[i] = v
		num[n] = (lp - lm) / (2 * h)
		ana[n] = analytic[i]
	}
	if e := acRelErr(ana, num); !fixtures.Within(e, 1e-6) {
		worst := 0
		for n := range num {
			if math.Abs(ana[n]-num[n]) > math.Abs(ana[worst]-num[worst]) {
				worst = n
			}
		}
		t.Errorf("%s: gradient relative error %.3g > 1e-6 (element %d: analytic %.10g, numeric %.10g)",
			name, e, idx[worst], ana[worst], num[worst])
	}
}

// acWeighted returns Σ r∘y, the random linear functional whose gradient with
// respect to y is r.
func acWeighted(r, y []float64) float64 {
	var s float64
	for i, v := range y {
		s += r[i] * v
	}
	return s
}

// acExpectPanic checks that f panics with a "kernels: " message.
func acExpectPanic(t *testing.T, name string, f func()) {
	t.Helper()
	defer func() {
		t.Helper()
		r := recover()
		msg, _ := r.(string)
		if r == nil {
			t.Errorf("%s: no panic", name)
		} else if !strings.HasPrefix(msg, "kernels: ") {
			t.Errorf("%s: panic %v, want a \"kernels: ...\" message", name, r)
		}
	}()
	f()
}

// acCPUSeconds is the CPU time this process has used: on a shared machine
// a benchmark's CPU time per operation is steadier than its wall time.
func acCPUSeconds() float64 {
	var r syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &r) != nil {
		return 0
	}
	return float64(r.Utime.Nano()+r.Stime.Nano()) / 1e9
}

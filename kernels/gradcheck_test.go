package kernels

// Shared test helpers for kernel gradient checks. Any kernel test may use
// them; they depend on nothing but the standard library, and their names
// start with "fd" so that they do not collide with a test's own helpers.

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/dcdit/dcdit/internal/fixtures"
)

// fdParam is one input of a kernel under a gradient check. X is the input
// (perturbed in place during the check and restored afterwards); Grad is
// where the caller's backward writes the analytic gradient dL/dX.
type fdParam struct {
	Name string
	X    []float64
	Grad []float64
}

// fdOptions tunes fdCheck; the zero value is a good default for smooth
// float64 kernels.
type fdOptions struct {
	Step     float64 // central-difference step h (default 1e-6)
	Tol      float64 // allowed |fd − grad| / max(1, |fd|, |grad|) (default 1e-6)
	MaxProbe int     // elements probed per parameter, chosen at random (default 64, 16 when ny > 4096)
	Seed     uint64  // seeds the functional R and the probe choice
}

// fdCheck verifies a kernel's backward pass against central finite
// differences of the scalar L = Σ_j R_j·y_j, where R is a fixed random
// vector of length ny. forward(y) must recompute y (len ny) from the
// current values of every params[i].X; backward(dy) must write dL/dX into
// every params[i].Grad given dy = R (it may call forward first if it needs
// saved state). Using a random linear functional instead of a single output
// exercises every output's contribution at once.
//
// It fails the test with the worst element of each parameter whose error
// exceeds opt.Tol.
func fdCheck(t *testing.T, ny int, params []fdParam, forward func(y []float64), backward func(dy []float64), opt fdOptions) {
	t.Helper()
	for _, err := range fdErrors(ny, params, forward, backward, opt) {
		t.Error(err)
	}
}

// fdErrors is fdCheck's core: it returns one error per parameter whose
// gradient is wrong.
func fdErrors(ny int, params []fdParam, forward func(y []float64), backward func(dy []float64), opt fdOptions) []error {
	if opt.Step == 0 {
		opt.Step = 1e-6
	}
	if opt.Tol == 0 {
		opt.Tol = 1e-6
	}
	if opt.MaxProbe == 0 {
		// Each probe costs two forward passes: keep large cases (there for
		// the parallel paths) cheap under -race.
		opt.MaxProbe = 64
		if ny > 4096 {
			opt.MaxProbe = 16
		}
	}
	rng := rand.New(rand.NewPCG(opt.Seed, 0x9e3779b97f4a7c15))
	r := fdRand(rng, ny, 1)
	for _, p := range params {
		if len(p.Grad) != len(p.X) {
			return []error{fmt.Errorf("fdCheck: %s: len(Grad) = %d, len(X) = %d", p.Name, len(p.Grad), len(p.X))}
		}
		fdPoison(p.Grad) // backward must overwrite, not accumulate
	}
	backward(r)
	y := make([]float64, ny)
	loss := func() float64 {
		forward(y)
		var s float64
		for j, v := range y {
			s += r[j] * v
		}
		return s
	}
	var errs []error
	for _, p := range params {
		probes := make([]int, len(p.X))
		for i := range probes {
			probes[i] = i
		}
		if len(probes) > opt.MaxProbe {
			rng.Shuffle(len(probes), func(i, j int) { probes[i], probes[j] = probes[j], probes[i] })
			probes = probes[:opt.MaxProbe]
		}
		worst, worstAt := 0.0, -1
		var worstFD, worstG float64
		for _, i := range probes {
			x0 := p.X[i]
			h := opt.Step * max(1, math.Abs(x0))
			p.X[i] = x0 + h
			lp := loss()
			p.X[i] = x0 - h
			lm := loss()
			p.X[i] = x0
			fd := (lp - lm) / (2 * h)
			g := p.Grad[i]
			e := math.Abs(fd-g) / max(1, math.Abs(fd), math.Abs(g))
			if e > worst || math.IsNaN(e) {
				worst, worstAt, worstFD, worstG = e, i, fd, g
			}
		}
		if !fixtures.Within(worst, opt.Tol) {
			errs = append(errs, fmt.Errorf("gradient of %s: element %d: analytic %.10g, finite difference %.10g (error %.3g > %.3g)",
				p.Name, worstAt, worstG, worstFD, worst, opt.Tol))
		}
	}
	return errs
}

// fdPoison fills s with NaN so that a kernel which forgets to write an
// element (or accumulates instead of overwriting) is caught.
func fdPoison[T float32 | float64](s []T) {
	for i := range s {
		s[i] = T(math.NaN())
	}
}

// fdRand returns n values uniform in [−scale, scale).
func fdRand(rng *rand.Rand, n int, scale float64) []float64 {
	s := make([]float64, n)
	for i := range s {
		s[i] = scale * (2*rng.Float64() - 1)
	}
	return s
}

// fdF32 rounds a float64 slice to float32.
func fdF32(s []float64) []float32 {
	o := make([]float32, len(s))
	for i, v := range s {
		o[i] = float32(v)
	}
	return o
}

// fdF64 widens a float32 slice (so references see exactly the float32
// inputs).
func fdF64(s []float32) []float64 {
	o := make([]float64, len(s))
	for i, v := range s {
		o[i] = float64(v)
	}
	return o
}

// fdCompare reports the first element where got and want differ by more
// than tol·max(floor, |want|): a relative tolerance that becomes absolute
// below floor, where relative errors of values near zero mean nothing.
func fdCompare[T float32 | float64](t *testing.T, what string, got []T, want []float64, tol, floor float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: len %d, want %d", what, len(got), len(want))
	}
	worst, at := 0.0, -1
	for i, w := range want {
		e := math.Abs(float64(got[i])-w) / max(floor, math.Abs(w))
		if e > worst || math.IsNaN(e) {
			worst, at = e, i
			if math.IsNaN(e) {
				break
			}
		}
	}
	if !fixtures.Within(worst, tol) {
		t.Errorf("%s: element %d = %.9g, want %.9g (error %.3g > %.3g)", what, at, float64(got[at]), want[at], worst, tol)
	}
}

// fdUnchanged fails the test when a kernel modified an input it should
// only read.
func fdUnchanged[T float32 | float64](t *testing.T, what string, got, before []T) {
	t.Helper()
	for i := range before {
		if got[i] != before[i] && !(got[i] != got[i] && before[i] != before[i]) {
			t.Errorf("%s: input modified at %d: %v, was %v", what, i, got[i], before[i])
			return
		}
	}
}

// fdPanics fails the test unless f panics with a message starting with
// prefix.
func fdPanics(t *testing.T, prefix string, f func()) {
	t.Helper()
	defer func() {
		t.Helper()
		r := recover()
		if r == nil {
			t.Errorf("no panic, want one starting with %q", prefix)
			return
		}
		if msg := fmt.Sprint(r); len(msg) < len(prefix) || msg[:len(prefix)] != prefix {
			t.Errorf("panic %q, want one starting with %q", msg, prefix)
		}
	}()
	f()
}

// TestFDCheckDetectsWrongGradient makes sure the checker can fail: a
// backward that drops a term must be reported.
func TestFDCheckDetectsWrongGradient(t *testing.T) {
	x := []float64{0.3, -1.2, 2.0}
	gx := make([]float64, 3)
	forward := func(y []float64) {
		for i, v := range x {
			y[i] = v * v * v
		}
	}
	wrong := func(dy []float64) {
		for i, v := range x {
			gx[i] = dy[i] * 2 * v * v // should be 3·v²
		}
	}
	if errs := fdErrors(3, []fdParam{{"x", x, gx}}, forward, wrong, fdOptions{}); len(errs) != 1 {
		t.Fatalf("fdCheck on a wrong gradient: %v, want one error", errs)
	}
	right := func(dy []float64) {
		for i, v := range x {
			gx[i] = dy[i] * 3 * v * v
		}
	}
	fdCheck(t, 3, []fdParam{{"x", x, gx}}, forward, right, fdOptions{})
}

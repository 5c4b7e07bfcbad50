package ops

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/nlpodyssey/spago/mat"
)

// input describes one operand of an op under test.
type input struct {
	name      string
	rows      int
	cols      int
	scale     float64 // values uniform in [−scale, scale) (default 1)
	noGrad    bool    // a constant: must receive no gradient
	transpose bool    // a vector given as [1, n] instead of [n, 1]
}

// makeInputs returns float64 matrices for the inputs, filled from rng.
func makeInputs(rng *rand.Rand, ins []input) []*mat.Dense[float64] {
	out := make([]*mat.Dense[float64], len(ins))
	for i, in := range ins {
		scale := in.scale
		if scale == 0 {
			scale = 1
		}
		d := make([]float64, in.rows*in.cols)
		for j := range d {
			d[j] = scale * (2*rng.Float64() - 1)
		}
		out[i] = mat.NewDense[float64](mat.WithShape(in.rows, in.cols), mat.WithBacking(d), mat.WithGrad(!in.noGrad))
	}
	return out
}

func tensors[T interface {
	*mat.Dense[float32] | *mat.Dense[float64]
}](ds []T) []mat.Tensor {
	ts := make([]mat.Tensor, len(ds))
	for i, d := range ds {
		ts[i] = mat.Tensor(d)
	}
	return ts
}

// to32 copies float64 inputs into float32 ones with the same grad flags.
func to32(ds []*mat.Dense[float64]) []*mat.Dense[float32] {
	out := make([]*mat.Dense[float32], len(ds))
	for i, d := range ds {
		src := mat.Data[float64](d)
		dst := make([]float32, len(src))
		for j, v := range src {
			dst[j] = float32(v)
		}
		out[i] = mat.NewDense[float32](mat.WithShape(d.Shape()...), mat.WithBacking(dst), mat.WithGrad(d.RequiresGrad()))
	}
	return out
}

// gradCheckOptions tunes checkGrad; the zero value suits smooth ops.
type gradCheckOptions struct {
	Tol      float64 // |fd − grad| / max(1, |fd|, |grad|) (default 1e-6)
	MaxProbe int     // elements probed per input (default 40)
}

// reporter is the part of *testing.T that checkGrad uses, so that the
// checker itself can be tested with a fake.
type reporter interface {
	Helper()
	Errorf(format string, args ...any)
}

// checkGrad builds the op on float64 inputs, back-propagates the scalar
// L = Σ R∘y with spago (by seeding dL/dy = R, R random and fixed, and
// calling Backward(y)), and compares every input's Grad() with central finite differences of L
// computed by re-running the op's forward pass. Inputs marked noGrad must
// receive no gradient at all.
func checkGrad(t reporter, seed uint64, ins []input, build func(x []mat.Tensor) mat.Tensor, opt gradCheckOptions) {
	t.Helper()
	if opt.Tol == 0 {
		opt.Tol = 1e-6
	}
	if opt.MaxProbe == 0 {
		opt.MaxProbe = 40
	}
	rng := rand.New(rand.NewPCG(seed, 42))
	xs := makeInputs(rng, ins)
	y := build(tensors(xs))
	ys := y.Shape()
	r := make([]float64, y.Size())
	for i := range r {
		r[i] = 2*rng.Float64() - 1
	}
	R := mat.NewDense[float64](mat.WithShape(ys...), mat.WithBacking(r))
	done := make(chan error, 1)
	go func() { done <- seedBackward(y, R) }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("backward: %v", err)
			return
		}
	case <-time.After(time.Minute):
		// spago waits for one AccGrad per operand occurrence: an op that
		// skips one stalls the whole pass instead of failing.
		t.Errorf("backward did not finish: an op left an operand without its AccGrad call")
		return
	}
	loss := func() float64 {
		yv := mat.Data[float64](build(tensors(xs)).Value())
		var s float64
		for i, v := range yv {
			s += r[i] * v
		}
		return s
	}
	for k, in := range ins {
		// Grad() of a Dense is a typed nil when absent: ask HasGrad.
		if in.noGrad {
			if xs[k].HasGrad() {
				t.Errorf("%s does not require gradients but received one", in.name)
			}
			continue
		}
		if !xs[k].HasGrad() {
			t.Errorf("%s received no gradient", in.name)
			continue
		}
		g := xs[k].Grad()
		if got, want := fmt.Sprint(g.Shape()), fmt.Sprint(xs[k].Shape()); got != want {
			t.Errorf("gradient of %s has shape %s, want %s", in.name, got, want)
			continue
		}
		gd := mat.Data[float64](g)
		xd := mat.Data[float64](xs[k])
		probes := rng.Perm(len(xd))
		if len(probes) > opt.MaxProbe {
			probes = probes[:opt.MaxProbe]
		}
		for _, i := range probes {
			x0 := xd[i]
			h := 1e-6 * max(1, math.Abs(x0))
			xd[i] = x0 + h
			lp := loss()
			xd[i] = x0 - h
			lm := loss()
			xd[i] = x0
			fd := (lp - lm) / (2 * h)
			if e := math.Abs(fd-gd[i]) / max(1, math.Abs(fd), math.Abs(gd[i])); !(e <= opt.Tol) {
				t.Errorf("gradient of %s[%d] = %.10g, finite difference %.10g (error %.3g > %.3g)", in.name, i, gd[i], fd, e, opt.Tol)
				break
			}
		}
	}
}

// seedBackward back-propagates dL/dy = r from y. (spago's ReduceSum cannot
// serve as the scalar: its gradient is a column vector, whatever the shape
// of its input.)
func seedBackward(y, r mat.Tensor) error {
	y.AccGrad(r)
	return Backward(y)
}

// compareData fails when got and want differ by more than tol relative to
// max(1, |want|) anywhere.
func compareData[A, B float32 | float64](t *testing.T, what string, got []A, want []B, tol float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", what, len(got), len(want))
	}
	for i := range got {
		w := float64(want[i])
		if e := math.Abs(float64(got[i])-w) / max(1, math.Abs(w)); !(e <= tol) {
			t.Errorf("%s[%d] = %.9g, want %.9g (error %.3g > %.3g)", what, i, float64(got[i]), w, e, tol)
			return
		}
	}
}

// checkAgainst32 runs the op on float32 copies of float64 inputs and
// compares value and gradients (of L = Σ R∘y) with the float64 run.
func checkAgainst32(t *testing.T, seed uint64, ins []input, build func(x []mat.Tensor) mat.Tensor, tol float64) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 43))
	x64 := makeInputs(rng, ins)
	x32 := to32(x64)
	y64, y32 := build(tensors(x64)), build(tensors(x32))
	switch y32.Value().(type) {
	case *mat.Dense[float32], *value[float32]:
	default:
		t.Fatalf("float32 inputs gave a %T", y32.Value())
	}
	compareData(t, "float32 value", mat.Data[float32](y32.Value()), mat.Data[float64](y64.Value()), tol)
	r := make([]float64, y64.Size())
	for i := range r {
		r[i] = 2*rng.Float64() - 1
	}
	r32 := make([]float32, len(r))
	for i, v := range r {
		r32[i] = float32(v)
	}
	if err := seedBackward(y64, mat.NewDense[float64](mat.WithShape(y64.Shape()...), mat.WithBacking(r))); err != nil {
		t.Fatal(err)
	}
	if err := seedBackward(y32, mat.NewDense[float32](mat.WithShape(y32.Shape()...), mat.WithBacking(r32))); err != nil {
		t.Fatal(err)
	}
	for k, in := range ins {
		if in.noGrad {
			continue
		}
		compareData(t, "float32 gradient of "+in.name, mat.Data[float32](x32[k].Grad()), mat.Data[float64](x64[k].Grad()), tol)
	}
}

// mustPanic fails unless f panics with a message containing all parts.
func mustPanic(t *testing.T, f func(), parts ...string) {
	t.Helper()
	defer func() {
		t.Helper()
		r := recover()
		if r == nil {
			t.Errorf("no panic, want one mentioning %q", parts)
			return
		}
		msg := fmt.Sprint(r)
		for _, p := range parts {
			if !strings.Contains(msg, p) {
				t.Errorf("panic %q does not mention %q", msg, p)
			}
		}
	}()
	f()
}

// fakeT records failures instead of reporting them.
type fakeT struct{ failed bool }

func (f *fakeT) Helper()               {}
func (f *fakeT) Errorf(string, ...any) { f.failed = true }

// TestCheckGradDetectsWrongGradient makes sure the op gradient checker can
// fail: a Backward that forgets a factor of 2 must be reported, the right
// one must pass.
func TestCheckGradDetectsWrongGradient(t *testing.T) {
	ins := []input{{name: "x", rows: 2, cols: 3}}
	ft := &fakeT{}
	checkGrad(ft, 1, ins, func(x []mat.Tensor) mat.Tensor {
		return node(&squareOp{x: x[0], factor: 1})
	}, gradCheckOptions{})
	if !ft.failed {
		t.Fatal("checkGrad accepted a wrong gradient")
	}
	checkGrad(t, 1, ins, func(x []mat.Tensor) mat.Tensor {
		return node(&squareOp{x: x[0], factor: 2})
	}, gradCheckOptions{})
}

// squareOp computes x∘x and returns factor·x∘dy as its gradient (right
// for factor 2).
type squareOp struct {
	x      mat.Tensor
	factor float64
}

func (f *squareOp) Operands() []mat.Tensor { return []mat.Tensor{f.x} }
func (f *squareOp) Forward() (mat.Tensor, error) {
	return f.x.Value().(mat.Matrix).Prod(f.x.Value().(mat.Matrix)), nil
}
func (f *squareOp) Backward(gy mat.Tensor) error {
	f.x.AccGrad(gy.(mat.Matrix).Prod(f.x.Value().(mat.Matrix)).ProdScalar(f.factor))
	return nil
}

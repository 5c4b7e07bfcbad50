package ops

import (
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"

	"github.com/nlpodyssey/spago/ag"
	"github.com/nlpodyssey/spago/mat"
)

// fanOutGraph returns a scalar that depends on x through branches of
// different lengths, all consuming the node h: h's gradient is the sum of
// eight contributions, whose float sum depends on the order they arrive.
func fanOutGraph(x, w mat.Tensor) mat.Tensor {
	h := Linear(x, w, nil)
	var total mat.Tensor
	for b := range 8 {
		y := h
		for range b % 4 {
			y = GELU(Linear(y, w, nil))
		}
		y = Sum(Scale(y, float64(b+1)*0.37))
		if total == nil {
			total = y
		} else {
			total = Add(total, y)
		}
	}
	return total
}

// TestBackwardOrderIsFixed runs the same fan-out graph many times and
// wants bit-identical gradients every time (with spago's concurrent
// backward, the second run already differs).
func TestBackwardOrderIsFixed(t *testing.T) {
	if runtime.GOMAXPROCS(0) < 2 {
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2))
	}
	rng := rand.New(rand.NewPCG(1, 2))
	xs := make([]float32, 64*32)
	ws := make([]float32, 32*32)
	for i := range xs {
		xs[i] = float32(rng.NormFloat64())
	}
	for i := range ws {
		ws[i] = float32(rng.NormFloat64() * 0.2)
	}
	grads := func() []float32 {
		x := mat.NewDense[float32](mat.WithShape(64, 32), mat.WithBacking(slices.Clone(xs)), mat.WithGrad(true))
		w := mat.NewDense[float32](mat.WithShape(32, 32), mat.WithBacking(slices.Clone(ws)), mat.WithGrad(true))
		y := fanOutGraph(x, w)
		if err := Backward(y); err != nil {
			t.Fatal(err)
		}
		g := append(slices.Clone(mat.Data[float32](x.Grad())), mat.Data[float32](w.Grad())...)
		Release(y)
		return g
	}
	want := grads()
	for run := range 30 {
		if got := grads(); !slices.Equal(got, want) {
			t.Fatalf("run %d: gradients differ from the first run's", run+1)
		}
	}
}

// TestBackwardMatchesSpago: the order differs, the gradients agree (to
// float32 rounding).
func TestBackwardMatchesSpago(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	xs := make([]float64, 16*8)
	ws := make([]float64, 8*8)
	for i := range xs {
		xs[i] = rng.NormFloat64()
	}
	for i := range ws {
		ws[i] = rng.NormFloat64() * 0.3
	}
	run := func(backward func(mat.Tensor) error) []float64 {
		x := mat.NewDense[float64](mat.WithShape(16, 8), mat.WithBacking(slices.Clone(xs)), mat.WithGrad(true))
		w := mat.NewDense[float64](mat.WithShape(8, 8), mat.WithBacking(slices.Clone(ws)), mat.WithGrad(true))
		if err := backward(fanOutGraph(x, w)); err != nil {
			t.Fatal(err)
		}
		return append(slices.Clone(mat.Data[float64](x.Grad())), mat.Data[float64](w.Grad())...)
	}
	ours := run(Backward)
	theirs := run(func(y mat.Tensor) error { return ag.Backward(y) })
	compareData(t, "gradients", ours, theirs, 1e-12)
}

func TestBackwardErrors(t *testing.T) {
	x := mat.NewDense[float32](mat.WithShape(2, 3), mat.WithGrad(true))
	if err := Backward(Scale(x, 2)); err == nil {
		t.Error("a non-scalar root without a gradient was accepted")
	}
	if err := Backward(mat.NewDense[float32](mat.WithShape(1, 1))); err != nil {
		t.Errorf("a leaf: %v", err)
	}
}

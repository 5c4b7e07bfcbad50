package params_test

import (
	"testing"

	"github.com/nlpodyssey/spago/ag"
	"github.com/nlpodyssey/spago/mat"

	"github.com/dcdit/dcdit/ops"
	"github.com/dcdit/dcdit/params"
)

// These tests run ops over a set, from outside the package: ops imports
// the device packages, which import params.

// Gradients of an op land in the gradient arena, accumulate over two
// backward passes and clear with ZeroGrad.
func TestGradientsLandInArena(t *testing.T) {
	s, err := params.New([]params.Spec{{Name: "w", Rows: 2, Cols: 3}, {Name: "b", Rows: 2, Cols: 1}})
	if err != nil {
		t.Fatal(err)
	}
	copy(s.Data, []float32{1, 2, 3, 4, 5, 6, 0.5, -0.5})
	w, b := s.Get("w"), s.Get("b")
	x := mat.NewDense[float32](mat.WithShape(1, 3), mat.WithBacking([]float32{1, 1, 2}))
	if w.HasGrad() || w.Grad() != nil {
		t.Fatal("gradient before any backward pass")
	}
	for pass := 1; pass <= 2; pass++ {
		if err := ag.Backward(ops.Sum(ops.Linear(x, w, b))); err != nil {
			t.Fatal(err)
		}
		// d(Σ x·wᵀ + b)/dw[i][j] = x[j], /db = 1.
		want := []float32{1, 1, 2, 1, 1, 2, 1, 1}
		for i := range want {
			if s.Grad[i] != float32(pass)*want[i] {
				t.Fatalf("pass %d: Grad = %v, want %d×%v", pass, s.Grad, pass, want)
			}
		}
	}
	if !w.HasGrad() || mat.Data[float32](w.Grad())[2] != 4 {
		t.Fatal("Grad does not report the arena")
	}
	s.ZeroGrad()
	if w.HasGrad() || s.Grad[0] != 0 {
		t.Fatal("ZeroGrad left a gradient")
	}
	if !s.RequiresGrad() {
		t.Fatal("a new set does not require gradients")
	}
	s.SetRequiresGrad(false)
	if w.RequiresGrad() || s.RequiresGrad() {
		t.Fatal("SetRequiresGrad(false) ignored")
	}
}

// After Join, both the parts and the joint set see one arena: values,
// gradients from a backward pass and parameter identity are shared.
func TestJoin(t *testing.T) {
	a, _ := params.New([]params.Spec{{Name: "w", Rows: 2, Cols: 3}})
	b, _ := params.New([]params.Spec{{Name: "b", Rows: 2, Cols: 1}})
	copy(a.Data, []float32{1, 2, 3, 4, 5, 6})
	copy(b.Data, []float32{0.5, -0.5})
	b.SetRequiresGrad(false)
	w, bias := a.Get("w"), b.Get("b")
	j, err := params.Join(a, b)
	if err != nil {
		t.Fatal(err)
	}
	if j.Len() != 8 || j.Get("w") != w || j.Get("b") != bias || j.List()[1] != bias {
		t.Fatal("the joint set does not hold the parts' parameters")
	}
	want := []float32{1, 2, 3, 4, 5, 6, 0.5, -0.5}
	for i, v := range want {
		if j.Data[i] != v {
			t.Fatalf("joint Data = %v, want %v", j.Data, want)
		}
	}
	if bias.RequiresGrad() || !w.RequiresGrad() {
		t.Fatal("Join changed requiresGrad")
	}
	j.Data[7] = 9
	if b.Data[1] != 9 || bias.Values()[1] != 9 {
		t.Fatal("part b does not see the joint arena")
	}
	if lo, hi, _ := j.Range("b"); lo != 6 || hi != 8 {
		t.Fatalf("joint range of b [%d,%d), want [6,8)", lo, hi)
	}
	if lo, hi, _ := b.Range("b"); lo != 0 || hi != 2 {
		t.Fatalf("part range of b [%d,%d), want [0,2)", lo, hi)
	}
	b.SetRequiresGrad(true)
	x := mat.NewDense[float32](mat.WithShape(1, 3), mat.WithBacking([]float32{1, 1, 2}))
	if err := ag.Backward(ops.Sum(ops.Linear(x, w, bias))); err != nil {
		t.Fatal(err)
	}
	if j.Grad[2] != 2 || a.Grad[2] != 2 || j.Grad[7] != 1 || b.Grad[1] != 1 {
		t.Fatalf("gradients: joint %v, parts %v %v", j.Grad, a.Grad, b.Grad)
	}
	if _, err := params.Join(a, a); err == nil {
		t.Fatal("joining a set with itself: no error for the repeated names")
	}
}

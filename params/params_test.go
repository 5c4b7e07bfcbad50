package params

import (
	"strings"
	"testing"

	"github.com/nlpodyssey/spago/ag"
	"github.com/nlpodyssey/spago/mat"

	"github.com/dcdit/dcdit/ops"
)

func TestNewErrors(t *testing.T) {
	tests := []struct {
		name  string
		specs []Spec
		want  string
	}{
		{"zero rows", []Spec{{"w", 0, 3}}, `"w" has shape [0 3]`},
		{"negative cols", []Spec{{"b", 2, -1}}, `"b" has shape [2 -1]`},
		{"duplicate", []Spec{{"w", 1, 1}, {"w", 2, 2}}, `"w" appears twice`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(tt.specs)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want it to contain %q", err, tt.want)
			}
		})
	}
}

func TestLayout(t *testing.T) {
	s, err := New([]Spec{{"w", 2, 3}, {"b", 2, 1}})
	if err != nil {
		t.Fatal(err)
	}
	if s.Len() != 8 || len(s.Grad) != 8 {
		t.Fatalf("arena lengths %d/%d, want 8", s.Len(), len(s.Grad))
	}
	w, b := s.Get("w"), s.Get("b")
	if w.Lo != 0 || w.Hi != 6 || b.Lo != 6 || b.Hi != 8 || s.Get("x") != nil {
		t.Fatalf("ranges w [%d,%d) b [%d,%d)", w.Lo, w.Hi, b.Lo, b.Hi)
	}
	b.Values()[1] = 5
	if s.Data[7] != 5 {
		t.Fatal("Values is not a view of the arena")
	}
	if got := s.List(); len(got) != 2 || got[0] != w || got[1] != b {
		t.Fatal("List is not in arena order")
	}
}

// Gradients of an op land in the gradient arena, accumulate over two
// backward passes and clear with ZeroGrad.
func TestGradientsLandInArena(t *testing.T) {
	s, err := New([]Spec{{"w", 2, 3}, {"b", 2, 1}})
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

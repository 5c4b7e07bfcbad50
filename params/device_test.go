package params

import (
	"testing"

	"github.com/nlpodyssey/spago/mat"
)

// fakeSide records what a bound parameter routes to it (the device side is
// package gpu/device's Arena; this checks only the routing, without a GPU).
type fakeSide struct {
	val   mat.Tensor
	acc   int
	zeros int
}

func (f *fakeSide) Value() mat.Tensor  { return f.val }
func (f *fakeSide) AccGrad(mat.Tensor) { f.acc++ }
func (f *fakeSide) Grad() mat.Tensor {
	if f.acc == 0 {
		return nil
	}
	return f.val
}
func (f *fakeSide) HasGrad() bool { return f.acc > 0 }
func (f *fakeSide) ZeroGrad()     { f.acc = 0; f.zeros++ }

// TestBind: a bound parameter's value and gradient calls go to its device
// side and leave the host arena alone; Set.ZeroGrad reaches the side;
// Unbind returns to the host storage.
func TestBind(t *testing.T) {
	set, err := New([]Spec{{Name: "a", Rows: 2, Cols: 3}, {Name: "b", Rows: 3, Cols: 1}})
	if err != nil {
		t.Fatal(err)
	}
	a := set.Get("a")
	if a.Value() != mat.Tensor(a.Dense) || a.Bound() != nil {
		t.Fatalf("an unbound parameter's value is %T, want its host matrix", a.Value())
	}
	side := &fakeSide{val: mat.NewDense[float32](mat.WithShape(2, 3))}
	a.Bind(side)
	g := mat.NewDense[float32](mat.WithShape(2, 3), mat.WithBacking([]float32{1, 2, 3, 4, 5, 6}))
	steps := []struct {
		name  string
		do    func()
		check func() bool
	}{
		{"value", func() {}, func() bool { return a.Value() == side.val && a.Bound() == side }},
		{"no gradient yet", func() {}, func() bool { return a.Grad() == nil && !a.HasGrad() }},
		{"AccGrad", func() { a.AccGrad(g) }, func() bool { return side.acc == 1 && a.HasGrad() && a.Grad() == side.val }},
		{"host arena untouched", func() {}, func() bool { return set.Grad[0] == 0 && set.Grad[5] == 0 }},
		{"Set.ZeroGrad", func() { set.ZeroGrad() }, func() bool { return side.zeros == 1 && !a.HasGrad() }},
		{"Param.ZeroGrad", func() { a.ZeroGrad() }, func() bool { return side.zeros == 2 }},
		{"Unbind", func() { a.Unbind(); a.AccGrad(g) }, func() bool {
			return a.Value() == mat.Tensor(a.Dense) && side.acc == 0 && set.Grad[5] == 6 && a.HasGrad()
		}},
	}
	for _, s := range steps {
		s.do()
		if !s.check() {
			t.Errorf("%s: unexpected state (side %+v, host grad %v)", s.name, side, set.Grad)
		}
	}
}

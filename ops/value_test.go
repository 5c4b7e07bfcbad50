package ops

import (
	"math/rand/v2"
	"slices"
	"testing"
	"unsafe"

	"github.com/nlpodyssey/spago/mat"
)

// gradsOf copies the gradients of the inputs that take one.
func gradsOf(xs []*mat.Dense[float32]) [][]float32 {
	var gs [][]float32
	for _, x := range xs {
		if g := x.Grad(); g != nil {
			gs = append(gs, slices.Clone(mat.Data[float32](g)))
		}
	}
	return gs
}

// TestReleaseReusesBuffers: after Release, the next step runs on the same
// memory and computes the same values and gradients as the first, and a
// released result's buffer is back in the pool.
func TestReleaseReusesBuffers(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 5))
	xs := to32(makeInputs(rng, ditBlockInputs))
	step := func() (mat.Tensor, []float32, [][]float32) {
		for _, x := range xs {
			x.ZeroGrad()
		}
		y := ditBlock(tensors(xs))
		out := slices.Clone(mat.Data[float32](y.Value()))
		if err := seedBackward(y, mat.NewDense[float32](mat.WithShape(y.Shape()...), mat.WithBacking(slices.Repeat([]float32{1}, y.Size())))); err != nil {
			t.Fatal(err)
		}
		return y, out, gradsOf(xs)
	}
	y1, out1, g1 := step()
	buf := mat.Data[float32](y1.Value())
	Release(y1)
	Release(y1) // a second release does nothing
	if !pooled(buf) {
		t.Error("the released result's buffer is not in the pool")
	}
	y2, out2, g2 := step()
	defer Release(y2)
	compareData(t, "value after release", out2, out1, 0)
	if len(g1) != len(g2) {
		t.Fatalf("%d gradients, then %d", len(g1), len(g2))
	}
	for i := range g1 {
		compareData(t, "gradient after release", g2[i], g1[i], 0)
	}
}

// TestValueAdoptsFirstGradient: an op's first gradient becomes the node's
// gradient without a copy; a second one is added into it.
func TestValueAdoptsFirstGradient(t *testing.T) {
	v := output(2, 2, getBuffer[float32](4))
	g := getBuffer[float32](4)
	copy(g, []float32{1, 2, 3, 4})
	gb := &gradBuf[float32]{Dense: newMatrix(2, 2, g)}
	v.AccGrad(gb)
	if !gb.adopted || unsafe.SliceData(mat.Data[float32](v.Grad())) != unsafe.SliceData(g) {
		t.Fatal("first pooled gradient not adopted")
	}
	v.AccGrad(newMatrix(2, 2, []float32{10, 20, 30, 40})) // a caller's matrix: added
	compareData(t, "accumulated gradient", mat.Data[float32](v.Grad()), []float32{11, 22, 33, 44}, 0)
	if !v.release() || v.release() {
		t.Fatal("release should succeed once")
	}
	if v.HasGrad() {
		t.Fatal("gradient kept after release")
	}
}

// pooled reports whether b's memory is on the pool's free list.
func pooled(b []float32) bool {
	p := poolOf[float32]()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, f := range p.free {
		for _, x := range f {
			if unsafe.SliceData(x) == unsafe.SliceData(b) {
				return true
			}
		}
	}
	return false
}

package ops

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/nlpodyssey/spago/ag"
	"github.com/nlpodyssey/spago/mat"
)

// opCase is one table entry of an op test: the op built on its inputs and
// a naive float64 reference of its forward pass.
type opCase struct {
	name  string
	ins   []input
	build func(x []mat.Tensor) mat.Tensor
	// ref computes the expected output from the inputs' data.
	ref   func(x [][]float64) []float64
	shape [2]int  // expected output shape
	tol32 float64 // float32 vs float64 tolerance (default 2e-5)
	grad  gradCheckOptions
}

// runOpCases checks each case's forward against its reference, its
// gradients against finite differences, and float32 against float64.
func runOpCases(t *testing.T, cases []opCase) {
	t.Helper()
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			seed := uint64(i + 1)
			xs := makeInputs(rand.New(rand.NewPCG(seed, 7)), c.ins)
			data := make([][]float64, len(xs))
			before := make([][]float64, len(xs))
			for k, x := range xs {
				data[k] = mat.Data[float64](x)
				before[k] = append([]float64(nil), data[k]...)
			}
			y := c.build(tensors(xs))
			if got := y.Shape(); got[0] != c.shape[0] || got[1] != c.shape[1] {
				t.Fatalf("output shape %v, want %v", got, c.shape)
			}
			compareData(t, "value", mat.Data[float64](y.Value()), c.ref(data), 1e-12)
			for k := range xs {
				compareData(t, "input "+c.ins[k].name+" after the op", data[k], before[k], 0)
			}
			checkGrad(t, seed, c.ins, c.build, c.grad)
			tol := c.tol32
			if tol == 0 {
				tol = 2e-5
			}
			checkAgainst32(t, seed, c.ins, c.build, tol)
		})
	}
}

// compareWithSpago runs our op and spago's reference composition on the
// same float64 inputs and compares values and all gradients.
func compareWithSpago(t *testing.T, ins []input, ours, theirs func(x []mat.Tensor) mat.Tensor, tol float64) {
	t.Helper()
	rng := rand.New(rand.NewPCG(99, uint64(len(ins))))
	a := makeInputs(rng, ins)
	b := make([]*mat.Dense[float64], len(a))
	for i, d := range a {
		b[i] = d.Clone().(*mat.Dense[float64])
		b[i].SetRequiresGrad(d.RequiresGrad())
	}
	ya, yb := ours(tensors(a)), theirs(tensors(b))
	compareData(t, "value vs spago", mat.Data[float64](ya.Value()), mat.Data[float64](yb.Value()), tol)
	r := makeInputs(rng, []input{{rows: ya.Shape()[0], cols: ya.Shape()[1], noGrad: true}})[0]
	if err := seedBackward(ya, r); err != nil {
		t.Fatal(err)
	}
	// spago's own nodes go through spago's backward pass.
	yb.AccGrad(r)
	if err := ag.Backward(yb); err != nil {
		t.Fatal(err)
	}
	for i, in := range ins {
		if in.noGrad {
			continue
		}
		compareData(t, fmt.Sprintf("gradient of %s vs spago", in.name), mat.Data[float64](a[i].Grad()), mat.Data[float64](b[i].Grad()), tol)
	}
}

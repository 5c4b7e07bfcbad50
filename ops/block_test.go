package ops

import (
	"math/rand/v2"
	"testing"

	"github.com/nlpodyssey/spago/mat"
	"github.com/nlpodyssey/spago/nn"
)

// ditBlock is a DiT block with a linear layer standing in for attention:
// every op of the block but attention, wired as in DiT's models.py, over
// two ragged samples.
func ditBlock(x []mat.Tensor) mat.Tensor {
	const D = 4
	off := []int{0, 1, 4}
	h, c := x[0], x[1]
	wa, ba, w1, b1, w2, b2 := x[2], x[3], x[4], x[5], x[6], x[7]
	shiftMSA, scaleMSA, gateMSA := SliceCols(c, 0, D), SliceCols(c, D, 2*D), SliceCols(c, 2*D, 3*D)
	shiftMLP, scaleMLP, gateMLP := SliceCols(c, 3*D, 4*D), SliceCols(c, 4*D, 5*D), SliceCols(c, 5*D, 6*D)
	a := Linear(Modulate(LayerNorm(h, 1e-6), shiftMSA, scaleMSA, off), wa, ba)
	h = GatedResidual(h, gateMSA, a, off)
	m := Linear(GELU(Linear(Modulate(LayerNorm(h, 1e-6), shiftMLP, scaleMLP, off), w1, b1)), w2, b2)
	return GatedResidual(h, gateMLP, m, off)
}

var ditBlockInputs = []input{
	{name: "x", rows: 4, cols: 4, scale: 2}, {name: "c", rows: 2, cols: 24},
	{name: "wa", rows: 4, cols: 4}, {name: "ba", rows: 4, cols: 1},
	{name: "w1", rows: 16, cols: 4}, {name: "b1", rows: 16, cols: 1},
	{name: "w2", rows: 4, cols: 16}, {name: "b2", rows: 4, cols: 1},
}

func TestDiTBlockGradients(t *testing.T) {
	checkGrad(t, 1, ditBlockInputs, ditBlock, gradCheckOptions{})
	checkAgainst32(t, 1, ditBlockInputs, ditBlock, 1e-4)
}

// TestDiTBlockLoss: the block under an MSE against a constant target,
// back-propagated from the scalar loss alone (ag.Backward's own seed).
func TestDiTBlockLoss(t *testing.T) {
	ins := append(append([]input(nil), ditBlockInputs...), input{name: "target", rows: 4, cols: 4, noGrad: true})
	checkGrad(t, 2, ins, func(x []mat.Tensor) mat.Tensor {
		return Scale(MSE(ditBlock(x[:8]), x[8]), 3)
	}, gradCheckOptions{})
}

// TestOpsAcceptParams: weights held as spago nn.Params work as operands.
func TestOpsAcceptParams(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 3))
	xs := makeInputs(rng, []input{{rows: 2, cols: 3, noGrad: true}, {rows: 4, cols: 3}, {rows: 4, cols: 1}})
	w, b := nn.NewParam(xs[1]), nn.NewParam(xs[2])
	y := Sum(Linear(xs[0], w, b))
	if err := seedBackward(y, mat.Scalar(1.0)); err != nil {
		t.Fatal(err)
	}
	if !w.HasGrad() || !b.HasGrad() || xs[0].HasGrad() {
		t.Fatalf("gradients: w %v, b %v, x %v; want w and b only", w.HasGrad(), b.HasGrad(), xs[0].HasGrad())
	}
	// d(Σ y)/db = number of rows.
	for _, g := range mat.Data[float64](b.Grad()) {
		if g != 2 {
			t.Fatalf("db = %v, want 2", mat.Data[float64](b.Grad()))
		}
	}
}

func TestBufferPool(t *testing.T) {
	for _, n := range []int{1, 3, 4, 5, 1000} {
		b := getBuffer[float32](n)
		if len(b) != n || cap(b) < n {
			t.Fatalf("getBuffer(%d): len %d cap %d", n, len(b), cap(b))
		}
		putBuffer(b)
		if !pooled(b) {
			t.Fatalf("putBuffer: a buffer of %d is not in the pool", n)
		}
		if c := getBuffer[float32](n); len(c) != n || cap(c) < n {
			t.Fatalf("getBuffer(%d) from the pool: len %d cap %d", n, len(c), cap(c))
		}
		if c := getBuffer[float64](n); len(c) != n {
			t.Fatalf("getBuffer[float64](%d): len %d", n, len(c))
		}
	}
	putBuffer(make([]float32, 3)) // a caller's slice: pooled like any other
	if b := getBuffer[float32](0); len(b) != 0 {
		t.Fatalf("getBuffer(0) has length %d", len(b))
	}
}

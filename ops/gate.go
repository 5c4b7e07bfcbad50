package ops

import (
	"fmt"

	"github.com/nlpodyssey/spago/ag"
	"github.com/nlpodyssey/spago/mat"
	"github.com/nlpodyssey/spago/mat/float"

	"github.com/dcdit/dcdit/kernels"
)

// GateGroups returns y[r, j] = g[s, j/w]·x[r, j] for x [N, D] packed by
// offsets and per-sample gates g [S, G], G dividing D and w = D/G: each
// sample's columns scaled in G contiguous groups. DyDiT's dynamic width
// multiplies the attention output, head by head, and the MLP's hidden
// units, group by group, by their gates.
func GateGroups(x, g mat.Tensor, offsets []int) mat.Tensor {
	return run(newGateGroups(x, g, offsets))
}

type gateGroupsSpec struct {
	perSampleSpec
	x, g   mat.Tensor
	groups int
}

type gateGroups[T float.DType] struct{ gateGroupsSpec }

func newGateGroups(x, g mat.Tensor, offsets []int) ag.AutoGradFunction {
	rows, cols := dims("GateGroups", "x", x)
	off := copyOffsets("GateGroups", offsets, rows)
	S, G := dims("GateGroups", "g", g)
	if S != len(off)-1 || G < 1 || cols%G != 0 {
		panic(fmt.Sprintf("ops: GateGroups: g has shape [%d %d], want [%d G] with G dividing the %d columns of x", S, G, len(off)-1, cols))
	}
	s := gateGroupsSpec{perSampleSpec{rows, cols, off}, x, g, G}
	return pick("GateGroups", &gateGroups[float32]{s}, &gateGroups[float64]{s}, named{"x", x}, named{"g", g})
}

func (f *gateGroups[T]) Operands() []mat.Tensor { return []mat.Tensor{f.x, f.g} }

func (f *gateGroups[T]) Forward() (mat.Tensor, error) {
	y := getBuffer[T](f.rows * f.cols)
	kernels.GateGroups(y, data[T](f.x), data[T](f.g), f.offsets, f.cols, f.groups)
	return output(f.rows, f.cols, y), nil
}

func (f *gateGroups[T]) Backward(gy mat.Tensor) error {
	dx, dg := gradBuffer[T](f.x), gradBuffer[T](f.g)
	kernels.GateGroupsBackward(dx, dg, data[T](gy), data[T](f.x), data[T](f.g), f.offsets, f.cols, f.groups)
	accGrad(f.x, dx)
	accGrad(f.g, dg)
	return nil
}

// HardGate returns DyDiT's straight-through hard gates of the logits z
// [S, G]: exactly 1 where σ(z) ≥ ½ and in the first on columns (always on),
// exactly 0 elsewhere, so that a model whose gates are all on computes
// what it computes without them, bit for bit; the backward pass hands dz
// the sigmoid's gradient σ(z)·(1 − σ(z))·dy, and nothing to the columns
// that are always on. (hard + σ − stopgrad(σ) would round the forward
// value.)
func HardGate(z mat.Tensor, on int) mat.Tensor { return run(newHardGate(z, on)) }

type hardGateSpec struct {
	z              mat.Tensor
	rows, cols, on int
}

type hardGate[T float.DType] struct{ hardGateSpec }

func newHardGate(z mat.Tensor, on int) ag.AutoGradFunction {
	rows, cols := dims("HardGate", "z", z)
	if on < 0 || on > cols {
		panic(fmt.Sprintf("ops: HardGate: %d columns always on, want 0 … %d (the columns of z)", on, cols))
	}
	s := hardGateSpec{z, rows, cols, on}
	return pick("HardGate", &hardGate[float32]{s}, &hardGate[float64]{s}, named{"z", z})
}

func (f *hardGate[T]) Operands() []mat.Tensor { return []mat.Tensor{f.z} }

func (f *hardGate[T]) Forward() (mat.Tensor, error) {
	y := getBuffer[T](f.rows * f.cols)
	kernels.HardGateForward(y, data[T](f.z), f.cols, f.on)
	return output(f.rows, f.cols, y), nil
}

func (f *hardGate[T]) Backward(gy mat.Tensor) error {
	if dz := gradBuffer[T](f.z); dz != nil {
		kernels.HardGateBackward(dz, data[T](gy), data[T](f.z), f.cols, f.on)
		accGrad(f.z, dz)
	}
	return nil
}

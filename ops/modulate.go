package ops

import (
	"github.com/nlpodyssey/spago/ag"
	"github.com/nlpodyssey/spago/mat"
	"github.com/nlpodyssey/spago/mat/float"

	"github.com/dcdit/dcdit/kernels"
)

// perSampleSpec is the shape shared by the per-sample broadcasts: x
// [N, D] packed by offsets (S+1 entries) and vectors [S, D].
type perSampleSpec struct {
	rows, cols int
	offsets    []int // private copy
}

func newPerSampleSpec(op string, x mat.Tensor, offsets []int, vectors ...named) perSampleSpec {
	rows, cols := dims(op, "x", x)
	off := copyOffsets(op, offsets, rows)
	for _, v := range vectors {
		needShape(op, v.name, v.t, len(off)-1, cols, " (samples × columns of x)")
	}
	return perSampleSpec{rows, cols, off}
}

// Modulate returns DiT's adaLN modulation y = x·(1 + scale_s) + shift_s for
// x [N, D] packed by offsets and per-sample shift and scale [S, D].
func Modulate(x, shift, scale mat.Tensor, offsets []int) mat.Tensor {
	return run(newModulate(x, shift, scale, offsets))
}

type modulateSpec struct {
	perSampleSpec
	x, shift, scale mat.Tensor
}

type modulate[T float.DType] struct{ modulateSpec }

func newModulate(x, shift, scale mat.Tensor, offsets []int) ag.AutoGradFunction {
	colocate("Modulate", &x, &shift, &scale)
	ops := []named{{"x", x}, {"shift", shift}, {"scale", scale}}
	s := modulateSpec{newPerSampleSpec("Modulate", x, offsets, ops[1:]...), x, shift, scale}
	return pickOn("Modulate", &modulate[float32]{s}, &modulate[float64]{s}, &modulateDevice{modulate[float32]{s}}, ops...)
}

func (f *modulate[T]) Operands() []mat.Tensor { return []mat.Tensor{f.x, f.shift, f.scale} }

func (f *modulate[T]) Forward() (mat.Tensor, error) {
	y := getBuffer[T](f.rows * f.cols)
	kernels.ModulateForward(y, data[T](f.x), data[T](f.shift), data[T](f.scale), f.offsets, f.cols)
	return output(f.rows, f.cols, y), nil
}

func (f *modulate[T]) Backward(gy mat.Tensor) error {
	dx, dshift, dscale := gradBuffer[T](f.x), gradBuffer[T](f.shift), gradBuffer[T](f.scale)
	kernels.ModulateBackward(dx, dshift, dscale, data[T](gy), data[T](f.x), data[T](f.scale), f.offsets, f.cols)
	accGrad(f.x, dx)
	accGrad(f.shift, dshift)
	accGrad(f.scale, dscale)
	return nil
}

// GatedResidual returns DiT's gated residual y = x + gate_s∘h for x, h
// [N, D] packed by offsets and a per-sample gate [S, D].
func GatedResidual(x, gate, h mat.Tensor, offsets []int) mat.Tensor {
	return run(newGatedResidual(x, gate, h, offsets))
}

type gatedResidualSpec struct {
	perSampleSpec
	x, gate, h mat.Tensor
}

type gatedResidual[T float.DType] struct{ gatedResidualSpec }

func newGatedResidual(x, gate, h mat.Tensor, offsets []int) ag.AutoGradFunction {
	colocate("GatedResidual", &x, &gate, &h)
	ps := newPerSampleSpec("GatedResidual", x, offsets, named{"gate", gate})
	needShape("GatedResidual", "h", h, ps.rows, ps.cols, " (the shape of x)")
	s := gatedResidualSpec{ps, x, gate, h}
	return pickOn("GatedResidual", &gatedResidual[float32]{s}, &gatedResidual[float64]{s}, &gatedResidualDevice{gatedResidual[float32]{s}},
		named{"x", x}, named{"gate", gate}, named{"h", h})
}

func (f *gatedResidual[T]) Operands() []mat.Tensor { return []mat.Tensor{f.x, f.gate, f.h} }

func (f *gatedResidual[T]) Forward() (mat.Tensor, error) {
	y := getBuffer[T](f.rows * f.cols)
	kernels.GatedResidualForward(y, data[T](f.x), data[T](f.gate), data[T](f.h), f.offsets, f.cols)
	return output(f.rows, f.cols, y), nil
}

func (f *gatedResidual[T]) Backward(gy mat.Tensor) error {
	dgate, dh := gradBuffer[T](f.gate), gradBuffer[T](f.h)
	if dgate != nil || dh != nil {
		kernels.GatedResidualBackward(nil, dgate, dh, data[T](gy), data[T](f.gate), data[T](f.h), f.offsets, f.cols)
	}
	if f.x.RequiresGrad() {
		f.x.AccGrad(gy) // dx = dy: the residual passes the gradient on as is
	}
	accGrad(f.gate, dgate)
	accGrad(f.h, dh)
	return nil
}

// AddPerSample returns y = x + v_s, broadcasting a per-sample vector v
// [S, D] over the rows of each sample of x [N, D] (packed by offsets): for
// example a conditioning projection added to every token of a conv block.
func AddPerSample(x, v mat.Tensor, offsets []int) mat.Tensor {
	colocate("AddPerSample", &x, &v)
	return run(newAddPerSample(x, v, offsets))
}

type addPerSampleSpec struct {
	perSampleSpec
	x, v mat.Tensor
}

type addPerSample[T float.DType] struct{ addPerSampleSpec }

func newAddPerSample(x, v mat.Tensor, offsets []int) ag.AutoGradFunction {
	s := addPerSampleSpec{newPerSampleSpec("AddPerSample", x, offsets, named{"v", v}), x, v}
	return pickOn("AddPerSample", &addPerSample[float32]{s}, &addPerSample[float64]{s}, &addPerSampleDevice{addPerSample[float32]{s}}, named{"x", x}, named{"v", v})
}

func (f *addPerSample[T]) Operands() []mat.Tensor { return []mat.Tensor{f.x, f.v} }

func (f *addPerSample[T]) Forward() (mat.Tensor, error) {
	y := getBuffer[T](f.rows * f.cols)
	kernels.AddPerSample(y, data[T](f.x), data[T](f.v), f.offsets, f.cols)
	return output(f.rows, f.cols, y), nil
}

func (f *addPerSample[T]) Backward(gy mat.Tensor) error {
	if f.x.RequiresGrad() {
		f.x.AccGrad(gy)
	}
	if dv := gradBuffer[T](f.v); dv != nil {
		kernels.SumRows(dv, data[T](gy), f.offsets, f.cols)
		accGrad(f.v, dv)
	}
	return nil
}

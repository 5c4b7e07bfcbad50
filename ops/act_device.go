package ops

import (
	"github.com/nlpodyssey/spago/mat"

	"github.com/dcdit/dcdit/gpu/device"
)

// activationDevice is GELU, SiLU and Sigmoid on the device (Tanh has no
// device kernel yet). As on the host, the backward pass reads the output y,
// which is the node's own value.
type activationDevice struct {
	activation[float32]
	y *device.Tensor
}

func (f *activationDevice) name() string {
	return [...]string{"GELU", "SiLU", "Sigmoid", "Tanh"}[f.kind]
}

func (f *activationDevice) Forward() (mat.Tensor, error) {
	d, y, err := newDeviceOutput(f.name(), f.x, f.rows, f.cols)
	if err != nil {
		return nil, err
	}
	x := dbuf(f.x)
	switch f.kind {
	case actGELU:
		err = d.Kernels().GELU(y.Buffer(), x)
	case actSiLU:
		err = d.Kernels().SiLU(y.Buffer(), x)
	case actSigmoid:
		err = d.Scaffold().Sigmoid(y.Buffer(), x)
	}
	f.y = y
	return finish(f.name(), y, err)
}

func (f *activationDevice) Backward(gy mat.Tensor) error {
	d := dt(f.x).Device()
	gs, err := devGrads(f.name(), d, f.x)
	if err != nil || gs[0] == nil {
		return err
	}
	dx, dy, x, y := gs[0].Buffer(), dbuf(gy), dbuf(f.x), f.y.Buffer()
	switch f.kind {
	case actGELU:
		err = d.Scaffold().GELUBackwardFromOutput(dx, dy, x, y)
	case actSiLU:
		err = d.Scaffold().SiLUBackwardFromOutput(dx, dy, x, y)
	case actSigmoid:
		err = d.Scaffold().SigmoidBackward(dx, dy, y)
	}
	if err != nil {
		gs[0].Release()
		return devErr(f.name(), err)
	}
	devAccGrad(f.x, gs[0])
	return nil
}

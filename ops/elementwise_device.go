package ops

import (
	"github.com/nlpodyssey/spago/mat"
)

// binaryDevice is Add, Sub and Mul on the device.
type binaryDevice struct{ binary[float32] }

func (f *binaryDevice) name() string { return [...]string{"Add", "Sub", "Mul"}[f.kind] }

func (f *binaryDevice) Forward() (mat.Tensor, error) {
	d, y, err := newDeviceOutput(f.name(), f.a, f.rows, f.cols)
	if err != nil {
		return nil, err
	}
	a, b := dbuf(f.a), dbuf(f.b)
	switch f.kind {
	case binAdd:
		err = d.Kernels().Add(y.Buffer(), a, b)
	case binSub:
		err = d.Scaffold().Sub(y.Buffer(), a, b)
	case binMul:
		err = d.Kernels().Mul(y.Buffer(), a, b)
	}
	return finish(f.name(), y, err)
}

func (f *binaryDevice) Backward(gy mat.Tensor) error {
	d := dt(f.a).Device()
	if f.kind == binAdd || f.kind == binSub {
		if f.a.RequiresGrad() {
			f.a.AccGrad(gy) // da = dy, passed on as is
		}
		if f.kind == binAdd {
			if f.b.RequiresGrad() {
				f.b.AccGrad(gy)
			}
			return nil
		}
	}
	// Sub's db = −dy; Mul's da = dy∘b and db = dy∘a.
	for _, o := range []struct{ t, other mat.Tensor }{{f.a, f.b}, {f.b, f.a}} {
		if f.kind == binSub && o.t == f.a {
			continue
		}
		gs, err := devGrads(f.name(), d, o.t)
		if err != nil {
			return err
		}
		if gs[0] == nil {
			continue
		}
		var kerr error
		if f.kind == binSub {
			kerr = d.Kernels().Scale(gs[0].Buffer(), dbuf(gy), -1)
		} else {
			kerr = d.Kernels().Mul(gs[0].Buffer(), dbuf(gy), dbuf(o.other))
		}
		if kerr != nil {
			gs[0].Release()
			return devErr(f.name(), kerr)
		}
		devAccGrad(o.t, gs[0])
	}
	return nil
}

// scaleDevice is Scale on the device.
type scaleDevice struct{ scale[float32] }

func (f *scaleDevice) Forward() (mat.Tensor, error) {
	d, y, err := newDeviceOutput("Scale", f.x, f.rows, f.cols)
	if err != nil {
		return nil, err
	}
	return finish("Scale", y, d.Kernels().Scale(y.Buffer(), dbuf(f.x), float32(f.alpha)))
}

func (f *scaleDevice) Backward(gy mat.Tensor) error {
	d := dt(f.x).Device()
	gs, err := devGrads("Scale", d, f.x)
	if err != nil || gs[0] == nil {
		return err
	}
	if err := d.Kernels().Scale(gs[0].Buffer(), dbuf(gy), float32(f.alpha)); err != nil {
		gs[0].Release()
		return devErr("Scale", err)
	}
	devAccGrad(f.x, gs[0])
	return nil
}

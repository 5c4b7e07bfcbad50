package ops

import "github.com/nlpodyssey/spago/mat"

// modulateDevice is Modulate on the device, over the device's packing of
// the offsets.
type modulateDevice struct{ modulate[float32] }

func (f *modulateDevice) Forward() (mat.Tensor, error) {
	d, y, err := newDeviceOutput("Modulate", f.x, f.rows, f.cols)
	if err != nil {
		return nil, err
	}
	p, err := d.Packing(f.offsets)
	if err != nil {
		return finish("Modulate", y, err)
	}
	return finish("Modulate", y, d.Kernels().Modulate(y.Buffer(), dbuf(f.x), dbuf(f.shift), dbuf(f.scale), p, f.cols))
}

func (f *modulateDevice) Backward(gy mat.Tensor) error {
	d := dt(f.x).Device()
	p, err := d.Packing(f.offsets)
	if err != nil {
		return devErr("Modulate", err)
	}
	gs, err := devGrads("Modulate", d, f.x, f.shift, f.scale)
	if err != nil {
		return err
	}
	dx, dshift, dscale := gs[0], gs[1], gs[2]
	if err := d.Kernels().ModulateBackward(gbuf(dx), gbuf(dshift), gbuf(dscale), dbuf(gy), dbuf(f.x), dbuf(f.scale), p, f.cols); err != nil {
		releaseAll(gs...)
		return devErr("Modulate", err)
	}
	devAccGrad(f.x, dx)
	devAccGrad(f.shift, dshift)
	devAccGrad(f.scale, dscale)
	return nil
}

// gatedResidualDevice is GatedResidual on the device.
type gatedResidualDevice struct{ gatedResidual[float32] }

func (f *gatedResidualDevice) Forward() (mat.Tensor, error) {
	d, y, err := newDeviceOutput("GatedResidual", f.x, f.rows, f.cols)
	if err != nil {
		return nil, err
	}
	p, err := d.Packing(f.offsets)
	if err != nil {
		return finish("GatedResidual", y, err)
	}
	return finish("GatedResidual", y, d.Kernels().GatedResidual(y.Buffer(), dbuf(f.x), dbuf(f.gate), dbuf(f.h), p, f.cols))
}

func (f *gatedResidualDevice) Backward(gy mat.Tensor) error {
	d := dt(f.x).Device()
	p, err := d.Packing(f.offsets)
	if err != nil {
		return devErr("GatedResidual", err)
	}
	gs, err := devGrads("GatedResidual", d, f.gate, f.h)
	if err != nil {
		return err
	}
	dgate, dh := gs[0], gs[1]
	if dgate != nil || dh != nil {
		if err := d.Kernels().GatedResidualBackward(gbuf(nil), gbuf(dgate), gbuf(dh), dbuf(gy), dbuf(f.gate), dbuf(f.h), p, f.cols); err != nil {
			releaseAll(gs...)
			return devErr("GatedResidual", err)
		}
	}
	if f.x.RequiresGrad() {
		f.x.AccGrad(gy) // dx = dy: the residual passes the gradient on as is
	}
	devAccGrad(f.gate, dgate)
	devAccGrad(f.h, dh)
	return nil
}

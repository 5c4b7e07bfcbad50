package ops

import "github.com/nlpodyssey/spago/mat"

// linearDevice is Linear on the device: the 1×1 convolution kernels are
// exactly y = x·Wᵀ + b over token rows (a cuBLAS GEMM after the bias is
// broadcast), and their backward pass gives dx = dy·W, dW = dyᵀ·x and
// db = Σ dy.
type linearDevice struct{ linear[float32] }

func (f *linearDevice) Forward() (mat.Tensor, error) {
	d, y, err := newDeviceOutput("Linear", f.x, f.rows, f.out)
	if err != nil {
		return nil, err
	}
	err = d.Scaffold().Conv1x1Forward(y.Buffer(), dbuf(f.x), dbuf(f.w), dbuf(f.b), f.rows, f.in, f.out, d.Precision())
	return finish("Linear", y, err)
}

func (f *linearDevice) Backward(gy mat.Tensor) error {
	d := dt(f.x).Device()
	gs, err := devGrads("Linear", d, f.x, f.w, f.b)
	if err != nil {
		return err
	}
	dx, dw, db := gs[0], gs[1], gs[2]
	if err := d.Scaffold().Conv1x1Backward(gbuf(dx), gbuf(dw), gbuf(db), dbuf(gy), dbuf(f.x), dbuf(f.w), f.rows, f.in, f.out, d.Precision()); err != nil {
		releaseAll(gs...)
		return devErr("Linear", err)
	}
	devAccGrad(f.x, dx)
	devAccGrad(f.w, dw)
	devAccGrad(f.b, db)
	return nil
}

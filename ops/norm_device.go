package ops

import (
	"github.com/nlpodyssey/spago/mat"

	"github.com/dcdit/dcdit/gpu/cuda"
)

// layerNormDevice is the affine-free LayerNorm on the device. The per-row
// mean and rstd are kept with the output (Tensor.Keep), so they return to
// the pool with it.
type layerNormDevice struct {
	layerNorm[float32]
	mean, rstd cuda.Buffer
}

func (f *layerNormDevice) Forward() (mat.Tensor, error) {
	d, y, err := newDeviceOutput("LayerNorm", f.x, f.rows, f.cols)
	if err != nil {
		return nil, err
	}
	if f.mean, err = d.Alloc(f.rows); err != nil {
		return finish("LayerNorm", y, err)
	}
	y.Keep(f.mean)
	if f.rstd, err = d.Alloc(f.rows); err != nil {
		return finish("LayerNorm", y, err)
	}
	y.Keep(f.rstd)
	return finish("LayerNorm", y, d.Kernels().LayerNorm(y.Buffer(), f.mean, f.rstd, dbuf(f.x), f.rows, f.cols, float32(f.eps)))
}

func (f *layerNormDevice) Backward(gy mat.Tensor) error {
	d := dt(f.x).Device()
	gs, err := devGrads("LayerNorm", d, f.x)
	if err != nil || gs[0] == nil {
		return err
	}
	if err := d.Kernels().LayerNormBackward(gs[0].Buffer(), dbuf(gy), dbuf(f.x), f.mean, f.rstd, f.rows, f.cols); err != nil {
		gs[0].Release()
		return devErr("LayerNorm", err)
	}
	devAccGrad(f.x, gs[0])
	return nil
}

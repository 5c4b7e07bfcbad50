package ops

import (
	"fmt"

	"github.com/nlpodyssey/spago/mat"

	"github.com/dcdit/dcdit/gpu/cuda"
	"github.com/dcdit/dcdit/gpu/cudakernels"
	"github.com/dcdit/dcdit/gpu/device"
)

// attentionDevice is Attention on the device: the packed flash-style
// kernels, which keep only the log-sum-exp per (row, head) and recompute
// the probabilities in the backward pass (no L×L matrix at any length).
type attentionDevice struct {
	attention[float32]
	out *device.Tensor // the output, read by the backward pass
	lse cuda.Buffer    // kept with out
}

func (f *attentionDevice) Forward() (mat.Tensor, error) {
	if f.dim > cudakernels.MaxHeadDim {
		return nil, fmt.Errorf("ops: Attention (device): head dimension %d, the kernels take up to %d", f.dim, cudakernels.MaxHeadDim)
	}
	d, y, err := newDeviceOutput("Attention", f.qkv, f.rows, f.heads*f.dim)
	if err != nil {
		return nil, err
	}
	p, err := d.Packing(f.offsets)
	if err != nil {
		return finish("Attention", y, err)
	}
	if f.lse, err = d.Alloc(f.rows * f.heads); err != nil {
		return finish("Attention", y, err)
	}
	y.Keep(f.lse)
	f.out = y
	return finish("Attention", y, d.Kernels().AttentionForward(y.Buffer(), f.lse, dbuf(f.qkv), p, f.heads, f.dim, f.scale()))
}

func (f *attentionDevice) Backward(gy mat.Tensor) error {
	d := dt(f.qkv).Device()
	p, err := d.Packing(f.offsets)
	if err != nil {
		return devErr("Attention", err)
	}
	gs, err := devGrads("Attention", d, f.qkv)
	if err != nil || gs[0] == nil {
		return err
	}
	delta, err := d.Alloc(f.rows * f.heads)
	if err != nil {
		gs[0].Release()
		return devErr("Attention", err)
	}
	defer d.Recycle(delta) // later users run after the kernel on the same stream
	if err := d.Kernels().AttentionBackward(gs[0].Buffer(), delta, dbuf(gy), f.out.Buffer(), f.lse, dbuf(f.qkv), p, f.heads, f.dim, f.scale()); err != nil {
		gs[0].Release()
		return devErr("Attention", err)
	}
	devAccGrad(f.qkv, gs[0])
	return nil
}

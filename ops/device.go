package ops

import (
	"fmt"

	"github.com/nlpodyssey/spago/ag"
	"github.com/nlpodyssey/spago/mat"
	"github.com/nlpodyssey/spago/mat/float"

	"github.com/dcdit/dcdit/gpu/cuda"
	"github.com/dcdit/dcdit/gpu/device"
)

// Dispatch on where the operands live. An op whose operands are all device
// tensors (device.Resident) runs its device implementation, a type of its
// own in a *_device.go file beside the host one; host operands run the host
// op exactly as before. The device implementations are float32 and embed
// the host op's float32 struct for its operands and dimensions, so only
// Forward and Backward differ. Mixing host and device operands in one op is
// a caller bug: nothing copies behind the caller's back.

// placement returns whether the operands live on a device, panicking when
// some do and some do not.
func placement(op string, operands ...named) bool {
	var onDevice, onHost *named
	for i := range operands {
		o := &operands[i]
		if o.t == nil {
			panic(fmt.Sprintf("ops: %s: %s is nil", op, o.name))
		}
		if _, ok := o.t.Value().(device.Resident); ok {
			if onDevice == nil {
				onDevice = o
			}
		} else if onHost == nil {
			onHost = o
		}
	}
	if onDevice != nil && onHost != nil {
		panic(fmt.Sprintf("ops: %s: %s is on the device but %s is a %T on the host: move it with device.ToDevice first",
			op, onDevice.name, onHost.name, onHost.t.Value()))
	}
	return onDevice != nil
}

// pickOn is pick with a device implementation: dev when the operands are
// device tensors, otherwise f32 or f64 as pick chooses. dev == nil means
// the op has no device implementation yet, which a device operand turns
// into a panic naming the op.
func pickOn(op string, f32, f64, dev ag.AutoGradFunction, operands ...named) ag.AutoGradFunction {
	if !placement(op, operands...) {
		return pick(op, f32, f64, operands...)
	}
	if dev == nil {
		panic(fmt.Sprintf("ops: %s: no device implementation yet, and %s is on the device", op, operands[0].name))
	}
	return dev
}

// deviceValue is the result of a device op: the device tensor plus the
// function that computed it, for Backward (the host ops' value does the
// same). Its buffers, and those the op kept with it (Tensor.Keep), return
// to the device's pool on Release.
type deviceValue struct {
	*device.Tensor
	fn       ag.AutoGradFunction
	released bool // Release runs on one goroutine
}

// Data waits for the device and returns a host copy of the result's
// values. It is the one host read an op's device result allows (a bare
// device.Tensor refuses it): code above ops reads results at the edge with
// mat.Data (DC-DiT's router thresholds its probabilities on the host, a
// caller reads the output). Ops themselves never reach it: they dispatch
// on placement before touching data, and an op without a device
// implementation panics first. Writes to the copy do not reach the device.
// A CUDA error panics, since mat.Matrix's Data returns none.
func (v *deviceValue) Data() float.Slice {
	h, err := device.ToHost(v.Tensor)
	if err != nil {
		panic(fmt.Sprintf("ops: reading a device result: %v", err))
	}
	return float.Make(mat.Data[float32](h)...)
}

// Value is the result itself, not the bare tensor it embeds, so that a
// result used without a graph (inference, where no operand takes a
// gradient) still answers mat.Data through Data, as a graph node's value
// does.
func (v *deviceValue) Value() mat.Tensor { return v }

// dt returns the device tensor of an operand (placement checked it).
func dt(t mat.Tensor) *device.Tensor { return t.Value().(device.Resident).DeviceTensor() }

// dbuf returns an operand's device memory; nil (an absent optional
// operand) gives the empty buffer the kernels take for "none".
func dbuf(t mat.Tensor) cuda.Buffer {
	if t == nil {
		return cuda.Buffer{}
	}
	return dt(t).Buffer()
}

// devGrad returns a new device tensor for t's gradient, or nil when t takes
// none (the kernels then skip that gradient).
func devGrad(d *device.Device, t mat.Tensor) (*device.Tensor, error) {
	if t == nil || !t.RequiresGrad() {
		return nil, nil
	}
	s := t.Shape()
	return d.NewTensor(s[0], s[1])
}

// gbuf is a gradient's buffer for the kernels: empty for nil, which they
// take as "not wanted".
func gbuf(g *device.Tensor) cuda.Buffer {
	if g == nil {
		return cuda.Buffer{}
	}
	return g.Buffer()
}

// devGrads makes the gradients of several operands, releasing those made
// already when one fails.
func devGrads(op string, d *device.Device, ts ...mat.Tensor) ([]*device.Tensor, error) {
	gs := make([]*device.Tensor, len(ts))
	for i, t := range ts {
		g, err := devGrad(d, t)
		if err != nil {
			releaseAll(gs...)
			return nil, fmt.Errorf("ops: %s (device): %w", op, err)
		}
		gs[i] = g
	}
	return gs, nil
}

// devAccGrad hands a gradient from devGrad to t and releases it (t copies
// or adds it); nil does nothing.
func devAccGrad(t mat.Tensor, g *device.Tensor) {
	if g == nil {
		return
	}
	t.AccGrad(g)
	g.Release()
}

// releaseAll releases the tensors that are not nil (gradients made before
// a failure).
func releaseAll(ts ...*device.Tensor) {
	for _, t := range ts {
		if t != nil {
			t.Release()
		}
	}
}

// devErr wraps a device error with the op's name.
func devErr(op string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("ops: %s (device): %w", op, err)
}

// newDeviceOutput allocates an op's [rows, cols] result on x's device.
func newDeviceOutput(op string, x mat.Tensor, rows, cols int) (*device.Device, *device.Tensor, error) {
	d := dt(x).Device()
	y, err := d.NewTensor(rows, cols)
	if err != nil {
		return nil, nil, devErr(op, err)
	}
	return d, y, nil
}

// finish returns y as an op's result, or releases it and returns err.
func finish(op string, y *device.Tensor, err error) (mat.Tensor, error) {
	if err != nil {
		y.Release()
		return nil, devErr(op, err)
	}
	return &deviceValue{Tensor: y}, nil
}

// release hands the value's buffers back to the device's pool, once; it
// reports whether this call did (Release walks on only then).
func (v *deviceValue) release() bool {
	if v.released {
		return false
	}
	v.released = true
	v.Tensor.Release()
	return true
}

package device

import (
	"fmt"
	"runtime"
	"sync"

	"github.com/nlpodyssey/spago/mat"

	"github.com/dcdit/dcdit/gpu/cuda"
)

// Resident is a value that lives on a device: a *Tensor, or a type that
// embeds one (the ops layer's results). ops dispatches on it.
type Resident interface {
	DeviceTensor() *Tensor
}

// Tensor is a [rows, cols] float32 matrix in device memory with spago's
// graph methods (see the package comment for what it does not offer).
type Tensor struct {
	dev        *Device
	rows, cols int
	buf        cuda.Buffer
	mem        *memory // nil for a view

	mu           sync.Mutex
	requiresGrad bool
	grad         *Tensor
}

// memory is what a tensor owns: its buffer and the buffers kept with it.
// It is apart from the Tensor so that the garbage collector's cleanup can
// recycle it without keeping the tensor alive.
type memory struct {
	dev   *Device
	mu    sync.Mutex
	bufs  []cuda.Buffer
	funcs []func() // OnRelease
	done  bool
}

func (m *memory) recycle() {
	m.mu.Lock()
	bufs, funcs, done := m.bufs, m.funcs, m.done
	m.bufs, m.funcs, m.done = nil, nil, true
	m.mu.Unlock()
	if done {
		return
	}
	for _, b := range bufs {
		m.dev.Recycle(b)
	}
	for _, f := range funcs {
		f()
	}
}

// NewTensor returns a [rows, cols] tensor with unspecified contents from
// the device's pool; it returns to the pool on Release or when unreachable.
func (d *Device) NewTensor(rows, cols int) (*Tensor, error) {
	if rows < 0 || cols < 0 {
		return nil, fmt.Errorf("device: NewTensor: shape [%d %d]", rows, cols)
	}
	b, err := d.Alloc(rows * cols)
	if err != nil {
		return nil, err
	}
	t := &Tensor{dev: d, rows: rows, cols: cols, buf: b, mem: &memory{dev: d, bufs: []cuda.Buffer{b}}}
	runtime.AddCleanup(t, (*memory).recycle, t.mem)
	return t, nil
}

// View returns a [rows, cols] tensor over b, which the caller owns and
// keeps alive (a slice of a parameter arena): it is never recycled.
func (d *Device) View(b cuda.Buffer, rows, cols int) (*Tensor, error) {
	if rows < 0 || cols < 0 || b.Len() != 4*rows*cols {
		return nil, fmt.Errorf("device: View: %d bytes for a [%d %d] float32 matrix", b.Len(), rows, cols)
	}
	return &Tensor{dev: d, rows: rows, cols: cols, buf: b}, nil
}

// Upload copies data, row-major [rows, cols], into a new tensor.
func (d *Device) Upload(rows, cols int, data []float32) (*Tensor, error) {
	if len(data) != rows*cols {
		return nil, fmt.Errorf("device: Upload: %d values for a [%d %d] matrix", len(data), rows, cols)
	}
	t, err := d.NewTensor(rows, cols)
	if err != nil {
		return nil, err
	}
	if err := cuda.CopyFromHost(t.buf, data); err != nil {
		t.Release()
		return nil, fmt.Errorf("device: Upload: %w", err)
	}
	return t, nil
}

// ToDevice copies a host float32 matrix (a *mat.Dense[float32], or a
// parameter or graph node whose value is one) into a new device tensor
// that requires a gradient when m does. The gradient is not copied.
func ToDevice(d *Device, m mat.Tensor) (*Tensor, error) {
	if m == nil {
		return nil, fmt.Errorf("device: ToDevice: nil tensor")
	}
	dense, ok := m.Value().(*mat.Dense[float32])
	if !ok {
		return nil, fmt.Errorf("device: ToDevice: a %T, want a float32 matrix (*mat.Dense[float32])", m.Value())
	}
	shape := dense.Shape()
	t, err := d.Upload(shape[0], shape[1], mat.Data[float32](dense))
	if err != nil {
		return nil, err
	}
	t.requiresGrad = m.RequiresGrad()
	return t, nil
}

// ToHost waits for the work queued on the device and copies a device
// tensor (or a node whose value is one) into a new host matrix.
func ToHost(t mat.Tensor) (*mat.Dense[float32], error) {
	r, ok := residentOf(t)
	if !ok {
		return nil, fmt.Errorf("device: ToHost: a %T, not a device tensor", t)
	}
	dt := r.DeviceTensor()
	data := make([]float32, dt.rows*dt.cols)
	if err := cuda.CopyToHost(data, dt.Buffer()); err != nil {
		return nil, fmt.Errorf("device: ToHost: %w", err)
	}
	return mat.NewDense[float32](mat.WithShape(dt.rows, dt.cols), mat.WithBacking(data)), nil
}

// residentOf finds the device tensor behind t: t itself or its value (a
// graph node's).
func residentOf(t mat.Tensor) (Resident, bool) {
	if t == nil {
		return nil, false
	}
	if r, ok := t.(Resident); ok {
		return r, true
	}
	r, ok := t.Value().(Resident)
	return r, ok
}

// DeviceTensor returns t (it makes *Tensor a Resident).
func (t *Tensor) DeviceTensor() *Tensor { return t }

// Device is the device t lives on.
func (t *Tensor) Device() *Device { return t.dev }

// Buffer is t's memory, rows·cols float32. It panics once t is released:
// a released tensor's memory belongs to the next op.
func (t *Tensor) Buffer() cuda.Buffer {
	if t.mem != nil {
		t.mem.mu.Lock()
		done := t.mem.done
		t.mem.mu.Unlock()
		if done {
			panic(fmt.Sprintf("device: use of a released [%d %d] tensor", t.rows, t.cols))
		}
	}
	return t.buf
}

// Keep ties buffers from t's Device.Alloc to t's lifetime: they return to
// the pool with t (an op's saved state, such as LayerNorm's statistics).
// It panics on a view, which owns nothing.
func (t *Tensor) Keep(bufs ...cuda.Buffer) {
	if t.mem == nil {
		panic("device: Keep on a view")
	}
	t.mem.mu.Lock()
	t.mem.bufs = append(t.mem.bufs, bufs...)
	t.mem.mu.Unlock()
}

// OnRelease runs f when t's memory goes back to the pool (Release, or the
// cleanup of an unreachable tensor): for device state an op keeps that is
// not a pool buffer, such as a gather's row index. f may run on another
// goroutine. It panics on a view, which owns nothing.
func (t *Tensor) OnRelease(f func()) {
	if t.mem == nil {
		panic("device: OnRelease on a view")
	}
	t.mem.mu.Lock()
	t.mem.funcs = append(t.mem.funcs, f)
	t.mem.mu.Unlock()
}

// Release hands t's buffers and its gradient's back to the pool. Nothing
// may use t afterwards. A view releases only its gradient.
func (t *Tensor) Release() {
	t.ZeroGrad()
	if t.mem != nil {
		t.mem.recycle()
	}
}

// Shape returns [rows, cols].
func (t *Tensor) Shape() []int { return []int{t.rows, t.cols} }

// Dims returns 2: device tensors are matrices, as spago's are.
func (t *Tensor) Dims() int { return 2 }

// Size returns rows·cols.
func (t *Tensor) Size() int { return t.rows * t.cols }

// Value returns t: a device tensor is its own value, as a mat.Dense is.
func (t *Tensor) Value() mat.Tensor { return t }

// Grad returns the accumulated gradient (a device tensor of t's shape),
// nil before the first.
func (t *Tensor) Grad() mat.Tensor {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.grad == nil {
		return nil // an untyped nil: a nil *Tensor would not compare equal to nil
	}
	return t.grad
}

// HasGrad reports whether a gradient has been accumulated.
func (t *Tensor) HasGrad() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.grad != nil
}

// RequiresGrad reports whether t takes a gradient.
func (t *Tensor) RequiresGrad() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.requiresGrad
}

// SetRequiresGrad sets whether t takes a gradient (spago's ag.Operator
// calls it on the values of nodes that do).
func (t *Tensor) SetRequiresGrad(v bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.requiresGrad = v
}

// AccGrad adds g, a device tensor of t's size, into t's gradient (a copy
// the first time). A host gradient panics: it means an op mixed host and
// device operands. A CUDA error panics too, since spago's interface
// returns none; it is sticky, so the next synchronising call reports it
// as well.
func (t *Tensor) AccGrad(g mat.Tensor) {
	r, ok := residentOf(g)
	if !ok {
		panic(fmt.Sprintf("device: AccGrad: the gradient of a device tensor [%d %d] is a %T on the host", t.rows, t.cols, g))
	}
	src := r.DeviceTensor()
	if src.Size() != t.Size() {
		panic(fmt.Sprintf("device: AccGrad: gradient of %d values for a [%d %d] tensor", src.Size(), t.rows, t.cols))
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.grad == nil {
		grad, err := t.dev.NewTensor(t.rows, t.cols)
		if err != nil {
			panic(fmt.Sprintf("device: AccGrad: %v", err))
		}
		if err := grad.buf.CopyFrom(src.Buffer()); err != nil {
			panic(fmt.Sprintf("device: AccGrad: %v", err))
		}
		t.grad = grad
		return
	}
	if err := t.dev.set.Add(t.grad.buf, t.grad.buf, src.Buffer()); err != nil {
		panic(fmt.Sprintf("device: AccGrad: %v", err))
	}
}

// ZeroGrad drops the gradient, returning its memory to the pool.
func (t *Tensor) ZeroGrad() {
	t.mu.Lock()
	g := t.grad
	t.grad = nil
	t.mu.Unlock()
	if g != nil {
		g.Release()
	}
}

// NewScalar returns a 1×1 device tensor holding v (ops.Backward seeds a
// scalar root's gradient with it). A CUDA error panics, as in AccGrad.
func (t *Tensor) NewScalar(v float64, _ ...mat.OptionsFunc) mat.Matrix {
	s, err := t.dev.Upload(1, 1, []float32{float32(v)})
	if err != nil {
		panic(fmt.Sprintf("device: NewScalar: %v", err))
	}
	return s
}

// String describes t without reading it (that would need a copy).
func (t *Tensor) String() string { return fmt.Sprintf("device.Tensor[%d %d]", t.rows, t.cols) }

// hostOnly is the panic message of a method that needs host data.
func hostOnly(method string) string {
	return fmt.Sprintf("device: %s needs host data, but the tensor lives on the device: "+
		"copy it with device.ToHost at the edge (inside ops, a device operand reached an op or a method without a device implementation)", method)
}

// Interface checks: a device tensor goes wherever spago's ag.Operator
// puts a value (it asserts mat.Matrix for SetRequiresGrad and NewScalar).
var (
	_ mat.Matrix = (*Tensor)(nil)
	_ Resident   = (*Tensor)(nil)
)

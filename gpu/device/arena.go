package device

import (
	"errors"
	"fmt"
	"sync"

	"github.com/nlpodyssey/spago/mat"

	"github.com/dcdit/dcdit/gpu/cuda"
	"github.com/dcdit/dcdit/params"
)

// Arena holds a params.Set on the device: the values in one flat buffer
// and the gradients in a second, both in the arena's layout, so that the
// optimiser, the clipper and the EMA run over whole buffers as they do on
// the host. Every Param of the set is bound to views of the two buffers
// (params.Param.Bind): model code keeps calling Set.Get, and the ops it
// runs see device tensors. The host arena is untouched in between; Upload
// and Download copy at the edges, and Close unbinds.
type Arena struct {
	dev        *Device
	set        *params.Set
	data, grad cuda.Buffer
	sides      []*paramSide
}

// paramSide is one parameter on the device: views of the arena's value
// and gradient buffers.
type paramSide struct {
	dev       *Device
	host      *params.Param
	val, grad *Tensor

	mu      sync.Mutex
	touched bool // a gradient was added since the last ZeroGrad
}

// NewArena allocates the device arena for set, uploads its values, zeroes
// the gradients and binds every parameter to it. The buffers are the
// arena's own (not the pool's), freed by Close.
func NewArena(d *Device, set *params.Set) (*Arena, error) {
	if d == nil || set == nil {
		return nil, errors.New("device: NewArena: nil device or set")
	}
	for _, p := range set.List() {
		if p.Bound() != nil {
			return nil, fmt.Errorf("device: NewArena: parameter %q is bound already", p.Name)
		}
	}
	n := set.Len()
	m := &Arena{dev: d, set: set}
	var err error
	if m.data, err = d.Runtime().Alloc(4 * n); err != nil {
		return nil, fmt.Errorf("device: NewArena: %d values: %w", n, err)
	}
	if m.grad, err = d.Runtime().Alloc(4 * n); err != nil {
		m.data.Free()
		return nil, fmt.Errorf("device: NewArena: %d gradients: %w", n, err)
	}
	if err := m.Upload(); err != nil {
		m.free()
		return nil, err
	}
	if err := m.grad.Zero(); err != nil {
		m.free()
		return nil, fmt.Errorf("device: NewArena: %w", err)
	}
	for _, p := range set.List() {
		lo, hi, _ := set.Range(p.Name)
		shape := p.Dense.Shape()
		s := &paramSide{dev: d, host: p}
		if s.val, err = m.view(m.data, lo, hi, shape); err == nil {
			s.grad, err = m.view(m.grad, lo, hi, shape)
		}
		if err != nil {
			m.free()
			return nil, fmt.Errorf("device: NewArena: %q: %w", p.Name, err)
		}
		m.sides = append(m.sides, s)
	}
	for i, p := range set.List() {
		p.Bind(m.sides[i])
	}
	return m, nil
}

// view is a [shape] tensor over elements [lo, hi) of b.
func (m *Arena) view(b cuda.Buffer, lo, hi int, shape []int) (*Tensor, error) {
	sl, err := b.Slice(4*lo, 4*(hi-lo))
	if err != nil {
		return nil, err
	}
	return m.dev.View(sl, shape[0], shape[1])
}

func (m *Arena) free() {
	m.data.Free()
	m.grad.Free()
}

// Device is the device the arena lives on.
func (m *Arena) Device() *Device { return m.dev }

// Set is the parameter set held on the device.
func (m *Arena) Set() *params.Set { return m.set }

// Data is the device arena of values (Set().Len() float32).
func (m *Arena) Data() cuda.Buffer { return m.data }

// Grad is the device arena of gradients, in the same layout.
func (m *Arena) Grad() cuda.Buffer { return m.grad }

// Upload copies the host arena's values (Set().Data) to the device.
func (m *Arena) Upload() error {
	if err := cuda.CopyFromHost(m.data, m.set.Data); err != nil {
		return fmt.Errorf("device: arena: Upload: %w", err)
	}
	return nil
}

// Download waits for the device and copies its values into the host arena
// (Set().Data), for a checkpoint or a host-side evaluation.
func (m *Arena) Download() error {
	if err := cuda.CopyToHost(m.set.Data, m.data); err != nil {
		return fmt.Errorf("device: arena: Download: %w", err)
	}
	return nil
}

// DownloadGrad waits for the device and copies its gradients into the host
// gradient arena (Set().Grad).
func (m *Arena) DownloadGrad() error {
	if err := cuda.CopyToHost(m.set.Grad, m.grad); err != nil {
		return fmt.Errorf("device: arena: DownloadGrad: %w", err)
	}
	return nil
}

// ZeroGrad clears every device gradient with one memset (Set.ZeroGrad
// would clear them one parameter at a time).
func (m *Arena) ZeroGrad() error {
	for _, s := range m.sides {
		s.mu.Lock()
		s.touched = false
		s.mu.Unlock()
	}
	if err := m.grad.Zero(); err != nil {
		return fmt.Errorf("device: arena: ZeroGrad: %w", err)
	}
	return nil
}

// Close unbinds every parameter (they read the host arena again, as it was
// at the last Download) and frees the device arena.
func (m *Arena) Close() error {
	for _, p := range m.set.List() {
		p.Unbind()
	}
	return errors.Join(m.data.Free(), m.grad.Free())
}

// Value is the parameter's device tensor. It tracks gradients exactly when
// the host parameter does, so that Set.SetRequiresGrad (a sampler's
// no-graph forward) and a trainer's frozen parameters reach the device.
func (s *paramSide) Value() mat.Tensor {
	s.val.SetRequiresGrad(s.host.Dense.RequiresGrad())
	return s.val
}

// AccGrad adds a device gradient into the parameter's view of the gradient
// arena. A host gradient panics (an op mixed host and device operands), as
// does a CUDA error: spago's interface returns none, and the error is
// sticky, so the next synchronising call reports it too.
func (s *paramSide) AccGrad(g mat.Tensor) {
	r, ok := g.(Resident)
	if !ok && g != nil {
		r, ok = g.Value().(Resident)
	}
	if !ok {
		panic(fmt.Sprintf("device: arena: AccGrad: the gradient of a device parameter %v is a %T on the host", s.val.Shape(), g))
	}
	src := r.DeviceTensor()
	if src.Size() != s.grad.Size() {
		panic(fmt.Sprintf("device: arena: AccGrad: gradient of %d values for a parameter of %d", src.Size(), s.grad.Size()))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	// The arena is zero after ZeroGrad, so the first gradient adds to 0.
	if err := s.dev.Kernels().Add(s.grad.Buffer(), s.grad.Buffer(), src.Buffer()); err != nil {
		panic(fmt.Sprintf("device: arena: AccGrad: %v", err))
	}
	s.touched = true
}

// Grad is the parameter's gradient view, nil before any.
func (s *paramSide) Grad() mat.Tensor {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.touched {
		return nil
	}
	return s.grad
}

// HasGrad reports whether a gradient was added since the last ZeroGrad.
func (s *paramSide) HasGrad() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.touched
}

// ZeroGrad clears the parameter's gradient view (only when something was
// added: an untouched view is zero already).
func (s *paramSide) ZeroGrad() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.touched {
		if err := s.grad.Buffer().Zero(); err != nil {
			panic(fmt.Sprintf("device: arena: ZeroGrad: %v", err))
		}
	}
	s.touched = false
}

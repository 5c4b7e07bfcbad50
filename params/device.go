package params

import "github.com/nlpodyssey/spago/mat"

// DeviceSide is where a parameter lives while it is on a device: its value
// there and its gradient there. Package gpu/device implements it (its
// Arena binds every parameter of a Set to views of two flat device
// buffers); this package only routes to it, so that it needs no device
// code and model code keeps calling Set.Get unchanged.
//
// While a parameter is bound, its Value is the device value, so the ops
// dispatch to their device implementations, and AccGrad, Grad, HasGrad and
// ZeroGrad act on the device gradient. The host arena (Values, Gradient,
// Set.Data, Set.Grad) is left as it was at binding: copying between the
// two is the binder's explicit job at the edges (upload, download).
type DeviceSide interface {
	// Value is the parameter's device tensor (a device.Resident).
	Value() mat.Tensor
	// AccGrad adds a device gradient into the device gradient.
	AccGrad(g mat.Tensor)
	// Grad is the device gradient, nil before any since the last ZeroGrad.
	Grad() mat.Tensor
	// HasGrad reports whether a gradient was accumulated since ZeroGrad.
	HasGrad() bool
	// ZeroGrad forgets the accumulated gradient.
	ZeroGrad()
}

// Bind makes d the parameter's storage until Unbind (see DeviceSide).
func (p *Param) Bind(d DeviceSide) { p.dev = d }

// Unbind returns the parameter to its host storage.
func (p *Param) Unbind() { p.dev = nil }

// Bound returns the device side the parameter is bound to, or nil.
func (p *Param) Bound() DeviceSide { return p.dev }

// Value returns the parameter's value: the host matrix (a view of the
// arena), or its device tensor while bound. spago's Dense returns itself;
// the host case returns that same matrix.
func (p *Param) Value() mat.Tensor {
	if p.dev != nil {
		return p.dev.Value()
	}
	return p.Dense
}

package family

import (
	"github.com/nlpodyssey/spago/mat"

	"github.com/dcdit/dcdit/cond"
)

// WidthGated is implemented by a Backbone that can run its blocks at a
// width its conditioning chooses: DyDiT's timestep-wise dynamic width
// (Zhao et al. 2024), a router per block that turns attention heads and
// MLP channel groups on or off from the timestep. A forward's cost then
// depends on the batch's conditioning, and its training adds a penalty on
// the FLOPs ratio the gates run at.
type WidthGated interface {
	// WidthGates reports whether the backbone has its width routers.
	WidthGates() bool
	// WithWidthGates returns the backbone with a width router per block,
	// started so that every gate is on: it computes what the receiver
	// computes, bit for bit, over the receiver's parameters (the same
	// *params.Param values, now in a new arena) and the routers'. A
	// backbone that has them returns itself.
	WithWidthGates() (Backbone, error)
	// GatedFLOPs is FLOPs(lengths) as a forward under cv (a Value of its
	// own Condition) runs: each block at the width its gates chose for
	// each sample.
	GatedFLOPs(cv cond.Value, lengths []int) (float64, error)
	// TimedFLOPs is FLOPs(lengths) as a forward of samples all at model
	// time t runs (the gates read the time alone): what one sampling
	// step costs. The parameters should track no gradients.
	TimedFLOPs(t float32, lengths []int) float64
	// WidthRatio is the batch's FLOPs of the gated blocks' attention and
	// MLP under cv over the same with every gate on, [1, 1], with the
	// gates' gradient: what the width penalty of training reads.
	WidthRatio(cv cond.Value, lengths []int) (mat.Tensor, error)
}

// HostOnly is implemented by a Backbone that may not run on a GPU yet.
type HostOnly interface {
	// HostOnly says why the backbone runs on the CPU only (naming the
	// tensor that keeps it there), or returns nil when it can run on a
	// device.
	HostOnly() error
}

// DeviceCheck returns why b cannot run on a device (HostOnly), or nil.
func DeviceCheck(b Backbone) error {
	if h, ok := b.(HostOnly); ok {
		return h.HostOnly()
	}
	return nil
}

// GatedWidth returns b as a WidthGated backbone that has its width
// routers, or false.
func GatedWidth(b Backbone) (WidthGated, bool) {
	g, ok := b.(WidthGated)
	return g, ok && g.WidthGates()
}

// WidthGatedSpec is implemented by a Spec that can describe a backbone
// with width gates.
type WidthGatedSpec interface {
	// WidthGates reports whether the described backbone has its width
	// routers, whose choices only its tensors know: a count from the
	// Spec alone has every gate on.
	WidthGates() bool
	// WithWidthGates describes the backbone with its width routers, as
	// WidthGated.WithWidthGates makes it.
	WithWidthGates() Spec
}

// SpecGated reports whether s describes a backbone with width gates.
func SpecGated(s Spec) bool {
	g, ok := s.(WidthGatedSpec)
	return ok && g.WidthGates()
}

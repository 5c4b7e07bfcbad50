package optim

import (
	"errors"
	"fmt"
	"math"
	"slices"
)

// Hyper are AdamW's hyperparameters, named and defaulted as in
// torch.optim.AdamW.
type Hyper struct {
	LR          float64
	Beta1       float64
	Beta2       float64
	Eps         float64
	WeightDecay float64
}

// DefaultHyper returns torch.optim.AdamW's defaults: lr 1e-3, betas
// (0.9, 0.999), eps 1e-8, weight_decay 1e-2.
func DefaultHyper() Hyper {
	return Hyper{LR: 1e-3, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 1e-2}
}

// validate applies PyTorch's argument checks.
func (h Hyper) validate() error {
	switch {
	case !(h.LR >= 0) || math.IsInf(h.LR, 0):
		return fmt.Errorf("learning rate %v, want ≥ 0", h.LR)
	case !(h.Beta1 >= 0 && h.Beta1 < 1):
		return fmt.Errorf("beta1 %v, want 0 ≤ beta1 < 1", h.Beta1)
	case !(h.Beta2 >= 0 && h.Beta2 < 1):
		return fmt.Errorf("beta2 %v, want 0 ≤ beta2 < 1", h.Beta2)
	case !(h.Eps >= 0) || math.IsInf(h.Eps, 0):
		return fmt.Errorf("eps %v, want ≥ 0", h.Eps)
	case !(h.WeightDecay >= 0) || math.IsInf(h.WeightDecay, 0):
		return fmt.Errorf("weight decay %v, want ≥ 0", h.WeightDecay)
	}
	return nil
}

// Group gives some ranges of the flat buffer their own hyperparameters, as
// a PyTorch param group does (typically: no weight decay for biases, norms
// and embeddings). Frozen elements inside a group stay frozen.
type Group struct {
	Name   string // used in error messages
	Ranges []Range
	Hyper  Hyper
}

// State is what AdamW must carry across a checkpoint to resume exactly.
// M and V hold PyTorch's exp_avg and exp_avg_sq for the trainable elements
// only, in index order (the layout of Mask.Gather), so a mostly frozen model
// costs state only for what trains.
type State struct {
	Step int64 // steps taken so far: PyTorch's state["step"]
	M, V []float32
}

// AdamW is torch.optim.AdamW (amsgrad and maximize off) over a flat float32
// buffer. Group 0 holds the base hyperparameters, which apply to every
// trainable element outside the other groups; group i ≥ 1 is the i-th Group
// given to NewAdamW. All trainable elements step together, so one step
// count serves them all, as in PyTorch when every parameter has a gradient.
//
// An AdamW is not safe for concurrent use; Step itself runs on all cores.
type AdamW struct {
	mask  *Mask
	hyper []Hyper
	plan  plan
	state State

	// Per-step inputs of stepBlocks, set by Step before the workers start.
	scalars []AdamWScalars
	params  []float32
	grads   []float32
	kern    *kernelSet
	body    func(lo, hi int)
}

// NewAdamW returns an optimiser for the buffers described by mask, with
// base hyperparameters for every trainable element outside groups. Groups
// must not overlap one another.
func NewAdamW(mask *Mask, base Hyper, groups ...Group) (*AdamW, error) {
	hyper, segs, err := cutSegments(mask, base, groups)
	if err != nil {
		return nil, err
	}
	return newAdamW(mask, hyper, segs), nil
}

// cutSegments validates NewAdamW's arguments and cuts the trainable
// elements into single-group segments, in buffer order.
func cutSegments(mask *Mask, base Hyper, groups []Group) ([]Hyper, []segment, error) {
	if mask == nil {
		return nil, nil, errors.New("optim: NewAdamW: nil mask (use AllTrainable(n) to train everything)")
	}
	if err := base.validate(); err != nil {
		return nil, nil, fmt.Errorf("optim: AdamW: %w", err)
	}
	hyper := []Hyper{base}
	// painted lists every group's ranges, sorted, to find overlaps and
	// then to cut the trainable ranges into single-group segments.
	type owned struct {
		r     Range
		group int
	}
	var painted []owned
	for i, g := range groups {
		if err := g.Hyper.validate(); err != nil {
			return nil, nil, fmt.Errorf("optim: AdamW: group %d %q: %w", i+1, g.Name, err)
		}
		rs, err := normalise(mask.n, g.Ranges)
		if err != nil {
			return nil, nil, fmt.Errorf("optim: AdamW: group %d %q: %w", i+1, g.Name, err)
		}
		hyper = append(hyper, g.Hyper)
		for _, r := range rs {
			painted = append(painted, owned{r, i + 1})
		}
	}
	slices.SortFunc(painted, func(a, b owned) int { return a.r.Lo - b.r.Lo })
	for i := 1; i < len(painted); i++ {
		if a, b := painted[i-1], painted[i]; b.r.Lo < a.r.Hi {
			return nil, nil, fmt.Errorf("optim: AdamW: groups %q and %q both hold %v",
				groups[a.group-1].Name, groups[b.group-1].Name, Range{b.r.Lo, min(a.r.Hi, b.r.Hi)})
		}
	}
	// Cut every trainable range at group boundaries.
	var segs []segment
	for _, t := range mask.trainable {
		pos := t.Lo
		emit := func(hi, group int) {
			if hi > pos {
				segs = append(segs, segment{lo: pos, n: hi - pos, group: group})
				pos = hi
			}
		}
		for _, p := range painted {
			if p.r.Hi <= pos || p.r.Lo >= t.Hi {
				continue
			}
			emit(max(p.r.Lo, pos), 0)
			emit(min(p.r.Hi, t.Hi), p.group)
		}
		emit(t.Hi, 0)
	}
	return hyper, segs, nil
}

// newAdamW returns an optimiser over mask's buffers stepping segs, which
// cover mask's trainable elements, with group i's hyperparameters hyper[i].
func newAdamW(mask *Mask, hyper []Hyper, segs []segment) *AdamW {
	o := &AdamW{
		mask:    mask,
		hyper:   hyper,
		plan:    newPlan(segs),
		scalars: make([]AdamWScalars, len(hyper)),
		state: State{
			M: make([]float32, mask.count),
			V: make([]float32, mask.count),
		},
	}
	o.body = o.stepBlocks
	return o
}

// Segment is a run of trainable elements in one hyperparameter group:
// buffer elements [Lo, Lo+N), whose moments are State's M and V at
// [Off, Off+N).
type Segment struct{ Lo, N, Off, Group int }

// Segments lists the optimiser's segments in buffer order, for a copy of
// it that steps elsewhere (a GPU) with the same layout and constants.
func (o *AdamW) Segments() []Segment {
	out := make([]Segment, len(o.plan.segs))
	for i, s := range o.plan.segs {
		out[i] = Segment{Lo: s.lo, N: s.n, Off: s.off, Group: s.group}
	}
	return out
}

// Groups is the number of hyperparameter groups, the base group included.
func (o *AdamW) Groups() int { return len(o.hyper) }

// Hyper returns the hyperparameters of group i (0 is the base group).
func (o *AdamW) Hyper(i int) Hyper { return o.hyper[i] }

// SetLR sets the learning rate of group i (0 is the base group), as a
// PyTorch LR scheduler writes param_group["lr"] before each step.
func (o *AdamW) SetLR(i int, lr float64) error {
	h := o.hyper[i]
	h.LR = lr
	if err := h.validate(); err != nil {
		return fmt.Errorf("optim: AdamW: group %d: %w", i, err)
	}
	o.hyper[i] = h
	return nil
}

// Mask returns the mask the optimiser was made with.
func (o *AdamW) Mask() *Mask { return o.mask }

// State returns the optimiser's live state: its slices are the buffers Step
// updates. Read them to save a checkpoint; SetState restores one.
func (o *AdamW) State() State { return o.state }

// SetState copies s into the optimiser, for resuming from a checkpoint
// made with the same mask.
func (o *AdamW) SetState(s State) error {
	if len(s.M) != o.mask.count || len(s.V) != o.mask.count {
		return fmt.Errorf("optim: AdamW state has %d and %d moments, want %d (one per trainable element)", len(s.M), len(s.V), o.mask.count)
	}
	if s.Step < 0 {
		return fmt.Errorf("optim: AdamW state step %d is negative", s.Step)
	}
	o.state.Step = s.Step
	copy(o.state.M, s.M)
	copy(o.state.V, s.V)
	return nil
}

// Step applies one AdamW update to the trainable elements of params from
// grads; both have Mask().Len() elements. Frozen elements of params, and
// anything in grads at frozen positions, are not touched.
func (o *AdamW) Step(params, grads []float32) {
	if len(params) != o.mask.n || len(grads) != o.mask.n {
		panic(fmt.Sprintf("optim: AdamW.Step: %d params and %d grads, want %d", len(params), len(grads), o.mask.n))
	}
	o.state.Step++
	for i, h := range o.hyper {
		o.scalars[i] = NewAdamWScalars(h, o.state.Step)
	}
	o.params, o.grads, o.kern = params, grads, active
	o.plan.run(o.body)
	o.params, o.grads = nil, nil
}

func (o *AdamW) stepBlocks(bl, bh int) {
	a, b := o.plan.blockRange(bl, bh)
	o.plan.visit(a, b, func(s *segment, pa, ca, n int) {
		o.kern.adamw(o.params[pa:pa+n], o.grads[pa:pa+n], o.state.M[ca:ca+n], o.state.V[ca:ca+n], &o.scalars[s.group])
	})
}

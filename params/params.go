// Package params holds a model's trainable tensors in one flat float32
// arena, with their gradients in a second arena of the same layout.
//
// The optimiser, the gradient clipper and the EMA (package optim) work over
// flat buffers, and checkpoints are written tensor by tensor from views: a
// Set gives both. Each Param is a spago leaf tensor whose value is a view of
// Set.Data and whose AccGrad adds into its view of Set.Grad, so a training
// step neither clones gradients (as spago's own Dense does on the first
// accumulation) nor gathers them afterwards.
//
// It also holds the parameter groups (Groups): the one vocabulary in which
// recipes select parameters and models place theirs.
package params

import (
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/nlpodyssey/spago/mat"

	"github.com/dcdit/dcdit/editdist"
)

// Spec describes one tensor of a Set: its name and its shape as a matrix
// (rows, cols). Higher-rank tensors are viewed as [shape[0], rest].
type Spec struct {
	Name       string
	Rows, Cols int
}

// Set is the arena. Data and Grad have the same length; each parameter
// owns the same range of both (Range).
type Set struct {
	Data, Grad []float32
	list       []*Param
	byName     map[string]*Param
	ranges     map[string][2]int
}

// Param is one tensor of a Set. It is a spago leaf (mat.Tensor): ops read
// its value and call AccGrad on it.
type Param struct {
	*mat.Dense[float32]
	// Name is the tensor's name in checkpoints.
	Name string

	grad    []float32
	gradT   *mat.Dense[float32]
	mu      sync.Mutex
	touched bool
	dev     DeviceSide // nil: the parameter lives on the host (device.go)
}

// New allocates a Set for specs, zero-filled, in the given order. Names
// must be unique and shapes positive.
func New(specs []Spec) (*Set, error) {
	n := 0
	for _, s := range specs {
		if s.Rows <= 0 || s.Cols <= 0 {
			return nil, fmt.Errorf("params: %q has shape [%d %d], want positive dimensions", s.Name, s.Rows, s.Cols)
		}
		n += s.Rows * s.Cols
	}
	set := &Set{Data: make([]float32, n), Grad: make([]float32, n), byName: make(map[string]*Param, len(specs)), ranges: make(map[string][2]int, len(specs))}
	lo := 0
	for _, s := range specs {
		if _, dup := set.byName[s.Name]; dup {
			return nil, fmt.Errorf("params: %q appears twice", s.Name)
		}
		hi := lo + s.Rows*s.Cols
		p := &Param{Name: s.Name, grad: set.Grad[lo:hi:hi]}
		p.Dense = mat.NewDense[float32](mat.WithShape(s.Rows, s.Cols), mat.WithBacking(set.Data[lo:hi:hi]))
		p.gradT = mat.NewDense[float32](mat.WithShape(s.Rows, s.Cols), mat.WithBacking(p.grad))
		p.Dense.SetRequiresGrad(true)
		set.list = append(set.list, p)
		set.byName[s.Name] = p
		set.ranges[s.Name] = [2]int{lo, hi}
		lo = hi
	}
	return set, nil
}

// Get returns the parameter called name. Model code asks for names it
// knows the set holds, so an unknown name is a misspelling: Get panics with
// a message naming it and the closest names the set does hold. (Returning
// nil would panic later, far from the cause and without the name, because a
// nil *Param stored in a mat.Tensor is not a nil interface and so passes
// the ops' nil checks.) Names that may be absent (optional tensors, names
// read from files) go through Lookup.
func (s *Set) Get(name string) *Param {
	if p, ok := s.byName[name]; ok {
		return p
	}
	panic(s.unknown(name))
}

// Lookup returns the parameter called name and whether the set holds it.
func (s *Set) Lookup(name string) (*Param, bool) {
	p, ok := s.byName[name]
	return p, ok
}

// unknown is Get's message for a name the set does not hold.
func (s *Set) unknown(name string) string {
	if len(s.list) == 0 {
		return fmt.Sprintf("params: no parameter %q: the set is empty", name)
	}
	// The closest names by edit distance: a misspelling is usually one or
	// two edits from the intended name.
	best, closest := -1, []string(nil)
	for _, p := range s.list {
		d := editdist.Distance(name, p.Name)
		switch {
		case best < 0 || d < best:
			best, closest = d, []string{p.Name}
		case d == best && len(closest) < 3:
			closest = append(closest, p.Name)
		}
	}
	quoted := make([]string, len(closest))
	for i, c := range closest {
		quoted[i] = strconv.Quote(c)
	}
	return fmt.Sprintf("params: no parameter %q among the set's %d; closest: %s", name, len(s.list), strings.Join(quoted, ", "))
}

// AddPrefix renames every parameter prefix + its name, in place: Get,
// Lookup, Range and List answer the new names from then on, and a *Param
// held elsewhere keeps its identity (and its new Name). It copies nothing,
// so that a model of billions of parameters can be renamed where a second
// arena would not fit. Rename a set before joining it (Join keys the joint
// set by the names the parts have then). The new names must stay unique,
// which a common prefix guarantees.
func (s *Set) AddPrefix(prefix string) {
	byName := make(map[string]*Param, len(s.byName))
	ranges := make(map[string][2]int, len(s.ranges))
	for _, p := range s.list {
		r := s.ranges[p.Name]
		p.Name = prefix + p.Name
		byName[p.Name], ranges[p.Name] = p, r
	}
	s.byName, s.ranges = byName, ranges
}

// Range returns where the parameter called name lies in Data and Grad.
func (s *Set) Range(name string) (lo, hi int, ok bool) {
	r, ok := s.ranges[name]
	return r[0], r[1], ok
}

// List returns the parameters in arena order. The slice is shared: do not
// modify it.
func (s *Set) List() []*Param { return s.list }

// Len is the number of float32 values in the arena.
func (s *Set) Len() int { return len(s.Data) }

// ZeroGrad clears every gradient before the next backward pass.
func (s *Set) ZeroGrad() {
	clear(s.Grad)
	for _, p := range s.list {
		p.touched = false
		if p.dev != nil {
			p.dev.ZeroGrad()
		}
	}
}

// SetRequiresGrad turns gradient tracking on or off for every parameter;
// inference runs with it off so that ops keep nothing for a backward pass.
func (s *Set) SetRequiresGrad(v bool) {
	for _, p := range s.list {
		p.Dense.SetRequiresGrad(v)
	}
}

// RequiresGrad reports whether the parameters track gradients (the state
// SetRequiresGrad last set; new sets do).
func (s *Set) RequiresGrad() bool {
	return len(s.list) > 0 && s.list[0].Dense.RequiresGrad()
}

// Values returns the parameter's data (a view of the arena).
func (p *Param) Values() []float32 { return mat.Data[float32](p.Dense) }

// Gradient returns the parameter's gradient (a view of the gradient arena).
func (p *Param) Gradient() []float32 { return p.grad }

// AccGrad adds g into the parameter's view of the gradient arena. Spago
// may run operators' backward passes concurrently, so it locks.
func (p *Param) AccGrad(g mat.Tensor) {
	if p.dev != nil {
		p.dev.AccGrad(g)
		return
	}
	src := mat.Data[float32](g)
	if len(src) != len(p.grad) {
		// A shape mismatch here is an op bug; spago panics in the same case.
		panic(fmt.Sprintf("params: gradient of %q has %d values, want %d", p.Name, len(src), len(p.grad)))
	}
	p.mu.Lock()
	for i, v := range src {
		p.grad[i] += v
	}
	p.touched = true
	p.mu.Unlock()
}

// Grad returns the accumulated gradient as a matrix (nil before any).
func (p *Param) Grad() mat.Tensor {
	if p.dev != nil {
		return p.dev.Grad()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.touched {
		return nil
	}
	return p.gradT
}

// HasGrad reports whether a gradient was accumulated since the last
// ZeroGrad.
func (p *Param) HasGrad() bool {
	if p.dev != nil {
		return p.dev.HasGrad()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.touched
}

// ZeroGrad clears this parameter's gradient.
func (p *Param) ZeroGrad() {
	if p.dev != nil {
		p.dev.ZeroGrad()
	}
	p.mu.Lock()
	clear(p.grad)
	p.touched = false
	p.mu.Unlock()
}

// Join moves the parameters of several sets into one new arena, in order,
// and returns a set over all of them: a model made of parts (a scaffold and
// its backbone) then trains with one optimiser, one clipper and one EMA
// over one buffer. Each part stays usable: its Data and Grad become views
// of the joint arena and its Params keep their identity, so code holding a
// *Param sees the moved values. Names must be unique across the parts.
func Join(sets ...*Set) (*Set, error) {
	var specs []Spec
	for _, s := range sets {
		for _, p := range s.list {
			sh := p.Dense.Shape()
			specs = append(specs, Spec{Name: p.Name, Rows: sh[0], Cols: sh[1]})
		}
	}
	joint, err := New(specs)
	if err != nil {
		return nil, err
	}
	base := 0
	for _, s := range sets {
		n := len(s.Data)
		copy(joint.Data[base:base+n], s.Data)
		copy(joint.Grad[base:base+n], s.Grad)
		s.Data, s.Grad = joint.Data[base:base+n:base+n], joint.Grad[base:base+n:base+n]
		for _, p := range s.list {
			q := joint.byName[p.Name]
			req := p.Dense.RequiresGrad()
			p.Dense, p.grad, p.gradT = q.Dense, q.grad, q.gradT
			p.Dense.SetRequiresGrad(req)
			// The joint set must hand out the very same objects.
			joint.byName[p.Name] = p
		}
		base += n
	}
	for i, s := range specs {
		joint.list[i] = joint.byName[s.Name]
	}
	return joint, nil
}

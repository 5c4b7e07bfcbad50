package optim

import (
	"sort"

	"github.com/dcdit/dcdit/kernels/parallel"
)

// segment is a run of trainable elements with one set of hyperparameters:
// buffer elements [lo, lo+n) whose per-element state sits at [off, off+n)
// of the compact state buffers.
type segment struct{ lo, n, off, group int }

// plan lays the trainable elements end to end ("compact" indices) and cuts
// that line into fixed blocks for the workers. Blocks do not depend on the
// number of cores, so reductions summed block by block give the same bits
// on any machine.
type plan struct {
	segs  []segment
	total int
}

// blockSize is the unit of work handed to a core: big enough that the
// scheduling cost vanishes (64 K floats is 256 KB per stream), small enough
// that two cores finish together on mid-sized models.
const blockSize = 1 << 16

func newPlan(segs []segment) plan {
	p := plan{segs: segs}
	for i := range p.segs {
		p.segs[i].off = p.total
		p.total += p.segs[i].n
	}
	return p
}

func (p *plan) blocks() int { return (p.total + blockSize - 1) / blockSize }

// run calls body on every block, on all cores. body must be a value made
// once (a method value stored at construction): a fresh closure per call
// would allocate.
func (p *plan) run(body func(lo, hi int)) {
	parallel.For(p.blocks(), 2, body)
}

// visit calls fn for each piece of compact range [a, b) that falls within
// one segment, with the buffer index pa and compact index ca where the
// piece starts and its length n.
func (p *plan) visit(a, b int, fn func(s *segment, pa, ca, n int)) {
	i := sort.Search(len(p.segs), func(i int) bool { return p.segs[i].off+p.segs[i].n > a })
	for ; i < len(p.segs) && p.segs[i].off < b; i++ {
		s := &p.segs[i]
		lo, hi := max(a, s.off), min(b, s.off+s.n)
		fn(s, s.lo+lo-s.off, lo, hi-lo)
	}
}

// blockRange is the compact range of blocks [bl, bh).
func (p *plan) blockRange(bl, bh int) (a, b int) {
	return bl * blockSize, min(bh*blockSize, p.total)
}

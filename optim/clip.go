package optim

import (
	"errors"
	"fmt"
	"math"
)

// ErrNonFiniteNorm is returned (wrapped) when the gradients' norm is NaN or
// infinite: scaling by it would spread the NaN into every parameter.
var ErrNonFiniteNorm = errors.New("optim: gradient norm is not finite")

// GradClipper scales gradients down so that their global L2 norm is at
// most MaxNorm, as torch.nn.utils.clip_grad_norm_ does. Frozen elements are
// neither counted nor scaled. It keeps its scratch space, so Clip does not
// allocate; it is not safe for concurrent use.
type GradClipper struct {
	// MaxNorm is the largest norm let through (clip_grad_norm_'s max_norm);
	// it may be changed between calls.
	MaxNorm float64

	mask    *Mask
	plan    plan
	partial []float64 // one sum of squares per block, added in block order

	grads []float32
	scale float32
	kern  *kernelSet
	sumF  func(lo, hi int)
	mulF  func(lo, hi int)
}

// NewGradClipper returns a clipper for gradient buffers described by mask,
// which must not be nil.
func NewGradClipper(mask *Mask, maxNorm float64) *GradClipper {
	segs := make([]segment, len(mask.trainable))
	for i, r := range mask.trainable {
		segs[i] = segment{lo: r.Lo, n: r.Len()}
	}
	c := &GradClipper{MaxNorm: maxNorm, mask: mask, plan: newPlan(segs)}
	c.partial = make([]float64, c.plan.blocks())
	c.sumF, c.mulF = c.sumBlocks, c.scaleBlocks
	return c
}

// Norm returns the L2 norm of the trainable elements of grads, computed in
// float64. The sum runs block by block in a fixed order, so the result is
// the same whatever the number of cores.
func (c *GradClipper) Norm(grads []float32) float64 {
	if len(grads) != c.mask.n {
		panic(fmt.Sprintf("optim: GradClipper: %d grads, want %d", len(grads), c.mask.n))
	}
	c.grads, c.kern = grads, active
	c.plan.run(c.sumF)
	c.grads = nil
	var s float64
	for _, p := range c.partial {
		s += p
	}
	return math.Sqrt(s)
}

// Clip returns the gradients' norm before clipping and, when it exceeds
// MaxNorm, multiplies the trainable gradients by MaxNorm/(norm+1e-6) (the
// multiplier is applied whenever it is below 1, as in PyTorch). A NaN or
// infinite norm leaves grads untouched and returns an error wrapping
// ErrNonFiniteNorm.
func (c *GradClipper) Clip(grads []float32) (float64, error) {
	if !(c.MaxNorm > 0) || math.IsInf(c.MaxNorm, 1) {
		return 0, fmt.Errorf("optim: clip: max norm %v, want a positive finite number", c.MaxNorm)
	}
	norm := c.Norm(grads)
	if math.IsNaN(norm) || math.IsInf(norm, 0) {
		return norm, fmt.Errorf("clip: %w (%v)", ErrNonFiniteNorm, norm)
	}
	coef := c.MaxNorm / (norm + 1e-6)
	if coef < 1 {
		c.grads, c.scale, c.kern = grads, float32(coef), active
		c.plan.run(c.mulF)
		c.grads = nil
	}
	return norm, nil
}

// ClipGradNorm is GradClipper.Clip for a one-off call; training loops
// should keep a GradClipper, which does not allocate per step.
func ClipGradNorm(grads []float32, mask *Mask, maxNorm float64) (float64, error) {
	return NewGradClipper(mask, maxNorm).Clip(grads)
}

func (c *GradClipper) sumBlocks(bl, bh int) {
	for blk := bl; blk < bh; blk++ {
		a, b := c.plan.blockRange(blk, blk+1)
		var s float64
		c.plan.visit(a, b, func(_ *segment, pa, _, n int) {
			s += c.kern.sumSquares(c.grads[pa : pa+n])
		})
		c.partial[blk] = s
	}
}

func (c *GradClipper) scaleBlocks(bl, bh int) {
	a, b := c.plan.blockRange(bl, bh)
	c.plan.visit(a, b, func(_ *segment, pa, _, n int) {
		c.kern.scale(c.grads[pa:pa+n], c.scale)
	})
}

package ops

import (
	"fmt"
	"sync"

	"github.com/nlpodyssey/spago/ag"
	"github.com/nlpodyssey/spago/mat"
	"github.com/nlpodyssey/spago/mat/float"

	"github.com/dcdit/dcdit/kernels"
)

// A training step of a DiT-S/2 used to allocate about 1.5 GB: every op
// made its output, and spago's Dense cloned the first gradient that
// reached each node (mat/dense_grad.go AccGrad) before adding later ones
// into the clone. Both now come from the pool, and Release hands a whole
// graph's buffers back once its backward pass is done, so that steady-state
// steps reuse the same memory instead of making the garbage collector and
// the page-fault handler recycle it.
//
// value is the result of an op. It is a spago Dense over a pooled buffer
// that, as a graph node's value (ag.Operator.Value), also keeps:
//   - the pooled buffers the op saved for its backward pass (LayerNorm's
//     statistics, attention's log-sum-exp), released with it;
//   - its own gradient: the first gradient an op computes for it is adopted
//     as is instead of being cloned, later ones are added into it, and a
//     gradient passed on from upstream (a residual's dy) is copied into a
//     pooled buffer.
//
// Ops read values through data[T], which unwraps them without copying;
// other code sees a mat.Matrix (mat.Data works on it, through Data()).
type value[T float.DType] struct {
	*mat.Dense[T]
	saved [][]T
	fn    ag.AutoGradFunction // the op that computed it, for Backward

	mu       sync.Mutex
	grad     *mat.Dense[T]
	released bool
}

// output wraps an op's result y (from getBuffer) as a [rows, cols] value
// that also owns the pooled buffers in saved.
func output[T float.DType](rows, cols int, y []T, saved ...[]T) *value[T] {
	return &value[T]{Dense: newMatrix(rows, cols, y), saved: saved}
}

// gradBuf is a gradient computed into a pooled buffer (gradBuffer), as
// handed to AccGrad: a value with no gradient yet adopts its buffer and
// says so, anything else copies or adds it and the buffer goes back to the
// pool. spago's own Dense, which clones the first gradient it receives,
// sees an ordinary matrix.
type gradBuf[T float.DType] struct {
	*mat.Dense[T]
	adopted bool
}

// Grad returns the accumulated gradient, nil before the first.
func (v *value[T]) Grad() mat.Tensor {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.grad == nil {
		return nil
	}
	return v.grad
}

// HasGrad reports whether a gradient has been accumulated.
func (v *value[T]) HasGrad() bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.grad != nil
}

// ZeroGrad drops the gradient, returning its buffer to the pool.
func (v *value[T]) ZeroGrad() {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.grad != nil {
		putBuffer(mat.Data[T](v.grad))
		v.grad = nil
	}
}

// AccGrad accumulates g, adopting it when it is the first and a pooled
// gradient (see gradBuf). Backward passes of several ops may call it at the
// same time, so it locks.
func (v *value[T]) AccGrad(g mat.Tensor) {
	var src []T
	gb, pooled := g.(*gradBuf[T])
	if pooled {
		src = mat.Data[T](gb.Dense)
	} else {
		src = data[T](g)
	}
	if len(src) != v.Size() {
		// A shape mismatch is an op bug; spago's Dense panics likewise.
		panic(fmt.Sprintf("ops: gradient of %d values for a %v node", len(src), v.Shape()))
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	switch {
	case v.grad == nil && pooled:
		v.grad = gb.Dense
		gb.adopted = true
	case v.grad == nil:
		buf := getBuffer[T](len(src))
		copy(buf, src)
		v.grad = newMatrix(v.Shape()[0], v.Shape()[1], buf)
	default:
		dst := mat.Data[T](v.grad)
		kernels.Add(dst, dst, src)
	}
}

// release returns the value's buffers (result, saved state, gradient) to
// the pool, once; it reports whether this call did.
func (v *value[T]) release() bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.released {
		return false
	}
	v.released = true
	putBuffer(mat.Data[T](v.Dense))
	for _, s := range v.saved {
		putBuffer(s)
	}
	v.saved = nil
	if v.grad != nil {
		putBuffer(mat.Data[T](v.grad))
		v.grad = nil
	}
	return true
}

// Release returns to the pool the buffers of every op node in the graphs
// that end at roots: results, what they kept for the backward pass, and
// gradients. Call it once a training step is done with its graph (after
// Backward, the loss and any gradient read from an intermediate): nothing
// of those graphs, roots included, may be used afterwards, since the next
// ops will reuse the memory. Parameters and other leaves are untouched, and
// so are values computed without a graph. Releasing is optional: a graph
// that is simply dropped is garbage-collected as before.
func Release(roots ...mat.Tensor) {
	stack := append([]mat.Tensor(nil), roots...)
	var seen map[*ag.Operator]bool // nodes that are not ops' values
	for len(stack) > 0 {
		t := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		o, ok := t.(*ag.Operator)
		if !ok {
			continue
		}
		switch v := o.Value().(type) {
		case *value[float32]:
			if !v.release() {
				continue
			}
		case *value[float64]:
			if !v.release() {
				continue
			}
		case *deviceValue:
			if !v.release() {
				continue
			}
		default:
			// Another library's node: walk through it to the ops behind.
			if seen == nil {
				seen = make(map[*ag.Operator]bool)
			}
			if seen[o] {
				continue
			}
			seen[o] = true
		}
		stack = append(stack, o.Operands()...)
	}
}

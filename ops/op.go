package ops

import (
	"fmt"
	"math/bits"
	"sync"

	"github.com/nlpodyssey/spago/ag"
	"github.com/nlpodyssey/spago/mat"
	"github.com/nlpodyssey/spago/mat/float"

	"github.com/dcdit/dcdit/gpu/device"
)

// named is an operand with the name used in panic messages.
type named struct {
	name string
	t    mat.Tensor
}

// is64 reports whether the element type shared by all operands is
// float64, panicking when an operand is nil, not a spago Dense matrix, or
// of another element type than the first: mixing them would make
// mat.Data silently convert (copy) and AccGrad panic later, far from the
// cause.
func is64(op string, operands ...named) bool {
	var first string
	for _, o := range operands {
		if o.t == nil {
			panic(fmt.Sprintf("ops: %s: %s is nil", op, o.name))
		}
		var dt string
		switch v := o.t.Value().(type) {
		case *mat.Dense[float32], *value[float32]:
			dt = "float32"
		case *mat.Dense[float64], *value[float64]:
			dt = "float64"
		case device.Resident:
			// pickOn sends device operands elsewhere: this op has none.
			panic(fmt.Sprintf("ops: %s: no device implementation yet, and %s is on the device", op, o.name))
		default:
			panic(fmt.Sprintf("ops: %s: %s is a %T, want *mat.Dense[float32] or *mat.Dense[float64]", op, o.name, v))
		}
		if first == "" {
			first = dt
		} else if dt != first {
			panic(fmt.Sprintf("ops: %s: %s is %s, want %s like %s", op, o.name, dt, first, operands[0].name))
		}
	}
	return first == "float64"
}

// pick returns f64 when the operands are float64 and f32 otherwise; the
// constructors build both candidates (two small structs) so that each op's
// generic struct is instantiated in one line per element type.
func pick(op string, f32, f64 ag.AutoGradFunction, operands ...named) ag.AutoGradFunction {
	if is64(op, operands...) {
		return f64
	}
	return f32
}

// dims returns a matrix operand's rows and columns (spago matrices are
// always 2-D).
func dims(op, name string, t mat.Tensor) (rows, cols int) {
	if t == nil {
		panic(fmt.Sprintf("ops: %s: %s is nil", op, name))
	}
	s := t.Shape()
	return s[0], s[1]
}

// needShape panics unless t is [rows, cols].
func needShape(op, name string, t mat.Tensor, rows, cols int, why string) {
	r, c := dims(op, name, t)
	if r != rows || c != cols {
		panic(fmt.Sprintf("ops: %s: %s has shape [%d %d], want [%d %d]%s", op, name, r, c, rows, cols, why))
	}
}

// needVector panics unless t is a vector of n elements, [n 1] or [1 n].
func needVector(op, name string, t mat.Tensor, n int, why string) {
	r, c := dims(op, name, t)
	if r*c != n || (r != 1 && c != 1) {
		panic(fmt.Sprintf("ops: %s: %s has shape [%d %d], want a vector [%d 1] or [1 %d]%s", op, name, r, c, n, n, why))
	}
}

// copyOffsets validates packed-sample offsets against a row count and
// returns a private copy: Backward runs later, when the caller may have
// reused its slice.
func copyOffsets(op string, offsets []int, rows int) []int {
	if len(offsets) == 0 {
		panic(fmt.Sprintf("ops: %s: empty offsets, want S+1 entries from 0 to %d", op, rows))
	}
	if offsets[0] != 0 || offsets[len(offsets)-1] != rows {
		panic(fmt.Sprintf("ops: %s: offsets run from %d to %d, want 0 to %d (the rows of x)", op, offsets[0], offsets[len(offsets)-1], rows))
	}
	for s := 1; s < len(offsets); s++ {
		if offsets[s] < offsets[s-1] {
			panic(fmt.Sprintf("ops: %s: offsets decrease at %d: %d after %d", op, s, offsets[s], offsets[s-1]))
		}
	}
	return append([]int(nil), offsets...)
}

// copyIndex validates row indices against a row count and returns a
// private copy.
func copyIndex(op string, idx []int, rows int) []int {
	for i, j := range idx {
		if j < 0 || j >= rows {
			panic(fmt.Sprintf("ops: %s: idx[%d] = %d out of range [0, %d)", op, i, j, rows))
		}
	}
	return append([]int(nil), idx...)
}

// data returns the backing slice of an operand's value (no copy: the
// element type was checked when the op was built).
func data[T float.DType](t mat.Tensor) []T {
	v := t.Value()
	if w, ok := v.(*value[T]); ok {
		return mat.Data[T](w.Dense)
	}
	return mat.Data[T](v)
}

// newMatrix wraps data as a [rows, cols] matrix without copying it.
func newMatrix[T float.DType](rows, cols int, data []T) *mat.Dense[T] {
	return mat.NewDense[T](mat.WithShape(rows, cols), mat.WithBacking(data))
}

// gradBuffer returns a scratch slice for t's gradient, or nil when t does
// not require one (kernels then skip that gradient).
func gradBuffer[T float.DType](t mat.Tensor) []T {
	if t == nil || !t.RequiresGrad() {
		return nil
	}
	return getBuffer[T](t.Size())
}

// accGrad hands a gradient computed by gradBuffer to t, which adopts the
// buffer when t is an op's value without a gradient yet; otherwise t adds
// or copies it and the buffer goes back to the pool. g == nil (gradient not
// required) does nothing.
func accGrad[T float.DType](t mat.Tensor, g []T) {
	if g == nil {
		return
	}
	gb := &gradBuf[T]{Dense: mat.NewDense[T](mat.WithShape(t.Shape()...), mat.WithBacking(g))}
	t.AccGrad(gb)
	if !gb.adopted {
		putBuffer(g)
	}
}

// Buffers are pooled by capacity class (powers of two) and element type: op
// results, what ops keep for their backward pass, gradients and kernel
// scratch all come from here, and sizes repeat op after op and step after
// step. Release (value.go) returns a finished graph's buffers.
//
// The pool is a free list, not a sync.Pool: a sync.Pool empties at every
// garbage collection, and a training step that reuses hundreds of megabytes
// would then fault them all back in, which is what pooling is meant to
// avoid. The list keeps at most maxPooled buffers per class, so it holds
// about the working set of the largest step run so far.
type bufferPool[T float.DType] struct {
	mu   sync.Mutex
	free [64][][]T
}

const maxPooled = 1024

var (
	pool32 bufferPool[float32]
	pool64 bufferPool[float64]
)

func poolOf[T float.DType]() *bufferPool[T] {
	var zero T
	if _, ok := any(zero).(float64); ok {
		return any(&pool64).(*bufferPool[T])
	}
	return any(&pool32).(*bufferPool[T])
}

// getBuffer returns a slice of length n with unspecified contents (kernels
// overwrite their outputs). A new slice is exactly n long, so that results
// computed without a graph (inference), which never come back to the pool,
// cost no more than a plain make.
func getBuffer[T float.DType](n int) []T {
	if n == 0 {
		return []T{}
	}
	c := bits.Len(uint(n - 1)) // 2^c ≥ n
	p := poolOf[T]()
	p.mu.Lock()
	// Class c−1 holds capacities in [2^(c−1), 2^c): sizes repeat step after
	// step, so the one wanted is usually there. The best fit is taken, so
	// that a smaller request does not use up a buffer that a larger one of
	// the same class will need. Every buffer of class c is large enough.
	if c > 0 {
		list, best := p.free[c-1], -1
		for i, b := range list {
			if cap(b) >= n && (best < 0 || cap(b) < cap(list[best])) {
				best = i
				if cap(b) == n {
					break
				}
			}
		}
		if best >= 0 {
			b := list[best]
			list[best] = list[len(list)-1]
			list[len(list)-1] = nil
			p.free[c-1] = list[:len(list)-1]
			p.mu.Unlock()
			return b[:n]
		}
	}
	if k := len(p.free[c]); k > 0 {
		b := p.free[c][k-1]
		p.free[c][k-1] = nil
		p.free[c] = p.free[c][:k-1]
		p.mu.Unlock()
		return b[:n]
	}
	p.mu.Unlock()
	return make([]T, n)
}

// putBuffer hands b to the pool, in the class of its capacity c
// (2^class ≤ c < 2^(class+1)).
func putBuffer[T float.DType](b []T) {
	c := cap(b)
	if c == 0 {
		return
	}
	class := bits.Len(uint(c)) - 1
	p := poolOf[T]()
	p.mu.Lock()
	if len(p.free[class]) < maxPooled {
		p.free[class] = append(p.free[class], b[:c])
	}
	p.mu.Unlock()
}

// run evaluates f as a graph node when some operand requires a gradient,
// and eagerly otherwise, returning the bare value: inference then builds
// no graph, and each intermediate is freed as soon as nothing uses it
// (a graph would keep every activation of a forward pass alive until its
// output is dropped).
func run(f ag.AutoGradFunction) mat.Tensor {
	for _, x := range f.Operands() {
		if x.RequiresGrad() {
			return node(f)
		}
	}
	y, err := f.Forward()
	if err != nil {
		// Forward validates nothing (constructors do), so this is a bug.
		panic(fmt.Sprintf("ops: forward: %v", err))
	}
	return y
}

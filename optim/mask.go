package optim

import (
	"fmt"
	"slices"
)

// Range is the half-open interval [Lo, Hi) of indices into a flat buffer.
type Range struct{ Lo, Hi int }

// Len is the number of elements in r.
func (r Range) Len() int { return r.Hi - r.Lo }

// String formats r as the interval "[Lo,Hi)".
func (r Range) String() string { return fmt.Sprintf("[%d,%d)", r.Lo, r.Hi) }

// Mask says which elements of a flat buffer of Len elements are trainable.
// AdamW, GradClipper and EMA skip the frozen ones entirely: they neither
// read nor write them, nor keep state for them. A Mask never changes once
// made, so one can be shared by all three.
type Mask struct {
	n         int
	trainable []Range // sorted, disjoint, non-empty, never adjacent
	count     int
}

// AllTrainable returns the mask of a buffer of n elements with nothing frozen.
func AllTrainable(n int) *Mask {
	m, err := TrainMask(n, Range{0, n})
	if err != nil {
		panic(err) // unreachable for n ≥ 0
	}
	return m
}

// FreezeMask returns the mask of a buffer of n elements in which the given
// ranges are frozen and everything else is trainable. Ranges may overlap
// and come in any order.
func FreezeMask(n int, frozen ...Range) (*Mask, error) {
	f, err := normalise(n, frozen)
	if err != nil {
		return nil, fmt.Errorf("optim: frozen %w", err)
	}
	return &Mask{n: n, trainable: complement(n, f), count: n - total(f)}, nil
}

// TrainMask returns the mask of a buffer of n elements in which only the
// given ranges are trainable, the usual case when a new part is trained
// against a frozen pretrained model. Ranges may overlap and come in any order.
func TrainMask(n int, trainable ...Range) (*Mask, error) {
	t, err := normalise(n, trainable)
	if err != nil {
		return nil, fmt.Errorf("optim: trainable %w", err)
	}
	return &Mask{n: n, trainable: t, count: total(t)}, nil
}

// Len is the length of the buffers the mask describes.
func (m *Mask) Len() int { return m.n }

// NumTrainable is the number of trainable elements: the length of AdamW's
// per-element state.
func (m *Mask) NumTrainable() int { return m.count }

// Trainable returns the trainable ranges, sorted and merged.
func (m *Mask) Trainable() []Range { return slices.Clone(m.trainable) }

// Frozen returns the frozen ranges, sorted and merged.
func (m *Mask) Frozen() []Range { return complement(m.n, m.trainable) }

// IsFrozen reports whether element i is frozen.
func (m *Mask) IsFrozen(i int) bool {
	_, found := slices.BinarySearchFunc(m.trainable, i, func(r Range, i int) int {
		switch {
		case r.Hi <= i:
			return -1
		case r.Lo > i:
			return 1
		}
		return 0
	})
	return !found
}

// Gather copies the trainable elements of full (Len elements) into dst
// (NumTrainable elements), in index order: the layout of AdamW's state. With
// Scatter it converts that state to and from whole-buffer tensors, e.g. for
// checkpoints keyed by parameter name.
func (m *Mask) Gather(dst, full []float32) {
	m.check("Gather", len(dst), len(full))
	off := 0
	for _, r := range m.trainable {
		off += copy(dst[off:], full[r.Lo:r.Hi])
	}
}

// Scatter is the inverse of Gather: it copies compact (NumTrainable
// elements) into the trainable elements of full and leaves the frozen ones
// as they are.
func (m *Mask) Scatter(full, compact []float32) {
	m.check("Scatter", len(compact), len(full))
	off := 0
	for _, r := range m.trainable {
		off += copy(full[r.Lo:r.Hi], compact[off:])
	}
}

func (m *Mask) check(op string, compact, full int) {
	if compact != m.count || full != m.n {
		panic(fmt.Sprintf("optim: Mask.%s: buffers of %d and %d elements, want %d trainable and %d in all", op, compact, full, m.count, m.n))
	}
}

// normalise validates ranges against [0, n) and returns their union as
// sorted, disjoint, non-adjacent, non-empty ranges.
func normalise(n int, rs []Range) ([]Range, error) {
	if n < 0 {
		return nil, fmt.Errorf("buffer length %d is negative", n)
	}
	out := make([]Range, 0, len(rs))
	for _, r := range rs {
		if r.Lo < 0 || r.Lo > r.Hi || r.Hi > n {
			return nil, fmt.Errorf("range %v is not within a buffer of %d elements", r, n)
		}
		if r.Lo < r.Hi {
			out = append(out, r)
		}
	}
	slices.SortFunc(out, func(a, b Range) int { return a.Lo - b.Lo })
	merged := out[:0]
	for _, r := range out {
		if k := len(merged) - 1; k >= 0 && r.Lo <= merged[k].Hi {
			merged[k].Hi = max(merged[k].Hi, r.Hi)
			continue
		}
		merged = append(merged, r)
	}
	return slices.Clip(merged), nil
}

// complement returns [0, n) minus the normalised ranges rs.
func complement(n int, rs []Range) []Range {
	var out []Range
	lo := 0
	for _, r := range rs {
		if r.Lo > lo {
			out = append(out, Range{lo, r.Lo})
		}
		lo = r.Hi
	}
	if lo < n {
		out = append(out, Range{lo, n})
	}
	return out
}

func total(rs []Range) int {
	s := 0
	for _, r := range rs {
		s += r.Len()
	}
	return s
}

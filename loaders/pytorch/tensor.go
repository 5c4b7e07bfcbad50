package pytorch

import (
	"errors"
	"fmt"
	"io"
	"math"
)

// Contiguous reports whether the tensor is row-major contiguous, so that its
// bytes are the single file region [FileOffset+StorageOffset*size,
// +numel*size). Dimensions of size 1 may have any stride, and an empty tensor
// is contiguous.
func (t *Tensor) Contiguous() bool {
	if len(t.Shape) != len(t.Strides) {
		return false
	}
	want := int64(1)
	for d := len(t.Shape) - 1; d >= 0; d-- {
		n := t.Shape[d]
		if n == 0 {
			return true
		}
		if n != 1 && t.Strides[d] != want {
			return false
		}
		if n > 0 && want > math.MaxInt64/n {
			return false
		}
		want *= n
	}
	return true
}

// ByteRange returns the file region holding a contiguous tensor's elements:
// n bytes at absolute offset off. ok is false when the tensor is not
// contiguous or its fields are inconsistent.
func (t *Tensor) ByteRange() (off, n int64, ok bool) {
	if !t.Contiguous() {
		return 0, 0, false
	}
	numel, lo, _, err := t.span()
	if err != nil || t.FileOffset < 0 || lo > math.MaxInt64-t.FileOffset {
		return 0, 0, false
	}
	return t.FileOffset + lo, numel * int64(t.DType.Size()), true
}

// maxOverlapBytes bounds what ReadBytes materialises for a tensor whose
// elements overlap (a stride-0 view from expand), which can name far more
// elements than its storage holds.
const maxOverlapBytes = 1 << 28

// errExpand is ReadBytes' refusal of an overlapping tensor past
// maxOverlapBytes: the file is well formed, the tensor too large to read.
var errExpand = errors.New("refusing to expand")

// ReadBytes reads the tensor's elements from r, the checkpoint file, and
// returns them in row-major order (numel*size bytes, little-endian as
// stored). A strided tensor is gathered from the storage region it spans.
// A tensor with overlapping elements (stride 0) whose result would exceed
// both its storage and 256 MiB is refused.
func (t *Tensor) ReadBytes(r io.ReaderAt) ([]byte, error) {
	numel, lo, hi, err := t.span()
	if err != nil {
		return nil, fmt.Errorf("pytorch: %w", err)
	}
	es := int64(t.DType.Size())
	if n := numel * es; n > t.StorageBytes && n > maxOverlapBytes {
		return nil, fmt.Errorf("pytorch: tensor %q: shape %v with strides %v repeats elements of storage %q (%d bytes); %w it to %d bytes",
			t.Name, t.Shape, t.Strides, t.Storage, t.StorageBytes, errExpand, n)
	}
	if t.FileOffset < 0 || hi > math.MaxInt64-t.FileOffset || numel*es > math.MaxInt {
		return nil, fmt.Errorf("pytorch: tensor %q: file offset %d and size %d bytes are out of range", t.Name, t.FileOffset, hi)
	}
	if numel == 0 {
		return []byte{}, nil
	}
	readAt := func(b []byte, off int64) error {
		if _, err := r.ReadAt(b, off); err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return fmt.Errorf("pytorch: tensor %q: reading %d bytes at offset %d of storage %q: %w", t.Name, len(b), off, t.Storage, err)
		}
		return nil
	}
	out := make([]byte, numel*es)
	if t.Contiguous() {
		if err := readAt(out, t.FileOffset+lo); err != nil {
			return nil, err
		}
		return out, nil
	}
	if hi-lo > math.MaxInt {
		return nil, fmt.Errorf("pytorch: tensor %q: spans %d bytes, too many to read", t.Name, hi-lo)
	}
	region := make([]byte, hi-lo)
	if err := readAt(region, t.FileOffset+lo); err != nil {
		return nil, err
	}
	// Walk the multi-index in row-major order; pos is the element's byte
	// offset in region.
	nd := len(t.Shape)
	idx := make([]int64, nd)
	pos := int64(0)
	for i := int64(0); i < numel; i++ {
		copy(out[i*es:(i+1)*es], region[pos:pos+es])
		for d := nd - 1; d >= 0; d-- {
			if idx[d]+1 < t.Shape[d] {
				idx[d]++
				pos += t.Strides[d] * es
				break
			}
			pos -= idx[d] * t.Strides[d] * es
			idx[d] = 0
		}
	}
	return out, nil
}

// span checks the tensor's layout against its storage and returns its
// element count and the byte range [lo, hi) of the storage that its elements
// lie in (hi == lo for an empty tensor). Errors name the tensor.
func (t *Tensor) span() (numel, lo, hi int64, err error) {
	errf := func(format string, args ...any) error {
		return fmt.Errorf("tensor %q: "+format, append([]any{t.Name}, args...)...)
	}
	es := int64(t.DType.Size())
	if es == 0 {
		return 0, 0, 0, errf("dtype %s is not supported", t.DType)
	}
	if len(t.Shape) != len(t.Strides) {
		return 0, 0, 0, errf("shape %v has %d dimensions, strides %v have %d", t.Shape, len(t.Shape), t.Strides, len(t.Strides))
	}
	if t.StorageOffset < 0 || t.StorageBytes < 0 {
		return 0, 0, 0, errf("storage offset %d or storage size %d bytes is negative", t.StorageOffset, t.StorageBytes)
	}
	numel = 1
	for d, n := range t.Shape {
		if n < 0 || t.Strides[d] < 0 {
			return 0, 0, 0, errf("shape %v or strides %v has a negative entry", t.Shape, t.Strides)
		}
		if n == 0 {
			numel = 0
		}
	}
	if numel != 0 {
		for _, n := range t.Shape {
			if numel > math.MaxInt64/n {
				return 0, 0, 0, errf("shape %v has more than 2^63 elements", t.Shape)
			}
			numel *= n
		}
	}
	// last is the largest element index reachable, or StorageOffset-1 when empty.
	last := t.StorageOffset - 1
	if numel > 0 {
		last = t.StorageOffset
		for d, n := range t.Shape {
			if n > 1 && t.Strides[d] > (math.MaxInt64-last)/(n-1) {
				return 0, 0, 0, errf("shape %v with strides %v overflows", t.Shape, t.Strides)
			}
			last += (n - 1) * t.Strides[d]
		}
	}
	if t.StorageOffset > math.MaxInt64/es || last >= math.MaxInt64/es || numel > math.MaxInt64/es {
		return 0, 0, 0, errf("extent in bytes overflows")
	}
	lo, hi = t.StorageOffset*es, (last+1)*es
	if numel == 0 {
		hi = lo
	}
	if hi > t.StorageBytes {
		return 0, 0, 0, errf("%s elements at storage offset %d with shape %v and strides %v reach byte %d, beyond storage %q of %d bytes",
			t.DType, t.StorageOffset, t.Shape, t.Strides, hi, t.Storage, t.StorageBytes)
	}
	return numel, lo, hi, nil
}

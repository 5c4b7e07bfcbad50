package safetensors

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strconv"

	"github.com/dcdit/dcdit/loaders/atomicfile"
	"github.com/dcdit/dcdit/loaders/dtype"
)

// WriteTensor is a tensor to be written: its raw little-endian bytes come
// from Data, or, when Data is nil, from Src (read for exactly the tensor's
// byte size, so large tensors can be streamed).
type WriteTensor struct {
	Name  string
	DType dtype.DType
	Shape []int64
	Data  []byte
	Src   io.Reader
}

// byteSize is the tensor's size in bytes according to its dtype and shape.
func (t *WriteTensor) byteSize() (int64, error) {
	if !t.DType.Valid() {
		return 0, fmt.Errorf("tensor %q: invalid dtype %v", t.Name, t.DType)
	}
	n, err := byteSize(t.DType, t.Shape)
	if err != nil {
		return 0, fmt.Errorf("tensor %q: %w", t.Name, err)
	}
	return n, nil
}

// Write writes tensors and metadata to path atomically (temporary file,
// fsync, rename). Tensors are laid out like the reference writer: by dtype
// alignment, largest first, then by name; the header is padded with spaces
// so the data buffer starts 8-byte aligned.
func Write(path string, tensors []WriteTensor, metadata map[string]string) error {
	if err := atomicfile.Write(path, func(w io.Writer) error { return Encode(w, tensors, metadata) }); err != nil {
		return fmt.Errorf("safetensors: %w", err)
	}
	return nil
}

// EncodeHeader returns the bytes that precede the data buffer (the 8-byte
// length prefix and the padded JSON header) and the data buffer's length.
// Writing those, then the tensors' bytes in the header's order, gives a
// valid file; a planner can also use it to size files without data.
func EncodeHeader(tensors []WriteTensor, metadata map[string]string) (prefix []byte, dataLen int64, err error) {
	order, sizes, err := plan(tensors)
	if err != nil {
		return nil, 0, err
	}
	header, err := encodeHeader(tensors, order, sizes, metadata)
	if err != nil {
		return nil, 0, err
	}
	for _, n := range sizes {
		dataLen += n
	}
	return append(lengthPrefix(len(header)), header...), dataLen, nil
}

func lengthPrefix(n int) []byte {
	b := make([]byte, 8)
	for i := range b {
		b[i] = byte(uint64(n) >> (8 * i))
	}
	return b
}

// Encode writes a complete safetensors stream to w. See Write for the layout.
func Encode(w io.Writer, tensors []WriteTensor, metadata map[string]string) error {
	order, sizes, err := plan(tensors)
	if err != nil {
		return err
	}
	header, err := encodeHeader(tensors, order, sizes, metadata)
	if err != nil {
		return err
	}
	if _, err := w.Write(lengthPrefix(len(header))); err != nil {
		return err
	}
	if _, err := w.Write(header); err != nil {
		return err
	}
	for _, i := range order {
		t := &tensors[i]
		if t.Data != nil {
			if _, err := w.Write(t.Data); err != nil {
				return err
			}
			continue
		}
		if t.Src == nil && sizes[i] == 0 {
			continue
		}
		if t.Src == nil {
			return fmt.Errorf("tensor %q: neither Data nor Src given", t.Name)
		}
		copied, err := io.CopyN(w, t.Src, sizes[i])
		if err != nil {
			return fmt.Errorf("tensor %q: copied %d of %d bytes: %w", t.Name, copied, sizes[i], err)
		}
	}
	return nil
}

// plan validates the tensors and returns their write order and byte sizes.
func plan(tensors []WriteTensor) ([]int, []int64, error) {
	sizes := make([]int64, len(tensors))
	seen := make(map[string]bool, len(tensors))
	for i := range tensors {
		t := &tensors[i]
		if t.Name == "__metadata__" {
			return nil, nil, fmt.Errorf("tensor name %q is reserved", t.Name)
		}
		if seen[t.Name] {
			return nil, nil, fmt.Errorf("tensor %q given twice", t.Name)
		}
		seen[t.Name] = true
		n, err := t.byteSize()
		if err != nil {
			return nil, nil, err
		}
		if t.Data != nil && int64(len(t.Data)) != n {
			return nil, nil, fmt.Errorf("tensor %q: %d data bytes, but shape %v of %s needs %d", t.Name, len(t.Data), t.Shape, t.DType, n)
		}
		sizes[i] = n
	}
	order := make([]int, len(tensors))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool {
		ta, tb := &tensors[order[a]], &tensors[order[b]]
		if ta.DType != tb.DType {
			return ta.DType > tb.DType
		}
		return ta.Name < tb.Name
	})
	return order, sizes, nil
}

func encodeHeader(tensors []WriteTensor, order []int, sizes []int64, metadata map[string]string) ([]byte, error) {
	var buf bytes.Buffer
	buf.WriteByte('{')
	first := true
	sep := func() {
		if !first {
			buf.WriteByte(',')
		}
		first = false
	}
	if len(metadata) > 0 {
		sep()
		md, err := json.Marshal(metadata) // map keys come out sorted
		if err != nil {
			return nil, err
		}
		buf.WriteString(`"__metadata__":`)
		buf.Write(md)
	}
	var off int64
	for _, i := range order {
		t := &tensors[i]
		sep()
		name, err := json.Marshal(t.Name)
		if err != nil {
			return nil, err
		}
		buf.Write(name)
		buf.WriteString(`:{"dtype":"`)
		buf.WriteString(t.DType.String())
		buf.WriteString(`","shape":[`)
		for j, d := range t.Shape {
			if j > 0 {
				buf.WriteByte(',')
			}
			buf.WriteString(strconv.FormatInt(d, 10))
		}
		buf.WriteString(`],"data_offsets":[`)
		buf.WriteString(strconv.FormatInt(off, 10))
		buf.WriteByte(',')
		off += sizes[i]
		buf.WriteString(strconv.FormatInt(off, 10))
		buf.WriteString("]}")
	}
	buf.WriteByte('}')
	for buf.Len()%8 != 0 {
		buf.WriteByte(' ')
	}
	if buf.Len() > MaxHeaderSize {
		return nil, fmt.Errorf("header would be %d bytes, over the %d limit", buf.Len(), MaxHeaderSize)
	}
	return buf.Bytes(), nil
}

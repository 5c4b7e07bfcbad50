package safetensors

import (
	"fmt"
	"io"
	"os"
	"sync"

	"github.com/dcdit/dcdit/loaders/dtype"
	"github.com/dcdit/dcdit/loaders/mmapfile"
)

// File is an open safetensors file. Opening reads the header only; the file
// is memory-mapped read-only the first time tensor data is requested.
// A File is safe for concurrent use.
type File struct {
	Path   string
	Header *Header

	f     *os.File
	size  int64
	index map[string]int

	mapOnce sync.Once
	mapped  *mmapfile.Map
	mapErr  error
}

// Open opens and validates the safetensors file at path.
func Open(path string) (*File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("safetensors: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("safetensors: %w", err)
	}
	if st.IsDir() {
		f.Close()
		return nil, fmt.Errorf("safetensors: %s: is a directory", path)
	}
	h, err := ReadHeader(f, st.Size(), path)
	if err != nil {
		f.Close()
		return nil, err
	}
	sf := &File{Path: path, Header: h, f: f, size: st.Size(), index: make(map[string]int, len(h.Tensors))}
	for i, t := range h.Tensors {
		sf.index[t.Name] = i
	}
	return sf, nil
}

// Size is the file's length in bytes.
func (f *File) Size() int64 { return f.size }

// Tensors lists the header entries in data order.
func (f *File) Tensors() []TensorInfo { return f.Header.Tensors }

// Metadata is the __metadata__ map (nil when absent).
func (f *File) Metadata() map[string]string { return f.Header.Metadata }

// Tensor returns a lazy handle to the named tensor.
func (f *File) Tensor(name string) (*Tensor, bool) {
	i, ok := f.index[name]
	if !ok {
		return nil, false
	}
	return &Tensor{TensorInfo: f.Header.Tensors[i], file: f}, true
}

// Close unmaps and closes the file. Slices returned by tensor handles must
// not be used afterwards.
func (f *File) Close() error {
	var err error
	if f.mapped != nil {
		err = f.mapped.Close()
	}
	if cerr := f.f.Close(); err == nil {
		err = cerr
	}
	return err
}

func (f *File) data() ([]byte, error) {
	f.mapOnce.Do(func() {
		f.mapped, f.mapErr = mmapfile.Open(f.f, f.size)
	})
	if f.mapErr != nil {
		return nil, fmt.Errorf("safetensors: %w", f.mapErr)
	}
	return f.mapped.Data, nil
}

// Tensor is a lazy handle to one tensor of a File.
type Tensor struct {
	TensorInfo
	file *File
}

// File returns the file holding the tensor.
func (t *Tensor) File() *File { return t.file }

// Offset is the absolute file offset of the tensor's first byte.
func (t *Tensor) Offset() int64 { return t.file.Header.DataStart + t.Begin }

// Reader returns a reader over the tensor's raw little-endian bytes that
// does not map the file.
func (t *Tensor) Reader() *io.SectionReader {
	return io.NewSectionReader(t.file.f, t.Offset(), t.Size())
}

// Bytes returns the tensor's raw bytes. The slice aliases a read-only memory
// map: writing to it faults. Copy it to modify.
func (t *Tensor) Bytes() ([]byte, error) {
	data, err := t.file.data()
	if err != nil {
		return nil, err
	}
	off := t.Offset()
	return data[off : off+t.Size() : off+t.Size()], nil
}

// Float32 returns the tensor's values as float32. For F32 data at a 4-byte
// aligned address the result aliases the read-only memory map (no copy);
// otherwise the values are decoded into a new slice.
func (t *Tensor) Float32() ([]float32, error) {
	raw, err := t.Bytes()
	if err != nil {
		return nil, err
	}
	v, err := dtype.ToFloat32(raw, t.DType)
	if err != nil {
		return nil, fmt.Errorf("safetensors: %s: tensor %q: %w", t.file.Path, t.Name, err)
	}
	return v, nil
}

// Int64 decodes an integer or BOOL tensor.
func (t *Tensor) Int64() ([]int64, error) {
	raw, err := t.Bytes()
	if err != nil {
		return nil, err
	}
	v, err := dtype.ToInt64(raw, t.DType)
	if err != nil {
		return nil, fmt.Errorf("safetensors: %s: tensor %q: %w", t.file.Path, t.Name, err)
	}
	return v, nil
}

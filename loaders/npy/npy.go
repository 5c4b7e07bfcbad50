// Package npy reads and writes NumPy's .npy arrays and .npz archives, the
// formats in which FID tools exchange sample batches (DiT's sample_ddp.py
// writes an uint8 arr_0 [N, H, W, 3]) and Inception statistics
// (pytorch-fid's --save-stats and the ADM reference batches: float64 mu
// and sigma).
//
// Only C-order arrays of plain numeric types are read (|b1, |u1, |i1, and
// little-endian <i2 <u2 <f2 <i4 <u4 <f4 <i8 <u8 <f8); object arrays, whose
// data is a pickle, are refused, as are Fortran-order and big-endian ones.
// Every size a header or a zip directory declares is checked against the
// bytes actually there before anything is allocated for it.
//
// An .npz is a zip archive of NAME.npy members, stored (np.savez) or
// deflate-compressed (np.savez_compressed), with zip64 records as numpy
// writes them. Archive opens one lazily: members are found by name and
// read whole (Member.Read) or streamed in whole rows (Member.Rows), so a
// 50 000×256×256×3 batch never has to sit in memory. WriteNPZ writes one
// atomically, and its Writer streams a member whose shape is declared up
// front in as many pieces as the caller likes.
package npy

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"os"
	"slices"

	"github.com/dcdit/dcdit/loaders/atomicfile"
	"github.com/dcdit/dcdit/loaders/dtype"
)

// Array is an in-memory array: Data holds its elements in C order,
// little-endian.
type Array struct {
	DType dtype.DType
	Shape []int
	Data  []byte
}

// Header returns the header describing a.
func (a *Array) Header() Header { return Header{DType: a.DType, Shape: a.Shape} }

// check reports an Array whose data does not match its dtype and shape.
func (a *Array) check() error {
	size, err := checkedSize(a.Header(), math.MaxInt64)
	if err != nil {
		return err
	}
	if int64(len(a.Data)) != size {
		return fmt.Errorf("array %s has %d data bytes, want %d", a.Header(), len(a.Data), size)
	}
	return nil
}

// FromFloat64 returns a float64 array of the given shape holding v.
func FromFloat64(shape []int, v []float64) *Array {
	b := make([]byte, 0, 8*len(v))
	for _, x := range v {
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(x))
	}
	return &Array{DType: dtype.F64, Shape: slices.Clone(shape), Data: b}
}

// FromFloat32 returns a float32 array of the given shape holding v.
func FromFloat32(shape []int, v []float32) *Array {
	return &Array{DType: dtype.F32, Shape: slices.Clone(shape), Data: dtype.F32Bytes(v)}
}

// Float64s returns the elements of a float64 array; another dtype is an
// error (widening would hide that a file is not what it should be).
func (a *Array) Float64s() ([]float64, error) {
	if a.DType != dtype.F64 {
		return nil, fmt.Errorf("dtype is %s, want <f8", a.Header())
	}
	if err := a.check(); err != nil {
		return nil, err
	}
	v := make([]float64, len(a.Data)/8)
	for i := range v {
		v[i] = math.Float64frombits(binary.LittleEndian.Uint64(a.Data[8*i:]))
	}
	return v, nil
}

// Float32s returns the elements of a float32 array; another dtype is an
// error.
func (a *Array) Float32s() ([]float32, error) {
	if a.DType != dtype.F32 {
		return nil, fmt.Errorf("dtype is %s, want <f4", a.Header())
	}
	if err := a.check(); err != nil {
		return nil, err
	}
	return dtype.ToFloat32(a.Data, dtype.F32)
}

// Decode reads one .npy array from r, which holds exactly size bytes.
func Decode(r io.Reader, size int64) (*Array, error) {
	h, n, err := ReadHeader(r, size)
	if err != nil {
		return nil, err
	}
	data := make([]byte, size-n)
	if _, err := io.ReadFull(r, data); err != nil {
		return nil, fmt.Errorf("reading %s data: %w", h, noEOF(err))
	}
	return &Array{DType: h.DType, Shape: h.Shape, Data: data}, nil
}

// ReadNPY reads the .npy file at path.
func ReadNPY(path string) (*Array, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("npy: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("npy: %w", err)
	}
	a, err := Decode(f, st.Size())
	if err != nil {
		return nil, fmt.Errorf("npy: %s: %w", path, err)
	}
	return a, nil
}

// Encode writes a as a .npy array (the bytes np.save writes).
func Encode(w io.Writer, a *Array) error {
	if err := a.check(); err != nil {
		return err
	}
	h, err := EncodeHeader(a.Header())
	if err != nil {
		return err
	}
	if _, err := w.Write(h); err != nil {
		return err
	}
	_, err = w.Write(a.Data)
	return err
}

// WriteNPY writes a to path atomically.
func WriteNPY(path string, a *Array) error {
	if err := atomicfile.Write(path, func(w io.Writer) error { return Encode(w, a) }); err != nil {
		return fmt.Errorf("npy: %w", err)
	}
	return nil
}

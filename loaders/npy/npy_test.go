package npy

import (
	"bytes"
	"encoding/binary"
	"math"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/dcdit/dcdit/loaders/dtype"
)

// The headers numpy 1.24's np.save writes for these arrays (format
// conformance, from numpy.lib.format._write_array_header).
func TestEncodeHeaderMatchesNumpy(t *testing.T) {
	pad := func(dict string) string {
		return "\x93NUMPY\x01\x00v\x00" + dict + strings.Repeat(" ", 118-len(dict)-1) + "\n"
	}
	tests := []struct {
		h    Header
		want string
	}{
		{Header{dtype.F64, []int{2048}}, pad("{'descr': '<f8', 'fortran_order': False, 'shape': (2048,), }" + strings.Repeat(" ", 17))},
		{Header{dtype.U8, []int{4, 512, 24, 3}}, pad("{'descr': '|u1', 'fortran_order': False, 'shape': (4, 512, 24, 3), }" + strings.Repeat(" ", 20))},
		{Header{dtype.F64, nil}, pad("{'descr': '<f8', 'fortran_order': False, 'shape': (), }")},
		{Header{dtype.F32, []int{0}}, pad("{'descr': '<f4', 'fortran_order': False, 'shape': (0,), }" + strings.Repeat(" ", 20))},
		{Header{dtype.I64, []int{3, 4}}, pad("{'descr': '<i8', 'fortran_order': False, 'shape': (3, 4), }" + strings.Repeat(" ", 20))},
		{Header{dtype.F64, []int{123456789012, 2}}, pad("{'descr': '<f8', 'fortran_order': False, 'shape': (123456789012, 2), }" + strings.Repeat(" ", 9))},
	}
	for _, tt := range tests {
		t.Run(tt.h.String(), func(t *testing.T) {
			got, err := EncodeHeader(tt.h)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want {
				t.Errorf("header\n%q\nwant\n%q", got, tt.want)
			}
		})
	}
}

func TestHeaderAlignment(t *testing.T) {
	for dims := 0; dims < 40; dims++ {
		shape := make([]int, dims)
		for i := range shape {
			shape[i] = 1 + i%3
		}
		b, err := EncodeHeader(Header{dtype.F32, shape})
		if err != nil {
			t.Fatal(err)
		}
		if len(b)%align != 0 || b[len(b)-1] != '\n' {
			t.Errorf("%d dims: header of %d bytes, want a multiple of %d ending in a newline", dims, len(b), align)
		}
		h, n, err := ReadHeader(bytes.NewReader(b), int64(len(b))+Header{dtype.F32, shape}.DataSize())
		if err != nil || n != int64(len(b)) || !equalShape(h.Shape, shape) {
			t.Errorf("%d dims: read back %v, %d, %v", dims, h, n, err)
		}
	}
}

func equalShape(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestRoundTrip(t *testing.T) {
	tests := []struct {
		name  string
		dt    dtype.DType
		shape []int
	}{
		{"u8 images", dtype.U8, []int{2, 3, 4, 3}},
		{"f64 matrix", dtype.F64, []int{5, 5}},
		{"f32 vector", dtype.F32, []int{7}},
		{"i64 scalar", dtype.I64, nil},
		{"i32 empty", dtype.I32, []int{0, 3}},
		{"bool", dtype.BOOL, []int{9}},
		{"f16", dtype.F16, []int{2, 2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := Header{tt.dt, tt.shape}
			data := make([]byte, h.DataSize())
			for i := range data {
				data[i] = byte(i*7 + 3)
			}
			if tt.dt == dtype.BOOL {
				for i := range data {
					data[i] &= 1
				}
			}
			a := &Array{DType: tt.dt, Shape: tt.shape, Data: data}
			path := filepath.Join(t.TempDir(), "a.npy")
			if err := WriteNPY(path, a); err != nil {
				t.Fatal(err)
			}
			got, err := ReadNPY(path)
			if err != nil {
				t.Fatal(err)
			}
			if got.DType != tt.dt || !equalShape(got.Shape, tt.shape) || !bytes.Equal(got.Data, data) {
				t.Errorf("read back %s, want %s with the same data", got.Header(), h)
			}
		})
	}
}

func TestTypedAccess(t *testing.T) {
	v := []float64{1.5, -2, math.Pi, 1e-300}
	a := FromFloat64([]int{2, 2}, v)
	got, err := a.Float64s()
	if err != nil {
		t.Fatal(err)
	}
	for i := range v {
		if got[i] != v[i] {
			t.Errorf("element %d: %v, want %v", i, got[i], v[i])
		}
	}
	if _, err := a.Float32s(); err == nil || !strings.Contains(err.Error(), "want <f4") {
		t.Errorf("Float32s of an <f8 array: %v, want a dtype error", err)
	}
	f := FromFloat32([]int{3}, []float32{1, 2, 3})
	if _, err := f.Float64s(); err == nil || !strings.Contains(err.Error(), "<f4 (3,)") {
		t.Errorf("Float64s of an <f4 array: %v, want an error naming the dtype and shape", err)
	}
	if g, err := f.Float32s(); err != nil || g[2] != 3 {
		t.Errorf("Float32s: %v, %v", g, err)
	}
	bad := &Array{DType: dtype.F64, Shape: []int{3}, Data: make([]byte, 16)}
	if _, err := bad.Float64s(); err == nil || !strings.Contains(err.Error(), "16 data bytes, want 24") {
		t.Errorf("short array: %v", err)
	}
}

// file builds a .npy file from a header dict (padded like numpy's) and data.
func file(version byte, dict string, data []byte) []byte {
	b := []byte(magic)
	b = append(b, version, 0)
	text := dict + "\n"
	if version == 1 {
		b = binary.LittleEndian.AppendUint16(b, uint16(len(text)))
	} else {
		b = binary.LittleEndian.AppendUint32(b, uint32(len(text)))
	}
	b = append(b, text...)
	return append(b, data...)
}

func TestDecodeErrors(t *testing.T) {
	f8 := make([]byte, 16)
	tests := []struct {
		name string
		data []byte
		want string
	}{
		{"fortran order", file(1, "{'descr': '<f8', 'fortran_order': True, 'shape': (2,), }", f8), "fortran_order is True"},
		{"object dtype", file(1, "{'descr': '|O', 'fortran_order': False, 'shape': (2,), }", f8), "object array"},
		{"big-endian", file(1, "{'descr': '>f8', 'fortran_order': False, 'shape': (2,), }", f8), "big-endian"},
		{"structured", file(1, "{'descr': [('a', '<f8')], 'fortran_order': False, 'shape': (2,), }", f8), "structured dtype"},
		{"unicode dtype", file(1, "{'descr': '<U3', 'fortran_order': False, 'shape': (2,), }", f8), "not supported"},
		{"bad magic", append([]byte("\x93NUMPX\x01\x00"), f8...), "not a .npy array"},
		{"version 4", file(4, "{}", nil), "format version 4.0"},
		{"short data", file(1, "{'descr': '<f8', 'fortran_order': False, 'shape': (3,), }", f8), "declares more data than the 16 bytes found"},
		{"trailing data", file(1, "{'descr': '<f8', 'fortran_order': False, 'shape': (1,), }", f8), "declares 8 data bytes, found 16"},
		{"huge shape", file(1, "{'descr': '<f8', 'fortran_order': False, 'shape': (4611686018427387904, 4), }", f8), "declares more data than the 16 bytes"},
		{"overflowing int", file(1, "{'descr': '<f8', 'fortran_order': False, 'shape': (99999999999999999999,), }", f8), "out of range"},
		{"missing key", file(1, "{'descr': '<f8', 'shape': (2,), }", f8), `lacks the key "fortran_order"`},
		{"extra key", file(1, "{'descr': '<f8', 'fortran_order': False, 'shape': (2,), 'x': 1}", f8), "keys beyond"},
		{"duplicate key", file(1, "{'descr': '<f8', 'descr': '<f8', 'fortran_order': False, 'shape': (2,), }", f8), "appears twice"},
		{"shape not a tuple", file(1, "{'descr': '<f8', 'fortran_order': False, 'shape': (2), }", f8), "want a tuple"},
		{"negative-looking shape", file(1, "{'descr': '<f8', 'fortran_order': False, 'shape': (-2,), }", f8), "unexpected"},
		{"header longer than file", append([]byte(magic+"\x01\x00\xff\xff"), f8...), "header length 65535 exceeds"},
		{"deep nesting", file(1, strings.Repeat("(", 50)+strings.Repeat(")", 50), nil), "nested deeper"},
		{"truncated", []byte(magic[:4]), "unexpected EOF"},
		{"not a dict", file(1, "(1, 2)", nil), "not a dict"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Decode(bytes.NewReader(tt.data), int64(len(tt.data)))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %v, want one containing %q", err, tt.want)
			}
		})
	}
}

// Version 2.0 and 3.0 headers (4-byte length) and headers with other
// spacing, quotes and key order read like numpy's own.
func TestDecodeVariants(t *testing.T) {
	data := make([]byte, 6)
	tests := []struct {
		name string
		file []byte
	}{
		{"v2", file(2, "{'descr': '<i2', 'fortran_order': False, 'shape': (3,), }", data)},
		{"v3", file(3, "{'descr': '<i2', 'fortran_order': False, 'shape': (3,), }", data)},
		{"reordered, double quotes", file(1, `{"shape":(3,),"fortran_order":False,"descr":"<i2"}`, data)},
		{"list shape element spacing", file(1, "{ 'descr' : '<i2' , 'fortran_order' : False , 'shape' : ( 3 , ) }", data)},
		{"2-d", file(1, "{'descr': '<i2', 'fortran_order': False, 'shape': (1, 3)}", data)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, err := Decode(bytes.NewReader(tt.file), int64(len(tt.file)))
			if err != nil {
				t.Fatal(err)
			}
			if a.DType != dtype.I16 || a.Header().NumElements() != 3 {
				t.Errorf("read %s", a.Header())
			}
		})
	}
}

// A header that declares far more data than the file holds is refused
// before anything of that size is allocated.
func TestLyingSizesDoNotAllocate(t *testing.T) {
	data := file(1, "{'descr': '<f8', 'fortran_order': False, 'shape': (1000000000,), }", make([]byte, 64))
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range 10 {
		if _, err := Decode(bytes.NewReader(data), int64(len(data))); err == nil {
			t.Fatal("accepted")
		}
	}
	runtime.ReadMemStats(&after)
	if d := after.TotalAlloc - before.TotalAlloc; !(d < 1<<20) {
		t.Errorf("10 refused reads allocated %d bytes", d)
	}
}

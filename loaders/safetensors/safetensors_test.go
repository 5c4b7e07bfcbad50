package safetensors

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"unsafe"

	"github.com/dcdit/dcdit/loaders/dtype"
)

func f32bytes(vals ...float32) []byte {
	b := make([]byte, 4*len(vals))
	for i, v := range vals {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
	}
	return b
}

func TestWriteReadRoundTrip(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "m.safetensors")
	tensors := []WriteTensor{
		{Name: "b.weight", DType: dtype.F32, Shape: []int64{2, 3}, Data: f32bytes(1, 2, 3, 4, 5, 6)},
		{Name: "a.half", DType: dtype.F16, Shape: []int64{2}, Data: []byte{0x00, 0x3c, 0x00, 0xc0}}, // 1, -2
		{Name: "c.ids", DType: dtype.I64, Shape: []int64{1}, Data: []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}},
		{Name: "d.mask", DType: dtype.U8, Shape: []int64{3}, Data: []byte{0, 1, 1}},
		{Name: "e.scalar", DType: dtype.F32, Shape: []int64{}, Data: f32bytes(7)},
		{Name: "f.empty", DType: dtype.F32, Shape: []int64{0, 5}, Data: []byte{}},
		{Name: "g.streamed", DType: dtype.F32, Shape: []int64{2}, Src: bytes.NewReader(f32bytes(8, 9))},
	}
	md := map[string]string{"format": "pt", "note": "ünïcode"}
	if err := Write(path, tensors, md); err != nil {
		t.Fatal(err)
	}
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if !reflect.DeepEqual(f.Metadata(), md) {
		t.Errorf("metadata = %v, want %v", f.Metadata(), md)
	}
	if f.Header.DataStart%8 != 0 {
		t.Errorf("data starts at %d, not 8-byte aligned", f.Header.DataStart)
	}
	// Largest alignment first, then by name.
	var order []string
	for _, ti := range f.Tensors() {
		order = append(order, ti.Name)
	}
	want := []string{"c.ids", "b.weight", "e.scalar", "f.empty", "g.streamed", "a.half", "d.mask"}
	if !reflect.DeepEqual(order, want) {
		t.Errorf("data order = %v, want %v", order, want)
	}
	checks := []struct {
		name string
		want []float32
	}{
		{"b.weight", []float32{1, 2, 3, 4, 5, 6}},
		{"a.half", []float32{1, -2}},
		{"d.mask", []float32{0, 1, 1}},
		{"e.scalar", []float32{7}},
		{"f.empty", []float32{}},
		{"g.streamed", []float32{8, 9}},
	}
	for _, c := range checks {
		tt, ok := f.Tensor(c.name)
		if !ok {
			t.Fatalf("tensor %q not found", c.name)
		}
		got, err := tt.Float32()
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, c.want) && !(len(got) == 0 && len(c.want) == 0) {
			t.Errorf("%s = %v, want %v", c.name, got, c.want)
		}
	}
	ids, _ := f.Tensor("c.ids")
	if v, err := ids.Int64(); err != nil || !reflect.DeepEqual(v, []int64{-1}) {
		t.Errorf("c.ids = %v, %v; want [-1]", v, err)
	}
}

// F32 tensors at aligned offsets come straight from the map.
func TestFloat32IsZeroCopyWhenAligned(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m.safetensors")
	if err := Write(path, []WriteTensor{{Name: "w", DType: dtype.F32, Shape: []int64{4}, Data: f32bytes(1, 2, 3, 4)}}, nil); err != nil {
		t.Fatal(err)
	}
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w, _ := f.Tensor("w")
	raw, err := w.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	vals, err := w.Float32()
	if err != nil {
		t.Fatal(err)
	}
	if len(vals) != 4 || unsafe.Pointer(&raw[0]) != unsafe.Pointer(&vals[0]) {
		t.Errorf("Float32 copied the data; want a view of the mapped bytes")
	}
}

func TestWriterRejectsBadTensors(t *testing.T) {
	dir := t.TempDir()
	cases := []struct {
		name    string
		tensors []WriteTensor
		want    string
	}{
		{"duplicate", []WriteTensor{{Name: "a", DType: dtype.U8, Shape: []int64{1}, Data: []byte{1}}, {Name: "a", DType: dtype.U8, Shape: []int64{1}, Data: []byte{1}}}, `"a" given twice`},
		{"short data", []WriteTensor{{Name: "a", DType: dtype.F32, Shape: []int64{2}, Data: []byte{1}}}, "1 data bytes"},
		{"reserved", []WriteTensor{{Name: "__metadata__", DType: dtype.U8, Shape: []int64{1}, Data: []byte{1}}}, "reserved"},
		{"short stream", []WriteTensor{{Name: "a", DType: dtype.F32, Shape: []int64{2}, Src: bytes.NewReader([]byte{1, 2})}}, "copied 2 of 8 bytes"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(dir, c.name+".safetensors")
			err := Write(path, c.tensors, nil)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want it to mention %q", err, c.want)
			}
			if _, statErr := os.Stat(path); !os.IsNotExist(statErr) {
				t.Errorf("a failed write left %s behind", path)
			}
			left, _ := filepath.Glob(filepath.Join(dir, ".*tmp*"))
			if len(left) != 0 {
				t.Errorf("temporary files left behind: %v", left)
			}
		})
	}
}

func TestParseHeaderErrors(t *testing.T) {
	cases := []struct {
		name    string
		header  string
		dataLen int64
		want    string
	}{
		{"valid", `{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}`, 8, ""},
		{"valid padded", `{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}    `, 8, ""},
		{"unordered entries", `{"b":{"dtype":"U8","shape":[1],"data_offsets":[4,5]},"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}`, 5, ""},
		{"zero-size tensors", `{"a":{"dtype":"F32","shape":[0],"data_offsets":[0,0]},"b":{"dtype":"F32","shape":[3,0],"data_offsets":[0,0]}}`, 0, ""},
		{"sub-byte dtype", `{"a":{"dtype":"F4","shape":[3],"data_offsets":[0,2]}}`, 2, "not a whole number of bytes"},
		{"trailing garbage", `{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}xx`, 1, "trailing data"},
		{"first offset not zero", `{"a":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}}`, 2, "hole of 1 bytes"},
		{"offsets reversed", `{"a":{"dtype":"U8","shape":[1],"data_offsets":[2,1]}}`, 2, "increasing pair"},
		{"three offsets", `{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1,2]}}`, 2, "has 3 values"},
		{"shape not list", `{"a":{"dtype":"U8","shape":"x","data_offsets":[0,1]}}`, 1, `tensor "a"`},
		{"fractional shape", `{"a":{"dtype":"U8","shape":[1.5],"data_offsets":[0,1]}}`, 1, `tensor "a"`},
		{"metadata not object", `{"__metadata__":[1]}`, 0, "__metadata__"},
		{"over 2^48 bytes", `{"a":{"dtype":"U8","shape":[281474976710657],"data_offsets":[0,281474976710657]}}`, 281474976710657, "2^48"},
		{"lowercase dtype", `{"a":{"dtype":"f32","shape":[1],"data_offsets":[0,4]}}`, 4, `unknown dtype "f32"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseHeader([]byte(c.header), c.dataLen, "x.safetensors")
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Fatalf("err = %v, want it to mention %q", err, c.want)
			case c.want != "" && !errors.Is(err, ErrFormat):
				t.Fatalf("err = %v does not wrap ErrFormat", err)
			case c.want != "" && !strings.Contains(err.Error(), "x.safetensors"):
				t.Fatalf("err = %v does not name the file", err)
			}
		})
	}
}

func TestShardedRoundTrip(t *testing.T) {
	dir := t.TempDir()
	var tensors []WriteTensor
	for i, name := range []string{"a", "b", "c", "d", "e"} {
		tensors = append(tensors, WriteTensor{Name: name, DType: dtype.F32, Shape: []int64{4}, Data: f32bytes(float32(i), 1, 2, 3)})
	}
	index, err := WriteSharded(dir, "model", tensors, 40, map[string]string{"format": "pt"})
	if err != nil {
		t.Fatal(err)
	}
	s, err := OpenSharded(index)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if len(s.Shards) != 3 {
		t.Fatalf("%d shards, want 3 (16-byte tensors in 40-byte shards)", len(s.Shards))
	}
	if got := filepath.Base(s.Shards[0].Path); got != "model-00001-of-00003.safetensors" {
		t.Errorf("first shard is %s", got)
	}
	if s.Index.TotalSize != 80 || len(s.Warnings) != 0 {
		t.Errorf("total_size %d, warnings %v; want 80 and none", s.Index.TotalSize, s.Warnings)
	}
	e, ok := s.Tensor("e")
	if !ok {
		t.Fatal("tensor e not found")
	}
	if v, err := e.Float32(); err != nil || v[0] != 4 {
		t.Errorf("e = %v, %v", v, err)
	}
	// Everything fits in one shard: a plain file, no index.
	single, err := WriteSharded(t.TempDir(), "model", tensors, 1<<20, nil)
	if err != nil || filepath.Base(single) != "model.safetensors" {
		t.Errorf("single shard written as %s, %v", single, err)
	}
}

func TestShardedTotalSizeMismatchWarns(t *testing.T) {
	dir := t.TempDir()
	shard := ShardName("m", 1, 1)
	if err := Write(filepath.Join(dir, shard), []WriteTensor{{Name: "a", DType: dtype.U8, Shape: []int64{3}, Data: []byte{1, 2, 3}}}, nil); err != nil {
		t.Fatal(err)
	}
	index := filepath.Join(dir, "m"+IndexSuffix)
	if err := WriteIndex(index, map[string]string{"a": shard}, 99); err != nil {
		t.Fatal(err)
	}
	s, err := OpenSharded(index)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if len(s.Warnings) != 1 || !strings.Contains(s.Warnings[0], "99") {
		t.Errorf("warnings = %v, want one about total_size 99", s.Warnings)
	}
}

func FuzzParseHeader(f *testing.F) {
	seeds := []string{
		`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}`,
		`{"__metadata__":{"format":"pt"},"a":{"dtype":"BF16","shape":[2,1],"data_offsets":[0,4]},"b":{"dtype":"I64","shape":[],"data_offsets":[4,12]}}`,
		`{"a":{"dtype":"F4","shape":[4],"data_offsets":[0,2]}}  `,
		`{}`, `[]`, `{"a":1}`, `{"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}}`,
	}
	for _, s := range seeds {
		f.Add([]byte(s), int64(12))
	}
	f.Fuzz(func(t *testing.T, header []byte, dataLen int64) {
		h, err := ParseHeader(header, dataLen, "fuzz")
		if err != nil {
			if !errors.Is(err, ErrFormat) {
				t.Fatalf("error does not wrap ErrFormat: %v", err)
			}
			return
		}
		// An accepted header tiles exactly dataLen bytes.
		var pos int64
		for _, ti := range h.Tensors {
			if ti.Begin != pos || ti.End < ti.Begin {
				t.Fatalf("accepted a layout with a gap or overlap at %q", ti.Name)
			}
			pos = ti.End
		}
		if pos != dataLen {
			t.Fatalf("accepted %d data bytes for a %d-byte buffer", pos, dataLen)
		}
	})
}

package pytorch

import (
	"archive/zip"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/dcdit/dcdit/loaders/dtype"
)

const torchDir = "../../testdata/pytorch"

// decodeValues widens little-endian elements of d to float64 (test-local, so
// that these tests do not depend on the dtype codecs).
func decodeValues(t *testing.T, b []byte, d dtype.DType) []float64 {
	t.Helper()
	es := d.Size()
	if es == 0 || len(b)%es != 0 {
		t.Fatalf("decodeValues: %d bytes of %s", len(b), d)
	}
	out := make([]float64, len(b)/es)
	for i := range out {
		e := b[i*es : (i+1)*es]
		switch d {
		case dtype.F32:
			out[i] = float64(math.Float32frombits(binary.LittleEndian.Uint32(e)))
		case dtype.F64:
			out[i] = math.Float64frombits(binary.LittleEndian.Uint64(e))
		case dtype.BF16:
			out[i] = float64(math.Float32frombits(uint32(binary.LittleEndian.Uint16(e)) << 16))
		case dtype.F16:
			out[i] = halfToFloat64(binary.LittleEndian.Uint16(e))
		case dtype.I64:
			out[i] = float64(int64(binary.LittleEndian.Uint64(e)))
		case dtype.I32:
			out[i] = float64(int32(binary.LittleEndian.Uint32(e)))
		case dtype.BOOL, dtype.U8:
			out[i] = float64(e[0])
		case dtype.I8:
			out[i] = float64(int8(e[0]))
		case dtype.I16:
			out[i] = float64(int16(binary.LittleEndian.Uint16(e)))
		default:
			t.Fatalf("decodeValues: dtype %s", d)
		}
	}
	return out
}

func halfToFloat64(h uint16) float64 {
	sign := 1.0
	if h&0x8000 != 0 {
		sign = -1
	}
	exp, man := int(h>>10&0x1f), float64(h&0x3ff)
	switch exp {
	case 0:
		return sign * math.Ldexp(man, -24)
	case 0x1f:
		if man != 0 {
			return math.NaN()
		}
		return sign * math.Inf(1)
	}
	return sign * math.Ldexp(1+man/1024, exp-15)
}

type expectedTensor struct {
	Name          string    `json:"name"`
	DType         string    `json:"dtype"`
	Shape         []int64   `json:"shape"`
	Strides       []int64   `json:"strides"`
	StorageOffset int64     `json:"storage_offset"`
	Values        []float64 `json:"values"`
}

type expectedFile struct {
	Selected     string           `json:"selected"`
	TopLevel     []string         `json:"top_level"`
	Tensors      []expectedTensor `json:"tensors"`
	ModelTensors []expectedTensor `json:"model_tensors"`
	Args         map[string]any   `json:"args"`
}

func loadExpected(t *testing.T) map[string]json.RawMessage {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(torchDir, "expected.json"))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// checkTensors compares f's tensors, and their bytes read from the file,
// with what torch said.
func checkTensors(t *testing.T, path string, got []Tensor, want []expectedTensor) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d tensors, want %d", path, len(got), len(want))
	}
	fh, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	for i, w := range want {
		g := got[i]
		if g.Name != w.Name || g.DType.String() != w.DType || !reflect.DeepEqual(append([]int64{}, g.Shape...), append([]int64{}, w.Shape...)) ||
			!reflect.DeepEqual(append([]int64{}, g.Strides...), append([]int64{}, w.Strides...)) || g.StorageOffset != w.StorageOffset {
			t.Errorf("%s: tensor %d = %s %s %v strides %v offset %d, want %s %s %v strides %v offset %d", path, i,
				g.Name, g.DType, g.Shape, g.Strides, g.StorageOffset, w.Name, w.DType, w.Shape, w.Strides, w.StorageOffset)
			continue
		}
		b, err := g.ReadBytes(fh)
		if err != nil {
			t.Errorf("%s: %v", path, err)
			continue
		}
		vals := decodeValues(t, b, g.DType)
		if len(vals) != len(w.Values) {
			t.Errorf("%s: tensor %q: %d values, want %d", path, g.Name, len(vals), len(w.Values))
			continue
		}
		for j := range vals {
			if vals[j] != w.Values[j] {
				t.Errorf("%s: tensor %q: value %d = %v, want %v", path, g.Name, j, vals[j], w.Values[j])
				break
			}
		}
	}
}

func TestOpenTorchFiles(t *testing.T) {
	exp := loadExpected(t)
	tests := []struct {
		file     string
		selected string
	}{
		{"bare.pt", ""},
		{"train.pt", "ema"},
		{"proto4.pt", ""},
	}
	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			var want expectedFile
			if err := json.Unmarshal(exp[tc.file], &want); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(torchDir, tc.file)
			f, err := Open(path)
			if err != nil {
				t.Fatal(err)
			}
			if f.Path != path || f.Selected != tc.selected {
				t.Errorf("Path, Selected = %q, %q, want %q, %q", f.Path, f.Selected, path, tc.selected)
			}
			if !reflect.DeepEqual(f.TopLevel, want.TopLevel) {
				t.Errorf("TopLevel = %q, want %q", f.TopLevel, want.TopLevel)
			}
			checkTensors(t, path, f.Tensors, want.Tensors)
			if want.Args == nil {
				if f.Args != nil {
					t.Errorf("Args = %v, want nil", f.Args)
				}
				return
			}
			// JSON numbers are float64 and tuples lists; normalise ours the same way.
			gotArgs, _ := json.Marshal(f.Args)
			wantArgs, _ := json.Marshal(want.Args)
			if string(gotArgs) != string(wantArgs) {
				t.Errorf("Args = %s\nwant %s", gotArgs, wantArgs)
			}
			if v, ok := f.Args["image_size"].(int64); !ok || v != 256 {
				t.Errorf("Args[image_size] = %#v, want int64 256", f.Args["image_size"])
			}
			if v, ok := f.Args["model"].(string); !ok || v != "DiT-S/2" {
				t.Errorf("Args[model] = %#v, want \"DiT-S/2\"", f.Args["model"])
			}
		})
	}
}

func TestTorchLayouts(t *testing.T) {
	path := filepath.Join(torchDir, "bare.pt")
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]Tensor{}
	for _, tt := range f.Tensors {
		byName[tt.Name] = tt
		if tt.FileOffset%64 != 0 {
			t.Errorf("%s: storage at file offset %d, torch aligns to 64", tt.Name, tt.FileOffset)
		}
	}
	a, b := byName["tied_a"], byName["tied_b"]
	if a.Storage != b.Storage || a.FileOffset != b.FileOffset {
		t.Errorf("tied tensors use storages %q@%d and %q@%d, want one", a.Storage, a.FileOffset, b.Storage, b.FileOffset)
	}
	offA, nA, okA := a.ByteRange()
	offB, nB, okB := b.ByteRange()
	if !okA || !okB || offB != offA+8 || nA != 24 || nB != 12 {
		t.Errorf("tied ByteRanges = (%d,%d,%v) (%d,%d,%v), want b = a+8, 12 bytes", offA, nA, okA, offB, nB, okB)
	}
	tr := byName["transposed"]
	if tr.Contiguous() {
		t.Error("transposed tensor reported contiguous")
	}
	if _, _, ok := tr.ByteRange(); ok {
		t.Error("transposed tensor has a ByteRange")
	}
	for name, want := range map[string]bool{"scalar": true, "empty": true, "w_f32": true} {
		tt := byName[name]
		off, n, ok := tt.ByteRange()
		if ok != want || (name == "empty" && n != 0) || (name == "scalar" && (n != 4 || off != tt.FileOffset)) {
			t.Errorf("%s: ByteRange = %d, %d, %v", name, off, n, ok)
		}
	}
}

func TestOpenRejectsTorchFiles(t *testing.T) {
	tests := []struct {
		file string
		want []string
	}{
		{"malicious.pt", []string{"malicious.pt", "data.pkl", `global "posix.system"`, "not allowed", "collections.OrderedDict"}},
		{"script.pt", []string{"script.pt", "TorchScript", "constants.pkl", "state_dict()", "safetensors"}},
	}
	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			_, err := Open(filepath.Join(torchDir, tc.file))
			assertErr(t, err, tc.want...)
		})
	}
}

func assertErr(t *testing.T, err error, want ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want one containing %q", want)
	}
	msg := err.Error()
	if !strings.HasPrefix(msg, "pytorch: ") || strings.Contains(msg, "internal error") {
		t.Errorf("error %q: want a \"pytorch: \" prefix and no internal error", msg)
	}
	for _, w := range want {
		if !strings.Contains(msg, w) {
			t.Errorf("error %q does not contain %q", msg, w)
		}
	}
}

func TestIsZipCheckpoint(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want bool
	}{{"PK\x03\x04rest", true}, {"PK\x03", false}, {"", false}, {"\x80\x02\x8a\x0a", false}} {
		if got := IsZipCheckpoint([]byte(tc.in)); got != tc.want {
			t.Errorf("IsZipCheckpoint(%q) = %v", tc.in, got)
		}
	}
}

// f32Bytes encodes float32 values little-endian.
func f32Bytes(v ...float32) []byte {
	b := make([]byte, 0, 4*len(v))
	for _, x := range v {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(x))
	}
	return b
}

func saveTestTensors() []SaveTensor {
	seq := func(n int, size int) []byte {
		b := make([]byte, n*size)
		for i := range b {
			b[i] = byte(i*7 + 3)
		}
		return b
	}
	return []SaveTensor{
		{Name: "x_embedder.proj.weight", DType: dtype.F32, Shape: []int64{2, 3, 2, 2}, Data: f32Bytes(1, -2, 3.5, 0, 1e-3, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20)},
		{Name: "f16", DType: dtype.F16, Shape: []int64{3}, Data: []byte{0x00, 0x3c, 0x00, 0xc0, 0x00, 0x7c}},
		{Name: "bf16", DType: dtype.BF16, Shape: []int64{2, 1}, Data: []byte{0x80, 0x3f, 0x49, 0x40}},
		{Name: "scalar", DType: dtype.F32, Shape: []int64{}, Data: f32Bytes(3.25)},
		{Name: "empty", DType: dtype.F32, Shape: []int64{0, 4}, Data: []byte{}},
		{Name: "f64", DType: dtype.F64, Shape: []int64{2}, Data: binary.LittleEndian.AppendUint64(binary.LittleEndian.AppendUint64(nil, math.Float64bits(0.1)), math.Float64bits(-7))},
		{Name: "i64", DType: dtype.I64, Shape: []int64{2}, Data: binary.LittleEndian.AppendUint64(binary.LittleEndian.AppendUint64(nil, 3_000_000_000), uint64(1<<64-5))},
		{Name: "i32", DType: dtype.I32, Shape: []int64{3}, Data: seq(3, 4)},
		{Name: "i16", DType: dtype.I16, Shape: []int64{2}, Data: seq(2, 2)},
		{Name: "i8", DType: dtype.I8, Shape: []int64{5}, Data: seq(5, 1)},
		{Name: "u8", DType: dtype.U8, Shape: []int64{1, 5}, Data: seq(5, 1)},
		{Name: "mask", DType: dtype.BOOL, Shape: []int64{3}, Data: []byte{1, 0, 1}},
		{Name: "big", DType: dtype.F32, Shape: []int64{70000}, Data: seq(70000, 4)},
	}
}

func TestSaveRoundTrip(t *testing.T) {
	tensors := saveTestTensors()
	ema := []SaveTensor{{Name: "x_embedder.proj.weight", DType: dtype.F32, Shape: []int64{2}, Data: f32Bytes(9, 8)}}
	args := map[string]any{"model": "DiT-XL/2", "image_size": int64(256), "num_classes": 1000, "lr": 1e-4,
		"compile": false, "resume": nil, "betas": []any{0.9, 0.999}, "extra": map[string]any{"a": "b"}}
	tests := []struct {
		name     string
		opts     SaveOptions
		want     []SaveTensor
		selected string
		top      []string
	}{
		{"bare", SaveOptions{}, tensors, "", nil},
		{"bare-named-archive", SaveOptions{Archive: "DiT-XL-2-256x256"}, tensors, "", nil},
		{"training-model", SaveOptions{Training: true}, tensors, "model", []string{"model", "opt"}},
		{"training-ema-copy", SaveOptions{Training: true, EMA: true, Args: args}, tensors, "ema", []string{"model", "ema", "opt", "args"}},
		{"training-ema", SaveOptions{Training: true, EMA: true, EMATensors: ema, Args: args}, ema, "ema", []string{"model", "ema", "opt", "args"}},
		{"empty-state-dict", SaveOptions{}, nil, "", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "ckpt.pt")
			in := tensors
			if tc.name == "empty-state-dict" {
				in = nil
			}
			if err := Save(path, in, tc.opts); err != nil {
				t.Fatal(err)
			}
			f, err := Open(path)
			if err != nil {
				t.Fatal(err)
			}
			if f.Selected != tc.selected || !reflect.DeepEqual(f.TopLevel, tc.top) {
				t.Errorf("Selected, TopLevel = %q, %q, want %q, %q", f.Selected, f.TopLevel, tc.selected, tc.top)
			}
			if len(f.Tensors) != len(tc.want) {
				t.Fatalf("%d tensors, want %d", len(f.Tensors), len(tc.want))
			}
			fh, err := os.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer fh.Close()
			archive := tc.opts.Archive
			if archive == "" {
				archive = "archive"
			}
			for i, w := range tc.want {
				g := f.Tensors[i]
				if g.Name != w.Name || g.DType != w.DType || len(g.Shape) != len(w.Shape) || (len(w.Shape) > 0 && !reflect.DeepEqual(g.Shape, w.Shape)) {
					t.Errorf("tensor %d = %s %s %v, want %s %s %v", i, g.Name, g.DType, g.Shape, w.Name, w.DType, w.Shape)
				}
				if !g.Contiguous() || g.FileOffset%64 != 0 || !strings.HasPrefix(g.Storage, archive+"/data/") {
					t.Errorf("tensor %q: contiguous %v, file offset %d, storage %q", g.Name, g.Contiguous(), g.FileOffset, g.Storage)
				}
				b, err := g.ReadBytes(fh)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(b, w.Data) {
					t.Errorf("tensor %q: bytes differ", g.Name)
				}
			}
			if tc.opts.Args != nil {
				gotArgs, _ := json.Marshal(f.Args)
				wantArgs, _ := json.Marshal(tc.opts.Args)
				if string(gotArgs) != string(wantArgs) {
					t.Errorf("Args = %s, want %s", gotArgs, wantArgs)
				}
				if v, ok := f.Args["num_classes"].(int64); !ok || v != 1000 {
					t.Errorf("Args[num_classes] = %#v, want int64 1000", f.Args["num_classes"])
				}
			} else if f.Args != nil {
				t.Errorf("Args = %v, want nil", f.Args)
			}
			// Records: torch's bookkeeping files, all stored.
			zr, err := zip.OpenReader(path)
			if err != nil {
				t.Fatal(err)
			}
			defer zr.Close()
			names := map[string]bool{}
			for _, zf := range zr.File {
				names[zf.Name] = true
				if zf.Method != zip.Store {
					t.Errorf("record %q has method %d", zf.Name, zf.Method)
				}
			}
			if zr.File[0].Name != archive+"/data.pkl" {
				t.Errorf("first record %q, want %s/data.pkl", zr.File[0].Name, archive)
			}
			for _, n := range []string{"version", "byteorder", ".format_version"} {
				if !names[archive+"/"+n] {
					t.Errorf("no record %s/%s", archive, n)
				}
			}
		})
	}
}

func TestSaveErrors(t *testing.T) {
	dir := t.TempDir()
	good := SaveTensor{Name: "a", DType: dtype.F32, Shape: []int64{2}, Data: f32Bytes(1, 2)}
	tests := []struct {
		name    string
		tensors []SaveTensor
		opts    SaveOptions
		want    string
	}{
		{"short data", []SaveTensor{{Name: "a", DType: dtype.F32, Shape: []int64{3}, Data: f32Bytes(1, 2)}}, SaveOptions{}, `tensor "a": 8 bytes of data, want 3 elements`},
		{"dtype", []SaveTensor{{Name: "a", DType: dtype.U16, Shape: []int64{1}, Data: []byte{1, 2}}}, SaveOptions{}, "dtype U16 cannot be saved"},
		{"duplicate", []SaveTensor{good, good}, SaveOptions{}, `duplicate tensor "a"`},
		{"negative shape", []SaveTensor{{Name: "a", DType: dtype.F32, Shape: []int64{-1}}}, SaveOptions{}, "bad shape"},
		{"archive", []SaveTensor{good}, SaveOptions{Archive: "a/b"}, "single path element"},
		{"args", []SaveTensor{good}, SaveOptions{Training: true, Args: map[string]any{"x": struct{}{}}}, "cannot be saved"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, "x.pt")
			err := Save(path, tc.tensors, tc.opts)
			assertErr(t, err, "x.pt", tc.want)
			if _, err := os.Stat(path); !os.IsNotExist(err) {
				t.Errorf("failed Save left %s behind", path)
			}
		})
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("failed Saves left files: %v", ents)
	}
}

// TestStridedRead checks ReadBytes' gather against a hand-computed
// transpose and slice of one storage.
func TestStridedRead(t *testing.T) {
	storage := f32Bytes(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11)
	r := bytes.NewReader(append(make([]byte, 100), storage...))
	tests := []struct {
		name    string
		shape   []int64
		strides []int64
		offset  int64
		want    []float32
	}{
		{"transpose", []int64{4, 3}, []int64{1, 4}, 0, []float32{0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11}},
		{"column", []int64{3}, []int64{4}, 2, []float32{2, 6, 10}},
		{"every-other", []int64{2, 2}, []int64{6, 2}, 1, []float32{1, 3, 7, 9}},
		{"broadcast", []int64{2, 3}, []int64{0, 1}, 5, []float32{5, 6, 7, 5, 6, 7}},
		{"contiguous-view", []int64{2, 2}, []int64{2, 1}, 8, []float32{8, 9, 10, 11}},
		{"scalar", nil, nil, 11, []float32{11}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tt := Tensor{Name: tc.name, DType: dtype.F32, Shape: tc.shape, Strides: tc.strides, StorageOffset: tc.offset,
				Storage: "archive/data/0", FileOffset: 100, StorageBytes: int64(len(storage))}
			b, err := tt.ReadBytes(r)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(b, f32Bytes(tc.want...)) {
				t.Errorf("got %v, want %v", b, f32Bytes(tc.want...))
			}
		})
	}
	bad := Tensor{Name: "w", DType: dtype.F32, Shape: []int64{13}, Strides: []int64{1}, StorageBytes: int64(len(storage)), Storage: "archive/data/0"}
	if _, err := bad.ReadBytes(r); err == nil || !strings.Contains(err.Error(), `tensor "w"`) || !strings.Contains(err.Error(), "beyond storage") {
		t.Errorf("ReadBytes beyond the storage: %v", err)
	}
	huge := Tensor{Name: "w", DType: dtype.F32, Shape: []int64{1 << 40}, Strides: []int64{0}, FileOffset: 100, StorageBytes: int64(len(storage)), Storage: "archive/data/0"}
	if _, err := huge.ReadBytes(r); err == nil || !strings.Contains(err.Error(), "refusing to expand") {
		t.Errorf("ReadBytes of a huge stride-0 view: %v", err)
	}
	short := Tensor{Name: "w", DType: dtype.F32, Shape: []int64{12}, Strides: []int64{1}, FileOffset: 104, StorageBytes: int64(len(storage))}
	if _, err := short.ReadBytes(r); err == nil || !strings.Contains(err.Error(), "unexpected EOF") {
		t.Errorf("ReadBytes past the end of the file: %v", err)
	}
}

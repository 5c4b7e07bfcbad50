package pytorch

import (
	"archive/zip"
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/dcdit/dcdit/loaders/dtype"
)

// zrec is one record of a hand-built zip.
type zrec struct {
	name    string
	data    []byte
	deflate bool
}

func makeZip(t testing.TB, recs []zrec) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, r := range recs {
		m := zip.Store
		if r.deflate {
			m = zip.Deflate
		}
		w, err := zw.CreateHeader(&zip.FileHeader{Name: r.name, Method: m})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write(r.data); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// ckpt builds a checkpoint zip "archive/..." from a pickle and storages.
func ckpt(t testing.TB, pkl []byte, storages map[string][]byte) []byte {
	t.Helper()
	recs := []zrec{{name: "archive/data.pkl", data: pkl}}
	keys := make([]string, 0, len(storages))
	for k := range storages {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		recs = append(recs, zrec{name: "archive/data/" + k, data: storages[k]})
	}
	return makeZip(t, append(recs, zrec{name: "archive/version", data: []byte("3\n")}))
}

// tspec describes one tensor entry of a hand-built pickle.
type tspec struct {
	name    string
	class   string // storage global, default "torch.FloatStorage"
	key     string // default "0"
	numel   int64
	offset  int64
	shape   []int64
	stride  []int64
	fn      string         // rebuild function, default "_rebuild_tensor_v2"
	extra   func(*pickler) // extra trailing arguments
	wrapper string         // e.g. "_rebuild_parameter"
	legacy  bool           // a legacy persistent id: view_metadata follows numel
	view    *viewSpec      // that view_metadata; nil writes None
}

// viewSpec is the view_metadata of a legacy persistent id.
type viewSpec struct {
	key           string
	offset, numel int64
}

func (p *pickler) testTensor(s tspec) {
	if s.class == "" {
		s.class = "torch.FloatStorage"
	}
	if s.key == "" {
		s.key = "0"
	}
	if s.fn == "" {
		s.fn = "_rebuild_tensor_v2"
	}
	if s.wrapper != "" {
		p.global("torch._utils", s.wrapper)
		p.op(opMark)
	}
	p.global("torch._utils", s.fn)
	p.op(opMark)
	p.op(opMark)
	p.str("storage")
	dot := strings.LastIndexByte(s.class, '.')
	p.global(s.class[:dot], s.class[dot+1:])
	p.str(s.key)
	p.str("cpu")
	p.int(s.numel)
	if s.view != nil {
		p.str(s.view.key)
		p.int(s.view.offset)
		p.int(s.view.numel)
		p.op(opTuple3)
	} else if s.legacy {
		p.op(opNone)
	}
	p.op(opTuple)
	p.op(opBinPersID)
	p.int(s.offset)
	p.intTuple(s.shape)
	p.intTuple(s.stride)
	p.boolean(false)
	p.global("collections", "OrderedDict")
	p.op(opEmptyTuple)
	p.op(opReduce)
	if s.extra != nil {
		s.extra(p)
	}
	p.op(opTuple)
	p.op(opReduce)
	if s.wrapper != "" {
		p.boolean(true)
		p.global("collections", "OrderedDict")
		p.op(opEmptyTuple)
		p.op(opReduce)
		if strings.HasSuffix(s.wrapper, "_with_state") {
			p.op(opEmptyDict)
		}
		p.op(opTuple)
		p.op(opReduce)
	}
}

// sdPickle pickles an OrderedDict of the given tensors.
func sdPickle(specs ...tspec) []byte {
	p := newPickler()
	p.proto()
	p.sd(specs...)
	p.op(opStop)
	return p.buf.Bytes()
}

func (p *pickler) sd(specs ...tspec) {
	p.global("collections", "OrderedDict")
	p.op(opEmptyTuple)
	p.op(opReduce)
	p.op(opMark)
	for _, s := range specs {
		p.str(s.name)
		p.testTensor(s)
	}
	p.op(opSetItems)
}

// raw builds a pickle from PROTO 2, the given bytes, and STOP.
func raw(b ...byte) []byte { return append(append([]byte{opProto, 2}, b...), opStop) }

func w4() tspec {
	return tspec{name: "w", numel: 4, shape: []int64{4}, stride: []int64{1}}
}

var four = map[string][]byte{"0": f32Bytes(1, 2, 3, 4)}

func writeTemp(t testing.TB, name string, data []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// badCorpus returns named bad checkpoints and the substrings their errors
// must contain (besides the file name).
func badCorpus(t testing.TB) []struct {
	name string
	data []byte
	want []string
} {
	good := ckpt(t, sdPickle(w4()), four)
	p := func(f func(p *pickler)) []byte {
		pk := newPickler()
		pk.proto()
		f(pk)
		pk.op(opStop)
		return pk.buf.Bytes()
	}
	deepMarks := bytes.Repeat([]byte{opMark}, maxMarkDepth+1)
	cases := []struct {
		name string
		data []byte
		want []string
	}{
		{"truncated-zip", good[:len(good)/2], []string{"reading zip archive"}},
		{"empty-file", nil, []string{"file is empty"}},
		{"not-zip", []byte("hello, world, this is not a zip"), []string{"not a zip-format PyTorch checkpoint, nor a legacy one", "68 65 6c"}},
		{"no-data-pkl", makeZip(t, []zrec{{name: "archive/version", data: []byte("3\n")}}), []string{`no record "archive/data.pkl"`}},
		{"no-folder", makeZip(t, []zrec{{name: "data.pkl", data: raw()}}), []string{`first record "data.pkl" is not inside a folder`}},
		{"compressed-data-pkl", makeZip(t, []zrec{{name: "archive/data.pkl", data: sdPickle(w4()), deflate: true}}), []string{`record "archive/data.pkl" is compressed (method 8)`}},
		{"compressed-storage", makeZip(t, []zrec{{name: "archive/data.pkl", data: sdPickle(w4())}, {name: "archive/data/0", data: four["0"], deflate: true}}),
			[]string{`record "archive/data/0" is compressed (method 8)`, "uncompressed"}},
		{"torchscript", makeZip(t, []zrec{{name: "m/data.pkl", data: sdPickle()}, {name: "m/constants.pkl", data: raw(opEmptyTuple)}}), []string{"TorchScript", "m/constants.pkl"}},
		{"duplicate-record", makeZip(t, []zrec{{name: "archive/data.pkl", data: sdPickle()}, {name: "archive/data.pkl", data: sdPickle()}}), []string{`duplicate record "archive/data.pkl"`}},
		{"big-endian", makeZip(t, []zrec{{name: "archive/data.pkl", data: sdPickle()}, {name: "archive/byteorder", data: []byte("big")}}), []string{`byte order "big"`, `"little"`}},
		{"disallowed-global", ckpt(t, p(func(p *pickler) {
			p.global("os", "system")
			p.str("echo pwned")
			p.op(opTuple1)
			p.op(opReduce)
		}), nil), []string{"archive/data.pkl", `global "os.system"`, "not allowed", "collections.OrderedDict", "torch._utils._rebuild_tensor_v2"}},
		{"disallowed-stack-global", ckpt(t, p(func(p *pickler) {
			p.str("builtins")
			p.str("eval")
			p.op(opStackGlobal)
		}), nil), []string{`global "builtins.eval"`, "not allowed"}},
		{"storage-class-call", ckpt(t, p(func(p *pickler) {
			p.global("torch", "FloatStorage")
			p.op(opEmptyTuple)
			p.op(opReduce)
		}), nil), []string{"REDUCE at offset", "torch.FloatStorage cannot be called"}},
		{"opcode-inst", ckpt(t, raw('i', 'o', 's', '\n', 's', 'y', 's', 't', 'e', 'm', '\n'), nil), []string{"opcode 0x69 (INST) at offset 2 is not allowed"}},
		{"opcode-ext1", ckpt(t, raw(0x82, 1), nil), []string{"opcode 0x82 (EXT1) at offset 2 is not allowed"}},
		{"opcode-pop", ckpt(t, raw(opNone, '0'), nil), []string{"(POP) at offset 3 is not allowed"}},
		{"opcode-unknown", ckpt(t, raw(0xff), nil), []string{"unknown opcode 0xff at offset 2"}},
		{"protocol-6", ckpt(t, []byte{opProto, 6, opNone, opStop}, nil), []string{"unsupported pickle protocol 6"}},
		{"memo-out-of-range", ckpt(t, raw(opEmptyList, opBinPut, 0, opBinGet, 5), nil), []string{"BINGET at offset 5", "memo index 5 not found (memo has 1 entries)"}},
		{"long-memo-out-of-range", ckpt(t, raw(opLongBinGet, 0xff, 0xff, 0xff, 0xff), nil), []string{"memo index 4294967295 not found"}},
		{"stack-underflow", ckpt(t, raw(opTuple1), nil), []string{"TUPLE1 at offset 2", "stack underflow"}},
		{"underflow-below-mark", ckpt(t, raw(opNone, opMark, opTuple1), nil), []string{"stack underflow"}},
		{"empty-stop", ckpt(t, raw(), nil), []string{"STOP at offset 2", "stack underflow"}},
		{"mark-mismatch", ckpt(t, raw(opEmptyList, opAppends), nil), []string{"APPENDS at offset 3", "no MARK"}},
		{"setitems-odd", ckpt(t, raw(opEmptyDict, opMark, opNone, opSetItems), nil), []string{"odd number of values"}},
		{"append-to-dict", ckpt(t, raw(opEmptyDict, opNone, opAppend), nil), []string{"target is a dict, want a list"}},
		{"absurd-string", ckpt(t, raw(opBinUnicode, 0xff, 0xff, 0xff, 0xff, 'a'), nil), []string{"BINUNICODE at offset 2", "needs 4294967295 bytes"}},
		{"absurd-string8", ckpt(t, raw(opBinUnicode8, 0, 0, 0, 0, 0, 0, 0, 0x80), nil), []string{"needs 9223372036854775808 bytes"}},
		{"absurd-frame", ckpt(t, raw(opFrame, 0xff, 0, 0, 0, 0, 0, 0, 0), nil), []string{"frame of 255 bytes"}},
		{"invalid-utf8", ckpt(t, raw(opShortBinUni, 1, 0xff), nil), []string{"not valid UTF-8"}},
		{"no-stop", ckpt(t, []byte{opProto, 2, opNone}, nil), []string{"without STOP"}},
		{"global-no-newline", ckpt(t, []byte{opProto, 2, opGlobal, 'o', 's'}, nil), []string{"no newline"}},
		{"deep-marks", ckpt(t, raw(deepMarks...), nil), []string{"more than 1000 nested MARKs"}},
		{"deep-tuple-key", ckpt(t, raw(append(append([]byte{opEmptyDict, opNone}, bytes.Repeat([]byte{opTuple1}, 100000)...), opNone, opSetItem)...), nil),
			[]string{"SETITEM at offset 100005", "tuple key nested more than 64 deep"}},
		{"wide-tuple-key", ckpt(t, raw(append(append([]byte{opEmptyDict, opMark}, bytes.Repeat([]byte{opShortBinUni, 3, 'a', 'b', 'c'}, 20000)...), opTuple, opNone, opSetItem)...), nil),
			[]string{"tuple key longer than 65536 bytes"}},
		{"unhashable-key", ckpt(t, raw(opEmptyDict, opEmptyList, opNone, opSetItem), nil), []string{"unhashable dict or set key: a list"}},
		{"storage-missing", ckpt(t, sdPickle(tspec{name: "w", key: "7", numel: 4, shape: []int64{4}, stride: []int64{1}}), four),
			[]string{`storage record "archive/data/7" not found`}},
		{"extent-beyond-storage", ckpt(t, sdPickle(tspec{name: "w", numel: 4, shape: []int64{5}, stride: []int64{1}}), four),
			[]string{`tensor "w"`, "reach byte 20", `beyond storage "archive/data/0" of 16 bytes`}},
		{"extent-offset", ckpt(t, sdPickle(tspec{name: "w", numel: 4, offset: 2, shape: []int64{2, 2}, stride: []int64{1, 1}}), four),
			[]string{`tensor "w"`, "beyond storage"}},
		{"lying-numel", ckpt(t, sdPickle(tspec{name: "w", numel: 100, shape: []int64{4}, stride: []int64{1}}), four),
			[]string{`storage "0": record "archive/data/0" has 16 bytes`, "says 100 elements of F32"}},
		{"numel-overflow", ckpt(t, sdPickle(tspec{name: "w", numel: 1 << 62, shape: []int64{4}, stride: []int64{1}}), four),
			[]string{"says 4611686018427387904 elements"}},
		{"shape-overflow", ckpt(t, sdPickle(tspec{name: "w", numel: 4, shape: []int64{1 << 62, 4}, stride: []int64{0, 0}}), four),
			[]string{`tensor "w"`, "more than 2^63 elements"}},
		{"stride-overflow", ckpt(t, sdPickle(tspec{name: "w", numel: 4, shape: []int64{2, 2}, stride: []int64{1 << 62, 1 << 62}}), four),
			[]string{`tensor "w"`, "overflows"}},
		{"negative-stride", ckpt(t, sdPickle(tspec{name: "w", numel: 4, shape: []int64{4}, stride: []int64{-1}}), four),
			[]string{"argument 4 (stride)", "int -1", "non-negative"}},
		{"negative-offset", ckpt(t, sdPickle(tspec{name: "w", numel: 4, offset: -1, shape: []int64{4}, stride: []int64{1}}), four),
			[]string{"argument 2 (storage_offset) is int -1"}},
		{"rank-mismatch", ckpt(t, sdPickle(tspec{name: "w", numel: 4, shape: []int64{4}, stride: []int64{1, 1}}), four),
			[]string{"size has 1 dimensions, stride has 2"}},
		{"rebuild-arity", ckpt(t, p(func(p *pickler) {
			p.global("torch._utils", "_rebuild_tensor_v2")
			p.op(opEmptyTuple)
			p.op(opReduce)
		}), nil), []string{"_rebuild_tensor_v2: got 0 arguments, want 6 or 7"}},
		{"storage-not-persistent", ckpt(t, p(func(p *pickler) {
			p.global("torch._utils", "_rebuild_tensor_v2")
			p.op(opMark)
			p.str("not a storage")
			p.int(0)
			p.op(opEmptyTuple)
			p.op(opEmptyTuple)
			p.boolean(false)
			p.op(opNone)
			p.op(opTuple)
			p.op(opReduce)
		}), nil), []string{"argument 1 (storage) is a string"}},
		{"persistent-id-shape", ckpt(t, p(func(p *pickler) {
			p.str("storage")
			p.op(opTuple1)
			p.op(opBinPersID)
		}), nil), []string{"persistent id is a tuple (1 items)"}},
		{"persistent-id-kind", ckpt(t, p(func(p *pickler) {
			p.op(opMark)
			p.str("module")
			p.global("torch", "FloatStorage")
			p.str("0")
			p.str("cpu")
			p.int(4)
			p.op(opTuple)
			p.op(opBinPersID)
		}), four), []string{`persistent id kind is string "module"`}},
		{"storage-two-classes", ckpt(t, sdPickle(w4(), tspec{name: "v", class: "torch.IntStorage", numel: 4, shape: []int64{4}, stride: []int64{1}}), four),
			[]string{`storage "0" is referenced as torch.FloatStorage and as torch.IntStorage`}},
		{"v3-dtype-mismatch", ckpt(t, sdPickle(tspec{name: "w", numel: 4, shape: []int64{4}, stride: []int64{1}, fn: "_rebuild_tensor_v3",
			extra: func(p *pickler) { p.global("torch", "int32") }}), four), []string{"dtype I32 disagrees with storage class torch.FloatStorage"}},
		{"top-level-list", ckpt(t, raw(opEmptyList), nil), []string{"top-level object is a list, want a dict"}},
		{"no-state-dict", ckpt(t, p(func(p *pickler) {
			p.op(opEmptyDict)
			p.op(opMark)
			p.str("step")
			p.int(3)
			p.str("model")
			p.op(opNone)
			p.op(opSetItems)
		}), nil), []string{"no state dict found", `value of "step" is an int, not a tensor`, `top-level keys: ["step" "model"]`}},
		{"namespace-args", ckpt(t, p(func(p *pickler) {
			p.global("argparse", "Namespace")
			p.int(1)
			p.op(opTuple1)
			p.op(opNewObj)
		}), nil), []string{"argparse.Namespace: got 1 arguments, want none"}},
		{"newobj-tensor", ckpt(t, p(func(p *pickler) {
			p.global("torch._utils", "_rebuild_tensor_v2")
			p.op(opEmptyTuple)
			p.op(opNewObj)
		}), nil), []string{"cannot be instantiated with NEWOBJ"}},
		{"build-on-list", ckpt(t, raw(opEmptyList, opEmptyDict, opBuild), nil), []string{"BUILD at offset 4", "cannot set state of a list"}},
		{"parameter-state", ckpt(t, p(func(p *pickler) {
			p.global("torch._utils", "_rebuild_parameter_with_state")
			p.op(opMark)
			p.testTensor(w4())
			p.boolean(true)
			p.op(opNone)
			p.op(opEmptyDict)
			p.op(opMark)
			p.str("x")
			p.int(1)
			p.op(opSetItems)
			p.op(opTuple)
			p.op(opReduce)
		}), four), []string{"argument 4 (state) is a dict with 1 entries"}},
	}
	return append(cases, legacyBadCorpus(t)...)
}

func TestBadInputs(t *testing.T) {
	for _, tc := range badCorpus(t) {
		t.Run(tc.name, func(t *testing.T) {
			path := writeTemp(t, tc.name+".pt", tc.data)
			f, err := Open(path)
			if err == nil {
				t.Fatalf("Open succeeded with %d tensors", len(f.Tensors))
			}
			assertErr(t, err, append([]string{path}, tc.want...)...)
		})
	}
}

func TestOpenMissingFile(t *testing.T) {
	_, err := Open(filepath.Join(t.TempDir(), "nope.pt"))
	assertErr(t, err, "nope.pt", "no such file")
}

// TestAccepts covers the forms newer PyTorch versions, parameters and
// protocol 4+ pickles produce.
func TestAccepts(t *testing.T) {
	metadata := func(p *pickler) {
		p.op(opEmptyDict)
		p.str("conj")
		p.boolean(false)
		p.op(opSetItem)
	}
	type want struct {
		name    string
		dt      dtype.DType
		shape   []int64
		storage string
	}
	tests := []struct {
		name     string
		pkl      []byte
		storages map[string][]byte
		selected string
		want     []want
		args     map[string]any
	}{
		{"v2-metadata", sdPickle(tspec{name: "w", numel: 4, shape: []int64{2, 2}, stride: []int64{2, 1}, extra: metadata}), four, "",
			[]want{{"w", dtype.F32, []int64{2, 2}, "archive/data/0"}}, nil},
		{"v3-untyped", sdPickle(tspec{name: "w", class: "torch.storage.UntypedStorage", numel: 16, shape: []int64{8}, stride: []int64{1},
			fn: "_rebuild_tensor_v3", extra: func(p *pickler) { p.global("torch", "uint16") }}), four, "",
			[]want{{"w", dtype.U16, []int64{8}, "archive/data/0"}}, nil},
		{"v3-typed-with-metadata", sdPickle(tspec{name: "w", numel: 4, shape: []int64{4}, stride: []int64{1},
			fn: "_rebuild_tensor_v3", extra: func(p *pickler) { p.global("torch", "float32"); metadata(p) }}), four, "",
			[]want{{"w", dtype.F32, []int64{4}, "archive/data/0"}}, nil},
		{"parameter", sdPickle(tspec{name: "p", numel: 4, shape: []int64{4}, stride: []int64{1}, wrapper: "_rebuild_parameter"},
			tspec{name: "q", numel: 4, shape: []int64{2}, stride: []int64{2}, wrapper: "_rebuild_parameter_with_state"}), four, "",
			[]want{{"p", dtype.F32, []int64{4}, "archive/data/0"}, {"q", dtype.F32, []int64{2}, "archive/data/0"}}, nil},
		{"training-model-fallback", func() []byte {
			p := newPickler()
			p.proto()
			p.op(opEmptyDict)
			p.op(opMark)
			p.str("ema")
			p.op(opNone)
			p.str("model")
			p.sd(w4())
			p.str("args")
			p.global("argparse", "Namespace")
			p.op(opEmptyTuple)
			p.op(opReduce)
			p.op(opEmptyDict)
			p.op(opMark)
			p.str("image_size")
			p.int(512)
			p.str("tags")
			p.op(opEmptySet)
			p.op(opMark)
			p.str("a")
			p.op(opAddItems)
			p.str("frozen")
			p.op(opMark)
			p.int(1)
			p.op(opFrozenSet)
			p.str("big")
			p.buf.Write([]byte{opLong1, 9, 0, 0, 0, 0, 0, 0, 0, 0, 1})
			p.str("neg")
			p.buf.Write([]byte{opLong1, 2, 0x00, 0xff})
			p.str("raw")
			p.buf.Write([]byte{opShortBinBytes, 2, 'h', 'i'})
			p.op(opSetItems)
			p.op(opBuild)
			p.op(opSetItems)
			p.op(opStop)
			return p.buf.Bytes()
		}(), four, "model", []want{{"w", dtype.F32, []int64{4}, "archive/data/0"}}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := writeTemp(t, tc.name+".pt", ckpt(t, tc.pkl, tc.storages))
			f, err := Open(path)
			if err != nil {
				t.Fatal(err)
			}
			if f.Selected != tc.selected {
				t.Errorf("Selected = %q, want %q", f.Selected, tc.selected)
			}
			var got []want
			for _, tt := range f.Tensors {
				got = append(got, want{tt.Name, tt.DType, tt.Shape, tt.Storage})
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("tensors = %v, want %v", got, tc.want)
			}
			if tc.name == "training-model-fallback" {
				if f.Args["image_size"] != int64(512) || !reflect.DeepEqual(f.Args["tags"], []any{"a"}) ||
					!reflect.DeepEqual(f.Args["frozen"], []any{int64(1)}) || f.Args["neg"] != int64(-256) ||
					!reflect.DeepEqual(f.Args["raw"], []byte("hi")) {
					t.Errorf("Args = %#v", f.Args)
				}
				if b, ok := f.Args["big"].(interface{ String() string }); !ok || b.String() != "18446744073709551616" {
					t.Errorf("Args[big] = %#v, want 2^64", f.Args["big"])
				}
			}
		})
	}
}

// TestUnpickleProtocol4 runs FRAME, SHORT_BINUNICODE, MEMOIZE, STACK_GLOBAL
// and BINGET of a MEMOIZEd value, as protocol 4 writes them.
func TestUnpickleProtocol4(t *testing.T) {
	b := []byte{opProto, 4, opFrame, 30, 0, 0, 0, 0, 0, 0, 0, opEmptyDict, opMemoize, opMark, opShortBinUni, 1, 'w', opMemoize}
	b = append(b, opShortBinUni, 5, 't', 'o', 'r', 'c', 'h', opShortBinUni, 4, 'S', 'i', 'z', 'e', opStackGlobal, opMemoize)
	b = append(b, opBinInt1, 3, opTuple1, opTuple1, opReduce, opBinGet, 1, opBinInt2, 0, 1, opSetItems, opStop)
	v, err := unpickle(b, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := toGo(v)
	want := map[string]any{"w": int64(256)}
	if !reflect.DeepEqual(got, want) {
		// d["w"] = Size((3,)), then d[memo[1] == "w"] = 256 replaces it.
		t.Errorf("got %#v, want %#v", got, want)
	}
}

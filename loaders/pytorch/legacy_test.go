package pytorch

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// lstorage is one storage of a hand-built legacy checkpoint: the element
// count its header states and its bytes.
type lstorage struct {
	key   string
	count int64
	data  []byte
}

// legacySpec describes a hand-built legacy checkpoint.
type legacySpec struct {
	obj       []byte     // the saved-object pickle
	storages  []lstorage // in data order; their keys make the key list
	version   int64      // the protocol version; 0 writes 1001
	bigEndian bool
}

// bytes lays the checkpoint out as torch's _legacy_save does.
func (s legacySpec) bytes() []byte {
	var b bytes.Buffer
	b.Write(raw(opLong1, 10, 0x6c, 0xfc, 0x9c, 0x46, 0xf9, 0x20, 0x6a, 0xa8, 0x50, 0x19))
	version := s.version
	if version == 0 {
		version = legacyProtocolVersion
	}
	p := newPickler()
	p.proto()
	p.int(version)
	p.op(opStop)
	b.Write(p.buf.Bytes())

	p = newPickler()
	p.proto()
	p.op(opEmptyDict)
	p.op(opMark)
	p.str("protocol_version")
	p.int(legacyProtocolVersion)
	p.str("little_endian")
	p.boolean(!s.bigEndian)
	p.str("type_sizes")
	p.op(opEmptyDict)
	p.op(opMark)
	for i, n := range []string{"short", "int", "long"} {
		p.str(n)
		p.int(int64(2 << i))
	}
	p.op(opSetItems)
	p.op(opSetItems)
	p.op(opStop)
	b.Write(p.buf.Bytes())

	b.Write(s.obj)

	p = newPickler()
	p.proto()
	p.op(opEmptyList)
	p.op(opMark)
	for _, st := range s.storages {
		p.str(st.key)
	}
	p.op(opAppends)
	p.op(opStop)
	b.Write(p.buf.Bytes())
	for _, st := range s.storages {
		b.Write(binary.LittleEndian.AppendUint64(nil, uint64(st.count)))
		b.Write(st.data)
	}
	return b.Bytes()
}

// lw4 is w4 with a legacy persistent id.
func lw4() tspec {
	s := w4()
	s.legacy = true
	return s
}

// legacyBadCorpus returns bad legacy checkpoints for badCorpus.
func legacyBadCorpus(t testing.TB) []struct {
	name string
	data []byte
	want []string
} {
	st0 := []lstorage{{"0", 4, f32Bytes(1, 2, 3, 4)}}
	good := legacySpec{obj: sdPickle(lw4()), storages: st0}.bytes()
	with := func(f func(s *legacySpec)) []byte {
		s := legacySpec{obj: sdPickle(lw4()), storages: st0}
		f(&s)
		return s.bytes()
	}
	// Without storages the key list is the 6 bytes PROTO 2, EMPTY_LIST,
	// MARK, APPENDS, STOP; the saved object ends where it starts.
	objEnd := len(legacySpec{obj: sdPickle(lw4())}.bytes()) - 6
	return []struct {
		name string
		data []byte
		want []string
	}{
		{"legacy-magic-only", []byte{opProto, 2, opLong1, 10, 0x6c, 0xfc, 0x9c, 0x46, 0xf9, 0x20, 0x6a, 0xa8, 0x50, 0x19, opStop, opProto, 2},
			[]string{"legacy checkpoint: protocol-version pickle at byte 15", "pickle ends at offset 2 without STOP", "the file ends inside this pickle (truncated file?)"}},
		{"legacy-truncated-object", good[:objEnd-10], []string{"legacy checkpoint: saved-object pickle at byte", "truncated file?"}},
		{"legacy-truncated-data", good[:len(good)-3], []string{`storage "0": 16 bytes (4 elements of F32) at byte`, "extend past the end of the file", "truncated file?"}},
		{"legacy-truncated-header", good[:len(good)-20], []string{`storage "0": its header at byte`, "past the end of the file"}},
		{"legacy-not-torch", raw(opEmptyDict), []string{"not a zip-format PyTorch checkpoint, nor a legacy one", "first pickle holds a dict", "0x1950a86a20f9469cfc6c"}},
		{"legacy-version", with(func(s *legacySpec) { s.version = 1000 }), []string{"protocol version is int 1000, want 1001"}},
		{"legacy-big-endian", with(func(s *legacySpec) { s.bigEndian = true }), []string{"little_endian=False", "big-endian", "only little-endian"}},
		{"legacy-zip-persistent-id", with(func(s *legacySpec) { s.obj = sdPickle(w4()) }),
			[]string{"saved-object pickle at byte 133", "persistent id is a tuple (5 items)", "view_metadata"}},
		{"legacy-count-mismatch", with(func(s *legacySpec) { s.storages = []lstorage{{"0", 5, f32Bytes(1, 2, 3, 4, 5)}} }),
			[]string{`storage "0": header at byte`, "says 5 elements, the saved object says 4"}},
		{"legacy-unlisted", with(func(s *legacySpec) { s.storages = nil }), []string{`storage "0" has no data`, "(0 entries)"}},
		{"legacy-unknown-key", with(func(s *legacySpec) { s.storages = append(st0, lstorage{"9", 0, nil}) }),
			[]string{`storage key list entry 1, "9", is not a storage the saved object references`}},
		{"legacy-duplicate-key", with(func(s *legacySpec) { s.storages = append(st0, st0...) }), []string{`storage key list names "0" twice`}},
		{"legacy-huge-count", with(func(s *legacySpec) {
			s.obj = sdPickle(tspec{name: "w", numel: 1 << 40, shape: []int64{4}, stride: []int64{1}, legacy: true})
			s.storages = []lstorage{{"0", 1 << 40, f32Bytes(1, 2, 3, 4)}}
		}), []string{`storage "0": 4398046511104 bytes (1099511627776 elements of F32)`, "extend past the end of the file"}},
		{"legacy-numel-overflow", with(func(s *legacySpec) {
			s.obj = sdPickle(tspec{name: "w", numel: 1 << 62, shape: []int64{4}, stride: []int64{1}, legacy: true})
		}), []string{"says 4611686018427387904 elements of F32"}},
		{"legacy-view-outside", with(func(s *legacySpec) {
			s.obj = sdPickle(tspec{name: "w", numel: 4, shape: []int64{2}, stride: []int64{1}, legacy: true, view: &viewSpec{"v", 3, 2}})
		}), []string{`storage "0": view "v" of int 2 at element offset int 3 does not fit in its 4 elements`}},
		{"legacy-view-extent", with(func(s *legacySpec) {
			s.obj = sdPickle(tspec{name: "w", numel: 4, shape: []int64{3}, stride: []int64{1}, legacy: true, view: &viewSpec{"v", 1, 2}})
		}), []string{`tensor "w"`, `beyond storage "v" of 8 bytes`}},
		{"legacy-view-is-storage", with(func(s *legacySpec) {
			s.obj = sdPickle(tspec{name: "w", numel: 4, shape: []int64{2}, stride: []int64{1}, legacy: true, view: &viewSpec{"0", 0, 2}})
		}), []string{`storage "0" is referenced as a view and as a whole storage`}},
		{"legacy-view-twice", with(func(s *legacySpec) {
			s.obj = sdPickle(tspec{name: "w", numel: 4, shape: []int64{2}, stride: []int64{1}, legacy: true, view: &viewSpec{"v", 0, 2}},
				tspec{name: "x", numel: 4, shape: []int64{2}, stride: []int64{1}, legacy: true, view: &viewSpec{"v", 1, 2}})
		}), []string{`storage view "v" is referenced as 2 elements at 0 of "0" and as 2 elements at 1 of "0"`}},
		{"legacy-key-list-dict", func() []byte {
			b := good[:objEnd:objEnd]
			return append(append(b, raw(opEmptyDict)...), binary.LittleEndian.AppendUint64(nil, 4)...)
		}(), []string{"storage key list is a dict, want a list of strings"}},
		{"legacy-not-state-dict", with(func(s *legacySpec) { s.obj = raw(opEmptyList); s.storages = nil }),
			[]string{"legacy checkpoint: saved object: top-level object is a list"}},
	}
}

// TestOpenLegacy reads legacy checkpoints that torch wrote and compares
// their tensors with what torch reported.
func TestOpenLegacy(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("testdata", "legacy_expected.json"))
	if err != nil {
		t.Fatal(err)
	}
	var exp map[string]expectedFile
	if err := json.Unmarshal(b, &exp); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		path string
		want expectedFile
	}{
		{filepath.Join("testdata", "legacy_sd.pth"), exp["legacy_sd.pth"]},
		{filepath.Join("testdata", "legacy_nested.pth"), exp["legacy_nested.pth"]},
		{filepath.Join("testdata", "legacy_proto4.pth"), exp["legacy_proto4.pth"]},
		// An OrderedDict holding w = torch.arange(4.0) (make_torch_pt.py).
		{filepath.Join(torchDir, "legacy.pt"), expectedFile{Tensors: []expectedTensor{
			{Name: "w", DType: "F32", Shape: []int64{4}, Strides: []int64{1}, Values: []float64{0, 1, 2, 3}}}}},
	}
	for _, tc := range tests {
		t.Run(filepath.Base(tc.path), func(t *testing.T) {
			if len(tc.want.Tensors) == 0 {
				t.Fatal("no expected tensors")
			}
			f, err := Open(tc.path)
			if err != nil {
				t.Fatal(err)
			}
			if f.Path != tc.path || f.Selected != tc.want.Selected || !reflect.DeepEqual(f.TopLevel, tc.want.TopLevel) {
				t.Errorf("Path, Selected, TopLevel = %q, %q, %q, want %q, %q, %q", f.Path, f.Selected, f.TopLevel, tc.path, tc.want.Selected, tc.want.TopLevel)
			}
			checkTensors(t, tc.path, f.Tensors, tc.want.Tensors)
			checkLegacyLayout(t, tc.path, f)
		})
	}
}

// checkLegacyLayout checks that every tensor's storage lies in the file,
// right after a header that states its element count.
func checkLegacyLayout(t *testing.T, path string, f *File) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range f.Tensors {
		es := int64(tt.DType.Size())
		if tt.FileOffset < 8 || tt.StorageBytes%es != 0 || tt.FileOffset+tt.StorageBytes > int64(len(data)) {
			t.Errorf("%s: tensor %q: storage %q of %d bytes at %d, file has %d bytes", path, tt.Name, tt.Storage, tt.StorageBytes, tt.FileOffset, len(data))
			continue
		}
		if n := binary.LittleEndian.Uint64(data[tt.FileOffset-8:]); int64(n) != tt.StorageBytes/es {
			t.Errorf("%s: tensor %q: header before storage %q says %d elements, StorageBytes %d", path, tt.Name, tt.Storage, n, tt.StorageBytes)
		}
		if strings.Contains(tt.Storage, "/") {
			t.Errorf("%s: tensor %q: storage %q, want a legacy storage key", path, tt.Name, tt.Storage)
		}
	}
}

// TestLegacySharedStorage checks that views torch wrote share one storage.
func TestLegacySharedStorage(t *testing.T) {
	f, err := Open(filepath.Join("testdata", "legacy_sd.pth"))
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]Tensor{}
	for _, tt := range f.Tensors {
		byName[tt.Name] = tt
	}
	a, b := byName["view_a"], byName["view_b"]
	if a.Storage != b.Storage || a.FileOffset != b.FileOffset || a.StorageBytes != 40 {
		t.Errorf("views use storages %q@%d (%d bytes) and %q@%d, want one of 40 bytes", a.Storage, a.FileOffset, a.StorageBytes, b.Storage, b.FileOffset)
	}
	offA, nA, okA := a.ByteRange()
	offB, nB, okB := b.ByteRange()
	if !okA || !okB || offA != a.FileOffset+8 || offB != a.FileOffset+20 || nA != 16 || nB != 16 {
		t.Errorf("ByteRanges = (%d,%d,%v) (%d,%d,%v), want storage+8 and storage+20, 16 bytes each", offA, nA, okA, offB, nB, okB)
	}
	if tr := byName["transposed"]; tr.Contiguous() {
		t.Error("transposed tensor reported contiguous")
	}
}

// TestLegacyStorageViews reads storage views as PyTorch before 1.0 wrote
// them, and storages whose data follows in another order than the pickle
// references them.
func TestLegacyStorageViews(t *testing.T) {
	obj := sdPickle(
		tspec{name: "a", numel: 6, shape: []int64{2}, stride: []int64{1}, legacy: true, view: &viewSpec{"v1", 1, 2}},
		tspec{name: "b", numel: 6, offset: 1, shape: []int64{3}, stride: []int64{1}, legacy: true, view: &viewSpec{"v2", 2, 4}},
		tspec{name: "c", numel: 6, shape: []int64{2, 3}, stride: []int64{3, 1}, legacy: true},
		tspec{name: "d", class: "torch.LongStorage", key: "1", numel: 2, shape: []int64{2}, stride: []int64{1}, legacy: true},
		tspec{name: "a2", numel: 6, shape: []int64{2}, stride: []int64{1}, legacy: true, view: &viewSpec{"v1", 1, 2}},
	)
	i64 := binary.LittleEndian.AppendUint64(binary.LittleEndian.AppendUint64(nil, 7), uint64(1<<64-2))
	data := legacySpec{obj: obj, storages: []lstorage{{"1", 2, i64}, {"0", 6, f32Bytes(0, 1, 2, 3, 4, 5)}}}.bytes()
	path := writeTemp(t, "views.pt", data)
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	root := int64(len(data)) - 24
	tests := []struct {
		name         string
		storage      string
		fileOffset   int64
		storageBytes int64
		want         []byte
	}{
		{"a", "v1", root + 4, 8, f32Bytes(1, 2)},
		{"b", "v2", root + 8, 16, f32Bytes(3, 4, 5)},
		{"c", "0", root, 24, f32Bytes(0, 1, 2, 3, 4, 5)},
		{"d", "1", root - 24, 16, i64},
		{"a2", "v1", root + 4, 8, f32Bytes(1, 2)},
	}
	if len(f.Tensors) != len(tests) {
		t.Fatalf("%d tensors, want %d", len(f.Tensors), len(tests))
	}
	r := bytes.NewReader(data)
	for i, tc := range tests {
		g := f.Tensors[i]
		if g.Name != tc.name || g.Storage != tc.storage || g.FileOffset != tc.fileOffset || g.StorageBytes != tc.storageBytes {
			t.Errorf("tensor %d = %q in %q at %d, %d bytes, want %q in %q at %d, %d bytes", i, g.Name, g.Storage, g.FileOffset, g.StorageBytes,
				tc.name, tc.storage, tc.fileOffset, tc.storageBytes)
			continue
		}
		b, err := g.ReadBytes(r)
		if err != nil || !bytes.Equal(b, tc.want) {
			t.Errorf("tensor %q reads % x, %v, want % x", g.Name, b, err, tc.want)
		}
	}
}

// TestLegacyLongPickles checks that pickles longer than the first read are
// read whole.
func TestLegacyLongPickles(t *testing.T) {
	specs := make([]tspec, 4000)
	for i := range specs {
		specs[i] = lw4()
		specs[i].name = fmt.Sprintf("%0700d", i)
	}
	data := legacySpec{obj: sdPickle(specs...), storages: []lstorage{{"0", 4, f32Bytes(1, 2, 3, 4)}}}.bytes()
	if len(data) < 2*legacyFirstRead {
		t.Fatalf("pickles of %d bytes do not exceed two first reads", len(data))
	}
	f, err := open(bytes.NewReader(data), int64(len(data)), "long.pt")
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Tensors) != len(specs) || f.Tensors[len(specs)-1].FileOffset != int64(len(data))-16 {
		t.Errorf("%d tensors, last at %d; want %d, at %d", len(f.Tensors), f.Tensors[len(f.Tensors)-1].FileOffset, len(specs), len(data)-16)
	}
}

// TestUnpickleNext checks the byte count of a pickle followed by more bytes,
// and which failures mark the data as cut short.
func TestUnpickleNext(t *testing.T) {
	tests := []struct {
		name      string
		data      []byte
		n         int
		truncated bool
	}{
		{"followed", append(raw(opBinInt1, 7), raw(opNone)...), 5, false},
		{"no-stop", []byte{opProto, 2, opNone}, 0, true},
		{"short-string", []byte{opProto, 2, opBinUnicode, 9, 0, 0, 0, 'a'}, 0, true},
		{"short-frame", []byte{opProto, 4, opFrame, 9, 0, 0, 0, 0, 0, 0, 0, opNone}, 0, true},
		{"short-global", []byte{opProto, 2, opGlobal, 't', 'o'}, 0, true},
		{"long-global", append([]byte{opProto, 2, opGlobal}, bytes.Repeat([]byte{'a'}, maxLineLength+1)...), 0, false},
		{"bad-opcode", []byte{opProto, 2, 0xff}, 0, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, n, err := unpickleNext(tc.data, nil)
			var short *truncatedError
			if errors.As(err, &short) != tc.truncated || (err == nil && n != tc.n) || (err == nil) != (tc.n > 0) {
				t.Errorf("unpickleNext = %d, %v; want %d bytes, truncated %v", n, err, tc.n, tc.truncated)
			}
		})
	}
}

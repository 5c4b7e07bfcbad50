// Package pytorch reads PyTorch checkpoints written by torch.save without
// executing anything: the zip format (PyTorch 1.6 and later) and the legacy
// format before it.
//
// A zip checkpoint is an archive whose records all sit in one folder
// <archive>/: data.pkl is a pickle of the saved object, and data/<key> holds
// the raw little-endian bytes of storage <key>. A legacy checkpoint is a few
// pickles back to back (see legacy.go), the saved object among them,
// followed by the storages' bytes. Open runs the pickles through a small
// pickle interpreter of this package that accepts only the opcodes and
// globals a state dict or a training checkpoint needs (see allowedSummary in
// pickle.go); any other global, such as os.system, or opcode is an error, so
// a malicious checkpoint cannot run code. Open reads no tensor data: each
// Tensor records where its elements lie in the file, and ReadBytes or
// ByteRange fetch them later.
//
// Open accepts a bare state dict (a dict or OrderedDict of name -> tensor, as
// in the released DiT-XL-2-256x256.pt) and a training checkpoint such as
// DiT's train.py writes, {"model": sd, "ema": sd, "opt": ..., "args":
// argparse.Namespace(...)}, from which it takes "ema", else "model", else
// "state_dict", "model_state_dict" or "module" (the first that holds a state
// dict), and whose args it exposes as File.Args.
//
// Save writes zip-format files (see write.go).
package pytorch

import (
	"archive/zip"
	"bytes"
	"fmt"
	"io"
	"math"
	"os"
	"strings"

	"github.com/dcdit/dcdit/loaders/dtype"
)

// File is a parsed checkpoint: the tensors of its state dict and where their
// bytes lie in the file.
type File struct {
	// Path is the path Open was given.
	Path string
	// Tensors are the selected state dict's tensors in pickle (insertion) order.
	Tensors []Tensor
	// Selected is "" for a bare state dict, else the top-level key whose
	// value is the state dict ("ema", "model", ...).
	Selected string
	// TopLevel lists the top-level keys of a training checkpoint in order
	// (non-string keys formatted with %v); nil for a bare state dict.
	TopLevel []string
	// Args holds the attributes of the argparse.Namespace (or plain dict)
	// stored under "args" in a training checkpoint, or nil. Values are
	// string, int64, float64, bool, nil, []any (tuples, lists, sets) and
	// map[string]any (dicts, nested Namespaces); rarer ones are *big.Int
	// (ints beyond int64), []byte, and descriptive strings such as
	// "<tensor F32 [3]>" for tensors.
	Args map[string]any
	// Config holds the attributes of the config object (or plain dict)
	// stored under "config" in a training checkpoint, nested objects as
	// maps — the official DC-DiT's train.py stores its config.Config
	// there — or nil. Values are as in Args.
	Config map[string]any
}

// Tensor locates one tensor of a checkpoint. All counts are in elements of
// DType unless they say bytes.
type Tensor struct {
	// Name is the state-dict key.
	Name string
	// DType is the element type (from the storage class, or the dtype
	// argument of _rebuild_tensor_v3).
	DType dtype.DType
	// Shape is the size of each dimension; empty for a 0-d scalar.
	Shape []int64
	// Strides are the per-dimension strides, in elements.
	Strides []int64
	// StorageOffset is the index in the storage of element [0, 0, ...].
	StorageOffset int64
	// Storage is the zip record holding the storage, e.g. "archive/data/0",
	// or in a legacy checkpoint the storage's key, e.g. "94532587301376".
	// Tensors that share storage (tied weights, views) name the same one.
	Storage string
	// FileOffset is the absolute offset in the checkpoint file of the
	// storage's first byte.
	FileOffset int64
	// StorageBytes is the storage's length in bytes as the checkpoint states
	// it (its element count times its element size); the record holds at
	// least that many bytes.
	StorageBytes int64
}

// Limits on what Open reads into memory.
const (
	maxPickleBytes = 128 << 20 // data.pkl
	maxSmallRecord = 64        // byteorder
)

// stateDictKeys are the top-level keys of a training checkpoint that may
// hold the model's state dict, in order of preference.
var stateDictKeys = []string{"ema", "model", "state_dict", "model_state_dict", "module"}

// IsZipCheckpoint reports whether header, the first bytes of a file, starts
// like a zip archive ("PK\x03\x04"), as PyTorch 1.6+ checkpoints do.
func IsZipCheckpoint(header []byte) bool {
	return bytes.HasPrefix(header, []byte("PK\x03\x04"))
}

// Open parses the checkpoint at path: its zip directory and its pickle, or
// a legacy checkpoint's pickles and storage headers. It reads no tensor
// data, but checks that every storage the pickle references exists, is
// stored uncompressed, holds the bytes its persistent id claims, and covers
// the tensors that view it.
func Open(path string) (*File, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("pytorch: %w", err)
	}
	defer fh.Close()
	st, err := fh.Stat()
	if err != nil {
		return nil, fmt.Errorf("pytorch: %w", err)
	}
	return open(fh, st.Size(), path)
}

// open parses a checkpoint of size bytes read through r; name is used in
// errors and as File.Path.
func open(r io.ReaderAt, size int64, name string) (f *File, err error) {
	defer func() {
		// Last resort only: every input is checked, so this should not fire.
		if p := recover(); p != nil {
			f, err = nil, fmt.Errorf("pytorch: %s: internal error: %v", name, p)
		}
	}()
	errf := func(format string, args ...any) error {
		return fmt.Errorf("pytorch: %s: "+format, append([]any{name}, args...)...)
	}

	head := make([]byte, 8)
	n, _ := r.ReadAt(head, 0)
	head = head[:n]
	if len(head) == 0 {
		return nil, errf("file is empty; want a PyTorch checkpoint")
	}
	if head[0] == opProto {
		f, err := openLegacy(r, size)
		if err != nil {
			return nil, errf("%w", err)
		}
		f.Path = name
		return f, nil
	}
	if !IsZipCheckpoint(head) {
		return nil, errf("not a zip-format PyTorch checkpoint, nor a legacy one: starts with % x, want 50 4b 03 04 (\"PK\\x03\\x04\") or a pickle (80)", head)
	}
	zr, err := zip.NewReader(r, size)
	if err != nil {
		return nil, errf("reading zip archive: %w", err)
	}
	if len(zr.File) == 0 {
		return nil, errf("zip archive has no records")
	}
	first := zr.File[0].Name
	slash := strings.IndexByte(first, '/')
	if slash <= 0 {
		return nil, errf("first record %q is not inside a folder; want <archive>/data.pkl and <archive>/data/<key>", first)
	}
	prefix := first[:slash]
	records := make(map[string]*zip.File, len(zr.File))
	for _, zf := range zr.File {
		if _, dup := records[zf.Name]; dup {
			return nil, errf("duplicate record %q", zf.Name)
		}
		records[zf.Name] = zf
	}

	if _, ok := records[prefix+"/constants.pkl"]; ok {
		return nil, errf("TorchScript archive (%s/constants.pkl present) is not supported; "+
			"load it in Python and save model.state_dict() with torch.save, or convert it to safetensors", prefix)
	}
	if zf, ok := records[prefix+"/byteorder"]; ok {
		b, err := readRecord(zf, maxSmallRecord, size)
		if err != nil {
			return nil, errf("%w", err)
		}
		if bo := strings.TrimSpace(string(b)); bo != "little" {
			return nil, errf("record %q says byte order %q; only \"little\" is supported", zf.Name, bo)
		}
	}
	pklName := prefix + "/data.pkl"
	zf, ok := records[pklName]
	if !ok {
		return nil, errf("no record %q (archive folder %q from first record %q)", pklName, prefix, first)
	}
	pkl, err := readRecord(zf, maxPickleBytes, size)
	if err != nil {
		return nil, errf("%w", err)
	}

	lookup := func(key string) (record, error) {
		rn := prefix + "/data/" + key
		zf, ok := records[rn]
		if !ok {
			return record{}, fmt.Errorf("storage record %q not found", rn)
		}
		if err := checkStored(zf, size); err != nil {
			return record{}, err
		}
		off, err := zf.DataOffset()
		if err != nil {
			return record{}, fmt.Errorf("record %q: %w", rn, err)
		}
		sz := int64(zf.UncompressedSize64)
		if off < 0 || off > size || sz > size-off {
			return record{}, fmt.Errorf("record %q (%d bytes at offset %d) extends past the end of the file (%d bytes)", rn, sz, off, size)
		}
		return record{name: rn, offset: off, size: sz}, nil
	}
	f, err = parse(pklName, pkl, lookup)
	if err != nil {
		return nil, errf("%w", err)
	}
	f.Path = name
	return f, nil
}

// checkStored checks that zf is stored uncompressed with consistent sizes
// that fit the file.
func checkStored(zf *zip.File, fileSize int64) error {
	if zf.Method != zip.Store {
		return fmt.Errorf("record %q is compressed (method %d); PyTorch records must be stored uncompressed (method 0)", zf.Name, zf.Method)
	}
	if zf.CompressedSize64 != zf.UncompressedSize64 || zf.UncompressedSize64 > uint64(fileSize) {
		return fmt.Errorf("record %q: stored sizes %d and %d disagree or exceed the file (%d bytes)",
			zf.Name, zf.CompressedSize64, zf.UncompressedSize64, fileSize)
	}
	return nil
}

// readRecord reads a whole stored record of at most limit bytes.
func readRecord(zf *zip.File, limit, fileSize int64) ([]byte, error) {
	if err := checkStored(zf, fileSize); err != nil {
		return nil, err
	}
	if zf.UncompressedSize64 > uint64(limit) {
		return nil, fmt.Errorf("record %q has %d bytes, more than the %d allowed", zf.Name, zf.UncompressedSize64, limit)
	}
	rc, err := zf.Open()
	if err != nil {
		return nil, fmt.Errorf("record %q: %w", zf.Name, err)
	}
	defer rc.Close()
	b := make([]byte, zf.UncompressedSize64)
	if _, err := io.ReadFull(rc, b); err != nil {
		return nil, fmt.Errorf("record %q: %w", zf.Name, err)
	}
	// Reading to EOF makes archive/zip verify the CRC-32.
	if _, err := rc.Read(make([]byte, 1)); err != io.EOF {
		if err == nil {
			err = fmt.Errorf("longer than its stated %d bytes", len(b))
		}
		return nil, fmt.Errorf("record %q: %w", zf.Name, err)
	}
	return b, nil
}

// record is a storage record's place in the file.
type record struct {
	name   string // zip record name
	offset int64  // absolute offset of its first data byte
	size   int64  // length in bytes
}

// parse interprets the pickle pkl (the record named pklName), resolving
// storage keys through lookup, and selects the state dict.
func parse(pklName string, pkl []byte, lookup func(key string) (record, error)) (*File, error) {
	st := &storageTable{refs: map[string]*storageRef{}, lookup: lookup}
	root, err := unpickle(pkl, st.persistentLoad)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", pklName, err)
	}
	return selectStateDict(pklName, root)
}

// storageTable resolves the persistent ids of one checkpoint's pickle.
type storageTable struct {
	// refs holds the storages by key; in a legacy file also the views of
	// storages, by their own keys.
	refs map[string]*storageRef
	// lookup locates a zip storage record. It is nil for a legacy file,
	// whose persistent ids are 6-tuples with view metadata and whose storage
	// data is located after the whole pickle has been read (see
	// locateLegacy).
	lookup func(key string) (record, error)
}

// persistentLoad resolves ('storage', class, key, location, numel) in a zip
// checkpoint, and ('storage', class, key, location, numel, view_metadata)
// in a legacy one.
func (st *storageTable) persistentLoad(pid any) (any, error) {
	items := 5
	want := "('storage', class, key, location, numel)"
	if st.lookup == nil {
		items = 6
		want = "('storage', class, key, location, numel, view_metadata)"
	}
	t, ok := pid.(*pyTuple)
	if !ok || len(t.items) != items {
		n := -1
		if ok {
			n = len(t.items)
		}
		return nil, fmt.Errorf("persistent id is %s (%d items), want %s", typeName(pid), n, want)
	}
	if kind, _ := t.items[0].(string); kind != "storage" {
		return nil, fmt.Errorf("persistent id kind is %s, want \"storage\"", describeValue(t.items[0]))
	}
	cls, ok := t.items[1].(*pyGlobal)
	if !ok || cls.kind != gStorage {
		return nil, fmt.Errorf("persistent id storage class is %s, want a torch storage class", typeName(t.items[1]))
	}
	key, ok := t.items[2].(string)
	if !ok {
		return nil, fmt.Errorf("persistent id key is %s, want a string", typeName(t.items[2]))
	}
	loc, ok := t.items[3].(string)
	if !ok {
		return nil, fmt.Errorf("storage %q: location is %s, want a string such as \"cpu\"", key, typeName(t.items[3]))
	}
	numel, ok := t.items[4].(int64)
	if !ok || numel < 0 {
		return nil, fmt.Errorf("storage %q: element count is %s, want a non-negative int", key, describeValue(t.items[4]))
	}
	s, ok := st.refs[key]
	if ok {
		if s.root != nil {
			return nil, fmt.Errorf("storage %q is referenced as a view and as a whole storage", key)
		}
		if s.class != cls.name {
			return nil, fmt.Errorf("storage %q is referenced as %s and as %s", key, s.class, cls.name)
		}
		if numel != s.numel {
			return nil, fmt.Errorf("storage %q is referenced with %d and with %d elements", key, s.numel, numel)
		}
	} else {
		es := int64(cls.dt.Size())
		if numel > math.MaxInt64/es {
			return nil, fmt.Errorf("storage %q: the persistent id says %d elements of %s, more bytes than an int64 counts", key, numel, cls.dt)
		}
		s = &storageRef{key: key, class: cls.name, location: loc, dt: cls.dt, untyped: strings.HasSuffix(cls.name, "UntypedStorage"), numel: numel}
		if st.lookup != nil {
			rec, err := st.lookup(key)
			if err != nil {
				return nil, err
			}
			if rec.size < numel*es {
				return nil, fmt.Errorf("storage %q: record %q has %d bytes, but the persistent id says %d elements of %s (%d bytes each)",
					key, rec.name, rec.size, numel, cls.dt, es)
			}
			s.record = rec
		}
		st.refs[key] = s
	}
	if st.lookup == nil && t.items[5] != nil {
		return st.view(s, t.items[5])
	}
	return s, nil
}

// selectStateDict finds the state dict in root, the object the pickle
// (named what in errors) holds, and validates its tensors.
func selectStateDict(what string, root any) (*File, error) {
	top, ok := root.(*pyDict)
	if !ok {
		return nil, fmt.Errorf("%s: top-level object is %s, want a dict of tensors or a training-checkpoint dict", what, typeName(root))
	}

	f := &File{}
	sd := top
	why := stateDictProblem(top)
	if why != "" {
		f.TopLevel = make([]string, len(top.keys))
		for i, k := range top.keys {
			f.TopLevel[i] = keyString(k)
		}
		sd = nil
		for _, k := range stateDictKeys {
			if v, ok := top.get(k); ok {
				if d, ok := v.(*pyDict); ok && len(d.keys) > 0 && stateDictProblem(d) == "" {
					sd, f.Selected = d, k
					break
				}
			}
		}
		if sd == nil {
			return nil, fmt.Errorf("no state dict found: the top-level dict is not one (%s), and no entry %q holds one (top-level keys: %q)",
				why, stateDictKeys, f.TopLevel)
		}
		for key, dst := range map[string]*map[string]any{"args": &f.Args, "config": &f.Config} {
			if v, ok := top.get(key); ok {
				switch v.(type) {
				case *pyObject, *pyDict:
					*dst, _ = toGo(v).(map[string]any)
				}
			}
		}
	}

	f.Tensors = make([]Tensor, 0, len(sd.keys))
	for i, k := range sd.keys {
		t, err := makeTensor(k.(string), sd.vals[i].(*tensorVal))
		if err != nil {
			where := ""
			if f.Selected != "" {
				where = fmt.Sprintf(" (in %q)", f.Selected)
			}
			return nil, fmt.Errorf("%s%s: %w", what, where, err)
		}
		f.Tensors = append(f.Tensors, t)
	}
	return f, nil
}

// stateDictProblem returns "" if every key of d is a string and every value
// a tensor, else why not.
func stateDictProblem(d *pyDict) string {
	for i, k := range d.keys {
		ks, ok := k.(string)
		if !ok {
			return fmt.Sprintf("key %s is %s, not a string", keyString(k), typeName(k))
		}
		if _, ok := d.vals[i].(*tensorVal); !ok {
			return fmt.Sprintf("value of %q is %s, not a tensor", ks, typeName(d.vals[i]))
		}
	}
	return ""
}

// keyString formats a dict key for File.TopLevel and errors.
func keyString(k any) string {
	if s, ok := k.(string); ok {
		return s
	}
	return fmt.Sprint(toGo(k))
}

// makeTensor validates t against its storage and locates it in the file.
func makeTensor(name string, t *tensorVal) (Tensor, error) {
	st := t.storage
	storageBytes := st.numel * int64(st.dt.Size()) // checked in persistentLoad
	out := Tensor{
		Name:          name,
		DType:         t.dt,
		Shape:         append([]int64{}, t.shape...),
		Strides:       append([]int64{}, t.stride...),
		StorageOffset: t.offset,
		Storage:       st.record.name,
		FileOffset:    st.record.offset,
		StorageBytes:  storageBytes,
	}
	if _, _, _, err := out.span(); err != nil {
		return Tensor{}, err
	}
	return out, nil
}

package pytorch

import (
	"archive/zip"
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"sort"
	"strconv"

	"github.com/dcdit/dcdit/loaders/atomicfile"
	"github.com/dcdit/dcdit/loaders/dtype"
)

// SaveTensor is one tensor for Save: contiguous row-major little-endian
// bytes (len(Data) must be numel*DType.Size()).
type SaveTensor struct {
	Name  string      // state-dict key
	DType dtype.DType // one of F32, F16, BF16, F64, I64, I32, I16, I8, U8, BOOL
	Shape []int64     // empty for a 0-d scalar
	Data  []byte      // the elements, row-major, little-endian
}

// SaveOptions control Save. The zero value writes a bare state dict in an
// archive folder named "archive".
type SaveOptions struct {
	// Archive is the folder all records sit in; "" means "archive".
	Archive string
	// Training wraps the state dict as a DiT train.py-style checkpoint
	// {"model": sd, ["ema": ...,] "opt": {...}, ["args": Namespace(...)]}
	// with a small AdamW-like optimizer state (no tensors).
	Training bool
	// EMA adds an "ema" entry to a training checkpoint: EMATensors if
	// non-nil, else a copy of the tensors (in storages of its own).
	EMA        bool
	EMATensors []SaveTensor
	// Args, if non-nil, is stored under "args" of a training checkpoint as
	// an argparse.Namespace with these attributes (in sorted order). Values
	// may be nil, bool, int, int64, float64, string, []any and
	// map[string]any.
	Args map[string]any
}

// storageClassOf maps dtypes to the torch storage class Save writes.
var storageClassOf = map[dtype.DType]string{
	dtype.F32: "FloatStorage", dtype.F16: "HalfStorage", dtype.BF16: "BFloat16Storage",
	dtype.F64: "DoubleStorage", dtype.I64: "LongStorage", dtype.I32: "IntStorage",
	dtype.I16: "ShortStorage", dtype.I8: "CharStorage", dtype.U8: "ByteStorage",
	dtype.BOOL: "BoolStorage",
}

// storageAlignment is the alignment of record data that torch.save uses.
const storageAlignment = 64

// Save writes tensors to path as a PyTorch zip checkpoint that torch.load
// reads (and weights_only=True too, except with Args, whose
// argparse.Namespace torch.load only accepts unrestricted): a protocol-2
// pickle of an OrderedDict of _rebuild_tensor_v2 calls, one storage record
// per tensor, every record stored uncompressed with its data aligned to 64
// bytes. The file is written to a temporary file in the same folder, synced
// and renamed over path.
func Save(path string, tensors []SaveTensor, opts SaveOptions) error {
	errf := func(format string, args ...any) error {
		return fmt.Errorf("pytorch: %s: "+format, append([]any{path}, args...)...)
	}
	archive := opts.Archive
	if archive == "" {
		archive = "archive"
	}
	if archive == "." || archive == ".." || bytes.ContainsAny([]byte(archive), "/\\") {
		return errf("archive folder %q must be a single path element", archive)
	}
	if err := checkSaveTensors(tensors); err != nil {
		return errf("%w", err)
	}
	ema := opts.EMATensors
	if opts.EMA && ema == nil {
		ema = tensors
	}
	if opts.Training && opts.EMA {
		if err := checkSaveTensors(ema); err != nil {
			return errf("ema: %w", err)
		}
	}

	// Pickle first; it assigns the storage keys.
	p := newPickler()
	var storages [][]byte
	p.proto()
	if opts.Training {
		p.op(opEmptyDict)
		p.op(opMark)
		p.str("model")
		storages = p.stateDict(tensors, storages)
		if opts.EMA {
			p.str("ema")
			storages = p.stateDict(ema, storages)
		}
		p.str("opt")
		p.optimizerState(len(tensors))
		if opts.Args != nil {
			p.str("args")
			if err := p.namespace(opts.Args); err != nil {
				return errf("args: %w", err)
			}
		}
		p.op(opSetItems)
	} else {
		storages = p.stateDict(tensors, storages)
	}
	p.op(opStop)
	if err := writeArchive(path, archive, p.buf.Bytes(), storages); err != nil {
		return fmt.Errorf("pytorch: %w", err)
	}
	return nil
}

// writeArchive writes the zip checkpoint torch.save makes: the pickle, the
// format records, the storages in order, the version, each record stored
// with its data aligned.
func writeArchive(path, archive string, pkl []byte, storages [][]byte) error {
	return atomicfile.Write(path, func(w io.Writer) error {
		cw := &countWriter{w: w}
		zw := zip.NewWriter(cw)
		put := func(name string, data []byte) error {
			return writeAligned(zw, cw, archive+"/"+name, data)
		}
		if err := put("data.pkl", pkl); err != nil {
			return err
		}
		for _, r := range []struct{ name, data string }{{".format_version", "1"}, {".storage_alignment", "64"}, {"byteorder", "little"}} {
			if err := put(r.name, []byte(r.data)); err != nil {
				return err
			}
		}
		for i, data := range storages {
			if err := put("data/"+strconv.Itoa(i), data); err != nil {
				return err
			}
		}
		if err := put("version", []byte("3\n")); err != nil {
			return err
		}
		return zw.Close()
	})
}

func checkSaveTensors(tensors []SaveTensor) error {
	seen := map[string]bool{}
	for _, t := range tensors {
		if t.Name == "" {
			return fmt.Errorf("tensor with an empty name")
		}
		if seen[t.Name] {
			return fmt.Errorf("duplicate tensor %q", t.Name)
		}
		seen[t.Name] = true
		if _, ok := storageClassOf[t.DType]; !ok {
			return fmt.Errorf("tensor %q: dtype %s cannot be saved (want F32, F16, BF16, F64, I64, I32, I16, I8, U8 or BOOL)", t.Name, t.DType)
		}
		numel := int64(1)
		for _, n := range t.Shape {
			if n < 0 || (n > 0 && numel > math.MaxInt64/n) {
				return fmt.Errorf("tensor %q: bad shape %v", t.Name, t.Shape)
			}
			numel *= n
		}
		es := int64(t.DType.Size())
		if numel > math.MaxInt64/es || int64(len(t.Data)) != numel*es {
			return fmt.Errorf("tensor %q: %d bytes of data, want %d elements of %s (%d bytes each)", t.Name, len(t.Data), numel, t.DType, es)
		}
	}
	return nil
}

// writeAligned adds a stored record whose data starts at a multiple of
// storageAlignment, padding the local header with an extra field the way
// torch.save does ("FB" followed by 'Z's).
func writeAligned(zw *zip.Writer, cw *countWriter, name string, data []byte) error {
	if err := zw.Flush(); err != nil {
		return err
	}
	const localHeader, extraHeader = 30, 4
	start := cw.n + localHeader + int64(len(name)) + extraHeader
	pad := (storageAlignment - start%storageAlignment) % storageAlignment
	extra := make([]byte, extraHeader+pad)
	binary.LittleEndian.PutUint16(extra, 'F'|'B'<<8)
	binary.LittleEndian.PutUint16(extra[2:], uint16(pad))
	for i := extraHeader; i < len(extra); i++ {
		extra[i] = 'Z'
	}
	w, err := zw.CreateRaw(&zip.FileHeader{
		Name:               name,
		Method:             zip.Store,
		CreatorVersion:     20,
		ReaderVersion:      20,
		CRC32:              crc32.ChecksumIEEE(data),
		CompressedSize64:   uint64(len(data)),
		UncompressedSize64: uint64(len(data)),
		Extra:              extra,
	})
	if err != nil {
		return fmt.Errorf("record %q: %w", name, err)
	}
	if _, err := w.Write(data); err != nil {
		return fmt.Errorf("record %q: %w", name, err)
	}
	return nil
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// pickler writes protocol-2 pickles, memoizing globals and repeated strings
// as torch's pickler does.
type pickler struct {
	buf  bytes.Buffer
	memo map[string]uint32
}

func newPickler() *pickler { return &pickler{memo: map[string]uint32{}} }

func (p *pickler) op(b byte) { p.buf.WriteByte(b) }

func (p *pickler) proto() { p.buf.Write([]byte{opProto, 2}) }

// cached writes a memo fetch of the value memoized under id and reports
// whether there was one.
func (p *pickler) cached(id string) bool {
	i, ok := p.memo[id]
	if !ok {
		return false
	}
	if i < 256 {
		p.buf.Write([]byte{opBinGet, byte(i)})
	} else {
		p.op(opLongBinGet)
		p.buf.Write(binary.LittleEndian.AppendUint32(nil, i))
	}
	return true
}

// remember memoizes the value on top of the stack under id.
func (p *pickler) remember(id string) {
	i := uint32(len(p.memo))
	p.memo[id] = i
	if i < 256 {
		p.buf.Write([]byte{opBinPut, byte(i)})
	} else {
		p.op(opLongBinPut)
		p.buf.Write(binary.LittleEndian.AppendUint32(nil, i))
	}
}

func (p *pickler) global(module, name string) {
	id := "g" + module + "." + name
	if p.cached(id) {
		return
	}
	p.op(opGlobal)
	p.buf.WriteString(module + "\n" + name + "\n")
	p.remember(id)
}

func (p *pickler) str(s string) {
	id := "s" + s
	if p.cached(id) {
		return
	}
	p.op(opBinUnicode)
	p.buf.Write(binary.LittleEndian.AppendUint32(nil, uint32(len(s))))
	p.buf.WriteString(s)
	p.remember(id)
}

func (p *pickler) int(v int64) {
	switch {
	case v >= 0 && v < 1<<8:
		p.buf.Write([]byte{opBinInt1, byte(v)})
	case v >= 0 && v < 1<<16:
		p.op(opBinInt2)
		p.buf.Write(binary.LittleEndian.AppendUint16(nil, uint16(v)))
	case v >= math.MinInt32 && v <= math.MaxInt32:
		p.op(opBinInt)
		p.buf.Write(binary.LittleEndian.AppendUint32(nil, uint32(int32(v))))
	default:
		b := binary.LittleEndian.AppendUint64(nil, uint64(v))
		// Shortest two's-complement form.
		for len(b) > 1 && ((b[len(b)-1] == 0 && b[len(b)-2]&0x80 == 0) || (b[len(b)-1] == 0xff && b[len(b)-2]&0x80 != 0)) {
			b = b[:len(b)-1]
		}
		p.buf.Write([]byte{opLong1, byte(len(b))})
		p.buf.Write(b)
	}
}

func (p *pickler) float(v float64) {
	p.op(opBinFloat)
	p.buf.Write(binary.BigEndian.AppendUint64(nil, math.Float64bits(v)))
}

func (p *pickler) boolean(v bool) {
	if v {
		p.op(opNewTrue)
	} else {
		p.op(opNewFalse)
	}
}

func (p *pickler) intTuple(v []int64) {
	switch len(v) {
	case 0:
		p.op(opEmptyTuple)
		return
	case 1, 2, 3:
		for _, x := range v {
			p.int(x)
		}
		p.op(opTuple1 + byte(len(v)-1))
		return
	}
	p.op(opMark)
	for _, x := range v {
		p.int(x)
	}
	p.op(opTuple)
}

// stateDict writes an OrderedDict of tensors, appending their storages.
func (p *pickler) stateDict(tensors []SaveTensor, storages [][]byte) [][]byte {
	p.global("collections", "OrderedDict")
	p.op(opEmptyTuple)
	p.op(opReduce)
	for i, t := range tensors {
		if i%1000 == 0 {
			if i > 0 {
				p.op(opSetItems)
			}
			p.op(opMark)
		}
		key := strconv.Itoa(len(storages))
		storages = append(storages, t.Data)
		numel := int64(len(t.Data) / t.DType.Size())
		p.str(t.Name)
		p.global("torch._utils", "_rebuild_tensor_v2")
		p.op(opMark)
		p.op(opMark) // persistent id
		p.str("storage")
		p.global("torch", storageClassOf[t.DType])
		p.str(key)
		p.str("cpu")
		p.int(numel)
		p.op(opTuple)
		p.op(opBinPersID)
		p.int(0)
		p.intTuple(t.Shape)
		strides := make([]int64, len(t.Shape))
		acc := int64(1)
		for d := len(t.Shape) - 1; d >= 0; d-- {
			strides[d] = acc
			acc *= max(t.Shape[d], 1)
		}
		p.intTuple(strides)
		p.boolean(false)
		p.global("collections", "OrderedDict")
		p.op(opEmptyTuple)
		p.op(opReduce)
		p.op(opTuple)
		p.op(opReduce)
	}
	if len(tensors) > 0 {
		p.op(opSetItems)
	}
	return storages
}

// optimizerState writes an AdamW-style optimizer state dict with no
// per-parameter state.
func (p *pickler) optimizerState(nparams int) {
	p.op(opEmptyDict)
	p.op(opMark)
	p.str("state")
	p.op(opEmptyDict)
	p.str("param_groups")
	p.op(opEmptyList)
	p.op(opEmptyDict)
	p.op(opMark)
	p.str("lr")
	p.float(1e-4)
	p.str("betas")
	p.float(0.9)
	p.float(0.999)
	p.op(opTuple2)
	p.str("eps")
	p.float(1e-8)
	p.str("weight_decay")
	p.int(0)
	p.str("amsgrad")
	p.boolean(false)
	p.str("foreach")
	p.op(opNone)
	p.str("maximize")
	p.boolean(false)
	p.str("capturable")
	p.boolean(false)
	p.str("params")
	p.op(opEmptyList)
	if nparams > 0 {
		p.op(opMark)
		for i := range nparams {
			p.int(int64(i))
		}
		p.op(opAppends)
	}
	p.op(opSetItems)
	p.op(opAppend)
	p.op(opSetItems)
}

// namespace writes argparse.Namespace(**attrs) the way pickle protocol 2
// does: NEWOBJ of the class, then BUILD with the attribute dict.
func (p *pickler) namespace(attrs map[string]any) error {
	p.global("argparse", "Namespace")
	p.op(opEmptyTuple)
	p.op(opNewObj)
	if err := p.value(attrs, 0); err != nil {
		return err
	}
	p.op(opBuild)
	return nil
}

// value writes a plain value (see SaveOptions.Args).
func (p *pickler) value(v any, depth int) error {
	if depth > maxValueDepth {
		return fmt.Errorf("values nested more than %d deep", maxValueDepth)
	}
	switch x := v.(type) {
	case nil:
		p.op(opNone)
	case bool:
		p.boolean(x)
	case int:
		p.int(int64(x))
	case int64:
		p.int(x)
	case float64:
		p.float(x)
	case string:
		p.str(x)
	case []any:
		p.op(opEmptyList)
		if len(x) > 0 {
			p.op(opMark)
			for _, it := range x {
				if err := p.value(it, depth+1); err != nil {
					return err
				}
			}
			p.op(opAppends)
		}
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		p.op(opEmptyDict)
		if len(keys) > 0 {
			p.op(opMark)
			for _, k := range keys {
				p.str(k)
				if err := p.value(x[k], depth+1); err != nil {
					return fmt.Errorf("%q: %w", k, err)
				}
			}
			p.op(opSetItems)
		}
	default:
		return fmt.Errorf("value of type %T cannot be saved (want nil, bool, int, int64, float64, string, []any or map[string]any)", v)
	}
	return nil
}

package pytorch

// A restricted pickle interpreter. It runs the opcodes that protocols 2-5 emit
// for state dicts and training checkpoints, and "calls" only the handful of
// globals those need, by building inert Go values; nothing is executed.
// Everything else is an error naming the opcode (and its byte offset) or the
// global. The interpreter never recurses over the values it builds, and every
// length read from the input is checked against the bytes that remain.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/big"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/dcdit/dcdit/loaders/dtype"
)

// Limits on hostile input. Legitimate checkpoints are far below them.
const (
	maxMarkDepth  = 1000    // nested MARKs outstanding at once
	maxKeyBytes   = 1 << 16 // canonical encoding of one dict/set key
	maxLineLength = 1 << 10 // GLOBAL module and name lines
	maxValueDepth = 64      // nesting followed when converting values for callers
	maxValueNodes = 1 << 16 // values visited when converting one value for callers
)

// Python values built by the interpreter. Scalars are Go values: nil (None),
// bool, int64, *big.Int (ints beyond int64), float64, string, pyBytes.
type (
	pyBytes []byte

	// pyTuple is an immutable tuple; key caches its canonical dict-key form
	// and depth is its tuple-nesting depth, which bounds hashKey's recursion.
	pyTuple struct {
		items  []any
		depth  int
		key    string
		keyErr error
		keyed  bool
	}

	pyList struct{ items []any }

	// pyDict is an insertion-ordered dict (both dict and OrderedDict).
	pyDict struct {
		keys    []any
		vals    []any
		index   map[string]int
		ordered bool // built by collections.OrderedDict
	}

	pySet struct {
		items  []any
		index  map[string]struct{}
		frozen bool
	}

	// pyGlobal is a reference to one of the allowed globals.
	pyGlobal struct {
		name string
		kind globalKind
		dt   dtype.DType // storage classes and torch dtypes
	}

	// pyObject is an argparse.Namespace: its attributes come from BUILD.
	pyObject struct {
		class string
		attrs *pyDict
	}

	// storageRef is a resolved persistent id ('storage', cls, key, location,
	// numel), or in a legacy file the view that its view_metadata names.
	storageRef struct {
		key      string
		class    string
		location string
		dt       dtype.DType // U8 for an untyped storage
		untyped  bool
		numel    int64 // in elements of dt, as stated in the persistent id
		record   record
		// root is the viewed storage of a legacy storage view, whose
		// elements start at element viewOffset of root; nil otherwise.
		root       *storageRef
		viewOffset int64
	}

	// tensorVal is the result of a _rebuild_tensor_* call, not yet validated
	// against its storage (that happens once the tensor has a name).
	tensorVal struct {
		storage *storageRef
		dt      dtype.DType
		offset  int64
		shape   []int64
		stride  []int64
	}
)

type globalKind uint8

const (
	gOrderedDict globalKind = iota + 1
	gRebuildV2
	gRebuildV3
	gRebuildParameter
	gRebuildParameterWithState
	gStorage
	gDType
	gSize
	gNamespace
)

// storageClasses maps torch storage class names (after "torch.") to dtypes.
var storageClasses = map[string]dtype.DType{
	"FloatStorage": dtype.F32, "HalfStorage": dtype.F16, "BFloat16Storage": dtype.BF16,
	"DoubleStorage": dtype.F64, "LongStorage": dtype.I64, "IntStorage": dtype.I32,
	"ShortStorage": dtype.I16, "CharStorage": dtype.I8, "ByteStorage": dtype.U8,
	"BoolStorage": dtype.BOOL,
}

// torchDTypes maps torch dtype globals (after "torch.") to dtypes.
var torchDTypes = map[string]dtype.DType{
	"float32": dtype.F32, "float": dtype.F32, "float16": dtype.F16, "half": dtype.F16,
	"bfloat16": dtype.BF16, "float64": dtype.F64, "double": dtype.F64,
	"int64": dtype.I64, "long": dtype.I64, "int32": dtype.I32, "int": dtype.I32,
	"int16": dtype.I16, "short": dtype.I16, "int8": dtype.I8, "uint8": dtype.U8,
	"bool": dtype.BOOL, "uint16": dtype.U16, "uint32": dtype.U32, "uint64": dtype.U64,
	"float8_e4m3fn": dtype.F8_E4M3, "float8_e5m2": dtype.F8_E5M2,
}

var allowedGlobals = func() map[string]pyGlobal {
	m := map[string]pyGlobal{
		"collections.OrderedDict":                    {kind: gOrderedDict},
		"torch._utils._rebuild_tensor_v2":            {kind: gRebuildV2},
		"torch._utils._rebuild_tensor_v3":            {kind: gRebuildV3},
		"torch._utils._rebuild_parameter":            {kind: gRebuildParameter},
		"torch._utils._rebuild_parameter_with_state": {kind: gRebuildParameterWithState},
		"torch.UntypedStorage":                       {kind: gStorage, dt: dtype.U8},
		"torch.storage.UntypedStorage":               {kind: gStorage, dt: dtype.U8},
		"torch.Size":                                 {kind: gSize},
		"argparse.Namespace":                         {kind: gNamespace},
	}
	// The official DC-DiT's train.py pickles its config.Config dataclass
	// (and the dataclasses it nests) into every training checkpoint: plain
	// attribute holders, read like a Namespace.
	for _, n := range []string{"Config", "ModelConfig", "HNetConfig", "TrainingConfig", "DataConfig", "DiffusionConfig", "LoggingConfig"} {
		m["config."+n] = pyGlobal{kind: gNamespace}
	}
	for n, dt := range storageClasses {
		m["torch."+n] = pyGlobal{kind: gStorage, dt: dt}
	}
	for n, dt := range torchDTypes {
		m["torch."+n] = pyGlobal{kind: gDType, dt: dt}
	}
	for n, g := range m {
		g.name = n
		m[n] = g
	}
	return m
}()

// allowedSummary lists the allowed globals for error messages.
var allowedSummary = func() string {
	var st, dt []string
	for n := range storageClasses {
		st = append(st, strings.TrimSuffix(n, "Storage"))
	}
	for n := range torchDTypes {
		dt = append(dt, n)
	}
	sort.Strings(st)
	sort.Strings(dt)
	return "collections.OrderedDict, torch._utils._rebuild_tensor_v2, torch._utils._rebuild_tensor_v3, " +
		"torch._utils._rebuild_parameter, torch._utils._rebuild_parameter_with_state, " +
		"torch.{" + strings.Join(st, ",") + "}Storage, torch.UntypedStorage, torch.storage.UntypedStorage, " +
		"torch.{" + strings.Join(dt, ",") + "}, torch.Size, argparse.Namespace, config.{Config,ModelConfig,HNetConfig,TrainingConfig,DataConfig,DiffusionConfig,LoggingConfig} (the official DC-DiT's)"
}()

// Pickle opcodes.
const (
	opMark          = '('
	opStop          = '.'
	opBinInt        = 'J'
	opBinInt1       = 'K'
	opBinInt2       = 'M'
	opNone          = 'N'
	opBinPersID     = 'Q'
	opReduce        = 'R'
	opBinUnicode    = 'X'
	opAppend        = 'a'
	opBuild         = 'b'
	opGlobal        = 'c'
	opAppends       = 'e'
	opBinGet        = 'h'
	opLongBinGet    = 'j'
	opEmptyList     = ']'
	opBinPut        = 'q'
	opLongBinPut    = 'r'
	opSetItem       = 's'
	opTuple         = 't'
	opEmptyTuple    = ')'
	opSetItems      = 'u'
	opBinFloat      = 'G'
	opEmptyDict     = '}'
	opBinBytes      = 'B'
	opShortBinBytes = 'C'
	opProto         = 0x80
	opNewObj        = 0x81
	opTuple1        = 0x85
	opTuple2        = 0x86
	opTuple3        = 0x87
	opNewTrue       = 0x88
	opNewFalse      = 0x89
	opLong1         = 0x8a
	opShortBinUni   = 0x8c
	opBinUnicode8   = 0x8d
	opBinBytes8     = 0x8e
	opEmptySet      = 0x8f
	opAddItems      = 0x90
	opFrozenSet     = 0x91
	opStackGlobal   = 0x93
	opMemoize       = 0x94
	opFrame         = 0x95
	highestProtocol = 5
)

// opNames names every pickle opcode (protocols 0-5), for error messages.
var opNames = map[byte]string{
	'(': "MARK", '.': "STOP", '0': "POP", '1': "POP_MARK", '2': "DUP", 'F': "FLOAT",
	'I': "INT", 'J': "BININT", 'K': "BININT1", 'L': "LONG", 'M': "BININT2", 'N': "NONE",
	'P': "PERSID", 'Q': "BINPERSID", 'R': "REDUCE", 'S': "STRING", 'T': "BINSTRING",
	'U': "SHORT_BINSTRING", 'V': "UNICODE", 'X': "BINUNICODE", 'a': "APPEND", 'b': "BUILD",
	'c': "GLOBAL", 'd': "DICT", '}': "EMPTY_DICT", 'e': "APPENDS", 'g': "GET", 'h': "BINGET",
	'i': "INST", 'j': "LONG_BINGET", 'l': "LIST", ']': "EMPTY_LIST", 'o': "OBJ", 'p': "PUT",
	'q': "BINPUT", 'r': "LONG_BINPUT", 's': "SETITEM", 't': "TUPLE", ')': "EMPTY_TUPLE",
	'u': "SETITEMS", 'G': "BINFLOAT", 'B': "BINBYTES", 'C': "SHORT_BINBYTES",
	0x80: "PROTO", 0x81: "NEWOBJ", 0x82: "EXT1", 0x83: "EXT2", 0x84: "EXT4", 0x85: "TUPLE1",
	0x86: "TUPLE2", 0x87: "TUPLE3", 0x88: "NEWTRUE", 0x89: "NEWFALSE", 0x8a: "LONG1",
	0x8b: "LONG4", 0x8c: "SHORT_BINUNICODE", 0x8d: "BINUNICODE8", 0x8e: "BINBYTES8",
	0x8f: "EMPTY_SET", 0x90: "ADDITEMS", 0x91: "FROZENSET", 0x92: "NEWOBJ_EX",
	0x93: "STACK_GLOBAL", 0x94: "MEMOIZE", 0x95: "FRAME", 0x96: "BYTEARRAY8",
	0x97: "NEXT_BUFFER", 0x98: "READONLY_BUFFER",
}

func opName(op byte) string {
	if n, ok := opNames[op]; ok {
		return n
	}
	return "unknown"
}

// unpickler holds the interpreter state for one pickle.
type unpickler struct {
	data  []byte
	pos   int // next byte to read
	opPos int // offset of the opcode being run
	op    byte
	stack []any
	marks []int // stack heights at each outstanding MARK
	memo  map[uint64]any

	// persistentLoad resolves a BINPERSID id; nil rejects persistent ids.
	persistentLoad func(pid any) (any, error)
}

// unpickle runs the pickle in data and returns the object STOP leaves.
func unpickle(data []byte, persistentLoad func(pid any) (any, error)) (any, error) {
	v, _, err := unpickleNext(data, persistentLoad)
	return v, err
}

// unpickleNext runs the pickle at the start of data, which may be followed
// by more bytes (a legacy checkpoint is several pickles back to back), and
// returns the object STOP leaves and the number of bytes up to and including
// that STOP.
func unpickleNext(data []byte, persistentLoad func(pid any) (any, error)) (any, int, error) {
	u := &unpickler{data: data, memo: map[uint64]any{}, persistentLoad: persistentLoad}
	v, err := u.run()
	return v, u.pos, err
}

// truncatedError is an error caused by data ending inside the pickle. A
// caller that passed only a prefix of a longer stream can read more and run
// the pickle again.
type truncatedError struct{ msg string }

func (e *truncatedError) Error() string { return e.msg }

// errf returns an error located at the current opcode.
func (u *unpickler) errf(format string, args ...any) error {
	return fmt.Errorf("%s at offset %d: %s", opName(u.op), u.opPos, fmt.Sprintf(format, args...))
}

// wrapf is errf for an error from a helper, keeping it for errors.Is/As.
func (u *unpickler) wrapf(err error) error {
	return fmt.Errorf("%s at offset %d: %w", opName(u.op), u.opPos, err)
}

func (u *unpickler) read(n uint64) ([]byte, error) {
	if rem := uint64(len(u.data) - u.pos); n > rem {
		return nil, &truncatedError{u.errf("needs %d bytes, only %d remain", n, rem).Error()}
	}
	b := u.data[u.pos : u.pos+int(n)]
	u.pos += int(n)
	return b, nil
}

func (u *unpickler) readUint(n int) (uint64, error) {
	b, err := u.read(uint64(n))
	if err != nil {
		return 0, err
	}
	var v uint64
	for i := n - 1; i >= 0; i-- {
		v = v<<8 | uint64(b[i])
	}
	return v, nil
}

// readLine reads up to and excluding the next '\n'.
func (u *unpickler) readLine() (string, error) {
	rest := u.data[u.pos:]
	for i := 0; i < len(rest) && i <= maxLineLength; i++ {
		if rest[i] == '\n' {
			u.pos += i + 1
			return string(rest[:i]), nil
		}
	}
	err := u.errf("no newline within %d bytes", min(len(rest), maxLineLength+1))
	if len(rest) <= maxLineLength {
		return "", &truncatedError{err.Error()}
	}
	return "", err
}

func (u *unpickler) push(v any) { u.stack = append(u.stack, v) }

func (u *unpickler) base() int {
	if len(u.marks) > 0 {
		return u.marks[len(u.marks)-1]
	}
	return 0
}

func (u *unpickler) pop() (any, error) {
	if len(u.stack) <= u.base() {
		return nil, u.errf("stack underflow")
	}
	v := u.stack[len(u.stack)-1]
	u.stack = u.stack[:len(u.stack)-1]
	return v, nil
}

func (u *unpickler) top() (any, error) {
	if len(u.stack) <= u.base() {
		return nil, u.errf("stack underflow")
	}
	return u.stack[len(u.stack)-1], nil
}

// popN pops n values (in push order).
func (u *unpickler) popN(n int) ([]any, error) {
	if len(u.stack)-u.base() < n {
		return nil, u.errf("stack underflow (needs %d values, has %d)", n, len(u.stack)-u.base())
	}
	items := append([]any(nil), u.stack[len(u.stack)-n:]...)
	u.stack = u.stack[:len(u.stack)-n]
	return items, nil
}

// popMark pops the values above the innermost MARK, and the MARK.
func (u *unpickler) popMark() ([]any, error) {
	if len(u.marks) == 0 {
		return nil, u.errf("no MARK on the stack")
	}
	m := u.marks[len(u.marks)-1]
	u.marks = u.marks[:len(u.marks)-1]
	items := append([]any(nil), u.stack[m:]...)
	u.stack = u.stack[:m]
	return items, nil
}

func (u *unpickler) memoGet(i uint64) error {
	v, ok := u.memo[i]
	if !ok {
		return u.errf("memo index %d not found (memo has %d entries)", i, len(u.memo))
	}
	u.push(v)
	return nil
}

func (u *unpickler) memoPut(i uint64) error {
	v, err := u.top()
	if err != nil {
		return err
	}
	u.memo[i] = v
	return nil
}

func (u *unpickler) run() (any, error) {
	for {
		if u.pos >= len(u.data) {
			return nil, &truncatedError{fmt.Sprintf("pickle ends at offset %d without STOP", len(u.data))}
		}
		u.opPos, u.op = u.pos, u.data[u.pos]
		u.pos++
		if err := u.step(); err != nil {
			if errors.Is(err, errStop) {
				return u.pop()
			}
			return nil, err
		}
	}
}

var errStop = errors.New("STOP")

// step runs one opcode.
func (u *unpickler) step() error {
	switch u.op {
	case opProto:
		v, err := u.readUint(1)
		if err != nil {
			return err
		}
		if v > highestProtocol {
			return u.errf("unsupported pickle protocol %d (want 2 to %d)", v, highestProtocol)
		}
	case opFrame:
		n, err := u.readUint(8)
		if err != nil {
			return err
		}
		if rem := uint64(len(u.data) - u.pos); n > rem {
			return &truncatedError{u.errf("frame of %d bytes, only %d remain", n, rem).Error()}
		}
	case opStop:
		return errStop
	case opMark:
		if len(u.marks) >= maxMarkDepth {
			return u.errf("more than %d nested MARKs", maxMarkDepth)
		}
		u.marks = append(u.marks, len(u.stack))

	// Scalars.
	case opNone:
		u.push(nil)
	case opNewTrue:
		u.push(true)
	case opNewFalse:
		u.push(false)
	case opBinInt:
		v, err := u.readUint(4)
		if err != nil {
			return err
		}
		u.push(int64(int32(uint32(v))))
	case opBinInt1:
		v, err := u.readUint(1)
		if err != nil {
			return err
		}
		u.push(int64(v))
	case opBinInt2:
		v, err := u.readUint(2)
		if err != nil {
			return err
		}
		u.push(int64(v))
	case opLong1:
		n, err := u.readUint(1)
		if err != nil {
			return err
		}
		b, err := u.read(n)
		if err != nil {
			return err
		}
		u.push(decodeLong(b))
	case opBinFloat:
		b, err := u.read(8)
		if err != nil {
			return err
		}
		u.push(math.Float64frombits(binary.BigEndian.Uint64(b)))
	case opShortBinUni, opBinUnicode, opBinUnicode8:
		b, err := u.readCounted(lengthWidth(u.op))
		if err != nil {
			return err
		}
		if !utf8.Valid(b) {
			return u.errf("string is not valid UTF-8")
		}
		u.push(string(b))
	case opShortBinBytes, opBinBytes, opBinBytes8:
		b, err := u.readCounted(lengthWidth(u.op))
		if err != nil {
			return err
		}
		u.push(pyBytes(append([]byte(nil), b...)))

	// Containers.
	case opEmptyTuple:
		u.push(newTuple(nil))
	case opTuple1, opTuple2, opTuple3:
		items, err := u.popN(int(u.op-opTuple1) + 1)
		if err != nil {
			return err
		}
		u.push(newTuple(items))
	case opTuple:
		items, err := u.popMark()
		if err != nil {
			return err
		}
		u.push(newTuple(items))
	case opEmptyList:
		u.push(&pyList{})
	case opEmptyDict:
		u.push(newDict(false))
	case opEmptySet:
		u.push(&pySet{index: map[string]struct{}{}})
	case opAppend, opAppends:
		var items []any
		var err error
		if u.op == opAppend {
			items, err = u.popN(1)
		} else {
			items, err = u.popMark()
		}
		if err != nil {
			return err
		}
		t, err := u.top()
		if err != nil {
			return err
		}
		l, ok := t.(*pyList)
		if !ok {
			return u.errf("target is %s, want a list", typeName(t))
		}
		l.items = append(l.items, items...)
	case opSetItem, opSetItems:
		var items []any
		var err error
		if u.op == opSetItem {
			items, err = u.popN(2)
		} else {
			items, err = u.popMark()
		}
		if err != nil {
			return err
		}
		if len(items)%2 != 0 {
			return u.errf("odd number of values (%d) for key/value pairs", len(items))
		}
		t, err := u.top()
		if err != nil {
			return err
		}
		d, ok := t.(*pyDict)
		if !ok {
			return u.errf("target is %s, want a dict", typeName(t))
		}
		for i := 0; i < len(items); i += 2 {
			if err := d.set(items[i], items[i+1]); err != nil {
				return u.wrapf(err)
			}
		}
	case opAddItems:
		items, err := u.popMark()
		if err != nil {
			return err
		}
		t, err := u.top()
		if err != nil {
			return err
		}
		s, ok := t.(*pySet)
		if !ok || s.frozen {
			return u.errf("target is %s, want a set", typeName(t))
		}
		for _, it := range items {
			if err := s.add(it); err != nil {
				return u.wrapf(err)
			}
		}
	case opFrozenSet:
		items, err := u.popMark()
		if err != nil {
			return err
		}
		s := &pySet{index: map[string]struct{}{}, frozen: true}
		for _, it := range items {
			if err := s.add(it); err != nil {
				return u.wrapf(err)
			}
		}
		u.push(s)

	// Memo.
	case opBinPut:
		i, err := u.readUint(1)
		if err != nil {
			return err
		}
		return u.memoPut(i)
	case opLongBinPut:
		i, err := u.readUint(4)
		if err != nil {
			return err
		}
		return u.memoPut(i)
	case opMemoize:
		return u.memoPut(uint64(len(u.memo)))
	case opBinGet:
		i, err := u.readUint(1)
		if err != nil {
			return err
		}
		return u.memoGet(i)
	case opLongBinGet:
		i, err := u.readUint(4)
		if err != nil {
			return err
		}
		return u.memoGet(i)

	// Globals, calls, objects.
	case opGlobal:
		mod, err := u.readLine()
		if err != nil {
			return err
		}
		name, err := u.readLine()
		if err != nil {
			return err
		}
		return u.pushGlobal(mod, name)
	case opStackGlobal:
		items, err := u.popN(2)
		if err != nil {
			return err
		}
		mod, ok1 := items[0].(string)
		name, ok2 := items[1].(string)
		if !ok1 || !ok2 {
			return u.errf("module and name are %s and %s, want strings", typeName(items[0]), typeName(items[1]))
		}
		return u.pushGlobal(mod, name)
	case opReduce:
		items, err := u.popN(2)
		if err != nil {
			return err
		}
		g, ok := items[0].(*pyGlobal)
		if !ok {
			return u.errf("callable is %s, want an allowed global", typeName(items[0]))
		}
		args, ok := items[1].(*pyTuple)
		if !ok {
			return u.errf("arguments of %s are %s, want a tuple", g.name, typeName(items[1]))
		}
		v, err := call(g, args.items)
		if err != nil {
			return u.wrapf(err)
		}
		u.push(v)
	case opNewObj:
		items, err := u.popN(2)
		if err != nil {
			return err
		}
		g, ok := items[0].(*pyGlobal)
		if !ok {
			return u.errf("class is %s, want an allowed global", typeName(items[0]))
		}
		args, ok := items[1].(*pyTuple)
		if !ok {
			return u.errf("arguments of %s are %s, want a tuple", g.name, typeName(items[1]))
		}
		if g.kind != gNamespace && g.kind != gOrderedDict {
			return u.errf("%s cannot be instantiated with NEWOBJ", g.name)
		}
		v, err := call(g, args.items)
		if err != nil {
			return u.wrapf(err)
		}
		u.push(v)
	case opBuild:
		state, err := u.pop()
		if err != nil {
			return err
		}
		obj, err := u.top()
		if err != nil {
			return err
		}
		if err := build(obj, state); err != nil {
			return u.wrapf(err)
		}
	case opBinPersID:
		pid, err := u.pop()
		if err != nil {
			return err
		}
		if u.persistentLoad == nil {
			return u.errf("persistent ids are not allowed here")
		}
		v, err := u.persistentLoad(pid)
		if err != nil {
			return u.wrapf(err)
		}
		u.push(v)

	default:
		if _, known := opNames[u.op]; !known {
			return fmt.Errorf("unknown opcode 0x%02x at offset %d", u.op, u.opPos)
		}
		return fmt.Errorf("opcode 0x%02x (%s) at offset %d is not allowed", u.op, opName(u.op), u.opPos)
	}
	return nil
}

// lengthWidth is the width of the length prefix of a string/bytes opcode.
func lengthWidth(op byte) int {
	switch op {
	case opShortBinUni, opShortBinBytes:
		return 1
	case opBinUnicode, opBinBytes:
		return 4
	}
	return 8
}

// readCounted reads a little-endian length of width n and that many bytes.
func (u *unpickler) readCounted(n int) ([]byte, error) {
	l, err := u.readUint(n)
	if err != nil {
		return nil, err
	}
	return u.read(l)
}

func (u *unpickler) pushGlobal(mod, name string) error {
	full := mod + "." + name
	g, ok := allowedGlobals[full]
	if !ok {
		return fmt.Errorf("global %q at offset %d is not allowed (allowed: %s)", full, u.opPos, allowedSummary)
	}
	u.push(&g)
	return nil
}

// decodeLong decodes a little-endian two's-complement integer (LONG1).
func decodeLong(b []byte) any {
	if len(b) == 0 {
		return int64(0)
	}
	if len(b) <= 8 {
		var v uint64
		for i := len(b) - 1; i >= 0; i-- {
			v = v<<8 | uint64(b[i])
		}
		shift := uint(64 - 8*len(b))
		return int64(v<<shift) >> shift // sign-extend
	}
	be := make([]byte, len(b))
	for i := range b {
		be[len(b)-1-i] = b[i]
	}
	v := new(big.Int).SetBytes(be)
	if b[len(b)-1]&0x80 != 0 {
		v.Sub(v, new(big.Int).Lsh(big.NewInt(1), uint(8*len(b))))
	}
	if v.IsInt64() {
		return v.Int64()
	}
	return v
}

// call applies an allowed global to its REDUCE/NEWOBJ arguments.
func call(g *pyGlobal, args []any) (any, error) {
	switch g.kind {
	case gOrderedDict:
		d := newDict(true)
		switch len(args) {
		case 0:
			return d, nil
		case 1:
			var pairs []any
			switch a := args[0].(type) {
			case *pyList:
				pairs = a.items
			case *pyTuple:
				pairs = a.items
			default:
				return nil, fmt.Errorf("%s: argument is %s, want a list of pairs", g.name, typeName(args[0]))
			}
			for _, p := range pairs {
				kv, ok := sequenceItems(p)
				if !ok || len(kv) != 2 {
					return nil, fmt.Errorf("%s: item is %s, want a (key, value) pair", g.name, typeName(p))
				}
				if err := d.set(kv[0], kv[1]); err != nil {
					return nil, fmt.Errorf("%s: %w", g.name, err)
				}
			}
			return d, nil
		}
		return nil, fmt.Errorf("%s: got %d arguments, want 0 or 1", g.name, len(args))
	case gNamespace:
		if len(args) != 0 {
			return nil, fmt.Errorf("%s: got %d arguments, want none", g.name, len(args))
		}
		return &pyObject{class: g.name, attrs: newDict(false)}, nil
	case gRebuildV2:
		if len(args) != 6 && len(args) != 7 {
			return nil, fmt.Errorf("%s: got %d arguments, want 6 or 7", g.name, len(args))
		}
		return rebuildTensor(g.name, args, nil)
	case gRebuildV3:
		if len(args) != 7 && len(args) != 8 {
			return nil, fmt.Errorf("%s: got %d arguments, want 7 or 8", g.name, len(args))
		}
		dt, ok := args[6].(*pyGlobal)
		if !ok || dt.kind != gDType {
			return nil, fmt.Errorf("%s: argument 7 (dtype) is %s, want a torch dtype", g.name, typeName(args[6]))
		}
		return rebuildTensor(g.name, args, dt)
	case gRebuildParameter, gRebuildParameterWithState:
		want := 3
		if g.kind == gRebuildParameterWithState {
			want = 4
		}
		if len(args) != want {
			return nil, fmt.Errorf("%s: got %d arguments, want %d", g.name, len(args), want)
		}
		t, ok := args[0].(*tensorVal)
		if !ok {
			return nil, fmt.Errorf("%s: argument 1 (data) is %s, want a tensor", g.name, typeName(args[0]))
		}
		if _, ok := args[1].(bool); !ok {
			return nil, fmt.Errorf("%s: argument 2 (requires_grad) is %s, want a bool", g.name, typeName(args[1]))
		}
		if want == 4 {
			if d, ok := args[3].(*pyDict); args[3] != nil && (!ok || len(d.keys) != 0) {
				return nil, fmt.Errorf("%s: argument 4 (state) is %s; only None or an empty dict is supported", g.name, describeState(args[3]))
			}
		}
		return t, nil
	case gSize:
		if len(args) != 1 {
			return nil, fmt.Errorf("%s: got %d arguments, want 1", g.name, len(args))
		}
		items, ok := sequenceItems(args[0])
		if !ok {
			return nil, fmt.Errorf("%s: argument is %s, want a tuple of ints", g.name, typeName(args[0]))
		}
		for _, it := range items {
			if _, ok := it.(int64); !ok {
				return nil, fmt.Errorf("%s: element is %s, want an int", g.name, typeName(it))
			}
		}
		return newTuple(items), nil
	}
	return nil, fmt.Errorf("global %s cannot be called", g.name)
}

// rebuildTensor checks the arguments shared by _rebuild_tensor_v2 and _v3:
// (storage, storage_offset, size, stride, requires_grad, backward_hooks, ...).
func rebuildTensor(fn string, args []any, dt *pyGlobal) (*tensorVal, error) {
	st, ok := args[0].(*storageRef)
	if !ok {
		return nil, fmt.Errorf("%s: argument 1 (storage) is %s, want a persistent storage reference", fn, typeName(args[0]))
	}
	off, ok := args[1].(int64)
	if !ok || off < 0 {
		return nil, fmt.Errorf("%s: argument 2 (storage_offset) is %s, want a non-negative int", fn, describeValue(args[1]))
	}
	shape, err := intTuple(args[2])
	if err != nil {
		return nil, fmt.Errorf("%s: argument 3 (size): %w", fn, err)
	}
	stride, err := intTuple(args[3])
	if err != nil {
		return nil, fmt.Errorf("%s: argument 4 (stride): %w", fn, err)
	}
	if len(shape) != len(stride) {
		return nil, fmt.Errorf("%s: size has %d dimensions, stride has %d", fn, len(shape), len(stride))
	}
	if _, ok := args[4].(bool); !ok {
		return nil, fmt.Errorf("%s: argument 5 (requires_grad) is %s, want a bool", fn, typeName(args[4]))
	}
	switch h := args[5].(type) {
	case nil:
	case *pyDict:
		if len(h.keys) != 0 {
			return nil, fmt.Errorf("%s: argument 6 (backward_hooks) has %d entries, want none", fn, len(h.keys))
		}
	default:
		return nil, fmt.Errorf("%s: argument 6 (backward_hooks) is %s, want an empty OrderedDict", fn, typeName(args[5]))
	}
	t := &tensorVal{storage: st, dt: st.dt, offset: off, shape: shape, stride: stride}
	if dt != nil {
		if !st.untyped && st.dt != dt.dt {
			return nil, fmt.Errorf("%s: dtype %s disagrees with storage class %s (%s)", fn, dt.dt, st.class, st.dt)
		}
		t.dt = dt.dt
	}
	if t.dt.Size() == 0 {
		return nil, fmt.Errorf("%s: dtype %s is not supported", fn, t.dt)
	}
	return t, nil
}

// intTuple returns the elements of a tuple (or list) of non-negative ints.
func intTuple(v any) ([]int64, error) {
	items, ok := sequenceItems(v)
	if !ok {
		return nil, fmt.Errorf("is %s, want a tuple of ints", typeName(v))
	}
	out := make([]int64, len(items))
	for i, it := range items {
		n, ok := it.(int64)
		if !ok || n < 0 {
			return nil, fmt.Errorf("element %d is %s, want a non-negative int", i, describeValue(it))
		}
		out[i] = n
	}
	return out, nil
}

func sequenceItems(v any) ([]any, bool) {
	switch s := v.(type) {
	case *pyTuple:
		return s.items, true
	case *pyList:
		return s.items, true
	}
	return nil, false
}

// build applies BUILD state to obj: attributes of an argparse.Namespace, or
// the instance attributes (e.g. _metadata) of a state-dict OrderedDict, which
// are not needed and dropped.
func build(obj, state any) error {
	switch o := obj.(type) {
	case *pyObject:
		d, ok := state.(*pyDict)
		if !ok {
			return fmt.Errorf("state of %s is %s, want a dict", o.class, typeName(state))
		}
		for i, k := range d.keys {
			if _, ok := k.(string); !ok {
				return fmt.Errorf("attribute name of %s is %s, want a string", o.class, typeName(k))
			}
			if err := o.attrs.set(k, d.vals[i]); err != nil {
				return err
			}
		}
		return nil
	case *pyDict:
		d, ok := state.(*pyDict)
		if !ok && state != nil {
			return fmt.Errorf("state of a dict is %s, want a dict of attributes", typeName(state))
		}
		if d != nil {
			for _, k := range d.keys {
				if _, ok := k.(string); !ok {
					return fmt.Errorf("attribute name of a dict is %s, want a string", typeName(k))
				}
			}
		}
		return nil
	}
	return fmt.Errorf("cannot set state of %s", typeName(obj))
}

func newDict(ordered bool) *pyDict {
	return &pyDict{index: map[string]int{}, ordered: ordered}
}

// set assigns d[k] = v, keeping the first insertion position of k.
func (d *pyDict) set(k, v any) error {
	h, err := hashKey(k)
	if err != nil {
		return err
	}
	if i, ok := d.index[h]; ok {
		d.vals[i] = v
		return nil
	}
	d.index[h] = len(d.keys)
	d.keys = append(d.keys, k)
	d.vals = append(d.vals, v)
	return nil
}

// get returns d[k] for a string key.
func (d *pyDict) get(k string) (any, bool) {
	h, _ := hashKey(k)
	i, ok := d.index[h]
	if !ok {
		return nil, false
	}
	return d.vals[i], true
}

func (s *pySet) add(v any) error {
	h, err := hashKey(v)
	if err != nil {
		return err
	}
	if _, ok := s.index[h]; !ok {
		s.index[h] = struct{}{}
		s.items = append(s.items, v)
	}
	return nil
}

// hashKey returns a canonical string for a hashable value, following
// Python's equality for the types that occur (1 == 1.0 == True).
func hashKey(v any) (string, error) {
	switch k := v.(type) {
	case nil:
		return "N", nil
	case bool:
		if k {
			return "i1", nil
		}
		return "i0", nil
	case int64:
		return "i" + strconv.FormatInt(k, 10), nil
	case *big.Int:
		return "i" + k.String(), nil
	case float64:
		if k == math.Trunc(k) && math.Abs(k) < 1<<63 {
			return "i" + strconv.FormatInt(int64(k), 10), nil
		}
		return "f" + strconv.FormatUint(math.Float64bits(k), 16), nil
	case string:
		return "s" + strconv.Itoa(len(k)) + ":" + k, nil
	case pyBytes:
		return "b" + strconv.Itoa(len(k)) + ":" + string(k), nil
	case *pyGlobal:
		return "g" + k.name, nil
	case *pyTuple:
		if !k.keyed {
			if k.depth > maxValueDepth {
				k.keyErr = fmt.Errorf("tuple key nested more than %d deep", maxValueDepth)
			} else {
				k.key, k.keyErr = tupleKey(k)
			}
			k.keyed = true
		}
		return k.key, k.keyErr
	}
	return "", fmt.Errorf("unhashable dict or set key: %s", typeName(v))
}

// newTuple returns a tuple of items, recording how deeply tuples nest in it.
func newTuple(items []any) *pyTuple {
	t := &pyTuple{items: items, depth: 1}
	for _, it := range items {
		if c, ok := it.(*pyTuple); ok && c.depth+1 > t.depth {
			t.depth = c.depth + 1
		}
	}
	return t
}

// tupleKey builds a tuple's key from its elements' (cached) keys.
func tupleKey(t *pyTuple) (string, error) {
	var b strings.Builder
	b.WriteString("t(")
	for _, it := range t.items {
		h, err := hashKey(it)
		if err != nil {
			return "", err
		}
		if b.Len()+len(h) > maxKeyBytes {
			return "", fmt.Errorf("tuple key longer than %d bytes", maxKeyBytes)
		}
		b.WriteString(strconv.Itoa(len(h)))
		b.WriteByte(':')
		b.WriteString(h)
	}
	b.WriteByte(')')
	return b.String(), nil
}

// describeState describes a non-empty parameter state.
func describeState(v any) string {
	if d, ok := v.(*pyDict); ok {
		return fmt.Sprintf("a dict with %d entries", len(d.keys))
	}
	return typeName(v)
}

// typeName names a value's Python type for error messages.
func typeName(v any) string {
	switch x := v.(type) {
	case nil:
		return "None"
	case bool:
		return "a bool"
	case int64, *big.Int:
		return "an int"
	case float64:
		return "a float"
	case string:
		return "a string"
	case pyBytes:
		return "bytes"
	case *pyTuple:
		return "a tuple"
	case *pyList:
		return "a list"
	case *pyDict:
		if x.ordered {
			return "an OrderedDict"
		}
		return "a dict"
	case *pySet:
		return "a set"
	case *pyGlobal:
		return "global " + x.name
	case *pyObject:
		return "an " + x.class
	case *storageRef:
		return "a storage"
	case *tensorVal:
		return "a tensor"
	}
	return fmt.Sprintf("%T", v)
}

// describeValue is typeName plus the value for scalars.
func describeValue(v any) string {
	switch x := v.(type) {
	case int64:
		return fmt.Sprintf("int %d", x)
	case float64:
		return fmt.Sprintf("float %g", x)
	case string:
		if len(x) > 40 {
			x = x[:40] + "..."
		}
		return fmt.Sprintf("string %q", x)
	}
	return typeName(v)
}

// toGo converts a value for callers (File.Args): scalars stay as they are
// (pyBytes become []byte), tuples, lists and sets become []any, dicts and
// Namespaces become map[string]any (non-string keys are formatted), and
// anything else becomes a short description such as "<tensor F32 [3 4]>".
// Nesting deeper than maxValueDepth, or more than maxValueNodes values, are
// cut off with "<...>".
func toGo(v any) any {
	budget := maxValueNodes
	return toGoDepth(v, 0, &budget)
}

func toGoDepth(v any, depth int, budget *int) any {
	*budget--
	if depth > maxValueDepth || *budget < 0 {
		return "<...>"
	}
	switch x := v.(type) {
	case nil, bool, int64, *big.Int, float64, string:
		return x
	case pyBytes:
		return []byte(x)
	case *pyTuple, *pyList, *pySet:
		var items []any
		switch s := x.(type) {
		case *pyTuple:
			items = s.items
		case *pyList:
			items = s.items
		case *pySet:
			items = s.items
		}
		out := make([]any, 0, len(items))
		for _, it := range items {
			if *budget < 0 {
				out = append(out, "<...>")
				break
			}
			out = append(out, toGoDepth(it, depth+1, budget))
		}
		return out
	case *pyDict:
		return dictToGo(x, depth, budget)
	case *pyObject:
		return dictToGo(x.attrs, depth, budget)
	case *pyGlobal:
		return "<global " + x.name + ">"
	case *storageRef:
		return "<storage " + x.dt.String() + ">"
	case *tensorVal:
		return fmt.Sprintf("<tensor %s %v>", x.dt, x.shape)
	}
	return fmt.Sprintf("<%T>", v)
}

func dictToGo(d *pyDict, depth int, budget *int) map[string]any {
	out := make(map[string]any, len(d.keys))
	for i, k := range d.keys {
		if *budget < 0 {
			break
		}
		ks, ok := k.(string)
		if !ok {
			ks = fmt.Sprint(toGoDepth(k, depth+1, budget))
		}
		out[ks] = toGoDepth(d.vals[i], depth+1, budget)
	}
	return out
}

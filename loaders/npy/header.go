package npy

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/dcdit/dcdit/loaders/dtype"
)

// magic opens every .npy file; the version bytes follow it.
const magic = "\x93NUMPY"

// align is the multiple numpy pads the header to, so that the data of a
// memory-mapped file starts aligned for every dtype.
const align = 64

// growthDigits is numpy's spare room after the header dict (numpy ≥ 1.23):
// the first axis may grow to this many digits in place. Writing the same
// spaces keeps our headers byte-identical to numpy's.
const growthDigits = 21

// maxHeader bounds the header text a reader accepts. The headers of the
// dtypes this package reads are a few hundred bytes; a larger declared
// length is a damaged or hostile file, refused before allocating.
const maxHeader = 1 << 16

// Header is what a .npy header declares: a C-order array of DType with
// Shape (empty for a 0-d array).
type Header struct {
	DType dtype.DType
	Shape []int
}

// NumElements is the product of the shape (1 for a 0-d array).
func (h Header) NumElements() int {
	n := 1
	for _, d := range h.Shape {
		n *= d
	}
	return n
}

// DataSize is the size of the array's data in bytes.
func (h Header) DataSize() int64 { return int64(h.NumElements()) * int64(h.DType.Size()) }

// String formats h like numpy prints a dtype and shape: "<f8 (2048, 2048)".
func (h Header) String() string {
	d, err := descr(h.DType)
	if err != nil {
		d = h.DType.String()
	}
	return d + " " + shapeRepr(h.Shape)
}

// codes pairs the numpy type codes (kind and item size) this package
// reads and writes with element types.
var codes = [...]struct {
	code string
	d    dtype.DType
}{
	{"b1", dtype.BOOL}, {"u1", dtype.U8}, {"i1", dtype.I8},
	{"i2", dtype.I16}, {"u2", dtype.U16}, {"f2", dtype.F16},
	{"i4", dtype.I32}, {"u4", dtype.U32}, {"f4", dtype.F32},
	{"i8", dtype.I64}, {"u8", dtype.U64}, {"f8", dtype.F64},
}

// descr is numpy's dtype string for d: '|' for one-byte types, whose byte
// order is moot, '<' (little-endian) otherwise.
func descr(d dtype.DType) (string, error) {
	for _, c := range codes {
		if c.d == d {
			if d.Size() == 1 {
				return "|" + c.code, nil
			}
			return "<" + c.code, nil
		}
	}
	return "", fmt.Errorf("dtype %v has no .npy code this package writes", d)
}

// parseDescr maps a numpy dtype string to an element type.
func parseDescr(s string) (dtype.DType, error) {
	if len(s) >= 2 && strings.ContainsRune("<>|=", rune(s[0])) {
		order, code := s[0], s[1:]
		for _, c := range codes {
			if c.code != code {
				continue
			}
			d := c.d
			switch {
			case d.Size() == 1 || order == '<':
				return d, nil
			case order == '>':
				return 0, fmt.Errorf("dtype %q is big-endian; only little-endian data is read", s)
			}
			return 0, fmt.Errorf("dtype %q: byte order %q is not one numpy writes for a %d-byte type", s, order, d.Size())
		}
		if code == "O" {
			return 0, fmt.Errorf("dtype %q is an object array, whose data is a pickle; it is refused", s)
		}
	}
	return 0, fmt.Errorf("dtype %q is not supported (want one of |b1 |u1 |i1 <i2 <u2 <f2 <i4 <u4 <f4 <i8 <u8 <f8)", s)
}

// shapeRepr is Python's repr of the shape tuple.
func shapeRepr(shape []int) string {
	switch len(shape) {
	case 0:
		return "()"
	case 1:
		return "(" + strconv.Itoa(shape[0]) + ",)"
	}
	parts := make([]string, len(shape))
	for i, d := range shape {
		parts[i] = strconv.Itoa(d)
	}
	return "(" + strings.Join(parts, ", ") + ")"
}

// EncodeHeader returns the bytes numpy (1.24) writes before the data of
// an array described by h: magic, version 1.0, length and the padded dict.
func EncodeHeader(h Header) ([]byte, error) {
	d, err := descr(h.DType)
	if err != nil {
		return nil, err
	}
	if _, err := checkedSize(h, math.MaxInt64); err != nil {
		return nil, err
	}
	dict := fmt.Sprintf("{'descr': '%s', 'fortran_order': False, 'shape': %s, }", d, shapeRepr(h.Shape))
	if len(h.Shape) > 0 {
		dict += strings.Repeat(" ", max(0, growthDigits-len(strconv.Itoa(h.Shape[0]))))
	}
	const prefix = len(magic) + 2 + 2
	// numpy pads with at least one space: an already aligned dict gets a
	// whole extra block.
	pad := align - (prefix+len(dict)+1)%align
	n := len(dict) + pad + 1
	if n > math.MaxUint16 {
		return nil, fmt.Errorf("header of %d bytes for %d dimensions is too long for format 1.0", n, len(h.Shape))
	}
	b := make([]byte, 0, prefix+n)
	b = append(b, magic...)
	b = append(b, 1, 0)
	b = binary.LittleEndian.AppendUint16(b, uint16(n))
	b = append(b, dict...)
	b = append(b, bytes.Repeat([]byte{' '}, pad)...)
	return append(b, '\n'), nil
}

// checkedSize returns h's data size in bytes, or an error when a
// dimension is negative or the size exceeds limit (checked without
// overflow, so a lying header cannot wrap around to a small size).
func checkedSize(h Header, limit int64) (int64, error) {
	if !h.DType.Valid() || h.DType.Size() == 0 {
		return 0, fmt.Errorf("invalid dtype %v", h.DType)
	}
	size := int64(h.DType.Size())
	for _, d := range h.Shape {
		if d < 0 {
			return 0, fmt.Errorf("shape %s has a negative dimension", shapeRepr(h.Shape))
		}
	}
	for _, d := range h.Shape {
		if d == 0 {
			return 0, nil
		}
	}
	for _, d := range h.Shape {
		if int64(d) > limit/size {
			return 0, fmt.Errorf("shape %s of %s needs more than %d bytes", shapeRepr(h.Shape), h.DType, limit)
		}
		size *= int64(d)
	}
	if size > limit {
		return 0, fmt.Errorf("shape %s of %s needs %d bytes, more than %d", shapeRepr(h.Shape), h.DType, size, limit)
	}
	return size, nil
}

// ReadHeader reads a .npy header from r, which holds avail bytes in all
// (header and data). It returns the header and the number of bytes it
// consumed, and fails unless the declared data fills exactly the
// remaining avail bytes: every size is checked before anything is
// allocated for it.
func ReadHeader(r io.Reader, avail int64) (Header, int64, error) {
	var pre [len(magic) + 2]byte
	if _, err := io.ReadFull(r, pre[:]); err != nil {
		return Header{}, 0, fmt.Errorf("reading the magic: %w", noEOF(err))
	}
	if string(pre[:len(magic)]) != magic {
		return Header{}, 0, fmt.Errorf("not a .npy array: starts with %q, want %q", pre[:len(magic)], magic)
	}
	major, minor := pre[len(magic)], pre[len(magic)+1]
	var lenBytes int
	switch {
	case major == 1 && minor == 0:
		lenBytes = 2
	case (major == 2 || major == 3) && minor == 0:
		lenBytes = 4
	default:
		return Header{}, 0, fmt.Errorf("format version %d.%d is not supported (want 1.0, 2.0 or 3.0)", major, minor)
	}
	var lb [4]byte
	if _, err := io.ReadFull(r, lb[:lenBytes]); err != nil {
		return Header{}, 0, fmt.Errorf("reading the header length: %w", noEOF(err))
	}
	n := int64(binary.LittleEndian.Uint32(lb[:]))
	used := int64(len(pre) + lenBytes)
	if n > maxHeader || n > avail-used {
		return Header{}, 0, fmt.Errorf("header length %d exceeds the %d bytes left (or the %d-byte limit)", n, max(avail-used, 0), maxHeader)
	}
	text := make([]byte, n)
	if _, err := io.ReadFull(r, text); err != nil {
		return Header{}, 0, fmt.Errorf("reading the %d-byte header: %w", n, noEOF(err))
	}
	used += n
	h, err := parseHeader(string(text))
	if err != nil {
		return Header{}, 0, err
	}
	size, err := checkedSize(h, avail-used)
	if err != nil {
		return Header{}, 0, fmt.Errorf("header %s declares more data than the %d bytes found", h, avail-used)
	}
	if size != avail-used {
		return Header{}, 0, fmt.Errorf("header %s declares %d data bytes, found %d", h, size, avail-used)
	}
	return h, used, nil
}

// noEOF turns a clean EOF inside a structure into ErrUnexpectedEOF: the
// file ended early.
func noEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// parseHeader interprets the header dict, a Python literal such as
// {'descr': '<f8', 'fortran_order': False, 'shape': (3, 4), }.
func parseHeader(text string) (Header, error) {
	p := &parser{s: text}
	v, err := p.value(0)
	if err == nil {
		p.space()
		if p.i != len(p.s) {
			err = fmt.Errorf("unexpected %q after the dict", p.rest())
		}
	}
	if err != nil {
		return Header{}, fmt.Errorf("header %q: %w", clip(text), err)
	}
	dict, ok := v.(map[string]any)
	if !ok {
		return Header{}, fmt.Errorf("header %q is not a dict", clip(text))
	}
	for _, key := range []string{"descr", "fortran_order", "shape"} {
		if _, ok := dict[key]; !ok {
			return Header{}, fmt.Errorf("header %q lacks the key %q", clip(text), key)
		}
	}
	if len(dict) != 3 {
		return Header{}, fmt.Errorf("header %q has keys beyond descr, fortran_order and shape", clip(text))
	}
	var h Header
	switch d := dict["descr"].(type) {
	case string:
		if h.DType, err = parseDescr(d); err != nil {
			return Header{}, err
		}
	case list:
		return Header{}, fmt.Errorf("structured dtype %s is not supported", clip(text))
	default:
		return Header{}, fmt.Errorf("descr is %s, want a dtype string", kindOf(d))
	}
	switch f := dict["fortran_order"].(type) {
	case bool:
		if f {
			return Header{}, fmt.Errorf("fortran_order is True; only C-order arrays are read (save np.ascontiguousarray(a))")
		}
	default:
		return Header{}, fmt.Errorf("fortran_order is %s, want True or False", kindOf(f))
	}
	shape, ok := dict["shape"].(list)
	if !ok || !shape.tuple {
		return Header{}, fmt.Errorf("shape is %s, want a tuple", kindOf(dict["shape"]))
	}
	for i, d := range shape.items {
		n, ok := d.(int64)
		if !ok || n < 0 || n > math.MaxInt {
			return Header{}, fmt.Errorf("shape[%d] is %v, want a non-negative integer", i, d)
		}
		h.Shape = append(h.Shape, int(n))
	}
	return h, nil
}

// clip shortens text for an error message.
func clip(text string) string {
	text = strings.TrimRight(text, " \n")
	if len(text) > 160 {
		return text[:160] + "…"
	}
	return text
}

// list is a parsed Python tuple or list.
type list struct {
	items []any
	tuple bool
}

func kindOf(v any) string {
	switch v := v.(type) {
	case string:
		return "the string " + strconv.Quote(v)
	case bool:
		return "a bool"
	case int64:
		return "an integer"
	case list:
		if v.tuple {
			return "a tuple"
		}
		return "a list"
	case map[string]any:
		return "a dict"
	case nil:
		return "None"
	}
	return fmt.Sprintf("%T", v)
}

// maxDepth bounds the nesting of a header literal; numpy's own are two
// levels deep (a dict holding a tuple).
const maxDepth = 8

// parser reads the subset of Python literals that .npy headers use:
// dicts with string keys, tuples, lists, strings, integers, True, False
// and None. Nothing is evaluated.
type parser struct {
	s string
	i int
}

func (p *parser) rest() string {
	r := p.s[p.i:]
	if len(r) > 20 {
		r = r[:20]
	}
	return r
}

func (p *parser) space() {
	for p.i < len(p.s) && strings.IndexByte(" \t\n\r", p.s[p.i]) >= 0 {
		p.i++
	}
}

func (p *parser) value(depth int) (any, error) {
	if depth > maxDepth {
		return nil, fmt.Errorf("nested deeper than %d levels", maxDepth)
	}
	p.space()
	if p.i >= len(p.s) {
		return nil, fmt.Errorf("ends early")
	}
	switch c := p.s[p.i]; {
	case c == '{':
		return p.dict(depth)
	case c == '(':
		return p.seq(depth, ')')
	case c == '[':
		return p.seq(depth, ']')
	case c == '\'' || c == '"':
		return p.str()
	case c >= '0' && c <= '9':
		return p.integer()
	}
	for _, w := range []struct {
		word string
		v    any
	}{{"True", true}, {"False", false}, {"None", nil}} {
		if strings.HasPrefix(p.s[p.i:], w.word) {
			p.i += len(w.word)
			return w.v, nil
		}
	}
	return nil, fmt.Errorf("unexpected %q", p.rest())
}

func (p *parser) dict(depth int) (any, error) {
	p.i++ // {
	out := map[string]any{}
	for {
		p.space()
		if p.i < len(p.s) && p.s[p.i] == '}' {
			p.i++
			return out, nil
		}
		k, err := p.value(depth + 1)
		if err != nil {
			return nil, err
		}
		key, ok := k.(string)
		if !ok {
			return nil, fmt.Errorf("dict key is %s, want a string", kindOf(k))
		}
		p.space()
		if p.i >= len(p.s) || p.s[p.i] != ':' {
			return nil, fmt.Errorf("want ':' after key %q", key)
		}
		p.i++
		v, err := p.value(depth + 1)
		if err != nil {
			return nil, err
		}
		if _, dup := out[key]; dup {
			return nil, fmt.Errorf("key %q appears twice", key)
		}
		out[key] = v
		if ok, _ := p.sep('}'); !ok {
			return nil, fmt.Errorf("want ',' or '}' after the value of %q, found %q", key, p.rest())
		}
	}
}

func (p *parser) seq(depth int, end byte) (any, error) {
	p.i++ // ( or [
	out := list{tuple: end == ')'}
	comma := false
	for {
		p.space()
		if p.i < len(p.s) && p.s[p.i] == end {
			p.i++
			// (x) without a comma is a parenthesised value, not a tuple.
			if out.tuple && len(out.items) == 1 && !comma {
				return out.items[0], nil
			}
			return out, nil
		}
		v, err := p.value(depth + 1)
		if err != nil {
			return nil, err
		}
		out.items = append(out.items, v)
		var ok bool
		if ok, comma = p.sep(end); !ok {
			return nil, fmt.Errorf("want ',' or %q in a sequence, found %q", end, p.rest())
		}
	}
}

// sep consumes the ',' after an item, or sees (without consuming) the
// closing end; ok is false for anything else.
func (p *parser) sep(end byte) (ok, comma bool) {
	p.space()
	switch {
	case p.i < len(p.s) && p.s[p.i] == ',':
		p.i++
		return true, true
	case p.i < len(p.s) && p.s[p.i] == end:
		return true, false
	}
	return false, false
}

// str reads a quoted string without escapes (numpy's headers have none).
func (p *parser) str() (any, error) {
	q := p.s[p.i]
	j := strings.IndexByte(p.s[p.i+1:], q)
	if j < 0 {
		return nil, fmt.Errorf("unterminated string")
	}
	v := p.s[p.i+1 : p.i+1+j]
	if strings.ContainsAny(v, "\\\n") {
		return nil, fmt.Errorf("string %q holds an escape or a newline", v)
	}
	p.i += j + 2
	return v, nil
}

// integer reads a non-negative decimal integer.
func (p *parser) integer() (any, error) {
	j := p.i
	for j < len(p.s) && p.s[j] >= '0' && p.s[j] <= '9' {
		j++
	}
	n, err := strconv.ParseInt(p.s[p.i:j], 10, 64)
	if err != nil {
		return nil, fmt.Errorf("integer %q: out of range", p.s[p.i:j])
	}
	p.i = j
	return n, nil
}

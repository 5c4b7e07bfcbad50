// Package safetensors reads, validates and writes the safetensors checkpoint
// format (single files and sharded folders with a *.safetensors.index.json).
//
// Reading follows the reference implementation's validation rules and is
// stricter where they are silent: the header is parsed without trusting any
// length that has not been checked against the file size, and tensor data is
// only touched when a tensor's bytes are asked for.
package safetensors

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"unicode/utf8"

	"github.com/dcdit/dcdit/loaders/dtype"
)

// MaxHeaderSize is the largest JSON header accepted, as in the reference
// reader (MAX_HEADER_SIZE).
const MaxHeaderSize = 100_000_000

// maxTensorBytes bounds a single tensor's byte size; the format's schema
// limits sizes to 48 bits.
const maxTensorBytes = int64(1) << 48

// ErrFormat is wrapped by every error about a malformed file, so callers can
// tell corrupt input from I/O failures with errors.Is.
var ErrFormat = errors.New("invalid safetensors file")

// FormatError describes what is wrong with a file: which file, which tensor
// (if any) and the numbers involved.
type FormatError struct {
	File   string // path or name of the file
	Tensor string // tensor name, empty for file-level problems
	Msg    string
}

func (e *FormatError) Error() string {
	if e.Tensor != "" {
		return fmt.Sprintf("safetensors: %s: tensor %q: %s", e.File, e.Tensor, e.Msg)
	}
	return fmt.Sprintf("safetensors: %s: %s", e.File, e.Msg)
}

// Unwrap makes errors.Is(err, ErrFormat) true.
func (e *FormatError) Unwrap() error { return ErrFormat }

// TensorInfo is one header entry. Begin and End are byte offsets relative to
// the start of the data buffer (End exclusive).
type TensorInfo struct {
	Name  string
	DType dtype.DType
	Shape []int64
	Begin int64
	End   int64
}

// NumElements is the product of the shape (1 for a scalar).
func (t *TensorInfo) NumElements() int64 {
	n := int64(1)
	for _, d := range t.Shape {
		n *= d
	}
	return n
}

// Size is the tensor's byte size.
func (t *TensorInfo) Size() int64 { return t.End - t.Begin }

// Header is a validated safetensors header.
type Header struct {
	// Tensors in data order (ascending Begin), which need not be the order
	// of the JSON object.
	Tensors  []TensorInfo
	Metadata map[string]string
	// DataStart is the absolute file offset of the data buffer: 8 + header length.
	DataStart int64
}

// ReadHeader reads and validates the header of a safetensors file of the
// given size through r. name is used in error messages. It reads only the
// 8-byte length prefix and the JSON header.
func ReadHeader(r io.ReaderAt, size int64, name string) (*Header, error) {
	fail := func(format string, args ...any) error {
		return &FormatError{File: name, Msg: fmt.Sprintf(format, args...)}
	}
	if size < 8 {
		return nil, fail("file is %d bytes, shorter than the 8-byte header length prefix", size)
	}
	var prefix [8]byte
	if _, err := r.ReadAt(prefix[:], 0); err != nil {
		return nil, fmt.Errorf("safetensors: %s: read header length: %w", name, err)
	}
	n := uint64(prefix[0]) | uint64(prefix[1])<<8 | uint64(prefix[2])<<16 | uint64(prefix[3])<<24 |
		uint64(prefix[4])<<32 | uint64(prefix[5])<<40 | uint64(prefix[6])<<48 | uint64(prefix[7])<<56
	if n > MaxHeaderSize {
		return nil, fail("header length %d exceeds the limit of %d bytes", n, MaxHeaderSize)
	}
	if int64(n) > size-8 {
		return nil, fail("header length %d runs past the end of the file (%d bytes after the length prefix)", n, size-8)
	}
	buf := make([]byte, n)
	if _, err := r.ReadAt(buf, 8); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, fmt.Errorf("safetensors: %s: read header: %w", name, err)
	}
	h, err := ParseHeader(buf, size-8-int64(n), name)
	if err != nil {
		return nil, err
	}
	h.DataStart = 8 + int64(n)
	return h, nil
}

// rawEntry is a header entry before validation.
type rawEntry struct {
	DType       *string  `json:"dtype"`
	Shape       *[]int64 `json:"shape"`
	DataOffsets *[]int64 `json:"data_offsets"`
}

// ParseHeader validates the JSON header text against a data buffer of
// dataLen bytes. It is the fuzzing entry point of the package.
func ParseHeader(text []byte, dataLen int64, name string) (*Header, error) {
	fail := func(tensor, format string, args ...any) error {
		return &FormatError{File: name, Tensor: tensor, Msg: fmt.Sprintf(format, args...)}
	}
	if !utf8.Valid(text) {
		return nil, fail("", "header is not valid UTF-8")
	}
	trimmed := bytes.TrimRight(text, " ")
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return nil, fail("", "header does not start with '{' (a JSON object is required)")
	}
	dec := json.NewDecoder(bytes.NewReader(trimmed))
	dec.UseNumber()
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, fail("", "header is not a JSON object")
	}
	h := &Header{}
	seen := make(map[string]bool)
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, fail("", "header JSON: %v", err)
		}
		key, ok := tok.(string)
		if !ok {
			return nil, fail("", "header JSON: expected a string key, found %v", tok)
		}
		if seen[key] {
			return nil, fail(key, "appears twice in the header")
		}
		seen[key] = true
		if key == "__metadata__" {
			md, err := decodeMetadata(dec)
			if err != nil {
				return nil, fail("", "__metadata__: %v", err)
			}
			h.Metadata = md
			continue
		}
		var raw rawEntry
		if err := dec.Decode(&raw); err != nil {
			return nil, fail(key, "header entry: %v", err)
		}
		info, err := validateEntry(key, raw)
		if err != nil {
			return nil, fail(key, "%v", err)
		}
		h.Tensors = append(h.Tensors, info)
	}
	if _, err := dec.Token(); err != nil {
		return nil, fail("", "header JSON: %v", err)
	}
	if rest, _ := io.ReadAll(dec.Buffered()); len(bytes.TrimSpace(rest)) != 0 {
		return nil, fail("", "header has %d bytes of trailing data after the JSON object", len(bytes.TrimSpace(rest)))
	}
	if err := checkLayout(h.Tensors, dataLen, name); err != nil {
		return nil, err
	}
	return h, nil
}

func decodeMetadata(dec *json.Decoder) (map[string]string, error) {
	var raw map[string]any
	if err := dec.Decode(&raw); err != nil {
		return nil, fmt.Errorf("must be an object of strings: %v", err)
	}
	md := make(map[string]string, len(raw))
	for k, v := range raw {
		s, ok := v.(string)
		if !ok {
			return nil, fmt.Errorf("value of %q is %s, want a string", k, jsonKind(v))
		}
		md[k] = s
	}
	return md, nil
}

func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case json.Number, float64:
		return "a number"
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%T", v)
}

func validateEntry(name string, raw rawEntry) (TensorInfo, error) {
	if raw.DType == nil || raw.Shape == nil || raw.DataOffsets == nil {
		var missing []string
		if raw.DType == nil {
			missing = append(missing, "dtype")
		}
		if raw.Shape == nil {
			missing = append(missing, "shape")
		}
		if raw.DataOffsets == nil {
			missing = append(missing, "data_offsets")
		}
		return TensorInfo{}, fmt.Errorf("header entry lacks %v", missing)
	}
	dt, err := dtype.Parse(*raw.DType)
	if err != nil {
		return TensorInfo{}, err
	}
	offs := *raw.DataOffsets
	if len(offs) != 2 {
		return TensorInfo{}, fmt.Errorf("data_offsets has %d values, want 2 [begin, end]", len(offs))
	}
	info := TensorInfo{Name: name, DType: dt, Shape: *raw.Shape, Begin: offs[0], End: offs[1]}
	if info.Begin < 0 || info.End < info.Begin {
		return TensorInfo{}, fmt.Errorf("data_offsets [%d, %d] are not an increasing pair of non-negative offsets", info.Begin, info.End)
	}
	want, err := byteSize(dt, info.Shape)
	if err != nil {
		return TensorInfo{}, err
	}
	if got := info.End - info.Begin; got != want {
		return TensorInfo{}, fmt.Errorf("data_offsets [%d, %d] span %d bytes, but shape %v of %s needs %d", info.Begin, info.End, got, info.Shape, dt, want)
	}
	return info, nil
}

// byteSize counts the bytes of a tensor with overflow checks, before any
// size taken from a file is trusted.
func byteSize(dt dtype.DType, shape []int64) (int64, error) {
	nbits := int64(dt.Bits())
	for _, d := range shape {
		if d < 0 {
			return 0, fmt.Errorf("shape %v has a negative dimension", shape)
		}
		if d != 0 && nbits > math.MaxInt64/d {
			return 0, fmt.Errorf("shape %v overflows (more than 2^63 bits of %s)", shape, dt)
		}
		nbits *= d
	}
	if nbits%8 != 0 {
		return 0, fmt.Errorf("shape %v of %s is %d bits, not a whole number of bytes", shape, dt, nbits)
	}
	if nbits/8 > maxTensorBytes {
		return 0, fmt.Errorf("shape %v of %s is %d bytes, over the format's 2^48 limit", shape, dt, nbits/8)
	}
	return nbits / 8, nil
}

// checkLayout sorts entries by offset and checks that they tile the data
// buffer exactly: first at 0, each starting where the previous ended, the
// last ending at the end of the file.
func checkLayout(ts []TensorInfo, dataLen int64, name string) error {
	sort.SliceStable(ts, func(i, j int) bool {
		if ts[i].Begin != ts[j].Begin {
			return ts[i].Begin < ts[j].Begin
		}
		return ts[i].End < ts[j].End
	})
	var pos int64
	for i := range ts {
		t := &ts[i]
		switch {
		case t.Begin > pos:
			return &FormatError{File: name, Tensor: t.Name, Msg: fmt.Sprintf("starts at data offset %d, leaving a hole of %d bytes after offset %d", t.Begin, t.Begin-pos, pos)}
		case t.Begin < pos:
			return &FormatError{File: name, Tensor: t.Name, Msg: fmt.Sprintf("starts at data offset %d, overlapping the previous tensor %q which ends at %d", t.Begin, ts[i-1].Name, pos)}
		}
		pos = t.End
	}
	if pos != dataLen {
		if pos > dataLen {
			return &FormatError{File: name, Msg: fmt.Sprintf("header describes %d data bytes but the file holds %d (truncated by %d bytes)", pos, dataLen, pos-dataLen)}
		}
		return &FormatError{File: name, Msg: fmt.Sprintf("header describes %d data bytes but the file holds %d (%d trailing bytes)", pos, dataLen, dataLen-pos)}
	}
	return nil
}

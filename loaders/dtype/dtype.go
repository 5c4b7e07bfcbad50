// Package dtype names the element types of checkpoint files and converts
// their little-endian encodings to and from the float32 and int64 values the
// rest of dcdit computes with.
package dtype

import (
	"fmt"
	"strings"
)

// DType is a safetensors element type. The numeric order is the reference
// writer's alignment order (smallest first), which the safetensors writer
// uses to sort tensors largest-alignment first.
type DType uint8

// The element types, in the reference implementation's alignment order.
const (
	Invalid DType = iota
	BOOL
	F4
	F6_E2M3
	F6_E3M2
	U8
	I8
	F8_E5M2
	F8_E4M3
	F8_E8M0
	F8_E4M3FNUZ
	F8_E5M2FNUZ
	I16
	U16
	F16
	BF16
	I32
	U32
	F32
	C64
	F64
	I64
	U64
)

var names = [...]string{
	Invalid: "INVALID", BOOL: "BOOL", F4: "F4", F6_E2M3: "F6_E2M3", F6_E3M2: "F6_E3M2",
	U8: "U8", I8: "I8", F8_E5M2: "F8_E5M2", F8_E4M3: "F8_E4M3", F8_E8M0: "F8_E8M0",
	F8_E4M3FNUZ: "F8_E4M3FNUZ", F8_E5M2FNUZ: "F8_E5M2FNUZ", I16: "I16", U16: "U16",
	F16: "F16", BF16: "BF16", I32: "I32", U32: "U32", F32: "F32", C64: "C64",
	F64: "F64", I64: "I64", U64: "U64",
}

var bits = [...]int{
	BOOL: 8, F4: 4, F6_E2M3: 6, F6_E3M2: 6, U8: 8, I8: 8, F8_E5M2: 8, F8_E4M3: 8,
	F8_E8M0: 8, F8_E4M3FNUZ: 8, F8_E5M2FNUZ: 8, I16: 16, U16: 16, F16: 16, BF16: 16,
	I32: 32, U32: 32, F32: 32, C64: 64, F64: 64, I64: 64, U64: 64,
}

// Parse returns the DType spelled name (case-sensitive, as in safetensors
// headers). An unknown name is an error listing the known ones.
func Parse(name string) (DType, error) {
	for d := BOOL; d <= U64; d++ {
		if names[d] == name {
			return d, nil
		}
	}
	return Invalid, fmt.Errorf("unknown dtype %q (known: %s)", name, strings.Join(names[BOOL:], ", "))
}

// String returns the safetensors spelling of d.
func (d DType) String() string {
	if int(d) < len(names) {
		return names[d]
	}
	return fmt.Sprintf("DType(%d)", uint8(d))
}

// Valid reports whether d is one of the named element types.
func (d DType) Valid() bool { return d >= BOOL && d <= U64 }

// Bits is the width of one element in bits (4 and 6 for the sub-byte floats).
func (d DType) Bits() int {
	if !d.Valid() {
		return 0
	}
	return bits[d]
}

// Size is the width of one element in bytes, or 0 for sub-byte types.
func (d DType) Size() int {
	if b := d.Bits(); b%8 == 0 {
		return b / 8
	}
	return 0
}

// IsFloat reports whether d holds real floating-point values.
func (d DType) IsFloat() bool {
	switch d {
	case F4, F6_E2M3, F6_E3M2, F8_E5M2, F8_E4M3, F8_E8M0, F8_E4M3FNUZ, F8_E5M2FNUZ, F16, BF16, F32, F64:
		return true
	}
	return false
}

// IsInt reports whether d holds integers (BOOL counts as an integer 0/1).
func (d DType) IsInt() bool {
	switch d {
	case BOOL, U8, I8, I16, U16, I32, U32, I64, U64:
		return true
	}
	return false
}

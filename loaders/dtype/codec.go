package dtype

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"sync"
	"unsafe"
)

// UnsupportedError reports a valid dtype that a conversion cannot handle
// (e.g. F4, or C64 to float32). It is a distinct type so that callers can
// fall back to another path with errors.As instead of matching text.
type UnsupportedError struct {
	DType DType
	Op    string // e.g. "decode to float32"
}

// Error implements error.
func (e *UnsupportedError) Error() string {
	return fmt.Sprintf("dtype: %v unsupported for %s", e.DType, e.Op)
}

const (
	opDecodeFloat32 = "decode to float32"
	opDecodeInt64   = "decode to int64"
	opEncodeFloat32 = "encode from float32"
)

// hostLittleEndian gates every reinterpretation of file bytes as Go
// numbers: only on little-endian hosts does memory order match the
// safetensors byte order. Set once at init and never written again.
var hostLittleEndian = binary.NativeEndian.Uint16([]byte{1, 0}) == 1

// checkLen builds the length-mismatch error; both lengths are stated because
// the usual cause is a wrong shape or dtype in a header, and seeing the two
// numbers side by side tells which.
func checkLen(op string, d DType, what string, got, elems int) error {
	want := elems * d.Size()
	if got == want {
		return nil
	}
	return fmt.Errorf("dtype: %s %v: %s is %d bytes, want %d (%d elements of %d bytes)",
		op, d, what, got, want, elems, d.Size())
}

func invalidErr(d DType) error {
	return fmt.Errorf("dtype: invalid dtype %v", d)
}

// DecodeFloat32 decodes len(dst) little-endian elements of type d from src
// into dst. len(src) must be exactly len(dst)*d.Size().
//
// Supported types: all float types except the sub-byte ones (F4, F6_*),
// every integer type and BOOL (any non-zero byte is 1). Integers too wide
// for float32's 24-bit significand and F64 values are rounded to nearest
// even; F64 values beyond float32 range become ±Inf. Other valid types give
// an *UnsupportedError.
func DecodeFloat32(dst []float32, src []byte, d DType) error {
	if !d.Valid() {
		return invalidErr(d)
	}
	switch d {
	case F4, F6_E2M3, F6_E3M2, C64:
		return &UnsupportedError{DType: d, Op: opDecodeFloat32}
	}
	if err := checkLen("decode", d, "source", len(src), len(dst)); err != nil {
		return err
	}
	switch d {
	case F32:
		decodeF32(dst, src)
	case F16:
		decode16(dst, src, false)
	case BF16:
		decode16(dst, src, true)
	case F64:
		for i := range dst {
			dst[i] = float32(math.Float64frombits(binary.LittleEndian.Uint64(src[8*i:])))
		}
	case F8_E4M3:
		decodeByTable(dst, src, e4m3fnTable())
	case F8_E5M2:
		decodeByTable(dst, src, e5m2Table())
	case F8_E4M3FNUZ:
		decodeByTable(dst, src, e4m3fnuzTable())
	case F8_E5M2FNUZ:
		decodeByTable(dst, src, e5m2fnuzTable())
	case F8_E8M0:
		decodeByTable(dst, src, e8m0Table())
	case BOOL, U8, I8, I16, U16, I32, U32, I64, U64:
		decodeInts(dst, src, d)
	default:
		// Reached only if a dtype is added to dtype.go without a codec here.
		return &UnsupportedError{DType: d, Op: opDecodeFloat32}
	}
	return nil
}

// DecodeInt64 decodes len(dst) little-endian integer or BOOL elements of
// type d from src into dst; len(src) must be exactly len(dst)*d.Size().
// BOOL decodes any non-zero byte as 1. A U64 element above math.MaxInt64 is
// an error rather than a silent wrap to a negative value. Float types give
// an *UnsupportedError: truncating them is a policy for the caller to choose.
func DecodeInt64(dst []int64, src []byte, d DType) error {
	if !d.Valid() {
		return invalidErr(d)
	}
	if !d.IsInt() {
		return &UnsupportedError{DType: d, Op: opDecodeInt64}
	}
	if err := checkLen("decode", d, "source", len(src), len(dst)); err != nil {
		return err
	}
	if d == U64 {
		for i := range dst {
			if v := binary.LittleEndian.Uint64(src[8*i:]); v > math.MaxInt64 {
				return fmt.Errorf("dtype: decode U64: element %d = %d overflows int64", i, v)
			}
		}
	}
	decodeInts(dst, src, d)
	return nil
}

// decodeInts converts integer and BOOL elements; d must be one of them and
// src already checked to hold len(dst) elements.
func decodeInts[T float32 | int64](dst []T, src []byte, d DType) {
	switch d {
	case BOOL:
		for i, b := range src[:len(dst)] {
			if b != 0 {
				dst[i] = 1
			} else {
				dst[i] = 0
			}
		}
	case U8:
		for i, b := range src[:len(dst)] {
			dst[i] = T(b)
		}
	case I8:
		for i, b := range src[:len(dst)] {
			dst[i] = T(int8(b))
		}
	case I16:
		for i := range dst {
			dst[i] = T(int16(binary.LittleEndian.Uint16(src[2*i:])))
		}
	case U16:
		for i := range dst {
			dst[i] = T(binary.LittleEndian.Uint16(src[2*i:]))
		}
	case I32:
		for i := range dst {
			dst[i] = T(int32(binary.LittleEndian.Uint32(src[4*i:])))
		}
	case U32:
		for i := range dst {
			dst[i] = T(binary.LittleEndian.Uint32(src[4*i:]))
		}
	case I64:
		for i := range dst {
			dst[i] = T(int64(binary.LittleEndian.Uint64(src[8*i:])))
		}
	case U64:
		for i := range dst {
			dst[i] = T(binary.LittleEndian.Uint64(src[8*i:]))
		}
	}
}

// EncodeFloat32 encodes src as little-endian elements of type d into dst;
// len(dst) must be exactly len(src)*d.Size().
//
// Supported types: F32, F64 (exact), F16 and BF16 (round to nearest even,
// NaN stays NaN, overflow gives ±Inf), F8_E4M3 and F8_E5M2 (rounded like
// PyTorch's float -> float8_e4m3fn / float8_e5m2 casts: nearest, ties to
// even, no saturation, so F8_E4M3 turns |x| > 464, ±Inf and NaN into NaN,
// and F8_E5M2 turns |x| >= 61440 into ±Inf; see float32ToF8E4M3 and
// float32ToF8E5M2). Other valid types give an *UnsupportedError.
func EncodeFloat32(dst []byte, src []float32, d DType) error {
	if !d.Valid() {
		return invalidErr(d)
	}
	switch d {
	case F32, F64, F16, BF16, F8_E4M3, F8_E5M2:
	default:
		return &UnsupportedError{DType: d, Op: opEncodeFloat32}
	}
	if err := checkLen("encode", d, "destination", len(dst), len(src)); err != nil {
		return err
	}
	switch d {
	case F32:
		if hostLittleEndian && len(src) > 0 {
			copy(dst, unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(src))), 4*len(src)))
			return nil
		}
		for i, f := range src {
			binary.LittleEndian.PutUint32(dst[4*i:], math.Float32bits(f))
		}
	case F64:
		for i, f := range src {
			binary.LittleEndian.PutUint64(dst[8*i:], math.Float64bits(float64(f)))
		}
	case F16:
		for i, f := range src {
			binary.LittleEndian.PutUint16(dst[2*i:], Float32ToF16(f))
		}
	case BF16:
		for i, f := range src {
			binary.LittleEndian.PutUint16(dst[2*i:], Float32ToBF16(f))
		}
	case F8_E4M3:
		dst = dst[:len(src)]
		for i, f := range src {
			dst[i] = float32ToF8E4M3(f)
		}
	case F8_E5M2:
		dst = dst[:len(src)]
		for i, f := range src {
			dst[i] = float32ToF8E5M2(f)
		}
	}
	return nil
}

// Float32View returns src reinterpreted as []float32 without copying when
// that is safe: a little-endian host, a 4-byte aligned address and a length
// that is a multiple of 4. Otherwise it returns nil, false and the caller
// must decode (DecodeFloat32 with F32) instead.
//
// The slice aliases src, which may be a read-only memory map: callers must
// not write to it, and must keep src's backing memory alive (and mapped)
// while the view is in use.
func Float32View(src []byte) (v []float32, ok bool) {
	if !hostLittleEndian || len(src)%4 != 0 {
		return nil, false
	}
	if len(src) == 0 {
		return []float32{}, true
	}
	p := unsafe.Pointer(unsafe.SliceData(src))
	if uintptr(p)%unsafe.Alignof(float32(0)) != 0 {
		return nil, false
	}
	return unsafe.Slice((*float32)(p), len(src)/4), true
}

// uint16View is Float32View's analogue for the 16-bit decoders: reading
// through []uint16 lets the compiler drop per-element bounds checks and
// byte assembly.
func uint16View(src []byte) ([]uint16, bool) {
	if !hostLittleEndian || len(src)%2 != 0 || len(src) == 0 {
		return nil, false
	}
	p := unsafe.Pointer(unsafe.SliceData(src))
	if uintptr(p)%unsafe.Alignof(uint16(0)) != 0 {
		return nil, false
	}
	return unsafe.Slice((*uint16)(p), len(src)/2), true
}

func decodeF32(dst []float32, src []byte) {
	if hostLittleEndian && len(dst) > 0 {
		// dst is always float32-aligned, so copying the bytes into it works
		// whatever src's alignment and compiles to a memmove.
		copy(unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(dst))), 4*len(dst)), src)
		return
	}
	for i := range dst {
		dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(src[4*i:]))
	}
}

// decode16 runs one of the 16-bit kernels over src. Aligned input on a
// little-endian host is read in place; otherwise it is staged through a
// small aligned buffer (a memmove, or a byte swap on big-endian hosts) so
// that every case gets the same tight kernel loop.
func decode16(dst []float32, src []byte, bf16 bool) {
	if u, ok := uint16View(src); ok {
		kernel16(dst, u, bf16)
		return
	}
	var buf [2048]uint16
	bufBytes := unsafe.Slice((*byte)(unsafe.Pointer(&buf[0])), 2*len(buf))
	for len(dst) > 0 {
		n := min(len(dst), len(buf))
		if hostLittleEndian {
			copy(bufBytes, src[:2*n])
		} else {
			for i := range n {
				buf[i] = binary.LittleEndian.Uint16(src[2*i:])
			}
		}
		kernel16(dst[:n], buf[:n], bf16)
		dst, src = dst[n:], src[2*n:]
	}
}

// kernel16 decodes len(u) F16 or BF16 values into dst.
func kernel16(dst []float32, u []uint16, bf16 bool) {
	dst = dst[:len(u)]
	if bf16 {
		for i, h := range u {
			dst[i] = math.Float32frombits(uint32(h) << 16)
		}
		return
	}
	// In BenchmarkDecodeF16 a 256 KiB table ran roughly 3x faster than
	// calling F16ToFloat32 (which branches on subnormals and Inf/NaN and does
	// not inline) and roughly 1.4x faster than an inlined fast path for
	// normal numbers.
	// Real weights touch only the table lines around their few exponents,
	// so it stays cache-resident.
	t := f16Table()
	for i, h := range u {
		dst[i] = t[h]
	}
}

// f16Table maps every binary16 bit pattern to its float32 value. Built on
// first use (about 0.1 ms) and never written afterwards, so scalar users of
// F16ToFloat32 do not pay for it.
var f16Table = sync.OnceValue(func() *[1 << 16]float32 {
	t := new([1 << 16]float32)
	for i := range t {
		t[i] = F16ToFloat32(uint16(i))
	}
	return t
})

func decodeByTable(dst []float32, src []byte, t *[256]float32) {
	src = src[:len(dst)]
	for i, b := range src {
		dst[i] = t[b]
	}
}

// F16ToFloat32 converts IEEE 754 binary16 bits to float32. The conversion
// is exact (every half value is a float32); NaN payloads are kept in the
// top mantissa bits so that Float32ToF16 restores them.
func F16ToFloat32(h uint16) float32 {
	sign := uint32(h&0x8000) << 16
	exp := uint32(h>>10) & 0x1f
	man := uint32(h & 0x3ff)
	switch exp {
	case 0:
		// Zero or subnormal: man * 2^-24 is exact in float32, whose range
		// covers it as a normal number, so let the FPU renormalise.
		return math.Float32frombits(sign | math.Float32bits(float32(man)*0x1p-24))
	case 0x1f:
		return math.Float32frombits(sign | 0x7f800000 | man<<13)
	}
	// Rebias the exponent from 15 to 127.
	return math.Float32frombits(sign | (exp+127-15)<<23 | man<<13)
}

// Float32ToF16 converts f to IEEE 754 binary16 bits, rounding to nearest
// with ties to even. Values at or above 65520 in magnitude (halfway between
// the largest half, 65504, and 2^16) become ±Inf, as IEEE rounding requires;
// NaN stays NaN with its top payload bits and sign kept.
func Float32ToF16(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	a := b & 0x7fffffff
	if a > 0x7f800000 {
		m := uint16(a>>13) & 0x3ff
		if m == 0 {
			// The payload lived only in bits that half cannot hold; keep
			// the value a NaN rather than letting it turn into Inf.
			m = 0x200
		}
		return sign | 0x7c00 | m
	}
	if a < 0x38800000 { // below 2^-14, the smallest normal half
		return sign | uint16(roundSubnormal(a, 10, 15))
	}
	// Rebias 127 -> 15 and round off 13 fraction bits. Results at or past
	// the Inf encoding (from |f| >= 65520, including Inf itself) clamp to it.
	return sign | uint16(min(shiftRNE(a-(127-15)<<23, 23-10), 0x7c00))
}

// BF16ToFloat32 converts bfloat16 bits to float32. bfloat16 is the top half
// of a float32, so this is a shift and is exact.
func BF16ToFloat32(h uint16) float32 {
	return math.Float32frombits(uint32(h) << 16)
}

// Float32ToBF16 converts f to bfloat16 bits, rounding to nearest with ties
// to even (not truncating, which biases values towards zero). Overflow
// rounds to ±Inf; NaN stays NaN with its top payload bits and sign kept.
func Float32ToBF16(f float32) uint16 {
	b := math.Float32bits(f)
	if b&0x7fffffff > 0x7f800000 {
		h := uint16(b >> 16)
		if h&0x7f == 0 {
			h |= 0x40 // payload was only in the dropped bits; stay NaN
		}
		return h
	}
	// A carry out of the fraction correctly bumps the exponent, and out of
	// the largest finite exponent gives Inf; it cannot reach the sign bit.
	return uint16(shiftRNE(b, 16))
}

// shiftRNE returns x >> s rounded to nearest, ties to even: adding (half-1)
// plus the lowest kept bit carries into the kept part exactly when the
// dropped bits are above half, or equal to half with an odd kept part.
func shiftRNE(x, s uint32) uint32 {
	return (x + (1<<(s-1) - 1) + (x>>s)&1) >> s
}

// roundSubnormal rounds the finite, non-negative float32 whose bits are a,
// known to be below the smallest normal of the target format (manBits
// fraction bits, exponent bias bias), to nearest-even and returns the
// target's magnitude bits. The result may be 1<<manBits, the smallest
// normal, which is the right answer when rounding carries up into it.
// Kept out of line so that the normal-range paths of the encoders stay small.
func roundSubnormal(a uint32, manBits, bias uint32) uint32 {
	e := a >> 23
	if e == 0 {
		// float32 subnormals are below 2^-126, far under half the smallest
		// subnormal of every format this is used for.
		return 0
	}
	// Count multiples of the target's subnormal spacing 2^(1-bias-manBits):
	// a = m * 2^(e-150), so the count is m >> s with s as below.
	m := a&0x7fffff | 0x800000
	s := 151 - bias - manBits - e
	if s > 24 {
		return 0 // m < 2^24 <= half a spacing
	}
	q := m >> s
	rem := m & (1<<s - 1)
	half := uint32(1) << (s - 1)
	if rem > half || rem == half && q&1 == 1 {
		q++
	}
	return q
}

// float32ToF8E4M3 rounds f to float8_e4m3fn bits as PyTorch does
// (c10/util/Float8_e4m3fn.h, fp8e4m3fn_from_fp32_value, used by
// tensor.to(torch.float8_e4m3fn)): round to nearest, ties to even, including
// into the subnormal range; no saturation. The format has no infinity, so
// anything that rounds past the largest finite value 448 (|f| > 464, the
// midpoint to the would-be next value 480; exactly 464 ties to 448), ±Inf
// and NaN all give NaN, S.1111.111, with the sign of the input.
func float32ToF8E4M3(f float32) uint8 {
	b := math.Float32bits(f)
	sign := uint8(b>>24) & 0x80
	a := b & 0x7fffffff
	switch {
	case a < 0x3c800000: // below 2^-6, the smallest normal
		return sign | uint8(roundSubnormal(a, 3, 7))
	case a >= 0x7f800000:
		return sign | 0x7f
	}
	// Rebias 127 -> 7 and round off 20 fraction bits; 0x7f (S.1111.111) is
	// both the first encoding past 448 and the NaN, so clamping to it gives
	// NaN for every overflow.
	return sign | uint8(min(shiftRNE(a-(127-7)<<23, 23-3), 0x7f))
}

// float32ToF8E5M2 rounds f to float8_e5m2 bits as PyTorch does
// (c10/util/Float8_e5m2.h, fp8e5m2_from_fp32_value): round to nearest,
// ties to even, including into the subnormal range; no saturation. Anything
// that rounds past the largest finite value 57344 (|f| >= 61440, the
// midpoint to 2^16, which ties to the even encoding S.11111.00) and ±Inf
// give ±Inf; NaN gives S.11111.11 with the sign of the input.
func float32ToF8E5M2(f float32) uint8 {
	b := math.Float32bits(f)
	sign := uint8(b>>24) & 0x80
	a := b & 0x7fffffff
	switch {
	case a < 0x38800000: // below 2^-14, the smallest normal
		return sign | uint8(roundSubnormal(a, 2, 15))
	case a > 0x7f800000:
		return sign | 0x7f
	}
	// Rebias 127 -> 15 and round off 21 fraction bits; overflow and Inf
	// clamp to the Inf encoding.
	return sign | uint8(min(shiftRNE(a-(127-15)<<23, 23-2), 0x7c))
}

// f8E4M3FNToFloat32 decodes float8_e4m3fn (bias 7, no Inf, S.1111.111 is
// NaN, largest finite 448).
func f8E4M3FNToFloat32(x uint8) float32 {
	sign := uint32(x&0x80) << 24
	exp := uint32(x>>3) & 0xf
	man := uint32(x & 7)
	switch {
	case exp == 0xf && man == 7:
		return math.Float32frombits(sign | 0x7fc00000)
	case exp == 0:
		return math.Float32frombits(sign | math.Float32bits(float32(man)*0x1p-9))
	}
	return math.Float32frombits(sign | (exp+127-7)<<23 | man<<20)
}

// f8E5M2ToFloat32 decodes float8_e5m2, which is exactly the top byte of
// an IEEE binary16 (same exponent width and bias, Inf and NaN included).
func f8E5M2ToFloat32(x uint8) float32 {
	return F16ToFloat32(uint16(x) << 8)
}

// f8E4M3FNUZToFloat32 decodes float8_e4m3fnuz (bias 8, no Inf, no negative
// zero: 0x80 is the only NaN; largest finite 240).
func f8E4M3FNUZToFloat32(x uint8) float32 {
	if x == 0x80 {
		return float32(math.NaN())
	}
	sign := uint32(x&0x80) << 24
	exp := uint32(x>>3) & 0xf
	man := uint32(x & 7)
	if exp == 0 {
		return math.Float32frombits(sign | math.Float32bits(float32(man)*0x1p-10))
	}
	return math.Float32frombits(sign | (exp+127-8)<<23 | man<<20)
}

// f8E5M2FNUZToFloat32 decodes float8_e5m2fnuz (bias 16, no Inf, no
// negative zero: 0x80 is the only NaN; largest finite 57344).
func f8E5M2FNUZToFloat32(x uint8) float32 {
	if x == 0x80 {
		return float32(math.NaN())
	}
	sign := uint32(x&0x80) << 24
	exp := uint32(x>>2) & 0x1f
	man := uint32(x & 3)
	if exp == 0 {
		return math.Float32frombits(sign | math.Float32bits(float32(man)*0x1p-17))
	}
	return math.Float32frombits(sign | (exp+127-16)<<23 | man<<21)
}

// f8E8M0ToFloat32 decodes float8_e8m0fnu, the OCP MX scale type: an
// unsigned power of two 2^(x-127) with 0xFF as NaN and no zero.
func f8E8M0ToFloat32(x uint8) float32 {
	switch x {
	case 0xff:
		return float32(math.NaN())
	case 0:
		return 0x1p-127 // a float32 subnormal: exponent field 0 cannot hold it
	}
	return math.Float32frombits(uint32(x) << 23)
}

// byteTable tabulates an 8-bit decoder once, on first use, so that decoding
// is one indexed load per element. The table is never written afterwards.
func byteTable(dec func(uint8) float32) func() *[256]float32 {
	return sync.OnceValue(func() *[256]float32 {
		var t [256]float32
		for i := range t {
			t[i] = dec(uint8(i))
		}
		return &t
	})
}

var (
	e4m3fnTable   = byteTable(f8E4M3FNToFloat32)
	e5m2Table     = byteTable(f8E5M2ToFloat32)
	e4m3fnuzTable = byteTable(f8E4M3FNUZToFloat32)
	e5m2fnuzTable = byteTable(f8E5M2FNUZToFloat32)
	e8m0Table     = byteTable(f8E8M0ToFloat32)
)

// ToFloat32 returns the elements of src, of type d, as float32: a view of
// src when d is F32 and Float32View allows it (the caller must then treat
// the result as read-only, like src), else a newly decoded slice.
func ToFloat32(src []byte, d DType) ([]float32, error) {
	if d == F32 {
		if v, ok := Float32View(src); ok {
			return v, nil
		}
	}
	if d.Size() == 0 {
		return nil, &UnsupportedError{DType: d, Op: opDecodeFloat32}
	}
	dst := make([]float32, len(src)/d.Size())
	return dst, DecodeFloat32(dst, src, d)
}

// ToInt64 returns the integer or BOOL elements of src, of type d, as a new
// int64 slice.
func ToInt64(src []byte, d DType) ([]int64, error) {
	if d.Size() == 0 {
		return nil, &UnsupportedError{DType: d, Op: opDecodeInt64}
	}
	dst := make([]int64, len(src)/d.Size())
	return dst, DecodeInt64(dst, src, d)
}

// F32Bytes returns v as a new little-endian F32 byte slice, the form a
// safetensors writer takes.
func F32Bytes(v []float32) []byte {
	b := make([]byte, 4*len(v))
	// F32 with a destination of the right length cannot fail.
	_ = EncodeFloat32(b, v, F32)
	return b
}

// Float32Reader streams float32 values encoded as d (F32, F16 or BF16,
// little-endian, rounded as EncodeFloat32 rounds), so that a writer can
// store a large tensor in another dtype without a second copy of it in
// memory.
type Float32Reader struct {
	v    []float32
	d    DType
	pend []byte // the rest of a value split across two reads
	tmp  [4]byte
}

// NewFloat32Reader returns a reader of v encoded as d, or an error for a
// d other than F32, F16 and BF16.
func NewFloat32Reader(v []float32, d DType) (*Float32Reader, error) {
	switch d {
	case F32, F16, BF16:
	default:
		return nil, fmt.Errorf("dtype: float32 reader: %s, want F32, F16 or BF16", d)
	}
	return &Float32Reader{v: v, d: d}, nil
}

// Read implements io.Reader.
func (r *Float32Reader) Read(p []byte) (int, error) {
	size := r.d.Size()
	n := 0
	for n < len(p) {
		if len(r.pend) > 0 {
			c := copy(p[n:], r.pend)
			r.pend, n = r.pend[c:], n+c
			continue
		}
		if len(r.v) == 0 {
			break
		}
		k := min((len(p)-n)/size, len(r.v))
		if k == 0 {
			// Less room than one value: encode it aside.
			_ = EncodeFloat32(r.tmp[:size], r.v[:1], r.d)
			r.v, r.pend = r.v[1:], r.tmp[:size]
			continue
		}
		// The lengths match and d is supported: this cannot fail.
		_ = EncodeFloat32(p[n:n+k*size], r.v[:k], r.d)
		r.v, n = r.v[k:], n+k*size
	}
	if n == 0 && len(p) > 0 {
		return 0, io.EOF
	}
	return n, nil
}

package dtype

import (
	"encoding/binary"
	"errors"
	"math"
	"strings"
	"testing"
	"unsafe"
)

// sameFloat compares bit patterns so that -0 differs from +0, and treats any
// two NaNs as equal (payloads are not part of the contract).
func sameFloat(got, want float32) bool {
	if want != want {
		return got != got
	}
	return math.Float32bits(got) == math.Float32bits(want)
}

func nextUp(f float32) float32   { return math.Nextafter32(f, float32(math.Inf(1))) }
func nextDown(f float32) float32 { return math.Nextafter32(f, float32(math.Inf(-1))) }

// refMiniFloat decodes sign/exponent/fraction fields with math.Ldexp, as an
// oracle independent of the bit-shuffling decoders under test.
func refMiniFloat(neg bool, exp, man, manBits, bias int) float64 {
	var v float64
	if exp == 0 {
		v = math.Ldexp(float64(man), 1-bias-manBits)
	} else {
		v = math.Ldexp(float64(man|1<<manBits), exp-bias-manBits)
	}
	if neg {
		v = -v
	}
	return v
}

func isF16NaN(h uint16) bool  { return h&0x7c00 == 0x7c00 && h&0x3ff != 0 }
func isBF16NaN(h uint16) bool { return h&0x7f80 == 0x7f80 && h&0x7f != 0 }

func TestF16AllPatterns(t *testing.T) {
	for i := 0; i < 1<<16; i++ {
		h := uint16(i)
		f := F16ToFloat32(h)
		exp, man := int(h>>10)&0x1f, int(h&0x3ff)
		switch {
		case isF16NaN(h):
			if f == f {
				t.Fatalf("F16ToFloat32(%#04x) = %v, want NaN", h, f)
			}
		case exp == 0x1f:
			if !math.IsInf(float64(f), 0) || math.Signbit(float64(f)) != (h&0x8000 != 0) {
				t.Fatalf("F16ToFloat32(%#04x) = %v, want signed Inf", h, f)
			}
		default:
			want := float32(refMiniFloat(h&0x8000 != 0, exp, man, 10, 15))
			if !sameFloat(f, want) {
				t.Fatalf("F16ToFloat32(%#04x) = %v, want %v", h, f, want)
			}
		}
		back := Float32ToF16(f)
		if isF16NaN(h) {
			if !isF16NaN(back) || back&0x8000 != h&0x8000 {
				t.Fatalf("Float32ToF16(F16ToFloat32(%#04x)) = %#04x, want a NaN of the same sign", h, back)
			}
		} else if back != h {
			t.Fatalf("Float32ToF16(F16ToFloat32(%#04x)) = %#04x", h, back)
		}
	}
}

func TestBF16AllPatterns(t *testing.T) {
	for i := 0; i < 1<<16; i++ {
		h := uint16(i)
		f := BF16ToFloat32(h)
		exp, man := int(h>>7)&0xff, int(h&0x7f)
		switch {
		case isBF16NaN(h):
			if f == f {
				t.Fatalf("BF16ToFloat32(%#04x) = %v, want NaN", h, f)
			}
		case exp == 0xff:
			if !math.IsInf(float64(f), 0) || math.Signbit(float64(f)) != (h&0x8000 != 0) {
				t.Fatalf("BF16ToFloat32(%#04x) = %v, want signed Inf", h, f)
			}
		default:
			want := float32(refMiniFloat(h&0x8000 != 0, exp, man, 7, 127))
			if !sameFloat(f, want) {
				t.Fatalf("BF16ToFloat32(%#04x) = %v, want %v", h, f, want)
			}
		}
		back := Float32ToBF16(f)
		if isBF16NaN(h) {
			if !isBF16NaN(back) || back&0x8000 != h&0x8000 {
				t.Fatalf("Float32ToBF16(BF16ToFloat32(%#04x)) = %#04x, want a NaN of the same sign", h, back)
			}
		} else if back != h {
			t.Fatalf("Float32ToBF16(BF16ToFloat32(%#04x)) = %#04x", h, back)
		}
	}
}

// TestSliceRoundTrip16 runs all 65536 patterns through the slice API, with
// the source both aligned and misaligned so both decode paths are covered.
func TestSliceRoundTrip16(t *testing.T) {
	for _, tc := range []struct {
		d     DType
		isNaN func(uint16) bool
	}{{F16, isF16NaN}, {BF16, isBF16NaN}} {
		for _, off := range []int{0, 1} {
			buf := make([]byte, off+2<<16)
			src := buf[off:]
			for i := 0; i < 1<<16; i++ {
				binary.LittleEndian.PutUint16(src[2*i:], uint16(i))
			}
			fs := make([]float32, 1<<16)
			if err := DecodeFloat32(fs, src, tc.d); err != nil {
				t.Fatal(err)
			}
			out := make([]byte, len(src))
			if err := EncodeFloat32(out, fs, tc.d); err != nil {
				t.Fatal(err)
			}
			for i := 0; i < 1<<16; i++ {
				got := binary.LittleEndian.Uint16(out[2*i:])
				if tc.isNaN(uint16(i)) {
					if !tc.isNaN(got) {
						t.Fatalf("%v offset %d: %#04x came back as non-NaN %#04x", tc.d, off, i, got)
					}
				} else if got != uint16(i) {
					t.Fatalf("%v offset %d: %#04x came back as %#04x", tc.d, off, i, got)
				}
			}
		}
	}
}

// f8Spec describes an 8-bit float layout for the reference decoder.
type f8Spec struct {
	d                DType
	expBits, manBits int
	bias             int
	fnuz             bool // 0x80 is the only NaN, no -0, no Inf
	ieee             bool // top exponent is Inf/NaN as in IEEE 754
}

func (s f8Spec) ref(x uint8) float64 {
	if s.fnuz && x == 0x80 {
		return math.NaN()
	}
	neg := x&0x80 != 0
	exp := int(x>>s.manBits) & (1<<s.expBits - 1)
	man := int(x) & (1<<s.manBits - 1)
	maxExp := 1<<s.expBits - 1
	switch {
	case s.ieee && exp == maxExp && man == 0:
		if neg {
			return math.Inf(-1)
		}
		return math.Inf(1)
	case s.ieee && exp == maxExp:
		return math.NaN()
	case !s.ieee && !s.fnuz && exp == maxExp && man == 1<<s.manBits-1:
		return math.NaN() // e4m3fn: only S.1111.111
	}
	return refMiniFloat(neg, exp, man, s.manBits, s.bias)
}

var f8Specs = []f8Spec{
	{d: F8_E4M3, expBits: 4, manBits: 3, bias: 7},
	{d: F8_E5M2, expBits: 5, manBits: 2, bias: 15, ieee: true},
	{d: F8_E4M3FNUZ, expBits: 4, manBits: 3, bias: 8, fnuz: true},
	{d: F8_E5M2FNUZ, expBits: 5, manBits: 2, bias: 16, fnuz: true},
}

func decodeOne(t *testing.T, d DType, b []byte) float32 {
	t.Helper()
	var out [1]float32
	if err := DecodeFloat32(out[:], b, d); err != nil {
		t.Fatalf("DecodeFloat32(%v, % x): %v", d, b, err)
	}
	return out[0]
}

func TestF8AllPatterns(t *testing.T) {
	all := make([]byte, 256)
	for i := range all {
		all[i] = byte(i)
	}
	for _, s := range f8Specs {
		got := make([]float32, 256)
		if err := DecodeFloat32(got, all, s.d); err != nil {
			t.Fatal(err)
		}
		for i, g := range got {
			want := float32(s.ref(uint8(i)))
			if !sameFloat(g, want) {
				t.Errorf("%v %#02x: got %v, want %v", s.d, i, g, want)
			}
		}
		// Positive patterns must increase strictly up to the first non-finite one.
		prev := float32(math.Inf(-1))
		for i := 0; i < 0x80; i++ {
			g := got[i]
			if g != g {
				break
			}
			if !(g > prev) {
				t.Errorf("%v: %#02x = %v not above %#02x = %v", s.d, i, g, i-1, prev)
			}
			prev = g
		}
		// Setting the sign bit negates (apart from the FNUZ NaN at 0x80).
		for i := 1; i < 0x80; i++ {
			p, n := got[i], got[i|0x80]
			if p == p && !sameFloat(n, -p) {
				t.Errorf("%v: %#02x = %v but %#02x = %v", s.d, i, p, i|0x80, n)
			}
		}
	}
	// E8M0: unsigned powers of two, 0xFF NaN.
	got := make([]float32, 256)
	if err := DecodeFloat32(got, all, F8_E8M0); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 255; i++ {
		if want := float32(math.Ldexp(1, i-127)); got[i] != want {
			t.Errorf("F8_E8M0 %#02x: got %v, want %v", i, got[i], want)
		}
	}
	if got[255] == got[255] {
		t.Errorf("F8_E8M0 0xff: got %v, want NaN", got[255])
	}
}

func TestDecodeKnownValues(t *testing.T) {
	nan := float32(math.NaN())
	inf := float32(math.Inf(1))
	negZero := float32(math.Copysign(0, -1))
	u16 := func(v uint16) []byte { return binary.LittleEndian.AppendUint16(nil, v) }
	tests := []struct {
		d    DType
		src  []byte
		want float32
	}{
		{F16, u16(0x3c00), 1},
		{F16, u16(0xc000), -2},
		{F16, u16(0x7bff), 65504},
		{F16, u16(0x0001), 0x1p-24},
		{F16, u16(0x03ff), 1023 * 0x1p-24},
		{F16, u16(0x0400), 0x1p-14},
		{F16, u16(0x3555), 0.333251953125},
		{F16, u16(0x7c00), inf},
		{F16, u16(0xfc00), -inf},
		{F16, u16(0x7e00), nan},
		{F16, u16(0x8000), negZero},
		{BF16, u16(0x3f80), 1},
		{BF16, u16(0xc000), -2},
		{BF16, u16(0x0001), 0x1p-133},
		{BF16, u16(0x0080), 0x1p-126},
		{BF16, u16(0x7f7f), 0x1.fep127},
		{BF16, u16(0x7f80), inf},
		{BF16, u16(0xffc0), nan},
		{BF16, u16(0x8000), negZero},
		{F8_E4M3, []byte{0x38}, 1},
		{F8_E4M3, []byte{0xc0}, -2},
		{F8_E4M3, []byte{0x7e}, 448},
		{F8_E4M3, []byte{0xfe}, -448},
		{F8_E4M3, []byte{0x01}, 0x1p-9},
		{F8_E4M3, []byte{0x08}, 0x1p-6},
		{F8_E4M3, []byte{0x78}, 256},
		{F8_E4M3, []byte{0x7f}, nan},
		{F8_E4M3, []byte{0xff}, nan},
		{F8_E4M3, []byte{0x80}, negZero},
		{F8_E5M2, []byte{0x3c}, 1},
		{F8_E5M2, []byte{0xc0}, -2},
		{F8_E5M2, []byte{0x7b}, 57344},
		{F8_E5M2, []byte{0x01}, 0x1p-16},
		{F8_E5M2, []byte{0x04}, 0x1p-14},
		{F8_E5M2, []byte{0x7c}, inf},
		{F8_E5M2, []byte{0xfc}, -inf},
		{F8_E5M2, []byte{0x7d}, nan},
		{F8_E5M2, []byte{0x7f}, nan},
		{F8_E4M3FNUZ, []byte{0x40}, 1},
		{F8_E4M3FNUZ, []byte{0x7f}, 240},
		{F8_E4M3FNUZ, []byte{0xff}, -240},
		{F8_E4M3FNUZ, []byte{0x01}, 0x1p-10},
		{F8_E4M3FNUZ, []byte{0x80}, nan},
		{F8_E5M2FNUZ, []byte{0x40}, 1},
		{F8_E5M2FNUZ, []byte{0x7f}, 57344},
		{F8_E5M2FNUZ, []byte{0x01}, 0x1p-17},
		{F8_E5M2FNUZ, []byte{0x80}, nan},
		{F8_E8M0, []byte{0x7f}, 1},
		{F8_E8M0, []byte{0x80}, 2},
		{F8_E8M0, []byte{0x00}, 0x1p-127},
		{F8_E8M0, []byte{0xfe}, 0x1p127},
		{F8_E8M0, []byte{0xff}, nan},
		{F32, binary.LittleEndian.AppendUint32(nil, math.Float32bits(-1.5)), -1.5},
		{F64, binary.LittleEndian.AppendUint64(nil, math.Float64bits(0.1)), 0.1},
		{F64, binary.LittleEndian.AppendUint64(nil, math.Float64bits(1e300)), inf},
		{F64, binary.LittleEndian.AppendUint64(nil, math.Float64bits(-1e300)), -inf},
		{F64, binary.LittleEndian.AppendUint64(nil, math.Float64bits(math.NaN())), nan},
	}
	for _, tc := range tests {
		if got := decodeOne(t, tc.d, tc.src); !sameFloat(got, tc.want) {
			t.Errorf("%v % x: got %v (%#08x), want %v (%#08x)", tc.d, tc.src,
				got, math.Float32bits(got), tc.want, math.Float32bits(tc.want))
		}
	}
}

func TestIntegerDecode(t *testing.T) {
	le := binary.LittleEndian
	tests := []struct {
		d    DType
		src  []byte
		want []int64
	}{
		{BOOL, []byte{0, 1, 2, 0xff}, []int64{0, 1, 1, 1}},
		{U8, []byte{0, 7, 0xff}, []int64{0, 7, 255}},
		{I8, []byte{0xff, 0x80, 0x7f, 0}, []int64{-1, -128, 127, 0}},
		{I16, le.AppendUint16(le.AppendUint16(le.AppendUint16(nil, 0xffff), 0x8000), 300), []int64{-1, -32768, 300}},
		{U16, le.AppendUint16(le.AppendUint16(nil, 0xffff), 2), []int64{65535, 2}},
		{I32, le.AppendUint32(le.AppendUint32(le.AppendUint32(nil, 0xffffffff), 0x80000000), 70000), []int64{-1, math.MinInt32, 70000}},
		{U32, le.AppendUint32(nil, 0xffffffff), []int64{math.MaxUint32}},
		{I64, le.AppendUint64(le.AppendUint64(le.AppendUint64(nil, math.MaxUint64), 1<<63), 1<<40), []int64{-1, math.MinInt64, 1 << 40}},
		{U64, le.AppendUint64(le.AppendUint64(nil, math.MaxInt64), 5), []int64{math.MaxInt64, 5}},
	}
	for _, tc := range tests {
		got := make([]int64, len(tc.want))
		if err := DecodeInt64(got, tc.src, tc.d); err != nil {
			t.Errorf("DecodeInt64 %v: %v", tc.d, err)
			continue
		}
		gotF := make([]float32, len(tc.want))
		if err := DecodeFloat32(gotF, tc.src, tc.d); err != nil {
			t.Errorf("DecodeFloat32 %v: %v", tc.d, err)
			continue
		}
		for i := range tc.want {
			if got[i] != tc.want[i] {
				t.Errorf("DecodeInt64 %v [%d] = %d, want %d", tc.d, i, got[i], tc.want[i])
			}
			if wantF := float32(tc.want[i]); gotF[i] != wantF {
				t.Errorf("DecodeFloat32 %v [%d] = %v, want %v", tc.d, i, gotF[i], wantF)
			}
		}
	}

	// U64 beyond int64 is refused by DecodeInt64 but fine as a float32.
	big := le.AppendUint64(nil, math.MaxUint64)
	if err := DecodeInt64(make([]int64, 1), big, U64); err == nil {
		t.Error("DecodeInt64 U64 MaxUint64: no error")
	}
	var f [1]float32
	if err := DecodeFloat32(f[:], big, U64); err != nil || f[0] != 0x1p64 {
		t.Errorf("DecodeFloat32 U64 MaxUint64 = %v, %v; want 2^64", f[0], err)
	}
}

func TestEncodeKnownValues(t *testing.T) {
	nan := float32(math.NaN())
	inf := float32(math.Inf(1))
	negNaN := math.Float32frombits(0xffc00000)
	tests := []struct {
		d    DType
		in   float32
		want uint16 // the encoded bits (low byte only for F8)
	}{
		{F16, 1, 0x3c00},
		{F16, -2, 0xc000},
		{F16, 65504, 0x7bff},
		{F16, nextDown(65520), 0x7bff},
		{F16, 65520, 0x7c00}, // halfway to 2^16 rounds to even, which is Inf
		{F16, 1e6, 0x7c00},
		{F16, -1e6, 0xfc00},
		{F16, inf, 0x7c00},
		{F16, 0x1p-24, 0x0001},
		{F16, 0x1p-25, 0x0000},           // halfway to the smallest subnormal: ties to zero
		{F16, nextUp(0x1p-25), 0x0001},   // just above halfway
		{F16, 3 * 0x1p-25, 0x0002},       // halfway between 1 and 2 subnormal steps: to even 2
		{F16, 1 + 0x1p-11, 0x3c00},       // halfway above 1: even is 1
		{F16, 1 + 3*0x1p-11, 0x3c02},     // halfway between 0x3c01 and 0x3c02
		{F16, 0x1p-14 - 0x1p-25, 0x0400}, // halfway below the smallest normal rounds up into it
		{F16, 1e-10, 0x0000},             // underflow
		{F16, -1e-10, 0x8000},            // keeps the sign of zero
		{F16, 0x1p-130, 0x0000},          // float32 subnormal input
		{BF16, 1, 0x3f80},
		{BF16, -2, 0xc000},
		{BF16, 1 + 0x1p-8, 0x3f80},         // tie to even
		{BF16, 1 + 3*0x1p-8, 0x3f82},       // tie to even (up)
		{BF16, nextUp(1 + 0x1p-8), 0x3f81}, // above the tie
		{BF16, math.MaxFloat32, 0x7f80},    // rounds past the top: Inf
		{BF16, 0x1p-133, 0x0001},
		{BF16, 0x1p-134, 0x0000}, // tie to even zero
		{BF16, math.Float32frombits(0x7f800001), 0x7fc0},
		{F8_E4M3, 1, 0x38},
		{F8_E4M3, -2, 0xc0},
		{F8_E4M3, 448, 0x7e},
		{F8_E4M3, 464, 0x7e},         // halfway to 480: ties to even 448
		{F8_E4M3, nextUp(464), 0x7f}, // would round to 480, which does not exist: NaN
		{F8_E4M3, 480, 0x7f},
		{F8_E4M3, -1000, 0xff},
		{F8_E4M3, inf, 0x7f},
		{F8_E4M3, -inf, 0xff},
		{F8_E4M3, nan, 0x7f},
		{F8_E4M3, negNaN, 0xff},
		{F8_E4M3, 0x1p-9, 0x01},
		{F8_E4M3, 0x1p-10, 0x00},          // tie to even zero
		{F8_E4M3, 3 * 0x1p-10, 0x02},      // tie between 1 and 2 steps
		{F8_E4M3, 1 + 0x1p-4, 0x38},       // tie to even 1.0
		{F8_E4M3, 1 + 3*0x1p-4, 0x3a},     // tie to even 1.25
		{F8_E4M3, 0x1p-6 - 0x1p-10, 0x08}, // halfway under the smallest normal
		{F8_E5M2, 1, 0x3c},
		{F8_E5M2, -2, 0xc0},
		{F8_E5M2, 57344, 0x7b},
		{F8_E5M2, nextDown(61440), 0x7b},
		{F8_E5M2, 61440, 0x7c}, // halfway to 2^16 ties to the even encoding, Inf
		{F8_E5M2, 65536, 0x7c},
		{F8_E5M2, -1e9, 0xfc},
		{F8_E5M2, inf, 0x7c},
		{F8_E5M2, -inf, 0xfc},
		{F8_E5M2, nan, 0x7f},
		{F8_E5M2, negNaN, 0xff},
		{F8_E5M2, 0x1p-16, 0x01},
		{F8_E5M2, 0x1p-17, 0x00},
		{F8_E5M2, 3 * 0x1p-17, 0x02},
		{F8_E5M2, 1 + 0x1p-3, 0x3c},
		{F8_E5M2, 1 + 3*0x1p-3, 0x3e},
	}
	for _, tc := range tests {
		dst := make([]byte, tc.d.Size())
		if err := EncodeFloat32(dst, []float32{tc.in}, tc.d); err != nil {
			t.Errorf("EncodeFloat32(%v, %v): %v", tc.d, tc.in, err)
			continue
		}
		var got uint16
		if len(dst) == 2 {
			got = binary.LittleEndian.Uint16(dst)
		} else {
			got = uint16(dst[0])
		}
		if got != tc.want {
			t.Errorf("EncodeFloat32(%v, %v (%#08x)) = %#04x, want %#04x", tc.d, tc.in, math.Float32bits(tc.in), got, tc.want)
		}
	}
}

// encSpec pairs a scalar encoder with its decoder for the rounding sweeps.
type encSpec struct {
	name       string
	enc        func(float32) uint16
	dec        func(uint16) float32
	maxFinite  uint16 // largest positive finite encoding
	sign       uint16
	manBits    int
	bias       int
	overflowTo func(neg bool) uint16 // encoding for results past maxFinite
}

var encSpecs = []encSpec{
	{"F16", Float32ToF16, F16ToFloat32, 0x7bff, 0x8000, 10, 15,
		func(neg bool) uint16 { return pick(neg, 0xfc00, 0x7c00) }},
	{"BF16", Float32ToBF16, BF16ToFloat32, 0x7f7f, 0x8000, 7, 127,
		func(neg bool) uint16 { return pick(neg, 0xff80, 0x7f80) }},
	{"F8_E4M3", func(f float32) uint16 { return uint16(float32ToF8E4M3(f)) },
		func(h uint16) float32 { return f8E4M3FNToFloat32(uint8(h)) }, 0x7e, 0x80, 3, 7,
		func(neg bool) uint16 { return pick(neg, 0xff, 0x7f) }},
	{"F8_E5M2", func(f float32) uint16 { return uint16(float32ToF8E5M2(f)) },
		func(h uint16) float32 { return f8E5M2ToFloat32(uint8(h)) }, 0x7b, 0x80, 2, 15,
		func(neg bool) uint16 { return pick(neg, 0xfc, 0x7c) }},
}

func pick(neg bool, n, p uint16) uint16 {
	if neg {
		return n
	}
	return p
}

// TestEncodeMidpoints checks round-to-nearest-even at every rounding
// boundary of each format: the exact midpoint between two neighbouring
// values goes to the one with an even encoding, and the float32 values
// either side of it go to the nearer neighbour.
func TestEncodeMidpoints(t *testing.T) {
	for _, s := range encSpecs {
		for a := uint16(0); a < s.maxFinite; a++ {
			lo, hi := s.dec(a), s.dec(a+1)
			mid := float32((float64(lo) + float64(hi)) / 2)
			if float64(mid) != (float64(lo)+float64(hi))/2 {
				t.Fatalf("%s: midpoint of %#x and %#x not exact in float32", s.name, a, a+1)
			}
			even := a
			if a&1 == 1 {
				even = a + 1
			}
			for _, neg := range []bool{false, true} {
				sg, m, l, h := uint16(0), mid, lo, hi
				if neg {
					sg, m, l, h = s.sign, -mid, -lo, -hi
				}
				checks := []struct {
					in   float32
					want uint16
				}{
					{l, a}, {h, a + 1}, {m, even}, {towardZero(m), a}, {awayFromZero(m), a + 1},
				}
				for _, c := range checks {
					want := c.want | sg
					if got := s.enc(c.in); got != want {
						t.Fatalf("%s(%v = %#08x) = %#x, want %#x", s.name, c.in, math.Float32bits(c.in), got, want)
					}
				}
			}
		}
	}
}

func towardZero(f float32) float32   { return math.Float32frombits(math.Float32bits(f) - 1) }
func awayFromZero(f float32) float32 { return math.Float32frombits(math.Float32bits(f) + 1) }

// TestEncodeAgainstReference sweeps float32 bit patterns with a stride and
// compares each encoder with a float64 model of round-to-nearest-even.
func TestEncodeAgainstReference(t *testing.T) {
	stride := uint64(4099)
	if testing.Short() {
		stride = 65537
	}
	for _, s := range encSpecs {
		maxVal := float64(s.dec(s.maxFinite))
		for u := uint64(0); u < 1<<32; u += stride {
			f := math.Float32frombits(uint32(u))
			got := s.enc(f)
			if f != f {
				if g := s.dec(got); g == g {
					t.Fatalf("%s(NaN %#08x) = %#x, not NaN", s.name, uint32(u), got)
				}
				continue
			}
			x := float64(f)
			neg := math.Signbit(x)
			r := refRound(math.Abs(x), s.manBits, s.bias)
			if r > maxVal {
				if want := s.overflowTo(neg); got != want {
					t.Fatalf("%s(%v) = %#x, want overflow encoding %#x", s.name, f, got, want)
				}
				continue
			}
			if neg {
				r = -r
			}
			if g := s.dec(got); !sameFloat(g, float32(r)) {
				t.Fatalf("%s(%v = %#08x) = %#x = %v, want %v", s.name, f, uint32(u), got, g, r)
			}
		}
	}
}

// refRound rounds x >= 0 to manBits fraction bits at x's binary exponent
// (no lower than the format's smallest normal exponent, which yields the
// subnormal spacing), ties to even, with no upper exponent bound.
func refRound(x float64, manBits, bias int) float64 {
	if x == 0 || math.IsInf(x, 0) {
		return x
	}
	_, e := math.Frexp(x) // x = frac * 2^e, frac in [0.5, 1)
	e--
	if e < 1-bias {
		e = 1 - bias
	}
	ulp := math.Ldexp(1, e-manBits)
	return math.RoundToEven(x/ulp) * ulp
}

func TestEncodeSlices(t *testing.T) {
	src := []float32{0, 1, -2.5, 3.14159, 1e-3, -65504, 448, 1e30, float32(math.Inf(-1))}
	for _, d := range []DType{F32, F64, F16, BF16, F8_E4M3, F8_E5M2} {
		enc := make([]byte, len(src)*d.Size())
		if err := EncodeFloat32(enc, src, d); err != nil {
			t.Fatalf("EncodeFloat32 %v: %v", d, err)
		}
		dec := make([]float32, len(src))
		if err := DecodeFloat32(dec, enc, d); err != nil {
			t.Fatalf("DecodeFloat32 %v: %v", d, err)
		}
		for i, f := range src {
			var want float32
			switch d {
			case F32, F64:
				want = f
			case F16:
				want = F16ToFloat32(Float32ToF16(f))
			case BF16:
				want = BF16ToFloat32(Float32ToBF16(f))
			case F8_E4M3:
				want = f8E4M3FNToFloat32(float32ToF8E4M3(f))
			case F8_E5M2:
				want = f8E5M2ToFloat32(float32ToF8E5M2(f))
			}
			if !sameFloat(dec[i], want) {
				t.Errorf("%v [%d] %v: round trip %v, want %v", d, i, f, dec[i], want)
			}
		}
	}
}

func TestMisalignedDecodeMatches(t *testing.T) {
	const n = 37
	for _, d := range []DType{F32, F16, BF16} {
		buf := make([]byte, n*d.Size()+1)
		for i := range buf {
			buf[i] = byte(i*131 + 7)
		}
		a, b := make([]float32, n), make([]float32, n)
		al := make([]byte, n*d.Size())
		copy(al, buf[1:])
		if err := DecodeFloat32(a, al, d); err != nil {
			t.Fatal(err)
		}
		if err := DecodeFloat32(b, buf[1:], d); err != nil {
			t.Fatal(err)
		}
		for i := range a {
			if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
				t.Fatalf("%v [%d]: aligned %v, misaligned %v", d, i, a[i], b[i])
			}
		}
	}
}

func TestLengthMismatch(t *testing.T) {
	tests := []struct {
		name string
		call func() error
		got  string
		want string
	}{
		{"DecodeFloat32 F16", func() error { return DecodeFloat32(make([]float32, 4), make([]byte, 7), F16) }, "7", "8"},
		{"DecodeFloat32 F32", func() error { return DecodeFloat32(make([]float32, 3), make([]byte, 16), F32) }, "16", "12"},
		{"DecodeFloat32 F8", func() error { return DecodeFloat32(make([]float32, 5), make([]byte, 4), F8_E4M3) }, "4", "5"},
		{"DecodeInt64 I64", func() error { return DecodeInt64(make([]int64, 2), make([]byte, 9), I64) }, "9", "16"},
		{"EncodeFloat32 BF16", func() error { return EncodeFloat32(make([]byte, 5), make([]float32, 3), BF16) }, "5", "6"},
	}
	for _, tc := range tests {
		err := tc.call()
		if err == nil {
			t.Errorf("%s: no error", tc.name)
			continue
		}
		var ue *UnsupportedError
		if errors.As(err, &ue) {
			t.Errorf("%s: got UnsupportedError %v for a length mismatch", tc.name, err)
		}
		msg := err.Error()
		if !strings.Contains(msg, " "+tc.got+" ") || !strings.Contains(msg, " "+tc.want+" ") {
			t.Errorf("%s: error %q does not state both %s and %s", tc.name, msg, tc.got, tc.want)
		}
	}
}

func TestUnsupported(t *testing.T) {
	tests := []struct {
		op   string
		d    DType
		call func(DType) error
	}{
		{opDecodeFloat32, F4, decodeF32Call},
		{opDecodeFloat32, F6_E2M3, decodeF32Call},
		{opDecodeFloat32, F6_E3M2, decodeF32Call},
		{opDecodeFloat32, C64, decodeF32Call},
		{opDecodeInt64, F32, decodeI64Call},
		{opDecodeInt64, F16, decodeI64Call},
		{opDecodeInt64, BF16, decodeI64Call},
		{opDecodeInt64, F8_E4M3, decodeI64Call},
		{opDecodeInt64, C64, decodeI64Call},
		{opEncodeFloat32, I32, encodeCall},
		{opEncodeFloat32, BOOL, encodeCall},
		{opEncodeFloat32, F4, encodeCall},
		{opEncodeFloat32, F8_E4M3FNUZ, encodeCall},
		{opEncodeFloat32, F8_E8M0, encodeCall},
		{opEncodeFloat32, C64, encodeCall},
	}
	for _, tc := range tests {
		err := tc.call(tc.d)
		var ue *UnsupportedError
		if !errors.As(err, &ue) {
			t.Errorf("%s %v: got %v, want *UnsupportedError", tc.op, tc.d, err)
			continue
		}
		if ue.DType != tc.d || ue.Op != tc.op {
			t.Errorf("%s %v: got %+v", tc.op, tc.d, *ue)
		}
		if want := "dtype: " + tc.d.String() + " unsupported for " + tc.op; err.Error() != want {
			t.Errorf("Error() = %q, want %q", err.Error(), want)
		}
	}
	if got := (&UnsupportedError{DType: F4, Op: opDecodeFloat32}).Error(); got != "dtype: F4 unsupported for decode to float32" {
		t.Errorf("Error() = %q", got)
	}
	// Invalid dtypes are errors, but not "valid yet unsupported" ones.
	for _, d := range []DType{Invalid, DType(200)} {
		for _, call := range []func(DType) error{decodeF32Call, decodeI64Call, encodeCall} {
			err := call(d)
			var ue *UnsupportedError
			if err == nil || errors.As(err, &ue) {
				t.Errorf("%v: got %v, want a plain error", d, err)
			}
		}
	}
}

// The calls use lengths that would be wrong for any size, so the test also
// shows that an unsupported dtype is reported before the length check.
func decodeF32Call(d DType) error { return DecodeFloat32(make([]float32, 2), make([]byte, 3), d) }
func decodeI64Call(d DType) error { return DecodeInt64(make([]int64, 2), make([]byte, 3), d) }
func encodeCall(d DType) error    { return EncodeFloat32(make([]byte, 3), make([]float32, 2), d) }

func TestEmpty(t *testing.T) {
	for d := BOOL; d <= U64; d++ {
		if d.Size() == 0 || d == C64 {
			continue
		}
		if err := DecodeFloat32(nil, nil, d); err != nil {
			t.Errorf("DecodeFloat32 %v empty: %v", d, err)
		}
	}
	if err := EncodeFloat32(nil, nil, F32); err != nil {
		t.Errorf("EncodeFloat32 empty: %v", err)
	}
}

func TestFloat32View(t *testing.T) {
	buf := make([]byte, 24) // heap blocks of this size are 8-byte aligned
	if uintptr(unsafe.Pointer(&buf[0]))%4 != 0 {
		t.Skip("allocation not 4-byte aligned")
	}
	binary.LittleEndian.PutUint32(buf[4:], math.Float32bits(3.5))
	v, ok := Float32View(buf[:16])
	if !hostLittleEndian {
		if ok {
			t.Fatal("Float32View ok on a big-endian host")
		}
		return
	}
	if !ok || len(v) != 4 {
		t.Fatalf("aligned: got len %d ok %v, want len 4 ok true", len(v), ok)
	}
	if v[1] != 3.5 {
		t.Errorf("v[1] = %v, want 3.5", v[1])
	}
	if unsafe.Pointer(&v[0]) != unsafe.Pointer(&buf[0]) {
		t.Error("view does not alias the bytes")
	}
	binary.LittleEndian.PutUint32(buf[8:], math.Float32bits(-7))
	if v[2] != -7 {
		t.Errorf("after writing the bytes, v[2] = %v, want -7", v[2])
	}
	for _, tc := range []struct {
		name string
		b    []byte
	}{
		{"misaligned by 1", buf[1:17]},
		{"misaligned by 2", buf[2:18]},
		{"length not a multiple of 4", buf[:6]},
	} {
		if v, ok := Float32View(tc.b); ok || v != nil {
			t.Errorf("%s: got %v, %v; want nil, false", tc.name, v, ok)
		}
	}
	if v, ok := Float32View(nil); !ok || len(v) != 0 {
		t.Errorf("empty: got %v, %v; want empty, true", v, ok)
	}
}

// TestNoAllocs guards the per-call cost on multi-gigabyte checkpoints: no
// decode or encode path may allocate, aligned or not.
func TestNoAllocs(t *testing.T) {
	const n = 5000 // more than one staging chunk of the 16-bit decoders
	for _, d := range []DType{F16, BF16, F32, F64, F8_E4M3, F8_E5M2, I8, I32, I64, BOOL} {
		for _, off := range []int{0, 1} {
			src := make([]byte, off+n*d.Size())[off:]
			dst := make([]float32, n)
			allocs := testing.AllocsPerRun(3, func() {
				if err := DecodeFloat32(dst, src, d); err != nil {
					t.Fatal(err)
				}
			})
			if allocs != 0 {
				t.Errorf("DecodeFloat32 %v offset %d: %v allocations", d, off, allocs)
			}
		}
	}
	for _, d := range []DType{F16, BF16, F32, F64, F8_E4M3, F8_E5M2} {
		src := make([]float32, n)
		dst := make([]byte, n*d.Size())
		allocs := testing.AllocsPerRun(3, func() {
			if err := EncodeFloat32(dst, src, d); err != nil {
				t.Fatal(err)
			}
		})
		if allocs != 0 {
			t.Errorf("EncodeFloat32 %v: %v allocations", d, allocs)
		}
	}
	ints, raw := make([]int64, n), make([]byte, 8*n)
	if allocs := testing.AllocsPerRun(3, func() { _ = DecodeInt64(ints, raw, I64) }); allocs != 0 {
		t.Errorf("DecodeInt64: %v allocations", allocs)
	}
}

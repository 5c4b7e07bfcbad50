package cuda

import "math"

// BF16FromFloat32 stores each src value in dst as a bfloat16 bit pattern,
// rounding to nearest, ties to even (as PyTorch and cuBLAS do); NaN stays a
// quiet NaN. dst must be at least as long as src.
func BF16FromFloat32(dst []uint16, src []float32) {
	dst = dst[:len(src)]
	for i, v := range src {
		bits := math.Float32bits(v)
		if v != v {
			dst[i] = uint16(bits>>16) | 0x40 // keep the sign, force a quiet NaN
			continue
		}
		// Adding 0x7FFF plus the lowest kept bit rounds the 16 dropped bits
		// to nearest even; a carry into the exponent is the correct
		// rounding up (to Inf at the top of the range).
		bits += 0x7FFF + (bits>>16)&1
		dst[i] = uint16(bits >> 16)
	}
}

// Float32FromBF16 widens bfloat16 bit patterns to float32 (exactly). dst
// must be at least as long as src.
func Float32FromBF16(dst []float32, src []uint16) {
	dst = dst[:len(src)]
	for i, v := range src {
		dst[i] = math.Float32frombits(uint32(v) << 16)
	}
}

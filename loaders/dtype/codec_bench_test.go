package dtype

import (
	"math/rand/v2"
	"testing"
)

// benchElems is large enough (8 MiB of float32 output) that the benchmarks
// stream through memory as a checkpoint decode does, rather than sitting in
// L1/L2.
const benchElems = 1 << 21

// benchSource returns n elements of type d with realistic bit patterns
// (weights of magnitude around 0.01-1, so mostly normals with the odd
// subnormal), at the given byte offset from an aligned allocation.
func benchSource(d DType, n, off int) []byte {
	r := rand.New(rand.NewPCG(1, 2))
	vals := make([]float32, n)
	for i := range vals {
		vals[i] = float32(r.NormFloat64() * 0.05)
	}
	buf := make([]byte, off+n*d.Size())
	if err := EncodeFloat32(buf[off:], vals, d); err != nil {
		panic(err)
	}
	return buf[off:]
}

func benchDecode(b *testing.B, d DType, off int) {
	src := benchSource(d, benchElems, off)
	dst := make([]float32, benchElems)
	// SetBytes on the source size: the reported MB/s is checkpoint bytes
	// decoded per second, the figure that predicts load time.
	b.SetBytes(int64(len(src)))
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if err := DecodeFloat32(dst, src, d); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodeF16(b *testing.B)           { benchDecode(b, F16, 0) }
func BenchmarkDecodeF16Misaligned(b *testing.B) { benchDecode(b, F16, 1) }
func BenchmarkDecodeBF16(b *testing.B)          { benchDecode(b, BF16, 0) }
func BenchmarkDecodeBF16Misaligned(b *testing.B) {
	benchDecode(b, BF16, 1)
}
func BenchmarkDecodeF32(b *testing.B)           { benchDecode(b, F32, 0) }
func BenchmarkDecodeF32Misaligned(b *testing.B) { benchDecode(b, F32, 1) }
func BenchmarkDecodeF8E4M3(b *testing.B)        { benchDecode(b, F8_E4M3, 0) }

func benchEncode(b *testing.B, d DType) {
	src := make([]float32, benchElems)
	if err := DecodeFloat32(src, benchSource(F32, benchElems, 0), F32); err != nil {
		b.Fatal(err)
	}
	dst := make([]byte, benchElems*d.Size())
	b.SetBytes(int64(len(dst)))
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if err := EncodeFloat32(dst, src, d); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEncodeF16(b *testing.B)    { benchEncode(b, F16) }
func BenchmarkEncodeBF16(b *testing.B)   { benchEncode(b, BF16) }
func BenchmarkEncodeF8E4M3(b *testing.B) { benchEncode(b, F8_E4M3) }

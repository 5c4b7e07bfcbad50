package dtype

import (
	"math"
	"testing"
)

func TestF32Bytes(t *testing.T) {
	v := []float32{0, 1.5, -2, float32(math.Inf(1)), math.SmallestNonzeroFloat32}
	b := F32Bytes(v)
	if len(b) != 4*len(v) || b[4*1+3] != 0x3f || b[4*1+2] != 0xc0 {
		t.Fatalf("bytes % x, want little-endian F32", b)
	}
	back := make([]float32, len(v))
	if err := DecodeFloat32(back, b, F32); err != nil {
		t.Fatal(err)
	}
	for i := range v {
		if back[i] != v[i] {
			t.Fatalf("round trip %v, want %v", back, v)
		}
	}
	if len(F32Bytes(nil)) != 0 {
		t.Fatal("nil input gave bytes")
	}
}

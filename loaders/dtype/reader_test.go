package dtype

import (
	"bytes"
	"io"
	"math"
	"testing"
)

// Float32Reader gives EncodeFloat32's bytes whatever the read sizes,
// including reads smaller than one value.
func TestFloat32Reader(t *testing.T) {
	v := []float32{1, -2.5, 3.14159, 65504, 1e-8, float32(math.Inf(-1)), 0.1, -0}
	for _, d := range []DType{F32, F16, BF16} {
		want := make([]byte, len(v)*d.Size())
		if err := EncodeFloat32(want, v, d); err != nil {
			t.Fatal(err)
		}
		for _, chunk := range []int{1, 3, 5, 64} {
			r, err := NewFloat32Reader(v, d)
			if err != nil {
				t.Fatal(err)
			}
			var got bytes.Buffer
			buf := make([]byte, chunk)
			for {
				n, err := r.Read(buf)
				got.Write(buf[:n])
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			if !bytes.Equal(got.Bytes(), want) {
				t.Errorf("%s, reads of %d bytes: %x, want %x", d, chunk, got.Bytes(), want)
			}
		}
	}
	if _, err := NewFloat32Reader(v, I32); err == nil {
		t.Error("an integer dtype was accepted")
	}
}

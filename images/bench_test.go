package images

import (
	"bytes"
	"image"
	"image/draw"
	"image/jpeg"
	"testing"

	xdraw "golang.org/x/image/draw"
)

// The baselines are what a Go program reaches for without this package:
// x/image/draw's Catmull-Rom scaler (a = −0.5, as PIL's BICUBIC) for the
// crop's resize, image/jpeg with image/draw's YCbCr conversion for
// decoding.

func imageNetLike(b *testing.B) *RGB { return testImage(b, "blocks", 500, 375, 11) }

func BenchmarkCenterCrop256(b *testing.B) {
	m := imageNetLike(b)
	b.ResetTimer()
	for b.Loop() {
		if _, err := CenterCrop(m, 256, CropOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkBaselineCatmullRom256(b *testing.B) {
	m := imageNetLike(b)
	src := image.NewRGBA(image.Rect(0, 0, m.W, m.H))
	for i := range m.W * m.H {
		copy(src.Pix[4*i:], m.Pix[3*i:3*i+3])
		src.Pix[4*i+3] = 255
	}
	dst := image.NewRGBA(image.Rect(0, 0, 341, 256))
	b.ResetTimer()
	for b.Loop() {
		xdraw.CatmullRom.Scale(dst, dst.Rect, src, src.Rect, xdraw.Src, nil)
	}
}

// jpegBytes encodes an ImageNet-sized picture with image/jpeg (4:2:0).
func jpegBytes(b *testing.B) []byte {
	m := imageNetLike(b)
	src := image.NewRGBA(image.Rect(0, 0, m.W, m.H))
	for i := range m.W * m.H {
		copy(src.Pix[4*i:], m.Pix[3*i:3*i+3])
		src.Pix[4*i+3] = 255
	}
	var buf bytes.Buffer
	if err := jpeg.Encode(&buf, src, &jpeg.Options{Quality: 90}); err != nil {
		b.Fatal(err)
	}
	return buf.Bytes()
}

func BenchmarkDecodeJPEG(b *testing.B) {
	data := jpegBytes(b)
	for b.Loop() {
		if _, err := DecodeBytes(data); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkBaselineStdlibJPEG(b *testing.B) {
	data := jpegBytes(b)
	for b.Loop() {
		im, err := jpeg.Decode(bytes.NewReader(data))
		if err != nil {
			b.Fatal(err)
		}
		dst := image.NewRGBA(im.Bounds())
		draw.Draw(dst, dst.Rect, im, im.Bounds().Min, draw.Src)
	}
}

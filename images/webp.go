package images

import (
	"bytes"
	"fmt"
	"image"

	"golang.org/x/image/webp"
)

// decodeWebP decodes a WebP file. Lossless pictures come out of
// golang.org/x/image/webp exactly; lossy ones come out as their decoded
// 4:2:0 planes (VP8 decoding is bit-exact by specification), which
// libwebpRGB turns into RGB as libwebp (PIL's decoder) does.
func decodeWebP(data []byte) (*RGB, error) {
	c, err := webp.DecodeConfig(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("WebP header: %w", err)
	}
	if err := checkSize(c.Width, c.Height); err != nil {
		return nil, fmt.Errorf("WebP: %w", err)
	}
	im, err := webp.Decode(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("WebP: %w", err)
	}
	var m *RGB
	switch im := im.(type) {
	case *image.YCbCr:
		m, err = libwebpRGB(im)
	case *image.NYCbCrA:
		// Alpha is dropped; the colour planes are not premultiplied.
		m, err = libwebpRGB(&im.YCbCr)
	default:
		m, err = toRGB(im, 0)
	}
	if err != nil {
		return nil, fmt.Errorf("WebP: %w", err)
	}
	return m, nil
}

// libwebpRGB converts VP8's planes to RGB as libwebp's default output does:
// "fancy" upsampling of the 4:2:0 chroma (for each output sample, 9:3:3:1
// of the four nearest chroma samples, in libwebp's two-step rounding),
// then its 14-bit fixed-point BT.601 conversion from limited range.
func libwebpRGB(im *image.YCbCr) (*RGB, error) {
	if im.SubsampleRatio != image.YCbCrSubsampleRatio420 {
		return nil, fmt.Errorf("lossy planes subsampled %v, want 4:2:0", im.SubsampleRatio)
	}
	b := im.Rect
	w, h := b.Dx(), b.Dy()
	if err := checkSize(w, h); err != nil {
		return nil, err
	}
	out := NewRGB(w, h)
	cw, ch := (w+1)/2, (h+1)/2
	u, v := make([]int32, w), make([]int32, w)
	cOff := im.COffset(b.Min.X, b.Min.Y)
	for y := range h {
		// The nearer chroma row and the further one, the edges repeated
		// (libwebp mirrors the first row onto itself, and the last of an
		// even height).
		near, far := y/2, y/2-1
		if y%2 == 1 {
			far = y/2 + 1
		}
		far = min(max(far, 0), ch-1)
		n := cOff + near*im.CStride
		f := cOff + far*im.CStride
		webpUpsampleRow(u, im.Cb[n:n+cw], im.Cb[f:f+cw])
		webpUpsampleRow(v, im.Cr[n:n+cw], im.Cr[f:f+cw])
		yrow := im.Y[im.YOffset(b.Min.X, b.Min.Y+y):]
		dst := out.Pix[3*y*w:]
		for x := range w {
			yy := webpMulHi(int32(yrow[x]), 19077)
			dst[3*x] = webpClip8(yy + webpMulHi(v[x], 26149) - 14234)
			dst[3*x+1] = webpClip8(yy - webpMulHi(u[x], 6419) - webpMulHi(v[x], 13320) + 8708)
			dst[3*x+2] = webpClip8(yy + webpMulHi(u[x], 33050) - 17685)
		}
	}
	return out, nil
}

// webpUpsampleRow fills out (one output row of chroma) from the nearer and
// further chroma rows. Between chroma columns a and a+1, the output column
// nearer a takes ((S + 8 + 2·(near[a+1] + far[a])) >> 3 + near[a]) >> 1,
// S being the four samples' sum; the first column, and the last of an even
// width, take (3·near + far + 2) >> 2.
func webpUpsampleRow(out []int32, near, far []uint8) {
	w := len(out)
	out[0] = (3*int32(near[0]) + int32(far[0]) + 2) >> 2
	for x := 1; x <= (w-1)/2; x++ {
		na, nb, fa, fb := int32(near[x-1]), int32(near[x]), int32(far[x-1]), int32(far[x])
		s := na + nb + fa + fb + 8
		out[2*x-1] = (((s + 2*(nb+fa)) >> 3) + na) >> 1
		out[2*x] = (((s + 2*(na+fb)) >> 3) + nb) >> 1
	}
	if w%2 == 0 {
		last := w/2 - 1
		out[w-1] = (3*int32(near[last]) + int32(far[last]) + 2) >> 2
	}
}

// webpMulHi is libwebp's MultHi, the high half of an 8.8 product.
func webpMulHi(v, c int32) int32 { return (v * c) >> 8 }

// webpClip8 takes a 6-bit fixed-point value to a byte, saturating.
func webpClip8(v int32) uint8 {
	if v&^(256<<6-1) == 0 {
		return uint8(v >> 6)
	}
	if v < 0 {
		return 0
	}
	return 255
}

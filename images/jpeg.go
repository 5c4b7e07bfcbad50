package images

import (
	"image"
	"image/jpeg"
)

func decodeJPEG(data []byte) (*RGB, error) {
	return decodeGo(data, "JPEG", jpeg.DecodeConfig, jpeg.Decode)
}

// ycbcrToRGB converts a JPEG's decoded planes as libjpeg-turbo (PIL's
// decoder) does by default: chroma upsampled with its "fancy" triangle
// filters where it uses them (2×1, 2×2 and 1×2 subsampling, the first two
// only when the chroma plane is more than 2 samples wide), by replication
// elsewhere; then its fixed-point YCbCr→RGB with 16 fractional bits.
func ycbcrToRGB(out *RGB, im *image.YCbCr) {
	w, h := out.W, out.H
	sx, sy := 1, 1
	switch im.SubsampleRatio {
	case image.YCbCrSubsampleRatio422:
		sx = 2
	case image.YCbCrSubsampleRatio420:
		sx, sy = 2, 2
	case image.YCbCrSubsampleRatio440:
		sy = 2
	case image.YCbCrSubsampleRatio411:
		sx = 4
	case image.YCbCrSubsampleRatio410:
		sx, sy = 4, 2
	}
	// libjpeg's downsampled sizes: the planes Go returns are padded to
	// whole blocks, and libjpeg never reads the padding.
	cw, ch := (w+sx-1)/sx, (h+sy-1)/sy
	cOff := im.COffset(im.Rect.Min.X, im.Rect.Min.Y)
	cb := upsample(im.Cb[cOff:], im.CStride, cw, ch, w, h, sx, sy)
	cr := upsample(im.Cr[cOff:], im.CStride, cw, ch, w, h, sx, sy)
	for y := range h {
		yrow := im.Y[im.YOffset(im.Rect.Min.X, im.Rect.Min.Y+y):]
		for x := range w {
			r, g, b := libjpegRGB(int32(yrow[x]), int32(cb[y*w+x]), int32(cr[y*w+x]))
			p := out.Pix[3*(y*w+x):]
			p[0], p[1], p[2] = r, g, b
		}
	}
}

// libjpegRGB is jdcolor.c's ycc_rgb_convert: the JFIF coefficients as
// 16-bit fixed point (FIX(x) = round(x·2¹⁶)), each term rounded as
// libjpeg's tables round it.
func libjpegRGB(y, cb, cr int32) (uint8, uint8, uint8) {
	const (
		half   = 1 << 15
		crR    = 91881  // FIX(1.40200)
		cbB    = 116130 // FIX(1.77200)
		crG    = 46802  // FIX(0.71414)
		cbG    = 22554  // FIX(0.34414)
		shift  = 16
		center = 128
	)
	cb -= center
	cr -= center
	r := y + (crR*cr+half)>>shift
	g := y + (-cbG*cb+half-crG*cr)>>shift
	b := y + (cbB*cb+half)>>shift
	return clamp8(r), clamp8(g), clamp8(b)
}

func clamp8(v int32) uint8 {
	return uint8(min(max(v, 0), 255))
}

// upsample returns a chroma plane of cw×ch samples (row stride stride)
// brought to w×h as libjpeg-turbo's jdsample.c does for sampling factors
// sx×sy. Rows above and below the plane repeat its edge rows (libjpeg's
// context rows); the fancy filters' edge columns reduce to the same
// clamping.
func upsample(p []uint8, stride, cw, ch, w, h, sx, sy int) []uint8 {
	out := make([]uint8, w*h)
	at := func(i, j int) int32 {
		return int32(p[min(max(j, 0), ch-1)*stride+min(max(i, 0), cw-1)])
	}
	switch {
	case sx == 2 && sy == 1 && cw > 2:
		// h2v1: 3/4 of the nearer sample, 1/4 of the further, with
		// alternating rounding bias.
		for y := range h {
			for x := range w {
				i := x / 2
				if x%2 == 0 {
					out[y*w+x] = uint8((3*at(i, y) + at(i-1, y) + 1) >> 2)
				} else {
					out[y*w+x] = uint8((3*at(i, y) + at(i+1, y) + 2) >> 2)
				}
			}
		}
	case sx == 1 && sy == 2:
		// h1v2: the vertical half of h2v2, bias 1 above and 2 below.
		for y := range h {
			j, far, bias := y/2, y/2-1, int32(1)
			if y%2 == 1 {
				far, bias = y/2+1, 2
			}
			for x := range w {
				out[y*w+x] = uint8((3*at(x, j) + at(x, far) + bias) >> 2)
			}
		}
	case sx == 2 && sy == 2 && cw > 2:
		// h2v2: column sums of 3·nearer row + further row, then the
		// same 3:1 horizontally, in sixteenths.
		sum := make([]int32, cw)
		for y := range h {
			j, far := y/2, y/2-1
			if y%2 == 1 {
				far = y/2 + 1
			}
			for i := range sum {
				sum[i] = 3*at(i, j) + at(i, far)
			}
			s := func(i int) int32 { return sum[min(max(i, 0), cw-1)] }
			for x := range w {
				i := x / 2
				if x%2 == 0 {
					out[y*w+x] = uint8((3*s(i) + s(i-1) + 8) >> 4)
				} else {
					out[y*w+x] = uint8((3*s(i) + s(i+1) + 7) >> 4)
				}
			}
		}
	default:
		for y := range h {
			for x := range w {
				out[y*w+x] = uint8(at(x/sx, y/sy))
			}
		}
	}
	return out
}

// Package images reads, resizes, crops and writes 8-bit RGB pictures the way
// the Python tools of diffusion research do, so that latents encoded and
// scores computed here match theirs pixel for pixel:
//
//   - Decode turns a PNG, JPEG, BMP, TIFF, WebP or binary PPM/PGM file into
//     the pixels of PIL's Image.open(path).convert("RGB");
//   - Resize is PIL's Image.resize for the BOX, BILINEAR and BICUBIC
//     filters, bit for bit, and CenterCrop is ADM's (and DiT's)
//     center_crop_arr built on it;
//   - Walk lists a folder of images as torchvision's ImageFolder does (class
//     folders, labels, order), or a flat folder of samples, with optional
//     captions;
//   - Quantize, ToUnit, Grid and WritePNG turn model outputs into pictures as
//     DiT's sampling script does.
//
// Everything works on RGB, an image in height-width-channel byte order; the
// package knows nothing of latents or models.
package images

import (
	"fmt"
	"image"
	"image/png"
	"io"
	"math"

	"github.com/dcdit/dcdit/loaders/atomicfile"
)

// RGB is an 8-bit RGB image: row after row from the top, pixel after pixel
// from the left, three bytes (red, green, blue) a pixel.
type RGB struct {
	W, H int
	Pix  []uint8 // len 3·W·H
}

// NewRGB returns a black w×h image.
func NewRGB(w, h int) *RGB {
	return &RGB{W: w, H: h, Pix: make([]uint8, 3*w*h)}
}

// check reports an RGB whose fields disagree, which every function taking
// one refuses rather than index out of range.
func (m *RGB) check() error {
	if m == nil {
		return fmt.Errorf("images: nil image")
	}
	if m.W < 1 || m.H < 1 || len(m.Pix) != 3*m.W*m.H {
		return fmt.Errorf("images: image of %d×%d pixels holds %d bytes, want %d and both sides ≥ 1",
			m.W, m.H, len(m.Pix), 3*max(m.W, 0)*max(m.H, 0))
	}
	return nil
}

// FlipH returns m mirrored left to right (torchvision's RandomHorizontalFlip
// when it flips, and ADM's random_flip).
func FlipH(m *RGB) (*RGB, error) {
	if err := m.check(); err != nil {
		return nil, err
	}
	out := NewRGB(m.W, m.H)
	for y := range m.H {
		src := m.Pix[3*y*m.W : 3*(y+1)*m.W]
		dst := out.Pix[3*y*m.W : 3*(y+1)*m.W]
		for x := range m.W {
			copy(dst[3*(m.W-1-x):3*(m.W-x)], src[3*x:3*x+3])
		}
	}
	return out, nil
}

// Quantize turns model outputs in [−1, 1] into bytes as DiT's sample_ddp.py
// does, torch.clamp(127.5·x + 128, 0, 255).to(uint8): the float32 product
// and sum rounded separately, clamped, then truncated toward zero (so 0
// maps to 128, not 127). The layout is untouched: NHWC in, NHWC out. A NaN,
// which torch would leave to the platform's float-to-byte conversion,
// becomes 0.
func Quantize(x []float32) []uint8 {
	out := make([]uint8, len(x))
	for i, v := range x {
		// The explicit float32 conversion keeps the compiler from fusing
		// the multiply and add, which torch's eager kernels do not.
		s := float32(127.5*v) + 128
		switch {
		case !(s > 0): // also NaN
			out[i] = 0
		case s >= 255:
			out[i] = 255
		default:
			out[i] = uint8(s)
		}
	}
	return out
}

// ToUnit is torchvision's ToTensor for one byte: u/255 in float32.
func ToUnit(u uint8) float32 { return float32(u) / 255 }

// Grid tiles images, all of one size, cols to a row (the last row filled
// from the left) with pad black pixels between them and around the edge,
// as torchvision's make_grid(nrow=cols, padding=pad) lays them out; like
// make_grid, it returns a single image as it is, unpadded.
func Grid(ims []*RGB, cols, pad int) (*RGB, error) {
	if len(ims) == 0 || cols < 1 || pad < 0 {
		return nil, fmt.Errorf("images: grid of %d images, %d columns, padding %d: want ≥ 1 image, ≥ 1 column, padding ≥ 0", len(ims), cols, pad)
	}
	for i, m := range ims {
		if err := m.check(); err != nil {
			return nil, fmt.Errorf("images: grid image %d: %w", i, err)
		}
		if m.W != ims[0].W || m.H != ims[0].H {
			return nil, fmt.Errorf("images: grid image %d is %d×%d, want %d×%d like image 0", i, m.W, m.H, ims[0].W, ims[0].H)
		}
	}
	if len(ims) == 1 {
		return &RGB{W: ims[0].W, H: ims[0].H, Pix: append([]uint8(nil), ims[0].Pix...)}, nil
	}
	cols = min(cols, len(ims))
	rows := (len(ims) + cols - 1) / cols
	w, h := ims[0].W, ims[0].H
	gw, gh := cols*(w+pad)+pad, rows*(h+pad)+pad
	if gw > math.MaxInt32 || gh > math.MaxInt32 || int64(gw)*int64(gh) > maxPixels {
		return nil, fmt.Errorf("images: grid of %d×%d pixels is over the %d-pixel limit", gw, gh, maxPixels)
	}
	out := NewRGB(gw, gh)
	for i, m := range ims {
		x0, y0 := pad+i%cols*(w+pad), pad+i/cols*(h+pad)
		for y := range h {
			copy(out.Pix[3*((y0+y)*gw+x0):], m.Pix[3*y*w:3*(y+1)*w])
		}
	}
	return out, nil
}

// WritePNG writes m as an 8-bit RGB PNG at path, atomically: a reader sees
// the old file or the whole new one.
func WritePNG(path string, m *RGB) error {
	if err := m.check(); err != nil {
		return fmt.Errorf("images: %s: %w", path, err)
	}
	// An opaque RGBA makes image/png write colour type 2 (RGB, no alpha).
	im := image.NewRGBA(image.Rect(0, 0, m.W, m.H))
	for i := range m.W * m.H {
		im.Pix[4*i], im.Pix[4*i+1], im.Pix[4*i+2], im.Pix[4*i+3] = m.Pix[3*i], m.Pix[3*i+1], m.Pix[3*i+2], 255
	}
	if err := atomicfile.Write(path, func(w io.Writer) error { return png.Encode(w, im) }); err != nil {
		return fmt.Errorf("images: %w", err)
	}
	return nil
}

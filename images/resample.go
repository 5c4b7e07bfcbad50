package images

import (
	"fmt"
	"math"

	"github.com/dcdit/dcdit/kernels/parallel"
)

// Filter is a resampling filter of PIL's Image.resize.
type Filter int

// The filters Resize implements, named as PIL names them.
const (
	Box      Filter = iota // Image.BOX: each output pixel averages the input pixels it covers
	Bilinear               // Image.BILINEAR: triangle filter
	Bicubic                // Image.BICUBIC: Keys cubic with a = −0.5
)

func (f Filter) String() string {
	switch f {
	case Box:
		return "BOX"
	case Bilinear:
		return "BILINEAR"
	case Bicubic:
		return "BICUBIC"
	}
	return fmt.Sprintf("Filter(%d)", int(f))
}

// support is the filter's half-width in input pixels at scale 1.
func (f Filter) support() float64 {
	switch f {
	case Box:
		return 0.5
	case Bilinear:
		return 1
	}
	return 2
}

// weight evaluates the filter. Every product is converted explicitly so
// that the compiler cannot fuse it with the following add: PIL's C is
// built without contraction, and one ulp here can move a fixed-point
// coefficient.
func (f Filter) weight(x float64) float64 {
	switch f {
	case Box:
		if x > -0.5 && x <= 0.5 {
			return 1
		}
		return 0
	case Bilinear:
		x = math.Abs(x)
		if x < 1 {
			return 1 - x
		}
		return 0
	}
	const a = -0.5
	x = math.Abs(x)
	if x < 1 {
		p := float64((a+2)*x) - (a + 3)
		return float64(p*x*x) + 1
	}
	if x < 2 {
		p := float64((x-5)*x) + 8
		return (float64(p*x) - 4) * a
	}
	return 0
}

// precisionBits is the fixed-point precision of PIL's 8-bit resampling
// coefficients: 32 bits less 8 for the pixel and 2 for the overshoot of
// filters with negative lobes.
const precisionBits = 32 - 8 - 2

// taps holds, for each output pixel along one axis, the first input pixel
// it reads and the fixed-point weights of the ones it reads from there.
type taps struct {
	first []int
	k     [][]int32
}

// coefficients computes PIL's precompute_coeffs followed by its 8-bit
// normalisation for resizing in pixels to out along one axis.
func coefficients(in, out int, f Filter) taps {
	scale := float64(in) / float64(out)
	filterscale := max(scale, 1)
	support := f.support() * filterscale
	ss := 1 / filterscale
	t := taps{first: make([]int, out), k: make([][]int32, out)}
	w := make([]float64, 0, int(math.Ceil(support))*2+1)
	for xx := range out {
		center := (float64(xx) + 0.5) * scale
		// C's (int) truncates toward zero; a negative start is clamped
		// to 0 either way.
		xmin := max(int(center-support+0.5), 0)
		xmax := min(int(center+support+0.5), in)
		w = w[:0]
		sum := 0.0
		for x := xmin; x < xmax; x++ {
			v := f.weight((float64(x) - center + 0.5) * ss)
			w = append(w, v)
			sum += v
		}
		k := make([]int32, len(w))
		for i, v := range w {
			if sum != 0 {
				v /= sum
			}
			if v < 0 {
				k[i] = int32(-0.5 + v*(1<<precisionBits))
			} else {
				k[i] = int32(0.5 + v*(1<<precisionBits))
			}
		}
		t.first[xx], t.k[xx] = xmin, k
	}
	return t
}

// clip8 takes a fixed-point sum (with its rounding half already added) to
// a byte.
func clip8(s int32) uint8 {
	v := s >> precisionBits
	switch {
	case v < 0:
		return 0
	case v > 255:
		return 255
	}
	return uint8(v)
}

// Resize returns m resampled to w×h pixels as PIL's Image.resize((w, h),
// resample=f) computes it on an RGB image, bit for bit: separable fixed-
// point passes, horizontal first, each skipped when its side is unchanged
// (both skipped: a copy), the filter widened by the downscale factor so
// that every input pixel contributes.
func Resize(m *RGB, w, h int, f Filter) (*RGB, error) {
	if err := m.check(); err != nil {
		return nil, err
	}
	if w < 1 || h < 1 {
		return nil, fmt.Errorf("images: resize %d×%d to %d×%d: want both sides ≥ 1", m.W, m.H, w, h)
	}
	if f != Box && f != Bilinear && f != Bicubic {
		return nil, fmt.Errorf("images: resize with %v: want BOX, BILINEAR or BICUBIC", f)
	}
	if int64(w)*int64(h) > maxPixels {
		return nil, fmt.Errorf("images: resize %d×%d to %d×%d: over the %d-pixel limit", m.W, m.H, w, h, maxPixels)
	}
	return resize(m, w, h, f), nil
}

// resize is Resize on checked arguments.
func resize(m *RGB, w, h int, f Filter) *RGB {
	cur := m
	vert := coefficients(m.H, h, f)
	if w != m.W {
		// Only the rows the vertical pass reads are resampled, as PIL
		// does; the vertical taps are shifted to match.
		first := vert.first[0]
		last := vert.first[h-1] + len(vert.k[h-1])
		cur = horizontal(m, w, first, last, coefficients(m.W, w, f))
		for i := range vert.first {
			vert.first[i] -= first
		}
	}
	if h != m.H {
		cur = vertical(cur, h, vert)
	}
	if cur == m {
		cur = &RGB{W: m.W, H: m.H, Pix: append([]uint8(nil), m.Pix...)}
	}
	return cur
}

// rowGrain is the number of output rows worth a goroutine of their own.
const rowGrain = 16

// horizontal resamples rows [first, last) of m to width w.
func horizontal(m *RGB, w, first, last int, t taps) *RGB {
	out := NewRGB(w, last-first)
	parallel.For(last-first, rowGrain, func(lo, hi int) {
		for y := lo; y < hi; y++ {
			src := m.Pix[3*(y+first)*m.W : 3*(y+first+1)*m.W]
			dst := out.Pix[3*y*w : 3*(y+1)*w]
			for xx := range w {
				r, g, b := int32(1<<(precisionBits-1)), int32(1<<(precisionBits-1)), int32(1<<(precisionBits-1))
				p := src[3*t.first[xx]:]
				for i, k := range t.k[xx] {
					r += int32(p[3*i]) * k
					g += int32(p[3*i+1]) * k
					b += int32(p[3*i+2]) * k
				}
				dst[3*xx], dst[3*xx+1], dst[3*xx+2] = clip8(r), clip8(g), clip8(b)
			}
		}
	})
	return out
}

// vertical resamples m to height h; t's first rows index m.
func vertical(m *RGB, h int, t taps) *RGB {
	out := NewRGB(m.W, h)
	stride := 3 * m.W
	parallel.For(h, rowGrain, func(lo, hi int) {
		acc := make([]int32, stride)
		for yy := lo; yy < hi; yy++ {
			for i := range acc {
				acc[i] = 1 << (precisionBits - 1)
			}
			for i, k := range t.k[yy] {
				row := m.Pix[(t.first[yy]+i)*stride : (t.first[yy]+i+1)*stride]
				for j, v := range row {
					acc[j] += int32(v) * k
				}
			}
			dst := out.Pix[yy*stride : (yy+1)*stride]
			for j, s := range acc {
				dst[j] = clip8(s)
			}
		}
	})
	return out
}

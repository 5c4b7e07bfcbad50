package inception

import (
	"math"

	"github.com/dcdit/dcdit/kernels/parallel"
)

// The resize reproduces PyTorch's CPU kernel for F.interpolate(x, (299,
// 299), mode="bilinear", align_corners=False) bit for bit, as pytorch-fid
// runs it on float32 images: the width axis is interpolated first, then the
// height axis, each output value being one float32 fused multiply-add
// fma(v0, λ0, v1·λ1) of its two neighbours; sizes that already match are
// copied. Plain float32 arithmetic without the fused step differs in the
// last bit for about a quarter of the pixels.

// axisPlan maps the InputSize output samples of one axis to the two input
// samples each one reads and their weights.
type axisPlan struct {
	i0, i1 []int
	l0, l1 []float32
}

// planAxis computes PyTorch's source indices and weights for resizing an
// axis of n samples to InputSize: the scale is a float32 quotient, the
// source coordinate is computed in float64 and clamped at 0, and the
// weights are rounded to float32 with λ0 = 1 − λ1 in float32.
func planAxis(n int) axisPlan {
	p := axisPlan{i0: make([]int, InputSize), i1: make([]int, InputSize), l0: make([]float32, InputSize), l1: make([]float32, InputSize)}
	scale := float64(float32(n) / float32(InputSize))
	for d := range InputSize {
		src := max(scale*(float64(d)+0.5)-0.5, 0)
		i0 := int(src)
		p.i0[d] = i0
		p.i1[d] = min(i0+1, n-1)
		p.l1[d] = float32(src - float64(i0))
		p.l0[d] = 1 - p.l1[d]
	}
	return p
}

// fma32 returns a·b + c rounded once to float32, which is what a float32
// fused multiply-add instruction computes (Go's math.FMA is float64 and
// rounding its result again to float32 could round twice). The product of
// two float32 values is exact in float64; the float64 sum s and its
// rounding error e (Knuth's two-sum) are then exact as well. Rounding the
// exact sum to odd at float64 precision (s, or its neighbour towards e
// when s's last bit is even) and then to nearest float32 is a correct
// single rounding, because float64 carries more than the two extra bits
// that needs.
func fma32(a, b, c float32) float32 {
	p := float64(a) * float64(b)
	s := p + float64(c)
	v := s - p
	e := (p - (s - v)) + (float64(c) - v)
	if e != 0 {
		bits := math.Float64bits(s)
		if bits&1 == 0 {
			if (e > 0) == (s > 0) {
				bits++
			} else {
				bits--
			}
			s = math.Float64frombits(bits)
		}
	}
	return float32(s)
}

// resizer resizes images of one size to the network's input.
type resizer struct {
	h, w   int
	px, py axisPlan
	lut    *[256]float32 // uint8 → float32, as torchvision's ToTensor
}

// newResizer prepares the resize of h×w images.
func newResizer(h, w int) *resizer {
	r := &resizer{h: h, w: w}
	if h != InputSize || w != InputSize {
		r.px, r.py = planAxis(w), planAxis(h)
	}
	r.lut = new([256]float32)
	for u := range r.lut {
		// A true division: u·(1/255) differs in the last bit for half the values.
		r.lut[u] = float32(u) / 255
	}
	return r
}

// tmpLen is the scratch the resize of one image needs.
func (r *resizer) tmpLen() int {
	if r.h == InputSize && r.w == InputSize {
		return 0
	}
	return r.h * InputSize * 3
}

// image resizes one h×w×3 image, given as float32 (f32) or uint8 (u8,
// scaled by 1/255), to dst (299×299×3) and maps it to 2x − 1. tmp holds
// tmpLen values.
func (r *resizer) image(dst []float32, f32 []float32, u8 []uint8, tmp []float32) {
	const out = InputSize * 3
	rowLen := r.w * 3
	// row returns input row i as float32, converting uint8 into buf.
	row := func(i int, buf []float32) []float32 {
		if f32 != nil {
			return f32[i*rowLen : (i+1)*rowLen]
		}
		src := u8[i*rowLen : (i+1)*rowLen]
		for k, u := range src {
			buf[k] = r.lut[u]
		}
		return buf
	}
	if r.h == InputSize && r.w == InputSize {
		parallel.For(InputSize, 32, func(lo, hi int) {
			buf := make([]float32, rowLen)
			for i := lo; i < hi; i++ {
				src := row(i, buf)
				d := dst[i*out : (i+1)*out]
				for k, v := range src {
					d[k] = 2*v - 1
				}
			}
		})
		return
	}
	px, py := &r.px, &r.py
	parallel.For(r.h, 16, func(lo, hi int) {
		buf := make([]float32, rowLen)
		for i := lo; i < hi; i++ {
			src := row(i, buf)
			t := tmp[i*out : (i+1)*out]
			for j := range InputSize {
				a, b := src[3*px.i0[j]:3*px.i0[j]+3], src[3*px.i1[j]:3*px.i1[j]+3]
				l0, l1 := px.l0[j], px.l1[j]
				o := t[3*j : 3*j+3]
				for c := range 3 {
					o[c] = fma32(a[c], l0, float32(b[c]*l1))
				}
			}
		}
	})
	parallel.For(InputSize, 16, func(lo, hi int) {
		for d := lo; d < hi; d++ {
			a, b := tmp[py.i0[d]*out:(py.i0[d]+1)*out], tmp[py.i1[d]*out:(py.i1[d]+1)*out]
			l0, l1 := py.l0[d], py.l1[d]
			o := dst[d*out : (d+1)*out]
			for k := range o {
				o[k] = 2*fma32(a[k], l0, float32(b[k]*l1)) - 1
			}
		}
	})
}

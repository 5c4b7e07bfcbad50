package qwen3

import (
	"math"

	"github.com/dcdit/dcdit/kernels/parallel"
)

// invFreq is transformers' default RoPE inv_freq [hd/2] as torch computes
// it in float32: 1 / θ^(float32(2i)/hd). The power is rounded once from
// float64, which is what torch's float32 pow delivers to within an ulp.
func invFreq(theta float64, hd int) []float32 {
	out := make([]float32, hd/2)
	for i := range out {
		e := float32(2*i) / float32(hd)
		out[i] = 1 / float32(math.Pow(theta, float64(e)))
	}
	return out
}

// ropeTables returns cos and sin [n, hd] for positions 0..n−1 in the
// rotate-half layout, cos(cat(f, f)) with f = p·inv_freq: the angle is
// the float32 product, as torch forms it, so that large positions keep
// the reference's rounding; cos and sin are then evaluated exactly and
// rounded once.
func ropeTables(inv []float32, n int) (cos, sin []float32) {
	half := len(inv)
	hd := 2 * half
	cos, sin = make([]float32, n*hd), make([]float32, n*hd)
	for p := range n {
		for i, f := range inv {
			a := float64(float32(p) * f)
			c, s := float32(math.Cos(a)), float32(math.Sin(a))
			cos[p*hd+i], cos[p*hd+half+i] = c, c
			sin[p*hd+i], sin[p*hd+half+i] = s, s
		}
	}
	return cos, sin
}

// rotate applies RoPE in place to x [rows, heads·hd], row r at position
// pos[r]: x·cos + rotate_half(x)·sin with rotate_half(x) = cat(−x₂, x₁)
// over the head's halves.
func rotate(x, cos, sin []float32, pos []int, heads, hd int) {
	half, width := hd/2, heads*hd
	parallel.For(len(pos), max(1, 4096/width), func(lo, hi int) {
		for r := lo; r < hi; r++ {
			c, s := cos[pos[r]*hd:(pos[r]+1)*hd], sin[pos[r]*hd:(pos[r]+1)*hd]
			for h := range heads {
				v := x[r*width+h*hd : r*width+(h+1)*hd]
				for i := range half {
					a, b := v[i], v[i+half]
					v[i] = a*c[i] - b*s[i]
					v[i+half] = b*c[i+half] + a*s[i+half]
				}
			}
		}
	})
}

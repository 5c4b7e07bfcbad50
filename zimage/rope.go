package zimage

import "math"

// Rope holds the 3-axis rotary embedding of Z-Image's RopeEmbedder: head
// dimensions [0, d₀) rotate with position axis 0 (caption index, or frame
// after the caption), the next d₁ with axis 1 (token row), the last d₂ with
// axis 2 (token column), in interleaved pairs.
type Rope struct {
	AxesDims []int
	Theta    float64
}

// HeadDim is the head width the axes cover.
func (r Rope) HeadDim() int {
	n := 0
	for _, d := range r.AxesDims {
		n += d
	}
	return n
}

// Freqs writes the rotary factors of len(pos)/3 tokens into dst
// ([tokens, HeadDim], each pair (cos, sin), the layout of the reference's
// freqs_cis viewed as real): token n sits at (pos[3n], pos[3n+1],
// pos[3n+2]), real numbers, so that tokens may sit between grid points.
// As the reference builds its tables, each angle is pos·ω in float64 with
// ω = 1/θ^(2k/d), rounded to float32, and its cosine and sine are float32:
// at integer positions the factors are the reference's table entries.
func (r Rope) Freqs(dst []float32, pos []float64) {
	hd := r.HeadDim()
	for n := range len(pos) / 3 {
		row := dst[n*hd : (n+1)*hd]
		at := 0
		for axis, d := range r.AxesDims {
			p := pos[3*n+axis]
			for k := 0; k < d; k += 2 {
				omega := 1 / math.Pow(r.Theta, float64(k)/float64(d))
				angle := float64(float32(p * omega))
				row[at+k] = float32(math.Cos(angle))
				row[at+k+1] = float32(math.Sin(angle))
			}
			at += d
		}
	}
}

// AxisTable returns the reference's precomputed table of one axis for
// positions 0..n−1: [n, d/2, 2] (cos, sin), what Freqs gives at integer
// positions on that axis alone.
func (r Rope) AxisTable(axis, n int) []float32 {
	one := Rope{AxesDims: []int{r.AxesDims[axis]}, Theta: r.Theta}
	out := make([]float32, n*r.AxesDims[axis])
	pos := make([]float64, 3*n)
	for i := range n {
		pos[3*i] = float64(i)
	}
	one.Freqs(out, pos)
	return out
}

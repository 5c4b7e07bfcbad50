package dit

import "math"

// PosEmbed2D writes the fixed 2-D sin-cos position embedding of a token at
// grid row i and column j (possibly fractional) into dst (len D, D % 4 == 0),
// as MAE's get_2d_sincos_pos_embed builds DiT's pos_embed: the first D/2
// dimensions encode the column, the last D/2 the row; each half is
// [sin(p·ω_k) ; cos(p·ω_k)] with ω_k = 10000^(−k/(D/4)), in float64.
func PosEmbed2D(dst []float32, row, col float64) {
	half := len(dst) / 2
	sinCos1D(dst[:half], col)
	sinCos1D(dst[half:], row)
}

func sinCos1D(dst []float32, pos float64) {
	sinCosAt(dst, pos, frequencies(len(dst)/2))
}

// frequencies are the ω_k = 10000^(−k/q) of a q-frequency half.
func frequencies(q int) []float64 {
	omega := make([]float64, q)
	for k := range omega {
		omega[k] = 1 / math.Pow(10000, float64(k)/float64(q))
	}
	return omega
}

// sinCosAt writes [sin(pos·ω) ; cos(pos·ω)] into dst (len 2·len(omega)).
func sinCosAt(dst []float32, pos float64, omega []float64) {
	q := len(omega)
	for k, w := range omega {
		s, c := math.Sincos(pos * w)
		dst[k], dst[q+k] = float32(s), float32(c)
	}
}

// PosEmbedGrid writes the embedding of every token of a grid×grid layout in
// row-major token order (token n = i·grid + j): dst is [grid², D].
func PosEmbedGrid(dst []float32, grid, d int) {
	for i := range grid {
		for j := range grid {
			n := i*grid + j
			PosEmbed2D(dst[n*d:(n+1)*d], float64(i), float64(j))
		}
	}
}

// TimestepFrequencies writes the sinusoidal timestep features of DiT's
// TimestepEmbedder for each t into dst ([len(t), dim]): [cos(t·f_k) ;
// sin(t·f_k)] with f_k = exp(−ln(10000)·k/(dim/2)). The frequencies and
// the products are float32, as the reference computes them, which differs
// from a float64 evaluation by up to ~3e-5 at t ≈ 1000.
func TimestepFrequencies(dst []float32, t []float32, dim int) {
	half := dim / 2
	// Each step rounds to float32 in the reference's order:
	// exp((−ln 10000 · k) / half).
	negLog := float32(-math.Log(10000))
	for b, tb := range t {
		row := dst[b*dim : (b+1)*dim]
		for k := range half {
			f := float32(math.Exp(float64(negLog * float32(k) / float32(half))))
			arg := tb * f
			s, c := math.Sincos(float64(arg))
			row[k], row[half+k] = float32(c), float32(s)
		}
		if dim%2 == 1 {
			row[dim-1] = 0
		}
	}
}

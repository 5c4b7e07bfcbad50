// Package posembed holds the fixed sinusoidal embeddings of DiT-style
// transformers: the 2-D sin-cos position table (MAE's
// get_2d_sincos_pos_embed, as DiT builds pos_embed), evaluated at any
// real-valued grid position, on a patch grid or packed per token, and the
// timestep frequencies of DiT's TimestepEmbedder. DiT, DC-DiT's main
// network, Z-Image's grid mapping and the converters share them.
package posembed

import (
	"math"

	"github.com/dcdit/dcdit/kernels/parallel"
)

// SinCos2D writes the fixed 2-D sin-cos position embedding of a token at
// grid row i and column j (possibly fractional) into dst (len D, D % 4 == 0),
// as MAE's get_2d_sincos_pos_embed builds DiT's pos_embed: the first D/2
// dimensions encode the column, the last D/2 the row; each half is
// [sin(p·ω_k) ; cos(p·ω_k)] with ω_k = 10000^(−k/(D/4)), in float64.
func SinCos2D(dst []float32, row, col float64) {
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

// SinCosGrid writes the embedding of every token of a grid×grid layout in
// row-major token order (token n = i·grid + j): dst is [grid², D].
func SinCosGrid(dst []float32, grid, d int) {
	for i := range grid {
		for j := range grid {
			n := i*grid + j
			SinCos2D(dst[n*d:(n+1)*d], float64(i), float64(j))
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

// GridPos maps a latent-grid coordinate v to the grid of a position table
// trained on patches of side p: a latent cell is embedded at the position
// of its centre, (v + ½)/p − ½, so the pretrained frequencies keep their
// meaning. p ≤ 1 (a table on the latent grid itself) leaves v as it is.
func GridPos(v float64, p int) float64 {
	if p <= 1 {
		return v
	}
	q := float64(p)
	return (v+0.5)/q - 0.5
}

// Packed returns the 2-D sin-cos embedding [N, d] of the N tokens
// whose latent-grid rows and columns pos holds (pos[2r], pos[2r+1]),
// evaluated on the grid of patch size p (GridPos).
//
// Every forward pass builds it, for every token of the batch, so it is
// built from the distinct coordinates: a batch repeats each sample's grid
// rows and columns (and a DC model's chunk positions often coincide), and
// each half of a token's embedding depends on one coordinate alone. The
// values are those SinCos2D writes, bit for bit.
func Packed(pos []float64, d, p int) []float32 {
	n := len(pos) / 2
	half := d / 2
	slot := make(map[float64]int, 64) // coordinate → its half in halves
	var coords []float64
	at := make([]int, 2*n) // token r's column half, then its row half
	for r := range n {
		for k, v := range [2]float64{GridPos(pos[2*r+1], p), GridPos(pos[2*r], p)} {
			i, ok := slot[v]
			if !ok {
				i = len(coords)
				slot[v] = i
				coords = append(coords, v)
			}
			at[2*r+k] = i
		}
	}
	omega := frequencies(half / 2)
	halves := make([]float32, len(coords)*half)
	parallel.For(len(coords), 16, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			sinCosAt(halves[i*half:(i+1)*half], coords[i], omega)
		}
	})
	pe := make([]float32, n*d)
	parallel.For(n, 256, func(lo, hi int) {
		for r := lo; r < hi; r++ {
			copy(pe[r*d:r*d+half], halves[at[2*r]*half:])
			copy(pe[r*d+half:(r+1)*d], halves[at[2*r+1]*half:])
		}
	})
	return pe
}

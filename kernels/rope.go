package kernels

import (
	"github.com/dcdit/dcdit/kernels/gemm"
	"github.com/dcdit/dcdit/kernels/parallel"
)

// RoPEForward rotates the interleaved pairs of x [rows, heads·dim] by the
// per-row factors freqs [rows, dim] (cos, sin of each pair's angle, shared
// by the heads): y[2i] + i·y[2i+1] = (x[2i] + i·x[2i+1])·(c + i·s). Rows
// run in parallel.
func RoPEForward[T gemm.Float](y, x, freqs []T, rows, heads, dim int) {
	width := heads * dim
	ewNeedDims("RoPEForward", rows, width)
	ewNeedLen("RoPEForward", "x", len(x), rows*width)
	ewNeedLen("RoPEForward", "y", len(y), rows*width)
	ewNeedLen("RoPEForward", "freqs", len(freqs), rows*dim)
	parallel.For(rows, ewRowGrain(width), func(lo, hi int) {
		for r := lo; r < hi; r++ {
			fq := freqs[r*dim : (r+1)*dim]
			for h := range heads {
				o := r*width + h*dim
				xr, yr := x[o:o+dim], y[o:o+dim]
				for i := 0; i < dim; i += 2 {
					c, s := fq[i], fq[i+1]
					a, b := xr[i], xr[i+1]
					yr[i] = a*c - b*s
					yr[i+1] = a*s + b*c
				}
			}
		}
	})
}

// RoPEBackward computes, from dy, dx (the conjugate rotation) and dfreqs
// (the sum over heads of dy·conj(x) in the same pairing, overwritten);
// either may be nil. Rows run in parallel.
func RoPEBackward[T gemm.Float](dx, dfreqs, dy, x, freqs []T, rows, heads, dim int) {
	width := heads * dim
	ewNeedDims("RoPEBackward", rows, width)
	ewNeedLen("RoPEBackward", "dy", len(dy), rows*width)
	ewNeedLen("RoPEBackward", "x", len(x), rows*width)
	ewNeedLen("RoPEBackward", "freqs", len(freqs), rows*dim)
	if dx != nil {
		ewNeedLen("RoPEBackward", "dx", len(dx), rows*width)
	}
	if dfreqs != nil {
		ewNeedLen("RoPEBackward", "dfreqs", len(dfreqs), rows*dim)
	}
	parallel.For(rows, ewRowGrain(width), func(lo, hi int) {
		for r := lo; r < hi; r++ {
			fq := freqs[r*dim : (r+1)*dim]
			var df []T
			if dfreqs != nil {
				df = dfreqs[r*dim : (r+1)*dim]
				clear(df)
			}
			for h := range heads {
				o := r*width + h*dim
				g, xr := dy[o:o+dim], x[o:o+dim]
				for i := 0; i < dim; i += 2 {
					c, s := fq[i], fq[i+1]
					if dx != nil {
						dx[o+i] = g[i]*c + g[i+1]*s
						dx[o+i+1] = g[i+1]*c - g[i]*s
					}
					if df != nil {
						df[i] += g[i]*xr[i] + g[i+1]*xr[i+1]
						df[i+1] += g[i+1]*xr[i] - g[i]*xr[i+1]
					}
				}
			}
		}
	})
}

package kernels

import (
	"fmt"
	"math"

	"github.com/dcdit/dcdit/kernels/gemm"
	"github.com/dcdit/dcdit/kernels/parallel"
)

// DeChunkEps is added to each row's total weight before normalising
// (DC-DiT's DeChunkLayer: weights / (weights.sum(-1) + 1e-8)).
const DeChunkEps = 1e-8

// DeChunkScratch is the scratch length DeChunkForward and DeChunkBackward
// need for packed samples with the given offsets and width cols.
func DeChunkScratch(offsets []int, cols int) int {
	m := 0
	for s := 1; s < len(offsets); s++ {
		m = max(m, offsets[s]-offsets[s-1])
	}
	return m*m + 2*m*cols + m
}

// deChunkNeed panics unless the packed shapes agree.
func deChunkNeed(kernel string, offsets []int, rows, cols int, pos []float64, n ...int) {
	if cols < 1 {
		panic(fmt.Sprintf("kernels: %s: cols = %d, want ≥ 1", kernel, cols))
	}
	if len(offsets) == 0 || offsets[0] != 0 || offsets[len(offsets)-1] != rows {
		panic(fmt.Sprintf("kernels: %s: offsets %v do not run from 0 to %d rows", kernel, offsets, rows))
	}
	for s := 1; s < len(offsets); s++ {
		if offsets[s] < offsets[s-1] {
			panic(fmt.Sprintf("kernels: %s: offsets decrease at %d", kernel, s))
		}
	}
	if len(pos) != 2*rows {
		panic(fmt.Sprintf("kernels: %s: pos has %d values, want 2·%d (row, column per token)", kernel, len(pos), rows))
	}
	for _, l := range n {
		if l != rows && l != rows*cols {
			panic(fmt.Sprintf("kernels: %s: a slice has length %d, want %d or %d", kernel, l, rows, rows*cols))
		}
	}
}

// deChunkKernel writes K_ij = exp(−((r_i−r_j)² + (c_i−c_j)²) / (2σ²)) for
// the m tokens of one sample into k [m, m], with the squared distance and
// the quotient rounded to T as the reference computes them in float32.
func deChunkKernel[T gemm.Float](k []T, pos []float64, m int, sigma float64) {
	den := T(2 * sigma * sigma)
	parallel.For(m, 64, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			ri, ci := pos[2*i], pos[2*i+1]
			for j := range m {
				dr, dc := T(ri-pos[2*j]), T(ci-pos[2*j+1])
				d2 := dr*dr + dc*dc
				k[i*m+j] = T(math.Exp(float64(-d2 / den)))
			}
		}
	})
}

// DeChunkForward computes DC-DiT's confidence-weighted Gaussian smoothing
// of packed kept tokens h [rows, cols] (sample s owns rows offsets[s] to
// offsets[s+1]−1; token i sits at grid position (pos[2i], pos[2i+1])):
//
//	q_j = clamp(p_j, pmin, pmax)
//	W_ij = K_ij·q_j / (Σ_j' K_ij'·q_j' + DeChunkEps)   (j, j' in i's sample)
//	s_i = Σ_j W_ij·h_j
//	y_i = q_i·h_i + (1 − q_i)·s_i
//
// It saves q, z (the per-row denominators) and s [rows, cols] for the
// backward pass. ws holds DeChunkScratch(offsets, cols) elements.
func DeChunkForward[T gemm.Float](y, q, z, s, h, p []T, pos []float64, offsets []int, rows, cols int, sigma, pmin, pmax float64, ws []T) {
	deChunkNeed("DeChunkForward", offsets, rows, cols, pos, len(y), len(q), len(z), len(s), len(h), len(p))
	for i, v := range p {
		q[i] = min(max(v, T(pmin)), T(pmax))
	}
	for b := 1; b < len(offsets); b++ {
		o, m := offsets[b-1], offsets[b]-offsets[b-1]
		if m == 0 {
			continue
		}
		k := ws[:m*m]
		deChunkKernel(k, pos[2*o:2*(o+m)], m, sigma)
		qs, zs := q[o:o+m], z[o:o+m]
		parallel.For(m, 64, func(lo, hi int) {
			for i := lo; i < hi; i++ {
				row := k[i*m : (i+1)*m]
				var tot T
				for j := range m {
					row[j] *= qs[j]
					tot += row[j]
				}
				zs[i] = tot + T(DeChunkEps)
				for j := range m {
					row[j] /= zs[i]
				}
			}
		})
		ss := s[o*cols : (o+m)*cols]
		gemm.Gemm(false, false, m, cols, m, 1, k, m, h[o*cols:], cols, 0, ss, cols)
		parallel.For(m, 64, func(lo, hi int) {
			for i := lo; i < hi; i++ {
				qi := qs[i]
				for c := range cols {
					r := (o+i)*cols + c
					y[r] = qi*h[r] + (1-qi)*s[r]
				}
			}
		})
	}
}

// DeChunkBackward is the gradient of DeChunkForward: given dy it writes dh
// [rows, cols] and dp [rows] (either may be nil), from the saved q, z and s.
// The gradient of p is zero where the clamp is active (p outside
// [pmin, pmax]), as PyTorch's clamp passes it only inside the closed range.
func DeChunkBackward[T gemm.Float](dh, dp, dy, h, p, q, z, s []T, pos []float64, offsets []int, rows, cols int, sigma, pmin, pmax float64, ws []T) {
	deChunkNeed("DeChunkBackward", offsets, rows, cols, pos, len(dy), len(h), len(p), len(q), len(z), len(s))
	if dh == nil && dp == nil {
		return
	}
	for b := 1; b < len(offsets); b++ {
		o, m := offsets[b-1], offsets[b]-offsets[b-1]
		if m == 0 {
			continue
		}
		k, u := ws[:m*m], ws[m*m:m*m+m*cols]
		ku, beta := ws[m*m+m*cols:m*m+2*m*cols], ws[m*m+2*m*cols:m*m+2*m*cols+m]
		deChunkKernel(k, pos[2*o:2*(o+m)], m, sigma)
		// u_i = (1 − q_i)·dy_i / z_i: the gradient of s_i over its
		// denominator.
		parallel.For(m, 64, func(lo, hi int) {
			for i := lo; i < hi; i++ {
				f := (1 - q[o+i]) / z[o+i]
				for c := range cols {
					u[i*cols+c] = f * dy[(o+i)*cols+c]
				}
			}
		})
		// beta_i = <u_i, s_i>, computed before u is overwritten by K·u.
		for i := range m {
			var acc T
			for c := range cols {
				acc += u[i*cols+c] * s[(o+i)*cols+c]
			}
			beta[i] = acc
		}
		gemm.Gemm(false, false, m, cols, m, 1, k, m, u, cols, 0, ku, cols) // K symmetric
		parallel.For(m, 64, func(lo, hi int) {
			for i := lo; i < hi; i++ {
				r := o + i
				qi := q[r]
				var gq T
				for c := range cols {
					e := r*cols + c
					g, hv := dy[e], h[e]
					if dh != nil {
						dh[e] = qi*g + qi*ku[i*cols+c]
					}
					gq += g*(hv-s[e]) + ku[i*cols+c]*hv
				}
				if dp == nil {
					continue
				}
				row := k[i*m : (i+1)*m]
				for j := range m {
					gq -= row[j] * beta[j]
				}
				if p[r] < T(pmin) || p[r] > T(pmax) {
					gq = 0
				}
				dp[r] = gq
			}
		})
	}
}

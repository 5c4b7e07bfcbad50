package kernels

import (
	"math"

	"github.com/dcdit/dcdit/kernels/gemm"
	"github.com/dcdit/dcdit/kernels/parallel"
)

// GroupNorm followed by SiLU, the pre-activation of every conv block and
// of DC-DiT's router, fused: the statistics take two passes over each
// sample's rows with per-channel float64 accumulators (the channels of a
// row are contiguous, where a group's are a short strided run), and
// normalisation, affine and SiLU one more, writing the output once.
// Backward recomputes the normalised values and the sigmoid instead of
// keeping them.

// GroupNormSiLUForward sets y = SiLU(GroupNorm(x)) for x [batch·tokens,
// channels]: per (sample, group) the mean and variance over tokens ×
// channels/groups values, ẑ = (x − mean)·rstd, z = ẑ·w + b per channel,
// y = z·σ(z). mean and rstd ([batch·groups], either may be nil) receive the
// statistics, as GroupNormForward's.
func GroupNormSiLUForward[T gemm.Float](y, mean, rstd, x, w, b []T, batch, tokens, channels, groups int, eps T) {
	cpg, n := groupNormForwardArgs("GroupNormSiLUForward", y, mean, rstd, x, w, b, batch, tokens, channels, groups)
	if n == 0 {
		return
	}
	// Per sample and channel: the group's mean, rstd·w and b, the vectors
	// the fused loop reads beside each row.
	mc, sc, bc := make([]T, batch*channels), make([]T, batch*channels), make([]T, batch*channels)
	parallel.For(batch, 1, func(lo, hi int) {
		acc := make([]float64, channels)
		for s := lo; s < hi; s++ {
			ms, rs := groupStats(acc, x[s*tokens*channels:(s+1)*tokens*channels], tokens, channels, cpg, float64(eps))
			for g := range groups {
				mt, rt := T(ms[g]), T(rs[g])
				if mean != nil {
					mean[s*groups+g] = mt
				}
				if rstd != nil {
					rstd[s*groups+g] = rt
				}
				for c := g * cpg; c < (g+1)*cpg; c++ {
					mc[s*channels+c], sc[s*channels+c], bc[s*channels+c] = mt, rt*w[c], b[c]
				}
			}
		}
	})
	parallel.For(batch*tokens, max(1, actGrain/channels), func(lo, hi int) {
		for r := lo; r < hi; r++ {
			s := r / tokens
			o := s * channels
			siluAffine(y[r*channels:(r+1)*channels], x[r*channels:(r+1)*channels], mc[o:o+channels], sc[o:o+channels], bc[o:o+channels])
		}
	})
}

// groupStats returns the mean and 1/√(variance + eps) of each group of one
// sample's rows xs [tokens, channels], accumulating per channel in acc
// (channels float64 scratch): two passes, the second over squared
// deviations from the mean, as GroupNormForward computes them.
func groupStats[T gemm.Float](acc []float64, xs []T, tokens, channels, cpg int, eps float64) (mean, rstd []float64) {
	groups := channels / cpg
	count := float64(tokens * cpg)
	clear(acc)
	for r := range tokens {
		row := xs[r*channels : (r+1)*channels]
		for c, v := range row[:len(acc)] {
			acc[c] += float64(v)
		}
	}
	mean, rstd = make([]float64, groups), make([]float64, groups)
	for g := range groups {
		var s float64
		for _, v := range acc[g*cpg : (g+1)*cpg] {
			s += v
		}
		if count > 0 {
			mean[g] = s / count
		}
	}
	clear(acc)
	for r := range tokens {
		row := xs[r*channels : (r+1)*channels]
		for g := range groups {
			m := mean[g]
			a := acc[g*cpg : (g+1)*cpg]
			for c, v := range row[g*cpg : (g+1)*cpg] {
				d := float64(v) - m
				a[c] += d * d
			}
		}
	}
	for g := range groups {
		var s float64
		for _, v := range acc[g*cpg : (g+1)*cpg] {
			s += v
		}
		var v float64
		if count > 0 {
			v = s / count
		}
		rstd[g] = 1 / math.Sqrt(v+eps)
	}
	return mean, rstd
}

// siluAffine sets y = z·σ(z) for z = (x − m)·s + b, element by element.
func siluAffine[T gemm.Float](y, x, m, s, b []T) {
	n := len(y)
	x, m, s, b = x[:n], m[:n], s[:n], b[:n]
	i := 0
	if siluAsm && n >= 8 && !actPrecise[T]() {
		i = n &^ 7
		siluAffineAVX2(f32p(y), f32p(x), f32p(m), f32p(s), f32p(b), i)
	}
	for ; i < n; i++ {
		z := (x[i]-m[i])*s[i] + b[i]
		if actPrecise[T]() {
			e, q := actExp2d(-math.Log2E * float64(z))
			y[i] = T(float64(z) / (1 + e*(1+q)))
			continue
		}
		e, q := actExp2f(-math.Log2E * float32(z))
		y[i] = T(float32(z) / (1 + e*(1+q)))
	}
}

// GroupNormSiLUBackward computes the gradients of GroupNormSiLUForward from
// dy, given x, w, b and the saved mean and rstd. With dz = dy·σ(z)·(1 +
// z·(1 − σ(z))) (recomputed), it is GroupNormBackward of dz: dx =
// rstd·(w∘dz − mean(w∘dz) − ẑ·mean(w∘dz∘ẑ)) per (sample, group), dw = Σ
// dz∘ẑ and db = Σ dz over all rows. Any of dx, dw, db may be nil; they are
// overwritten.
func GroupNormSiLUBackward[T gemm.Float](dx, dw, db, dy, x, mean, rstd, w, b []T, batch, tokens, channels, groups int) {
	cpg := groupNormShape("GroupNormSiLUBackward", batch, tokens, channels, groups)
	n := batch * tokens * channels
	ewNeedLen("GroupNormSiLUBackward", "dy", len(dy), n)
	ewNeedLen("GroupNormSiLUBackward", "x", len(x), n)
	ewNeedLen("GroupNormSiLUBackward", "w", len(w), channels)
	ewNeedLen("GroupNormSiLUBackward", "b", len(b), channels)
	ewNeedLen("GroupNormSiLUBackward", "mean", len(mean), batch*groups)
	ewNeedLen("GroupNormSiLUBackward", "rstd", len(rstd), batch*groups)
	if dx != nil {
		ewNeedLen("GroupNormSiLUBackward", "dx", len(dx), n)
	}
	if dw != nil {
		ewNeedLen("GroupNormSiLUBackward", "dw", len(dw), channels)
	}
	if db != nil {
		ewNeedLen("GroupNormSiLUBackward", "db", len(db), channels)
	}
	// Per-sample sums of dz and dz·ẑ per channel, added in sample order
	// at the end so that results do not depend on scheduling.
	sumDz, sumDzX := make([]float64, batch*channels), make([]float64, batch*channels)
	count := float64(tokens * cpg)
	parallel.For(batch, 1, func(lo, hi int) {
		var dzRow []T
		if dx == nil {
			dzRow = make([]T, channels)
		}
		mg, sg := make([]float64, groups), make([]float64, groups)
		for s := lo; s < hi; s++ {
			a, ax := sumDz[s*channels:(s+1)*channels], sumDzX[s*channels:(s+1)*channels]
			ms, rs := mean[s*groups:(s+1)*groups], rstd[s*groups:(s+1)*groups]
			for r := s * tokens; r < (s+1)*tokens; r++ {
				xr, dyr := x[r*channels:(r+1)*channels], dy[r*channels:(r+1)*channels]
				dz := dzRow
				if dx != nil {
					dz = dx[r*channels : (r+1)*channels]
				}
				for c := range channels {
					g := c / cpg
					xh := (xr[c] - ms[g]) * rs[g]
					z := xh*w[c] + b[c]
					sig := sigmoidOf(z)
					d := dyr[c] * sig * (1 + z*(1-sig))
					dz[c] = d
					a[c] += float64(d)
					ax[c] += float64(d) * float64(xh)
				}
			}
			if dx == nil {
				continue
			}
			for g := range groups {
				var sa, sax float64
				for c := g * cpg; c < (g+1)*cpg; c++ {
					sa += float64(w[c]) * a[c]
					sax += float64(w[c]) * ax[c]
				}
				mg[g], sg[g] = sa/count, sax/count
			}
			for r := s * tokens; r < (s+1)*tokens; r++ {
				xr, dxr := x[r*channels:(r+1)*channels], dx[r*channels:(r+1)*channels]
				for c := range channels {
					g := c / cpg
					xh := (xr[c] - ms[g]) * rs[g]
					dxr[c] = rs[g] * (w[c]*dxr[c] - T(mg[g]) - xh*T(sg[g]))
				}
			}
		}
	})
	for c := range channels {
		var sa, sax float64
		for s := range batch {
			sa += sumDz[s*channels+c]
			sax += sumDzX[s*channels+c]
		}
		if dw != nil {
			dw[c] = T(sax)
		}
		if db != nil {
			db[c] = T(sa)
		}
	}
}

// sigmoidOf is σ(z) at T's precision, as SigmoidForward computes it.
func sigmoidOf[T gemm.Float](z T) T {
	if actPrecise[T]() {
		e, q := actExp2d(-math.Log2E * float64(z))
		return T(1 / (1 + e*(1+q)))
	}
	e, q := actExp2f(-math.Log2E * float32(z))
	return T(1 / (1 + e*(1+q)))
}

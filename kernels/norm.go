package kernels

import (
	"fmt"
	"math"

	"github.com/dcdit/dcdit/kernels/gemm"
	"github.com/dcdit/dcdit/kernels/parallel"
)

// normRsqrt returns 1/sqrt(v) rounded once in float64: it runs once per row
// or group, so exactness is worth more than a fast approximation.
func normRsqrt[T gemm.Float](v T) T {
	return T(1 / math.Sqrt(float64(v)))
}

// normNeedStats checks an optional per-row (or per-group) statistics slice.
func normNeedStats[T gemm.Float](kernel, name string, s []T, n int) {
	if s != nil {
		ewNeedLen(kernel, name, len(s), n)
	}
}

// LayerNormForward normalises each row of x [rows, cols] to zero mean and
// unit variance without an affine transform (DiT's LayerNorm with
// elementwise_affine=False): y = (x − mean)·rstd, rstd = 1/sqrt(var + eps),
// var being the biased variance as in PyTorch. It stores each row's mean and
// rstd for the backward pass when mean and rstd are not nil. y may alias x.
func LayerNormForward[T gemm.Float](y, mean, rstd, x []T, rows, cols int, eps T) {
	ewNeedDims("LayerNormForward", rows, cols)
	ewNeedLen("LayerNormForward", "x", len(x), rows*cols)
	ewNeedLen("LayerNormForward", "y", len(y), rows*cols)
	normNeedStats("LayerNormForward", "mean", mean, rows)
	normNeedStats("LayerNormForward", "rstd", rstd, rows)
	parallel.For(rows, ewRowGrain(cols), func(lo, hi int) {
		for r := lo; r < hi; r++ {
			xr, yr := x[r*cols:(r+1)*cols], y[r*cols:(r+1)*cols]
			var m T
			if cols > 0 {
				m = ewSum(xr) / T(cols)
			}
			// Two passes over a row that sits in L1: the textbook E[x²] − E[x]²
			// cancels catastrophically when |mean| ≫ std.
			v := normSumSqDev(xr, m)
			if cols > 0 {
				v /= T(cols)
			}
			rs := normRsqrt(v + eps)
			yr = yr[:len(xr)]
			for i := range xr {
				yr[i] = (xr[i] - m) * rs
			}
			if mean != nil {
				mean[r] = m
			}
			if rstd != nil {
				rstd[r] = rs
			}
		}
	})
}

// normSumSqDev returns Σ (x − m)² with four accumulators.
func normSumSqDev[T gemm.Float](x []T, m T) T {
	var s0, s1, s2, s3 T
	i := 0
	for ; i+4 <= len(x); i += 4 {
		d0, d1, d2, d3 := x[i]-m, x[i+1]-m, x[i+2]-m, x[i+3]-m
		s0 += d0 * d0
		s1 += d1 * d1
		s2 += d2 * d2
		s3 += d3 * d3
	}
	for ; i < len(x); i++ {
		d := x[i] - m
		s0 += d * d
	}
	return (s0 + s1) + (s2 + s3)
}

// LayerNormBackward computes dx from dy for LayerNormForward, given the
// input x and the saved per-row mean and rstd:
// dx = rstd·(dy − mean(dy) − x̂·mean(dy·x̂)), x̂ = (x − mean)·rstd.
// dx may alias dy.
func LayerNormBackward[T gemm.Float](dx, dy, x, mean, rstd []T, rows, cols int) {
	ewNeedDims("LayerNormBackward", rows, cols)
	ewNeedLen("LayerNormBackward", "dx", len(dx), rows*cols)
	ewNeedLen("LayerNormBackward", "dy", len(dy), rows*cols)
	ewNeedLen("LayerNormBackward", "x", len(x), rows*cols)
	ewNeedLen("LayerNormBackward", "mean", len(mean), rows)
	ewNeedLen("LayerNormBackward", "rstd", len(rstd), rows)
	if cols == 0 {
		return
	}
	inv := 1 / T(cols)
	parallel.For(rows, ewRowGrain(cols), func(lo, hi int) {
		for r := lo; r < hi; r++ {
			xr, dyr, dxr := x[r*cols:(r+1)*cols], dy[r*cols:(r+1)*cols], dx[r*cols:(r+1)*cols]
			m, rs := mean[r], rstd[r]
			dyr = dyr[:len(xr)]
			dxr = dxr[:len(xr)]
			// a = mean(dy), b = mean(dy·x̂); Σ dy·(x − m) avoids forming x̂ twice.
			var sdy, sdx T
			for i := range xr {
				g := dyr[i]
				sdy += g
				sdx += g * (xr[i] - m)
			}
			a := sdy * inv
			b := sdx * inv * rs
			for i := range xr {
				xh := (xr[i] - m) * rs
				dxr[i] = rs * (dyr[i] - a - xh*b)
			}
		}
	})
}

// RMSNormForward computes y = x·rstd·w per row of x [rows, cols], with
// rstd = 1/sqrt(mean(x²) + eps) and weight w [cols]: the PyTorch / Z-Image
// RMSNorm (eps inside the square root, no bias), not spago's. It stores each
// row's rstd when rstd is not nil. y may alias x.
func RMSNormForward[T gemm.Float](y, rstd, x, w []T, rows, cols int, eps T) {
	ewNeedDims("RMSNormForward", rows, cols)
	ewNeedLen("RMSNormForward", "x", len(x), rows*cols)
	ewNeedLen("RMSNormForward", "y", len(y), rows*cols)
	ewNeedLen("RMSNormForward", "w", len(w), cols)
	normNeedStats("RMSNormForward", "rstd", rstd, rows)
	parallel.For(rows, ewRowGrain(cols), func(lo, hi int) {
		for r := lo; r < hi; r++ {
			xr, yr := x[r*cols:(r+1)*cols], y[r*cols:(r+1)*cols]
			ms := normSumSqDev(xr, 0)
			if cols > 0 {
				ms /= T(cols)
			}
			rs := normRsqrt(ms + eps)
			yr, wr := yr[:len(xr)], w[:len(xr)]
			for i := range xr {
				yr[i] = xr[i] * rs * wr[i]
			}
			if rstd != nil {
				rstd[r] = rs
			}
		}
	})
}

// RMSNormBackward computes the gradients of RMSNormForward from dy, given x,
// w and the saved rstd: dx = rstd·(w∘dy) − x·rstd³·mean(w∘dy∘x) and
// dw = Σ_rows dy∘x·rstd. dx or dw may be nil.
func RMSNormBackward[T gemm.Float](dx, dw, dy, x, w, rstd []T, rows, cols int) {
	ewNeedDims("RMSNormBackward", rows, cols)
	ewNeedLen("RMSNormBackward", "dy", len(dy), rows*cols)
	ewNeedLen("RMSNormBackward", "x", len(x), rows*cols)
	ewNeedLen("RMSNormBackward", "rstd", len(rstd), rows)
	if dx != nil {
		ewNeedLen("RMSNormBackward", "dx", len(dx), rows*cols)
		ewNeedLen("RMSNormBackward", "w", len(w), cols)
		if cols > 0 {
			inv := 1 / T(cols)
			parallel.For(rows, ewRowGrain(cols), func(lo, hi int) {
				for r := lo; r < hi; r++ {
					xr, dyr, dxr := x[r*cols:(r+1)*cols], dy[r*cols:(r+1)*cols], dx[r*cols:(r+1)*cols]
					wr := w[:len(xr)]
					dyr, dxr = dyr[:len(xr)], dxr[:len(xr)]
					rs := rstd[r]
					var s T
					for i := range xr {
						s += wr[i] * dyr[i] * xr[i]
					}
					c := rs * rs * rs * s * inv
					for i := range xr {
						dxr[i] = rs*wr[i]*dyr[i] - c*xr[i]
					}
				}
			})
		}
	}
	if dw != nil {
		ewNeedLen("RMSNormBackward", "dw", len(dw), cols)
		redColumns(cols, rows, func(c0, c1 int) {
			o := dw[c0:c1]
			for i := range o {
				o[i] = 0
			}
			for r := 0; r < rows; r++ {
				rs := rstd[r]
				xr, dyr := x[r*cols+c0:r*cols+c1], dy[r*cols+c0:r*cols+c1]
				xr, dyr = xr[:len(o)], dyr[:len(o)]
				for i := range o {
					o[i] += dyr[i] * xr[i] * rs
				}
			}
		})
	}
}

// groupNormShape validates GroupNorm's dimensions and returns the channels
// per group.
func groupNormShape(kernel string, batch, tokens, channels, groups int) int {
	ewNeedDims(kernel, batch, tokens, channels)
	if groups <= 0 || channels%groups != 0 {
		panic(fmt.Sprintf("kernels: %s: %d channels do not split into %d groups", kernel, channels, groups))
	}
	return channels / groups
}

// groupNormForwardArgs checks the arguments of a group-norm forward kernel
// (mean and rstd may be nil) and returns the channels per group and the
// element count.
func groupNormForwardArgs[T gemm.Float](kernel string, y, mean, rstd, x, w, b []T, batch, tokens, channels, groups int) (cpg, n int) {
	cpg = groupNormShape(kernel, batch, tokens, channels, groups)
	n = batch * tokens * channels
	ewNeedLen(kernel, "x", len(x), n)
	ewNeedLen(kernel, "y", len(y), n)
	ewNeedLen(kernel, "w", len(w), channels)
	ewNeedLen(kernel, "b", len(b), channels)
	normNeedStats(kernel, "mean", mean, batch*groups)
	normNeedStats(kernel, "rstd", rstd, batch*groups)
	return cpg, n
}

// GroupNormForward applies PyTorch's nn.GroupNorm(groups, channels, eps)
// with affine weight w and bias b [channels] to batch token-major grids x
// [batch·tokens, channels] (sample s owns rows s·tokens ≤ r < (s+1)·tokens).
// Statistics are per (sample, group) over tokens × channels/groups values;
// the biased variance is used. It stores them in mean and rstd
// [batch·groups] (index s·groups + g) when those are not nil. y may alias x.
func GroupNormForward[T gemm.Float](y, mean, rstd, x, w, b []T, batch, tokens, channels, groups int, eps T) {
	cpg, _ := groupNormForwardArgs("GroupNormForward", y, mean, rstd, x, w, b, batch, tokens, channels, groups)
	count := float64(tokens * cpg)
	parallel.For(batch*groups, max(1, ewGrain/max(1, tokens*cpg)), func(lo, hi int) {
		for item := lo; item < hi; item++ {
			s, g := item/groups, item%groups
			r0, r1, c0 := s*tokens, (s+1)*tokens, g*cpg
			// A group holds up to tokens·cpg values (thousands): accumulate in
			// float64 so that float32 statistics match PyTorch's closely.
			var sum float64
			for r := r0; r < r1; r++ {
				for _, v := range x[r*channels+c0 : r*channels+c0+cpg] {
					sum += float64(v)
				}
			}
			var m float64
			if count > 0 {
				m = sum / count
			}
			var ss float64
			for r := r0; r < r1; r++ {
				for _, v := range x[r*channels+c0 : r*channels+c0+cpg] {
					d := float64(v) - m
					ss += d * d
				}
			}
			var v float64
			if count > 0 {
				v = ss / count
			}
			rs := T(1 / math.Sqrt(v+float64(eps)))
			mt := T(m)
			wg, bg := w[c0:c0+cpg], b[c0:c0+cpg]
			for r := r0; r < r1; r++ {
				xr, yr := x[r*channels+c0:r*channels+c0+cpg], y[r*channels+c0:r*channels+c0+cpg]
				xr, yr, bg := xr[:len(wg)], yr[:len(wg)], bg[:len(wg)]
				for i := range wg {
					yr[i] = (xr[i]-mt)*rs*wg[i] + bg[i]
				}
			}
			if mean != nil {
				mean[item] = mt
			}
			if rstd != nil {
				rstd[item] = rs
			}
		}
	})
}

// GroupNormBackward computes the gradients of GroupNormForward from dy,
// given x, w and the saved mean and rstd: per (sample, group) with n values,
// dx = rstd·(w∘dy − mean(w∘dy) − x̂·mean(w∘dy∘x̂)); dw = Σ dy∘x̂ and
// db = Σ dy over all rows. Any of dx, dw, db may be nil.
func GroupNormBackward[T gemm.Float](dx, dw, db, dy, x, mean, rstd, w []T, batch, tokens, channels, groups int) {
	cpg := groupNormShape("GroupNormBackward", batch, tokens, channels, groups)
	n := batch * tokens * channels
	ewNeedLen("GroupNormBackward", "dy", len(dy), n)
	ewNeedLen("GroupNormBackward", "x", len(x), n)
	ewNeedLen("GroupNormBackward", "mean", len(mean), batch*groups)
	ewNeedLen("GroupNormBackward", "rstd", len(rstd), batch*groups)
	if dx != nil {
		ewNeedLen("GroupNormBackward", "dx", len(dx), n)
		ewNeedLen("GroupNormBackward", "w", len(w), channels)
		count := float64(tokens * cpg)
		parallel.For(batch*groups, max(1, ewGrain/max(1, tokens*cpg)), func(lo, hi int) {
			for item := lo; item < hi; item++ {
				s, g := item/groups, item%groups
				r0, r1, c0 := s*tokens, (s+1)*tokens, g*cpg
				m, rs := mean[item], rstd[item]
				wg := w[c0 : c0+cpg]
				var sg, sgx float64
				for r := r0; r < r1; r++ {
					xr, dyr := x[r*channels+c0:r*channels+c0+cpg], dy[r*channels+c0:r*channels+c0+cpg]
					xr, dyr = xr[:len(wg)], dyr[:len(wg)]
					var a, b T
					for i := range wg {
						gi := wg[i] * dyr[i]
						a += gi
						b += gi * (xr[i] - m)
					}
					sg += float64(a)
					sgx += float64(b)
				}
				a := T(sg / count)
				bb := T(sgx/count) * rs
				for r := r0; r < r1; r++ {
					xr, dyr, dxr := x[r*channels+c0:r*channels+c0+cpg], dy[r*channels+c0:r*channels+c0+cpg], dx[r*channels+c0:r*channels+c0+cpg]
					xr, dyr, dxr = xr[:len(wg)], dyr[:len(wg)], dxr[:len(wg)]
					for i := range wg {
						xh := (xr[i] - m) * rs
						dxr[i] = rs * (wg[i]*dyr[i] - a - xh*bb)
					}
				}
			}
		})
	}
	if dw == nil && db == nil {
		return
	}
	if dw != nil {
		ewNeedLen("GroupNormBackward", "dw", len(dw), channels)
	}
	if db != nil {
		ewNeedLen("GroupNormBackward", "db", len(db), channels)
	}
	// Parallel over whole groups: each worker owns its channels' dw and db,
	// and one (mean, rstd) pair serves a whole row segment.
	parallel.For(groups, max(1, groups*ewGrain/max(1, n)), func(g0, g1 int) {
		c0, c1 := g0*cpg, g1*cpg
		if dw != nil {
			clear(dw[c0:c1])
		}
		if db != nil {
			clear(db[c0:c1])
		}
		for s := 0; s < batch; s++ {
			for g := g0; g < g1; g++ {
				m, rs := mean[s*groups+g], rstd[s*groups+g]
				gc0 := g * cpg
				for r := s * tokens; r < (s+1)*tokens; r++ {
					dyr := dy[r*channels+gc0 : r*channels+gc0+cpg]
					if db != nil {
						o := db[gc0 : gc0+cpg]
						dyr := dyr[:len(o)]
						for i := range o {
							o[i] += dyr[i]
						}
					}
					if dw != nil {
						o := dw[gc0 : gc0+cpg]
						xr := x[r*channels+gc0 : r*channels+gc0+cpg]
						xr, dyr := xr[:len(o)], dyr[:len(o)]
						for i := range o {
							o[i] += dyr[i] * (xr[i] - m) * rs
						}
					}
				}
			}
		}
	})
}

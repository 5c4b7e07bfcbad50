package kernels

import (
	"fmt"

	"github.com/dcdit/dcdit/kernels/gemm"
	"github.com/dcdit/dcdit/kernels/parallel"
)

// redMaxBlocks caps the number of partial sums of a whole-tensor reduction.
// The block boundaries depend only on the length, never on the number of
// cores, so a loss is bit-identical however many cores computed it.
const redMaxBlocks = 64

// redReduce splits [0, n) into fixed blocks, evaluates part on each (in
// parallel) and adds the partial results in block order.
func redReduce(n int, part func(lo, hi int) float64) float64 {
	if n == 0 {
		return 0
	}
	nb := min(redMaxBlocks, max(1, n/ewGrain))
	var partial [redMaxBlocks]float64
	parallel.For(nb, 1, func(lo, hi int) {
		for b := lo; b < hi; b++ {
			partial[b] = part(b*n/nb, (b+1)*n/nb)
		}
	})
	var s float64
	for _, p := range partial[:nb] {
		s += p
	}
	return s
}

// Sum returns Σ x, accumulated in float64 so that a loss over millions of
// float32 values does not lose its low digits.
func Sum[T gemm.Float](x []T) T {
	return T(redReduce(len(x), func(lo, hi int) float64 {
		x := x[lo:hi]
		var s0, s1 float64
		i := 0
		for ; i+2 <= len(x); i += 2 {
			s0 += float64(x[i])
			s1 += float64(x[i+1])
		}
		if i < len(x) {
			s0 += float64(x[i])
		}
		return s0 + s1
	}))
}

// SumSquares returns Σ x², accumulated in float64.
func SumSquares[T gemm.Float](x []T) T {
	return T(redReduce(len(x), func(lo, hi int) float64 {
		x := x[lo:hi]
		var s0, s1 float64
		i := 0
		for ; i+2 <= len(x); i += 2 {
			a, b := float64(x[i]), float64(x[i+1])
			s0 += a * a
			s1 += b * b
		}
		if i < len(x) {
			a := float64(x[i])
			s0 += a * a
		}
		return s0 + s1
	}))
}

// SumSquaredDiff returns Σ (a − b)², accumulated in float64; divided by the
// length it is PyTorch's MSELoss with reduction "mean".
func SumSquaredDiff[T gemm.Float](a, b []T) T {
	ewNeedLen("SumSquaredDiff", "b", len(b), len(a))
	return T(redReduce(len(a), func(lo, hi int) float64 {
		a, b := a[lo:hi], b[lo:hi]
		b = b[:len(a)]
		var s0, s1 float64
		i := 0
		for ; i+2 <= len(a); i += 2 {
			d0 := float64(a[i]) - float64(b[i])
			d1 := float64(a[i+1]) - float64(b[i+1])
			s0 += d0 * d0
			s1 += d1 * d1
		}
		if i < len(a) {
			d := float64(a[i]) - float64(b[i])
			s0 += d * d
		}
		return s0 + s1
	}))
}

// SquaredDiffBackward sets da = alpha·(a − b) and db = −alpha·(a − b), the
// gradients of (alpha/2)·Σ (a − b)²; for a mean-reduced MSE with upstream
// gradient g over n elements, alpha = 2g/n. da or db may be nil.
func SquaredDiffBackward[T gemm.Float](da, db, a, b []T, alpha T) {
	ewNeedLen("SquaredDiffBackward", "b", len(b), len(a))
	if da != nil {
		ewNeedLen("SquaredDiffBackward", "da", len(da), len(a))
	}
	if db != nil {
		ewNeedLen("SquaredDiffBackward", "db", len(db), len(a))
	}
	parallel.For(len(a), ewGrain, func(lo, hi int) {
		a, b := a[lo:hi], b[lo:hi]
		b = b[:len(a)]
		switch {
		case da != nil && db != nil:
			da, db := da[lo:hi], db[lo:hi]
			da, db = da[:len(a)], db[:len(a)]
			for i := range a {
				g := alpha * (a[i] - b[i])
				da[i] = g
				db[i] = -g
			}
		case da != nil:
			da := da[lo:hi]
			da = da[:len(a)]
			for i := range a {
				da[i] = alpha * (a[i] - b[i])
			}
		case db != nil:
			db := db[lo:hi]
			db = db[:len(a)]
			for i := range a {
				db[i] = alpha * (b[i] - a[i])
			}
		}
	})
}

// ColSum sets out[c] = Σ_r x[r, c] for x [rows, cols]: the bias gradient of
// Linear and AddRowVector.
func ColSum[T gemm.Float](out, x []T, rows, cols int) {
	ewNeedDims("ColSum", rows, cols)
	ewNeedLen("ColSum", "x", len(x), rows*cols)
	ewNeedLen("ColSum", "out", len(out), cols)
	redColumns(cols, rows, func(c0, c1 int) {
		o := out[c0:c1]
		for i := range o {
			o[i] = 0
		}
		for r := 0; r < rows; r++ {
			xr := x[r*cols+c0 : r*cols+c1]
			xr = xr[:len(o)]
			for i := range o {
				o[i] += xr[i]
			}
		}
	})
}

// redColumns runs body over column blocks [c0, c1) in parallel. Reductions
// over rows split by columns rather than rows: every worker then owns its
// outputs, so no partial buffers (allocation) or locks are needed, and each
// row segment it reads is still contiguous.
func redColumns(cols, rows int, body func(c0, c1 int)) {
	// 16 columns is one 64-byte cache line of float32: narrower blocks would
	// make two workers write the same line.
	grain := max(16, ewGrain/max(rows, 1))
	parallel.For(cols, grain, body)
}

// redPerSample runs body(s, c0, c1) for every sample s of a packed [rows,
// cols] matrix and column blocks [c0, c1) covering all columns, each
// (sample, block) on exactly one worker, so per-sample reductions need no
// scratch or locks. With enough samples it splits by sample, so that each
// worker streams whole contiguous rows (column blocks leave gaps that cost
// the hardware prefetcher: 3–5× slower at 2048×1536); with fewer samples
// than workers it falls back to column blocks.
func redPerSample(offsets []int, rows, cols int, body func(s, c0, c1 int)) {
	samples := len(offsets) - 1
	if samples == 0 || rows == 0 {
		for s := 0; s < samples; s++ {
			body(s, 0, cols)
		}
		return
	}
	perSample := max(1, rows*cols/samples)
	if w := parallel.Workers(rows*cols, ewGrain); w == 1 || samples >= 2*w {
		parallel.For(samples, max(1, ewGrain/perSample), func(lo, hi int) {
			for s := lo; s < hi; s++ {
				body(s, 0, cols)
			}
		})
		return
	}
	redColumns(cols, rows, func(c0, c1 int) {
		for s := 0; s < samples; s++ {
			body(s, c0, c1)
		}
	})
}

// ewNeedOffsets panics unless offsets describes samples packed into exactly
// rows rows: offsets[0] = 0, non-decreasing, offsets[len-1] = rows.
func ewNeedOffsets(kernel string, offsets []int, rows int) {
	if len(offsets) == 0 {
		panic(fmt.Sprintf("kernels: %s: empty offsets (want len S+1 ≥ 1)", kernel))
	}
	if offsets[0] != 0 {
		panic(fmt.Sprintf("kernels: %s: offsets[0] = %d, want 0", kernel, offsets[0]))
	}
	for s := 1; s < len(offsets); s++ {
		if offsets[s] < offsets[s-1] {
			panic(fmt.Sprintf("kernels: %s: offsets decrease at %d: %d < %d", kernel, s, offsets[s], offsets[s-1]))
		}
	}
	if last := offsets[len(offsets)-1]; last != rows {
		panic(fmt.Sprintf("kernels: %s: offsets end at %d, want %d rows", kernel, last, rows))
	}
}

// ewRowsOf returns the number of rows of a [rows, cols] slice, panicking if
// its length is not a whole number of rows.
func ewRowsOf(kernel, name string, n, cols int) int {
	if cols <= 0 {
		if n != 0 {
			panic(fmt.Sprintf("kernels: %s: len(%s) = %d with cols = %d", kernel, name, n, cols))
		}
		return 0
	}
	if n%cols != 0 {
		panic(fmt.Sprintf("kernels: %s: len(%s) = %d is not a multiple of cols = %d", kernel, name, n, cols))
	}
	return n / cols
}

// SumRows sets out[s, :] = Σ_{r in sample s} x[r, :] for x [rows, cols]
// packed by offsets (len S+1) and out [S, cols]. An empty sample sums to 0.
func SumRows[T gemm.Float](out, x []T, offsets []int, cols int) {
	redRows("SumRows", out, x, offsets, cols, false)
}

// MeanRows sets out[s, :] to the mean of sample s's rows of x (see
// SumRows); an empty sample has mean 0 rather than NaN, so that it cannot
// poison a batch.
func MeanRows[T gemm.Float](out, x []T, offsets []int, cols int) {
	redRows("MeanRows", out, x, offsets, cols, true)
}

func redRows[T gemm.Float](kernel string, out, x []T, offsets []int, cols int, mean bool) {
	ewNeedDims(kernel, cols)
	rows := ewRowsOf(kernel, "x", len(x), cols)
	ewNeedOffsets(kernel, offsets, rows)
	samples := len(offsets) - 1
	ewNeedLen(kernel, "out", len(out), samples*cols)
	redPerSample(offsets, rows, cols, func(s, c0, c1 int) {
		o := out[s*cols+c0 : s*cols+c1]
		clear(o)
		for r := offsets[s]; r < offsets[s+1]; r++ {
			xr := x[r*cols+c0 : r*cols+c1]
			xr = xr[:len(o)]
			for i := range o {
				o[i] += xr[i]
			}
		}
		if n := offsets[s+1] - offsets[s]; mean && n > 0 {
			inv := 1 / T(n)
			for i := range o {
				o[i] *= inv
			}
		}
	})
}

// MeanRowsBackward sets dx[r, :] = dy[s, :]/n_s for every row r of sample
// s, the gradient of MeanRows.
func MeanRowsBackward[T gemm.Float](dx, dy []T, offsets []int, cols int) {
	ewNeedDims("MeanRowsBackward", cols)
	rows := ewRowsOf("MeanRowsBackward", "dx", len(dx), cols)
	ewNeedOffsets("MeanRowsBackward", offsets, rows)
	ewNeedLen("MeanRowsBackward", "dy", len(dy), (len(offsets)-1)*cols)
	parallel.For(rows, ewRowGrain(cols), func(lo, hi int) {
		s := ewSampleOf(offsets, lo)
		for r := lo; r < hi; r++ {
			for r >= offsets[s+1] {
				s++
			}
			inv := 1 / T(offsets[s+1]-offsets[s])
			dxr, dyr := dx[r*cols:(r+1)*cols], dy[s*cols:(s+1)*cols]
			dyr = dyr[:len(dxr)]
			for i := range dxr {
				dxr[i] = dyr[i] * inv
			}
		}
	})
}

// ewSampleOf returns the sample owning row r: the s with offsets[s] ≤ r <
// offsets[s+1], skipping empty samples. Row-parallel kernels call it once per
// chunk and then advance linearly.
func ewSampleOf(offsets []int, r int) int {
	lo, hi := 0, len(offsets)-1 // invariant: offsets[lo] ≤ r < offsets[hi]
	for hi-lo > 1 {
		mid := int(uint(lo+hi) >> 1)
		if offsets[mid] <= r {
			lo = mid
		} else {
			hi = mid
		}
	}
	return lo
}

package kernels

import (
	"fmt"

	"github.com/dcdit/dcdit/kernels/gemm"
	"github.com/dcdit/dcdit/kernels/parallel"
)

// ewGrain is the number of elements a memory-bound loop must have before a
// second goroutine pays off: starting one costs about a microsecond, which
// is what ~30k float32 element operations cost.
const ewGrain = 1 << 15

// ewRowGrain converts ewGrain into rows of the given width.
func ewRowGrain(cols int) int {
	return max(1, ewGrain/max(cols, 1))
}

// ewNeedLen panics when a slice does not have exactly the length the
// dimensions imply: a longer slice is as much a caller bug as a shorter one,
// since it means the caller and the kernel disagree on the shape.
func ewNeedLen(kernel, name string, got, want int) {
	if got != want {
		panic(fmt.Sprintf("kernels: %s: len(%s) = %d, want %d", kernel, name, got, want))
	}
}

// ewNeedDims panics on negative dimensions.
func ewNeedDims(kernel string, dims ...int) {
	for _, d := range dims {
		if d < 0 {
			panic(fmt.Sprintf("kernels: %s: negative dimension %d", kernel, d))
		}
	}
}

// Add sets y = a + b elementwise. y may alias a or b.
func Add[T gemm.Float](y, a, b []T) {
	ewNeedLen("Add", "a", len(a), len(y))
	ewNeedLen("Add", "b", len(b), len(y))
	parallel.For(len(y), ewGrain, func(lo, hi int) {
		y, a, b := y[lo:hi], a[lo:hi], b[lo:hi]
		for i := range y {
			y[i] = a[i] + b[i]
		}
	})
}

// Sub sets y = a − b elementwise. y may alias a or b.
func Sub[T gemm.Float](y, a, b []T) {
	ewNeedLen("Sub", "a", len(a), len(y))
	ewNeedLen("Sub", "b", len(b), len(y))
	parallel.For(len(y), ewGrain, func(lo, hi int) {
		y, a, b := y[lo:hi], a[lo:hi], b[lo:hi]
		for i := range y {
			y[i] = a[i] - b[i]
		}
	})
}

// Mul sets y = a ∘ b (elementwise product). y may alias a or b. It is also
// the backward of itself: da = dy ∘ b, db = dy ∘ a.
func Mul[T gemm.Float](y, a, b []T) {
	ewNeedLen("Mul", "a", len(a), len(y))
	ewNeedLen("Mul", "b", len(b), len(y))
	parallel.For(len(y), ewGrain, func(lo, hi int) {
		y, a, b := y[lo:hi], a[lo:hi], b[lo:hi]
		for i := range y {
			y[i] = a[i] * b[i]
		}
	})
}

// Scale sets y = alpha·x. y may alias x.
func Scale[T gemm.Float](y, x []T, alpha T) {
	ewNeedLen("Scale", "x", len(x), len(y))
	parallel.For(len(y), ewGrain, func(lo, hi int) {
		y, x := y[lo:hi], x[lo:hi]
		for i := range y {
			y[i] = alpha * x[i]
		}
	})
}

// AddScaled sets y += alpha·x (axpy), the accumulation step of gradient
// sums and optimiser updates.
func AddScaled[T gemm.Float](y, x []T, alpha T) {
	ewNeedLen("AddScaled", "x", len(x), len(y))
	parallel.For(len(y), ewGrain, func(lo, hi int) {
		y, x := y[lo:hi], x[lo:hi]
		for i := range y {
			y[i] += alpha * x[i]
		}
	})
}

// Fill sets every element of y to v.
func Fill[T gemm.Float](y []T, v T) {
	ewFill(y, v)
}

func ewFill[T gemm.Float](y []T, v T) {
	parallel.For(len(y), ewGrain, func(lo, hi int) {
		y := y[lo:hi]
		for i := range y {
			y[i] = v
		}
	})
}

// AddRowVector sets y[r, :] = x[r, :] + v for x, y [rows, cols] and v [cols]
// (a bias broadcast over all rows). y may alias x. Its backward is dx = dy
// and dv = ColSum(dy).
func AddRowVector[T gemm.Float](y, x, v []T, cols int) {
	ewNeedDims("AddRowVector", cols)
	ewNeedLen("AddRowVector", "v", len(v), cols)
	ewNeedLen("AddRowVector", "x", len(x), len(y))
	if cols == 0 {
		return
	}
	if len(y)%cols != 0 {
		panic(fmt.Sprintf("kernels: AddRowVector: len(y) = %d is not a multiple of cols = %d", len(y), cols))
	}
	parallel.For(len(y)/cols, ewRowGrain(cols), func(lo, hi int) {
		for r := lo; r < hi; r++ {
			yr, xr := y[r*cols:(r+1)*cols], x[r*cols:(r+1)*cols]
			xr, vr := xr[:len(yr)], v[:len(yr)]
			for i := range yr {
				yr[i] = xr[i] + vr[i]
			}
		}
	})
}

// ScaleRows sets y[r, :] = s[r]·x[r, :] for x, y [rows, cols] and s [rows]:
// a per-token multiplier such as DC-DiT's straight-through confidence. y may
// alias x.
func ScaleRows[T gemm.Float](y, x, s []T, cols int) {
	ewNeedDims("ScaleRows", cols)
	rows := len(s)
	ewNeedLen("ScaleRows", "x", len(x), rows*cols)
	ewNeedLen("ScaleRows", "y", len(y), rows*cols)
	parallel.For(rows, ewRowGrain(cols), func(lo, hi int) {
		for r := lo; r < hi; r++ {
			yr, xr := y[r*cols:(r+1)*cols], x[r*cols:(r+1)*cols]
			xr = xr[:len(yr)]
			sr := s[r]
			for i := range yr {
				yr[i] = sr * xr[i]
			}
		}
	})
}

// ScaleRowsBackward computes the gradients of ScaleRows from dy:
// dx[r, :] = s[r]·dy[r, :] and ds[r] = ⟨dy[r, :], x[r, :]⟩. dx or ds may be
// nil.
func ScaleRowsBackward[T gemm.Float](dx, ds, dy, x, s []T, cols int) {
	ewNeedDims("ScaleRowsBackward", cols)
	rows := len(s)
	ewNeedLen("ScaleRowsBackward", "dy", len(dy), rows*cols)
	if dx != nil {
		ScaleRows(dx, dy, s, cols)
	}
	if ds == nil {
		return
	}
	ewNeedLen("ScaleRowsBackward", "ds", len(ds), rows)
	ewNeedLen("ScaleRowsBackward", "x", len(x), rows*cols)
	parallel.For(rows, ewRowGrain(cols), func(lo, hi int) {
		for r := lo; r < hi; r++ {
			ds[r] = Dot(dy[r*cols:(r+1)*cols], x[r*cols:(r+1)*cols])
		}
	})
}

// Dot returns ⟨a, b⟩ over len(a) ≤ len(b) with four independent
// accumulators, which both hides the add latency and halves the rounding
// error growth of a single running sum.
func Dot[T gemm.Float](a, b []T) T {
	b = b[:len(a)]
	var s0, s1, s2, s3 T
	i := 0
	for ; i+4 <= len(a); i += 4 {
		s0 += a[i] * b[i]
		s1 += a[i+1] * b[i+1]
		s2 += a[i+2] * b[i+2]
		s3 += a[i+3] * b[i+3]
	}
	for ; i < len(a); i++ {
		s0 += a[i] * b[i]
	}
	return (s0 + s1) + (s2 + s3)
}

// ewSum returns Σ a with four accumulators (see Dot).
func ewSum[T gemm.Float](a []T) T {
	var s0, s1, s2, s3 T
	i := 0
	for ; i+4 <= len(a); i += 4 {
		s0 += a[i]
		s1 += a[i+1]
		s2 += a[i+2]
		s3 += a[i+3]
	}
	for ; i < len(a); i++ {
		s0 += a[i]
	}
	return (s0 + s1) + (s2 + s3)
}

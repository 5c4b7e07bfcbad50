package kernels

import (
	"github.com/dcdit/dcdit/kernels/gemm"
	"github.com/dcdit/dcdit/kernels/parallel"
)

// LinearForward computes y = x·Wᵀ + b for x [rows, in], W [out, in]
// (PyTorch's nn.Linear layout, so checkpoints load without a transpose) and
// b [out] or nil; y is [rows, out].
func LinearForward[T gemm.Float](y, x, w, b []T, rows, in, out int) {
	ewNeedDims("LinearForward", rows, in, out)
	ewNeedLen("LinearForward", "x", len(x), rows*in)
	ewNeedLen("LinearForward", "w", len(w), out*in)
	ewNeedLen("LinearForward", "y", len(y), rows*out)
	if b != nil {
		ewNeedLen("LinearForward", "b", len(b), out)
	}
	if rows == 0 || out == 0 {
		return
	}
	if b == nil {
		if in == 0 {
			ewFill(y, 0)
			return
		}
		gemm.Gemm(false, true, rows, out, in, 1, x, in, w, in, 0, y, out)
		return
	}
	// Seeding y with the bias and letting GEMM accumulate (beta = 1) costs
	// the same memory traffic as a separate bias pass over y, minus one read.
	parallel.For(rows, ewRowGrain(out), func(lo, hi int) {
		for r := lo; r < hi; r++ {
			copy(y[r*out:(r+1)*out], b)
		}
	})
	if in > 0 {
		gemm.Gemm(false, true, rows, out, in, 1, x, in, w, in, 1, y, out)
	}
}

// LinearBackward computes the gradients of LinearForward from dy [rows, out]:
// dx = dy·W [rows, in], dW = dyᵀ·x [out, in] and db = Σ_rows dy [out]. Any
// of dx, dw, db may be nil when not needed.
func LinearBackward[T gemm.Float](dx, dw, db, dy, x, w []T, rows, in, out int) {
	ewNeedDims("LinearBackward", rows, in, out)
	ewNeedLen("LinearBackward", "dy", len(dy), rows*out)
	if dx != nil {
		ewNeedLen("LinearBackward", "dx", len(dx), rows*in)
		ewNeedLen("LinearBackward", "w", len(w), out*in)
		if out == 0 {
			ewFill(dx, 0)
		} else if rows > 0 && in > 0 {
			gemm.Gemm(false, false, rows, in, out, 1, dy, out, w, in, 0, dx, in)
		}
	}
	if dw != nil {
		ewNeedLen("LinearBackward", "dw", len(dw), out*in)
		ewNeedLen("LinearBackward", "x", len(x), rows*in)
		if rows == 0 {
			ewFill(dw, 0)
		} else if out > 0 && in > 0 {
			gemm.Gemm(true, false, out, in, rows, 1, dy, out, x, in, 0, dw, in)
		}
	}
	if db != nil {
		ewNeedLen("LinearBackward", "db", len(db), out)
		ColSum(db, dy, rows, out)
	}
}

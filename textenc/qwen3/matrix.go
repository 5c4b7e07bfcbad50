package qwen3

import (
	"github.com/dcdit/dcdit/kernels/gemm"
	"github.com/dcdit/dcdit/loaders/dtype"
)

// matrix is a weight matrix [rows, cols] in nn.Linear's layout (one row
// per output feature), held either as float32 or, as a BF16 checkpoint
// stores it, as bfloat16 bit patterns. Exactly one of f32 and bf16 is set.
type matrix struct {
	rows, cols int
	f32        []float32
	bf16       []uint16
}

// bytes is the matrix's resident size.
func (w *matrix) bytes() int64 {
	return 4*int64(len(w.f32)) + 2*int64(len(w.bf16))
}

// row widens row r into dst [cols].
func (w *matrix) row(dst []float32, r int) {
	if w.f32 != nil {
		copy(dst, w.f32[r*w.cols:(r+1)*w.cols])
		return
	}
	widen(dst, w.bf16[r*w.cols:(r+1)*w.cols])
}

// widen converts bfloat16 bit patterns to float32, exactly.
func widen(dst []float32, src []uint16) {
	dst = dst[:len(src)]
	for i, h := range src {
		dst[i] = dtype.BF16ToFloat32(h)
	}
}

// mul sets y [n, rows] = x [n, cols] · wᵀ. A BF16 matrix is widened to
// float32 inside the GEMM's packing (gemm.GemmBF16), so no float32 copy of
// it exists; the result equals the float32 product on the widened weights
// bit for bit.
func (w *matrix) mul(y, x []float32, n int) {
	if n == 0 {
		return
	}
	if w.f32 != nil {
		gemm.Gemm(false, true, n, w.rows, w.cols, 1, x, w.cols, w.f32, w.cols, 0, y, w.rows)
		return
	}
	gemm.GemmBF16(true, n, w.rows, w.cols, 1, x, w.cols, w.bf16, w.cols, 0, y, w.rows)
}

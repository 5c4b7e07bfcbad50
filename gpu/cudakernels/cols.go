package cudakernels

import (
	"fmt"

	"github.com/dcdit/dcdit/gpu/cuda"
)

// colsSource copies a block of columns between row-major matrices of
// different widths: the device form of kernels.SliceCols (taking the
// columns [lo, hi) of x) and of its backward pass (putting them back into
// a zeroed matrix of the full width). DiT's adaLN splits its [S, 6D]
// modulation this way.
const colsSource = `
extern "C" __global__ void cols_copy(float* dst, int dst_cols, int dst_lo,
                                     const float* src, int src_cols, int src_lo,
                                     int width, long long n) {
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += (long long)gridDim.x * blockDim.x) {
    long long r = i / width;
    int c = (int)(i - r * width);
    dst[r * dst_cols + dst_lo + c] = src[r * src_cols + src_lo + c];
  }
}
`

// colsRange checks a column range [lo, hi) of a matrix of cols columns.
func colsRange(kernel string, rows, cols, lo, hi int) error {
	if rows < 0 || cols < 1 || lo < 0 || hi > cols || lo > hi || int64(rows)*int64(cols) > 1<<40 || cols > 1<<31-1 {
		return fmt.Errorf("cudakernels: %s: columns [%d, %d) of a [%d %d] matrix: want 0 ≤ lo ≤ hi ≤ cols and rows ≥ 0", kernel, lo, hi, rows, cols)
	}
	return nil
}

// SliceCols sets y [rows, hi−lo] to the columns [lo, hi) of x [rows, cols]
// (kernels.SliceCols).
func (sc *Scaffold) SliceCols(y, x cuda.Buffer, rows, cols, lo, hi int) error {
	const kernel = "SliceCols"
	if err := colsRange(kernel, rows, cols, lo, hi); err != nil {
		return err
	}
	w := hi - lo
	if err := checkBufs(kernel, bufArg{"y", y, rows * w, false}, bufArg{"x", x, rows * cols, false}); err != nil {
		return err
	}
	return sc.set.elementwise(sc.colsCopy, rows*w, y, int32(w), int32(0), x, int32(cols), int32(lo), int32(w))
}

// SliceColsBackward sets dx [rows, cols] to zero except its columns
// [lo, hi), which become dy [rows, hi−lo]: the gradient of SliceCols.
func (sc *Scaffold) SliceColsBackward(dx, dy cuda.Buffer, rows, cols, lo, hi int) error {
	const kernel = "SliceColsBackward"
	if err := colsRange(kernel, rows, cols, lo, hi); err != nil {
		return err
	}
	w := hi - lo
	if err := checkBufs(kernel, bufArg{"dx", dx, rows * cols, false}, bufArg{"dy", dy, rows * w, false}); err != nil {
		return err
	}
	if err := dx.Zero(); err != nil {
		return fmt.Errorf("cudakernels: %s: %w", kernel, err)
	}
	return sc.set.elementwise(sc.colsCopy, rows*w, dx, int32(cols), int32(lo), dy, int32(w), int32(0), int32(w))
}

package ops

import (
	"fmt"

	"github.com/nlpodyssey/spago/mat"

	"github.com/dcdit/dcdit/kernels/gemm"
)

// BF16Matrix is a constant row-major matrix of bfloat16 bit patterns (the
// upper halves of float32s): a weight kept at half the bytes of float32
// for inference, as a BF16 checkpoint stores it. It takes no gradient.
type BF16Matrix struct {
	Rows, Cols int
	Data       []uint16
}

// LinearBF16 is Linear with a bfloat16 weight: y = x·Wᵀ + b for x [N, in]
// (float32), W [out, in] and b a float32 vector of out elements, or nil.
// The GEMM widens W inside its packing (gemm.GemmBF16) and accumulates as
// Linear's does, so y equals Linear's on W widened to float32, bit for bit.
//
// It is for inference only: W has no gradient and the op records no graph,
// so it panics, as on a shape mismatch, when x or b requires a gradient.
// Its operands live on the host.
func LinearBF16(x mat.Tensor, w *BF16Matrix, b mat.Tensor) mat.Tensor {
	const op = "LinearBF16"
	rows, in := dims(op, "x", x)
	switch {
	case w == nil:
		panic("ops: LinearBF16: w is nil")
	case w.Cols != in:
		panic(fmt.Sprintf("ops: LinearBF16: w has shape [%d %d], want [out %d] (in = columns of x)", w.Rows, w.Cols, in))
	case w.Rows < 0 || len(w.Data) != w.Rows*w.Cols:
		panic(fmt.Sprintf("ops: LinearBF16: w holds %d values for shape [%d %d]", len(w.Data), w.Rows, w.Cols))
	}
	out := w.Rows
	operands := []named{{"x", x}}
	if b != nil {
		needVector(op, "b", b, out, " (out = rows of w)")
		operands = append(operands, named{"b", b})
	}
	if is64(op, operands...) {
		panic("ops: LinearBF16: x is float64, want float32 (the bfloat16 GEMM computes in float32)")
	}
	for _, o := range operands {
		if o.t.RequiresGrad() {
			panic(fmt.Sprintf("ops: LinearBF16: %s requires a gradient, but a bfloat16 weight is a constant without a backward pass (load the weights as float32 to train)", o.name))
		}
	}
	y := getBuffer[float32](rows * out)
	// As kernels.LinearForward: y seeded with the bias and accumulated
	// into (beta = 1), which is what makes the sums Linear's.
	var beta float32
	if b != nil {
		bias := data[float32](b)
		for r := range rows {
			copy(y[r*out:(r+1)*out], bias)
		}
		beta = 1
	}
	switch {
	case rows == 0 || out == 0:
	case in == 0:
		if b == nil {
			clear(y)
		}
	default:
		gemm.GemmBF16(true, rows, out, in, 1, data[float32](x), in, w.Data, in, beta, y, out)
	}
	return output(rows, out, y)
}

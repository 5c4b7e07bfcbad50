package ops

import (
	"fmt"

	"github.com/nlpodyssey/spago/ag"
	"github.com/nlpodyssey/spago/mat"
	"github.com/nlpodyssey/spago/mat/float"

	"github.com/dcdit/dcdit/kernels"
)

// Conv3x3 returns the 3×3 convolution (stride 1, zero padding 1, PyTorch
// semantics) of batch token-major grids: x is [batch·height·width, cin]
// with sample b's grid in rows b·H·W + i·W + j; w is PyTorch's
// [cout, cin, 3, 3] weight flattened to [cout, cin·9]; b is a vector of
// cout elements or nil. The result is [batch·height·width, cout].
func Conv3x3(x, w, b mat.Tensor, batch, height, width int) mat.Tensor {
	return run(newConv("Conv3x3", 9, x, w, b, batch, height, width))
}

// Conv1x1 is the 1×1 convolution over the same layout; w is [cout, cin]
// (PyTorch's [cout, cin, 1, 1] flattened).
func Conv1x1(x, w, b mat.Tensor) mat.Tensor {
	rows, _ := dims("Conv1x1", "x", x)
	return run(newConv("Conv1x1", 1, x, w, b, 1, 1, rows))
}

type convSpec struct {
	x, w, b              mat.Tensor
	taps                 int // 9 for 3×3, 1 for 1×1
	batch, height, width int
	rows, cin, cout      int
}

type conv[T float.DType] struct{ convSpec }

func newConv(op string, taps int, x, w, b mat.Tensor, batch, height, width int) ag.AutoGradFunction {
	colocate(op, &x, &w, &b)
	rows, cin := dims(op, "x", x)
	if batch < 1 || height < 1 || width < 1 || batch*height*width != rows {
		panic(fmt.Sprintf("ops: %s: x has %d rows, want batch·height·width = %d·%d·%d", op, rows, batch, height, width))
	}
	cout, _ := dims(op, "w", w)
	needShape(op, "w", w, cout, cin*taps, fmt.Sprintf(" (cin = %d columns of x, %d taps)", cin, taps))
	ops := []named{{"x", x}, {"w", w}}
	if b != nil {
		needVector(op, "b", b, cout, " (cout = rows of w)")
		ops = append(ops, named{"b", b})
	}
	s := convSpec{x, w, b, taps, batch, height, width, rows, cin, cout}
	return pickOn(op, &conv[float32]{s}, &conv[float64]{s}, &convDevice{conv[float32]{s}}, ops...)
}

func (f *conv[T]) Operands() []mat.Tensor {
	if f.b == nil {
		return []mat.Tensor{f.x, f.w}
	}
	return []mat.Tensor{f.x, f.w, f.b}
}

func (f *conv[T]) bias() []T {
	if f.b == nil {
		return nil
	}
	return data[T](f.b)
}

func (f *conv[T]) Forward() (mat.Tensor, error) {
	y := make([]T, f.rows*f.cout)
	if f.taps == 1 {
		kernels.Conv1x1Forward(y, data[T](f.x), data[T](f.w), f.bias(), f.rows, f.cin, f.cout)
	} else {
		ws := getBuffer[T](kernels.Conv3x3Scratch(f.batch, f.height, f.width, f.cin, f.cout))
		kernels.Conv3x3Forward(y, data[T](f.x), data[T](f.w), f.bias(), f.batch, f.height, f.width, f.cin, f.cout, ws)
		putBuffer(ws)
	}
	return newMatrix(f.rows, f.cout, y), nil
}

func (f *conv[T]) Backward(gy mat.Tensor) error {
	dx, dw, db := gradBuffer[T](f.x), gradBuffer[T](f.w), gradBuffer[T](f.b)
	if f.taps == 1 {
		kernels.Conv1x1Backward(dx, dw, db, data[T](gy), data[T](f.x), data[T](f.w), f.rows, f.cin, f.cout)
	} else {
		ws := getBuffer[T](kernels.Conv3x3Scratch(f.batch, f.height, f.width, f.cin, f.cout))
		kernels.Conv3x3Backward(dx, dw, db, data[T](gy), data[T](f.x), data[T](f.w), f.batch, f.height, f.width, f.cin, f.cout, ws)
		putBuffer(ws)
	}
	accGrad(f.x, dx)
	accGrad(f.w, dw)
	accGrad(f.b, db)
	return nil
}

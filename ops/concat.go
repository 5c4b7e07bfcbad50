package ops

import (
	"fmt"

	"github.com/nlpodyssey/spago/ag"
	"github.com/nlpodyssey/spago/mat"
	"github.com/nlpodyssey/spago/mat/float"

	"github.com/dcdit/dcdit/kernels"
)

// ConcatCols returns [x₀ | x₁ | …]: matrices with the same rows side by
// side (rebuilding a fused [q | k | v] after q and k were normalised and
// rotated separately).
func ConcatCols(xs ...mat.Tensor) mat.Tensor { return run(newConcat("ConcatCols", false, xs)) }

// ConcatRows returns [x₀ ; x₁ ; …]: matrices with the same columns stacked
// (joining two token streams before GatherRows interleaves them).
func ConcatRows(xs ...mat.Tensor) mat.Tensor { return run(newConcat("ConcatRows", true, xs)) }

type concatSpec struct {
	xs         []mat.Tensor
	byRows     bool
	sizes      []int // rows (byRows) or columns of each part
	rows, cols int   // of the output
}

type concat[T float.DType] struct{ concatSpec }

func newConcat(op string, byRows bool, xs []mat.Tensor) ag.AutoGradFunction {
	if len(xs) == 0 {
		panic(fmt.Sprintf("ops: %s: no operands", op))
	}
	s := concatSpec{xs: append([]mat.Tensor(nil), xs...), byRows: byRows}
	operands := make([]named, len(xs))
	for i, x := range xs {
		name := fmt.Sprintf("xs[%d]", i)
		r, c := dims(op, name, x)
		operands[i] = named{name, x}
		switch {
		case i == 0 && byRows:
			s.cols = c
		case i == 0:
			s.rows = r
		case byRows && c != s.cols:
			panic(fmt.Sprintf("ops: %s: %s has %d columns, want %d like xs[0]", op, name, c, s.cols))
		case !byRows && r != s.rows:
			panic(fmt.Sprintf("ops: %s: %s has %d rows, want %d like xs[0]", op, name, r, s.rows))
		}
		if byRows {
			s.sizes = append(s.sizes, r)
			s.rows += r
		} else {
			s.sizes = append(s.sizes, c)
			s.cols += c
		}
	}
	return pick(op, &concat[float32]{s}, &concat[float64]{s}, operands...)
}

func (f *concat[T]) Operands() []mat.Tensor { return f.xs }

func (f *concat[T]) Forward() (mat.Tensor, error) {
	y := getBuffer[T](f.rows * f.cols)
	at := 0
	for i, x := range f.xs {
		xd := data[T](x)
		if f.byRows {
			copy(y[at*f.cols:], xd)
		} else {
			w := f.sizes[i]
			for r := range f.rows {
				copy(y[r*f.cols+at:r*f.cols+at+w], xd[r*w:(r+1)*w])
			}
		}
		at += f.sizes[i]
	}
	return output(f.rows, f.cols, y), nil
}

func (f *concat[T]) Backward(gy mat.Tensor) error {
	dy := data[T](gy)
	at := 0
	for i, x := range f.xs {
		if dx := gradBuffer[T](x); dx != nil {
			if f.byRows {
				copy(dx, dy[at*f.cols:(at+f.sizes[i])*f.cols])
			} else {
				kernels.SliceCols(dx, dy, f.cols, at, at+f.sizes[i])
			}
			accGrad(x, dx)
		}
		at += f.sizes[i]
	}
	return nil
}

package ops

import (
	"fmt"

	"github.com/nlpodyssey/spago/ag"
	"github.com/nlpodyssey/spago/mat"
	"github.com/nlpodyssey/spago/mat/float"

	"github.com/dcdit/dcdit/kernels"
)

// GatherRows returns y [len(idx), D] with y[i] = x[idx[i]] for x [N, D]:
// selecting the kept tokens when chunking, or copying each position's
// nearest kept token when de-chunking. Indices may repeat; the gradient of
// a row gathered several times is the sum of its copies' gradients.
func GatherRows(x mat.Tensor, idx []int) mat.Tensor {
	return run(newGatherRows(x, idx))
}

type rowsSpec struct {
	x          mat.Tensor
	idx        []int // private copy
	rows, cols int   // of the output
	xRows      int
}

type gatherRows[T float.DType] struct{ rowsSpec }

func newGatherRows(x mat.Tensor, idx []int) ag.AutoGradFunction {
	xRows, cols := dims("GatherRows", "x", x)
	s := rowsSpec{x, copyIndex("GatherRows", idx, xRows), len(idx), cols, xRows}
	return pickOn("GatherRows", &gatherRows[float32]{s}, &gatherRows[float64]{s}, &gatherRowsDevice{gatherRows: gatherRows[float32]{s}}, named{"x", x})
}

func (f *gatherRows[T]) Operands() []mat.Tensor { return []mat.Tensor{f.x} }

func (f *gatherRows[T]) Forward() (mat.Tensor, error) {
	y := getBuffer[T](f.rows * f.cols)
	kernels.GatherRows(y, data[T](f.x), f.idx, f.cols)
	return output(f.rows, f.cols, y), nil
}

func (f *gatherRows[T]) Backward(gy mat.Tensor) error {
	if dx := gradBuffer[T](f.x); dx != nil {
		kernels.GatherRowsBackward(dx, data[T](gy), f.idx, f.cols)
		accGrad(f.x, dx)
	}
	return nil
}

// ScatterRows returns y [rows, D], zero except y[idx[i]] = x[i] for x
// [len(idx), D]: putting processed tokens back at their positions.
// Indices must be distinct (a repeated one panics: which copy would win is
// undefined, and its gradient with it).
func ScatterRows(x mat.Tensor, idx []int, rows int) mat.Tensor {
	return run(newScatterRows(x, idx, rows))
}

type scatterRows[T float.DType] struct{ rowsSpec }

func newScatterRows(x mat.Tensor, idx []int, rows int) ag.AutoGradFunction {
	xRows, cols := dims("ScatterRows", "x", x)
	if xRows != len(idx) {
		panic(fmt.Sprintf("ops: ScatterRows: x has %d rows, want one per index (%d)", xRows, len(idx)))
	}
	if rows < 0 {
		panic(fmt.Sprintf("ops: ScatterRows: %d output rows", rows))
	}
	own := copyIndex("ScatterRows", idx, rows)
	seen := make([]bool, rows)
	for i, j := range own {
		if seen[j] {
			panic(fmt.Sprintf("ops: ScatterRows: idx[%d] = %d repeats an earlier index", i, j))
		}
		seen[j] = true
	}
	s := rowsSpec{x, own, rows, cols, xRows}
	return pickOn("ScatterRows", &scatterRows[float32]{s}, &scatterRows[float64]{s}, &scatterRowsDevice{scatterRows: scatterRows[float32]{s}}, named{"x", x})
}

func (f *scatterRows[T]) Operands() []mat.Tensor { return []mat.Tensor{f.x} }

func (f *scatterRows[T]) Forward() (mat.Tensor, error) {
	y := getBuffer[T](f.rows * f.cols)
	kernels.ScatterRows(y, data[T](f.x), f.idx, f.cols)
	return output(f.rows, f.cols, y), nil
}

func (f *scatterRows[T]) Backward(gy mat.Tensor) error {
	if dx := gradBuffer[T](f.x); dx != nil {
		kernels.ScatterRowsBackward(dx, data[T](gy), f.idx, f.cols)
		accGrad(f.x, dx)
	}
	return nil
}

// SliceCols returns x[:, from:to] as a new matrix: splitting DiT's adaLN
// projection [S, 6D] into shift, scale and gate vectors.
func SliceCols(x mat.Tensor, from, to int) mat.Tensor {
	return run(newSliceCols(x, from, to))
}

type sliceColsSpec struct {
	x                    mat.Tensor
	rows, cols, from, to int
}

type sliceCols[T float.DType] struct{ sliceColsSpec }

func newSliceCols(x mat.Tensor, from, to int) ag.AutoGradFunction {
	rows, cols := dims("SliceCols", "x", x)
	if from < 0 || from > to || to > cols {
		panic(fmt.Sprintf("ops: SliceCols: columns [%d, %d) out of the %d columns of x", from, to, cols))
	}
	s := sliceColsSpec{x, rows, cols, from, to}
	return pickOn("SliceCols", &sliceCols[float32]{s}, &sliceCols[float64]{s}, &sliceColsDevice{sliceCols[float32]{s}}, named{"x", x})
}

func (f *sliceCols[T]) Operands() []mat.Tensor { return []mat.Tensor{f.x} }

func (f *sliceCols[T]) Forward() (mat.Tensor, error) {
	y := getBuffer[T](f.rows * (f.to - f.from))
	kernels.SliceCols(y, data[T](f.x), f.cols, f.from, f.to)
	return output(f.rows, f.to-f.from, y), nil
}

func (f *sliceCols[T]) Backward(gy mat.Tensor) error {
	if dx := gradBuffer[T](f.x); dx != nil {
		kernels.SliceColsBackward(dx, data[T](gy), f.cols, f.from, f.to)
		accGrad(f.x, dx)
	}
	return nil
}

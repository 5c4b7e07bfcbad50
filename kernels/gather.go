package kernels

import (
	"fmt"

	"github.com/dcdit/dcdit/kernels/gemm"
	"github.com/dcdit/dcdit/kernels/parallel"
)

// gatherNeedIndex panics unless every index addresses one of rows rows.
func gatherNeedIndex(kernel string, idx []int, rows int) {
	for i, j := range idx {
		if uint(j) >= uint(rows) {
			panic(fmt.Sprintf("kernels: %s: idx[%d] = %d out of range [0, %d)", kernel, i, j, rows))
		}
	}
}

// GatherRows sets y[i, :] = x[idx[i], :] for x [rowsX, cols] and y
// [len(idx), cols]: selecting the kept tokens of a chunked sequence, or
// copying each position's nearest kept token when de-chunking. Indices may
// repeat.
func GatherRows[T gemm.Float](y, x []T, idx []int, cols int) {
	ewNeedDims("GatherRows", cols)
	rowsX := ewRowsOf("GatherRows", "x", len(x), cols)
	ewNeedLen("GatherRows", "y", len(y), len(idx)*cols)
	gatherNeedIndex("GatherRows", idx, rowsX)
	parallel.For(len(idx), ewRowGrain(cols), func(lo, hi int) {
		for i := lo; i < hi; i++ {
			j := idx[i]
			copy(y[i*cols:(i+1)*cols], x[j*cols:(j+1)*cols])
		}
	})
}

// GatherRowsBackward is the gradient of GatherRows: it zeroes dx
// [rowsX, cols] and then adds dx[idx[i], :] += dy[i, :], so that rows
// gathered several times receive the sum of their gradients.
func GatherRowsBackward[T gemm.Float](dx, dy []T, idx []int, cols int) {
	ewNeedDims("GatherRowsBackward", cols)
	rowsX := ewRowsOf("GatherRowsBackward", "dx", len(dx), cols)
	ewNeedLen("GatherRowsBackward", "dy", len(dy), len(idx)*cols)
	gatherNeedIndex("GatherRowsBackward", idx, rowsX)
	// Repeated indices make a row-parallel scatter race; column blocks keep
	// every destination element on one worker and the order of additions
	// fixed (bit-reproducible).
	redColumns(cols, max(len(idx), rowsX), func(c0, c1 int) {
		for r := 0; r < rowsX; r++ {
			clear(dx[r*cols+c0 : r*cols+c1])
		}
		for i, j := range idx {
			d, s := dx[j*cols+c0:j*cols+c1], dy[i*cols+c0:i*cols+c1]
			s = s[:len(d)]
			for k := range d {
				d[k] += s[k]
			}
		}
	})
}

// ScatterRows zeroes y [rowsY, cols] and sets y[idx[i], :] = x[i, :] for x
// [len(idx), cols]: putting processed tokens back at their grid positions.
// Indices must not repeat (not checked here: the result would depend on
// which copy wins and the backward would be wrong); ops.ScatterRows checks.
func ScatterRows[T gemm.Float](y, x []T, idx []int, cols int) {
	ewNeedDims("ScatterRows", cols)
	rowsY := ewRowsOf("ScatterRows", "y", len(y), cols)
	ewNeedLen("ScatterRows", "x", len(x), len(idx)*cols)
	gatherNeedIndex("ScatterRows", idx, rowsY)
	ewFill(y, 0)
	parallel.For(len(idx), ewRowGrain(cols), func(lo, hi int) {
		for i := lo; i < hi; i++ {
			j := idx[i]
			copy(y[j*cols:(j+1)*cols], x[i*cols:(i+1)*cols])
		}
	})
}

// ScatterRowsBackward is the gradient of ScatterRows: dx[i, :] =
// dy[idx[i], :] (a GatherRows).
func ScatterRowsBackward[T gemm.Float](dx, dy []T, idx []int, cols int) {
	GatherRows(dx, dy, idx, cols)
}

// SliceCols sets y = x[:, from:to] for x [rows, cols] and y
// [rows, to−from]: splitting the adaLN projection into shift, scale and
// gate.
func SliceCols[T gemm.Float](y, x []T, cols, from, to int) {
	ewNeedDims("SliceCols", cols)
	if from < 0 || from > to || to > cols {
		panic(fmt.Sprintf("kernels: SliceCols: columns [%d, %d) out of [0, %d)", from, to, cols))
	}
	rows := ewRowsOf("SliceCols", "x", len(x), cols)
	w := to - from
	ewNeedLen("SliceCols", "y", len(y), rows*w)
	parallel.For(rows, ewRowGrain(cols), func(lo, hi int) {
		for r := lo; r < hi; r++ {
			copy(y[r*w:(r+1)*w], x[r*cols+from:r*cols+to])
		}
	})
}

// SliceColsBackward is the gradient of SliceCols: dx [rows, cols] is zero
// except dx[:, from:to] = dy.
func SliceColsBackward[T gemm.Float](dx, dy []T, cols, from, to int) {
	ewNeedDims("SliceColsBackward", cols)
	if from < 0 || from > to || to > cols {
		panic(fmt.Sprintf("kernels: SliceColsBackward: columns [%d, %d) out of [0, %d)", from, to, cols))
	}
	rows := ewRowsOf("SliceColsBackward", "dx", len(dx), cols)
	w := to - from
	ewNeedLen("SliceColsBackward", "dy", len(dy), rows*w)
	parallel.For(rows, ewRowGrain(cols), func(lo, hi int) {
		for r := lo; r < hi; r++ {
			dxr := dx[r*cols : (r+1)*cols]
			clear(dxr[:from])
			copy(dxr[from:to], dy[r*w:(r+1)*w])
			clear(dxr[to:])
		}
	})
}

package kernels

import (
	"fmt"
	"math"

	"github.com/dcdit/dcdit/kernels/gemm"
	"github.com/dcdit/dcdit/kernels/parallel"
)

// gateShape validates a per-sample group gate: x [rows, cols] packed by
// offsets (len S+1), gates [S, groups], groups dividing cols. It returns
// rows and the group width cols/groups.
func gateShape(kernel string, n, cols, groups int, offsets []int, gates int) (rows, width int) {
	ewNeedDims(kernel, cols, groups)
	if groups == 0 || cols%groups != 0 {
		panic(fmt.Sprintf("kernels: %s: %d groups do not divide %d columns", kernel, groups, cols))
	}
	rows = ewRowsOf(kernel, "x", n, cols)
	ewNeedOffsets(kernel, offsets, rows)
	ewNeedLen(kernel, "gates", gates, (len(offsets)-1)*groups)
	return rows, cols / groups
}

// GateGroups sets y[r, j] = g[s, j/w]·x[r, j] for x, y [rows, cols] packed
// by offsets (sample s owns rows offsets[s] … offsets[s+1]−1) and
// per-sample gates g [S, groups], w = cols/groups: each sample's columns
// scaled group by group, as DyDiT gates attention heads (w = d_h) and MLP
// channel groups. y may alias x.
func GateGroups[T gemm.Float](y, x, g []T, offsets []int, cols, groups int) {
	rows, w := gateShape("GateGroups", len(x), cols, groups, offsets, len(g))
	ewNeedLen("GateGroups", "y", len(y), len(x))
	modRows(offsets, rows, cols, func(lo, hi, s int) {
		gs := g[s*groups : (s+1)*groups]
		for r := lo; r < hi; r++ {
			xr, yr := x[r*cols:(r+1)*cols], y[r*cols:(r+1)*cols]
			for q, v := range gs {
				yq, xq := yr[q*w:(q+1)*w], xr[q*w:(q+1)*w]
				for i := range yq {
					yq[i] = v * xq[i]
				}
			}
		}
	})
}

// GateGroupsBackward computes the gradients of GateGroups from dy:
// dx[r, j] = g[s, j/w]·dy[r, j] and dg[s, q] = Σ over sample s's rows and
// group q's columns of dy·x. dx or dg may be nil.
func GateGroupsBackward[T gemm.Float](dx, dg, dy, x, g []T, offsets []int, cols, groups int) {
	rows, w := gateShape("GateGroupsBackward", len(dy), cols, groups, offsets, len(g))
	if dx != nil {
		GateGroups(dx, dy, g, offsets, cols, groups)
	}
	if dg == nil {
		return
	}
	ewNeedLen("GateGroupsBackward", "dg", len(dg), len(g))
	ewNeedLen("GateGroupsBackward", "x", len(x), len(dy))
	redPerSample(offsets, rows, groups, func(s, q0, q1 int) {
		for q := q0; q < q1; q++ {
			var sum T
			for r := offsets[s]; r < offsets[s+1]; r++ {
				sum += Dot(dy[r*cols+q*w:r*cols+(q+1)*w], x[r*cols+q*w:r*cols+(q+1)*w])
			}
			dg[s*groups+q] = sum
		}
	})
}

// HardGateForward sets y to DyDiT's hard gates of the logits z [rows,
// cols]: 1 where σ(z) ≥ ½ (z ≥ 0) or the column is one of the first on,
// which are always on, and 0 elsewhere (a NaN logit too).
func HardGateForward[T gemm.Float](y, z []T, cols, on int) {
	ewNeedDims("HardGateForward", cols, on)
	ewRowsOf("HardGateForward", "z", len(z), cols)
	ewNeedLen("HardGateForward", "y", len(y), len(z))
	parallel.For(len(z), ewGrain, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			y[i] = 0
			if i%cols < on || z[i] >= 0 {
				y[i] = 1
			}
		}
	})
}

// HardGateBackward sets dz to the gradient of HardGateForward as the
// straight-through estimator passes it: the sigmoid's, dz = σ(z)·(1 −
// σ(z))·dy, and 0 in the first on columns, whose gates are constants.
func HardGateBackward[T gemm.Float](dz, dy, z []T, cols, on int) {
	ewNeedDims("HardGateBackward", cols, on)
	ewRowsOf("HardGateBackward", "z", len(z), cols)
	ewNeedLen("HardGateBackward", "dy", len(dy), len(z))
	ewNeedLen("HardGateBackward", "dz", len(dz), len(z))
	parallel.For(len(z), ewGrain, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			if i%cols < on {
				dz[i] = 0
				continue
			}
			s := 1 / (1 + math.Exp(-float64(z[i])))
			dz[i] = T(s * (1 - s) * float64(dy[i]))
		}
	})
}

package ops

import (
	"fmt"
	"testing"

	"github.com/nlpodyssey/spago/mat"
)

func TestRMSNormHeads(t *testing.T) {
	var cases []opCase
	for _, tc := range []struct {
		rows, heads, dim int
		wConst           bool
	}{{1, 1, 1, false}, {3, 2, 4, false}, {4, 3, 5, true}, {0, 2, 3, false}} {
		cases = append(cases, opCase{
			name: fmt.Sprintf("N%d_heads%d_hd%d", tc.rows, tc.heads, tc.dim),
			ins: []input{{name: "x", rows: tc.rows, cols: tc.heads * tc.dim, scale: 2},
				{name: "w", rows: tc.dim, cols: 1, scale: 1.5, noGrad: tc.wConst}},
			build: func(x []mat.Tensor) mat.Tensor { return RMSNormHeads(x[0], x[1], tc.heads, 1e-5) },
			// Per head it is RMSNorm over the [N·heads, hd] view.
			ref:   rmsNormRef(tc.rows*tc.heads, tc.dim, 1e-5),
			shape: [2]int{tc.rows, tc.heads * tc.dim},
		})
	}
	runOpCases(t, cases)
}

func TestRMSNormHeadsPanics(t *testing.T) {
	x := mat.NewDense[float32](mat.WithShape(3, 12))
	mustPanic(t, func() { RMSNormHeads(x, mat.NewDense[float32](mat.WithShape(4, 1)), 5, 1e-5) }, "ops: RMSNormHeads: x has 12 columns")
	mustPanic(t, func() { RMSNormHeads(x, mat.NewDense[float32](mat.WithShape(4, 1)), 2, 1e-5) }, "ops: RMSNormHeads: w has shape [4 1]", "head width")
}

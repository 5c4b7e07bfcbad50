package ops

import (
	"fmt"
	"math"
	"testing"

	"github.com/nlpodyssey/spago/mat"
)

// GroupNormSiLU is SiLU of GroupNorm: forward against the reference,
// gradients against finite differences, float32 against float64.
func TestGroupNormSiLU(t *testing.T) {
	var cases []opCase
	for _, tc := range []struct{ batch, tokens, channels, groups int }{
		{1, 2, 1, 1}, {2, 3, 4, 2}, {3, 4, 6, 3}, {1, 5, 8, 1}, {2, 4, 16, 4},
	} {
		B, L, C, G := tc.batch, tc.tokens, tc.channels, tc.groups
		gn := groupNormRef(B, L, C, G, 1e-5)
		cases = append(cases, opCase{
			name: fmt.Sprintf("B%d_L%d_C%d_G%d", B, L, C, G),
			ins: []input{{name: "x", rows: B * L, cols: C, scale: 2}, {name: "w", rows: C, cols: 1, scale: 1.5},
				{name: "b", rows: 1, cols: C}},
			build: func(x []mat.Tensor) mat.Tensor { return GroupNormSiLU(x[0], x[1], x[2], B, G, 1e-5) },
			ref: func(d [][]float64) []float64 {
				z := gn(d)
				for i, v := range z {
					z[i] = v / (1 + math.Exp(-v))
				}
				return z
			},
			shape: [2]int{B * L, C},
		})
	}
	runOpCases(t, cases)
	x := mat.NewDense[float32](mat.WithShape(6, 4))
	w, b := mat.NewDense[float32](mat.WithShape(4, 1)), mat.NewDense[float32](mat.WithShape(4, 1))
	mustPanic(t, func() { GroupNormSiLU(x, w, b, 4, 2, 1e-5) }, "ops: GroupNorm: 6 rows of x do not split into 4 samples")
}

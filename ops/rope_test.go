package ops

import (
	"fmt"
	"testing"

	"github.com/nlpodyssey/spago/mat"
)

// ropeRef rotates each interleaved pair of every head by its row's factor.
func ropeRef(rows, heads, dim int) func(d [][]float64) []float64 {
	return func(d [][]float64) []float64 {
		x, fr := d[0], d[1]
		y := make([]float64, len(x))
		for r := range rows {
			for h := range heads {
				for i := 0; i < dim; i += 2 {
					o := r*heads*dim + h*dim + i
					c, s := fr[r*dim+i], fr[r*dim+i+1]
					y[o] = x[o]*c - x[o+1]*s
					y[o+1] = x[o]*s + x[o+1]*c
				}
			}
		}
		return y
	}
}

func TestRoPE(t *testing.T) {
	var cases []opCase
	for _, tc := range []struct {
		rows, heads, dim int
		freqsConst       bool
	}{{1, 1, 2, false}, {3, 2, 4, true}, {5, 3, 6, false}, {0, 2, 4, false}} {
		cases = append(cases, opCase{
			name: fmt.Sprintf("N%d_heads%d_hd%d", tc.rows, tc.heads, tc.dim),
			ins: []input{{name: "x", rows: tc.rows, cols: tc.heads * tc.dim, scale: 2},
				{name: "freqs", rows: tc.rows, cols: tc.dim, noGrad: tc.freqsConst}},
			build: func(x []mat.Tensor) mat.Tensor { return RoPE(x[0], x[1], tc.heads) },
			ref:   ropeRef(tc.rows, tc.heads, tc.dim),
			shape: [2]int{tc.rows, tc.heads * tc.dim},
		})
	}
	runOpCases(t, cases)
}

func TestRoPEPanics(t *testing.T) {
	x := mat.NewDense[float32](mat.WithShape(3, 12))
	mustPanic(t, func() { RoPE(x, mat.NewDense[float32](mat.WithShape(3, 6)), 5) }, "ops: RoPE: x has 12 columns")
	mustPanic(t, func() { RoPE(x, mat.NewDense[float32](mat.WithShape(3, 3)), 4) }, "ops: RoPE: x has 12 columns", "even hd")
	mustPanic(t, func() { RoPE(x, mat.NewDense[float32](mat.WithShape(2, 6)), 2) }, "ops: RoPE: freqs has shape [2 6], want [3 6]")
}

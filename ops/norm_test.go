package ops

import (
	"fmt"
	"math"
	"testing"

	"github.com/nlpodyssey/spago/mat"

	"github.com/dcdit/dcdit/internal/fixtures"
)

func layerNormRef(rows, cols int, eps float64) func(d [][]float64) []float64 {
	return func(d [][]float64) []float64 {
		y := make([]float64, rows*cols)
		for r := range rows {
			row := d[0][r*cols : (r+1)*cols]
			var m, v float64
			for _, e := range row {
				m += e
			}
			m /= float64(cols)
			for _, e := range row {
				v += (e - m) * (e - m)
			}
			rs := 1 / math.Sqrt(v/float64(cols)+eps)
			for i, e := range row {
				y[r*cols+i] = (e - m) * rs
			}
		}
		return y
	}
}

func TestLayerNorm(t *testing.T) {
	var cases []opCase
	for _, sh := range [][2]int{{1, 1}, {1, 6}, {3, 5}, {4, 1}, {6, 33}, {0, 3}} {
		rows, cols := sh[0], sh[1]
		cases = append(cases, opCase{
			name:  fmt.Sprintf("%dx%d", rows, cols),
			ins:   []input{{name: "x", rows: rows, cols: cols, scale: 2}},
			build: func(x []mat.Tensor) mat.Tensor { return LayerNorm(x[0], 1e-6) },
			ref:   layerNormRef(rows, cols, 1e-6),
			shape: [2]int{rows, cols},
		})
	}
	runOpCases(t, cases)
}

// TestLayerNormEps: DiT's eps 1e-6 sits inside the square root.
func TestLayerNormEps(t *testing.T) {
	x := mat.NewDense[float64](mat.WithShape(1, 2), mat.WithBacking([]float64{-1e-3, 1e-3}))
	got := mat.Data[float64](LayerNorm(x, 1e-6).Value())[1]
	if want := 1e-3 / math.Sqrt(1e-6+1e-6); !fixtures.Within(math.Abs(got-want), 1e-12) {
		t.Errorf("LayerNorm([−1e-3, 1e-3])[1] = %v, want %v", got, want)
	}
}

func rmsNormRef(rows, cols int, eps float64) func(d [][]float64) []float64 {
	return func(d [][]float64) []float64 {
		y := make([]float64, rows*cols)
		for r := range rows {
			var ms float64
			for _, e := range d[0][r*cols : (r+1)*cols] {
				ms += e * e
			}
			rs := 1 / math.Sqrt(ms/float64(cols)+eps)
			for i := range cols {
				y[r*cols+i] = d[0][r*cols+i] * rs * d[1][i]
			}
		}
		return y
	}
}

func TestRMSNorm(t *testing.T) {
	var cases []opCase
	for _, tc := range []struct {
		rows, cols int
		rowW       bool
		wConst     bool
	}{{1, 1, false, false}, {3, 5, false, false}, {6, 33, true, false}, {4, 7, false, true}} {
		w := input{name: "w", rows: tc.cols, cols: 1, scale: 1.5, noGrad: tc.wConst}
		if tc.rowW {
			w.rows, w.cols = 1, tc.cols
		}
		cases = append(cases, opCase{
			name:  fmt.Sprintf("%dx%d", tc.rows, tc.cols),
			ins:   []input{{name: "x", rows: tc.rows, cols: tc.cols, scale: 2}, w},
			build: func(x []mat.Tensor) mat.Tensor { return RMSNorm(x[0], x[1], 1e-5) },
			ref:   rmsNormRef(tc.rows, tc.cols, 1e-5),
			shape: [2]int{tc.rows, tc.cols},
		})
	}
	runOpCases(t, cases)
}

func groupNormRef(batch, tokens, channels, groups int, eps float64) func(d [][]float64) []float64 {
	return func(d [][]float64) []float64 {
		x, w, b := d[0], d[1], d[2]
		y := make([]float64, len(x))
		cpg := channels / groups
		n := float64(tokens * cpg)
		for s := range batch {
			for g := range groups {
				var m, v float64
				for r := s * tokens; r < (s+1)*tokens; r++ {
					for c := g * cpg; c < (g+1)*cpg; c++ {
						m += x[r*channels+c]
					}
				}
				m /= n
				for r := s * tokens; r < (s+1)*tokens; r++ {
					for c := g * cpg; c < (g+1)*cpg; c++ {
						v += (x[r*channels+c] - m) * (x[r*channels+c] - m)
					}
				}
				rs := 1 / math.Sqrt(v/n+eps)
				for r := s * tokens; r < (s+1)*tokens; r++ {
					for c := g * cpg; c < (g+1)*cpg; c++ {
						y[r*channels+c] = (x[r*channels+c]-m)*rs*w[c] + b[c]
					}
				}
			}
		}
		return y
	}
}

func TestGroupNorm(t *testing.T) {
	var cases []opCase
	for _, tc := range []struct{ batch, tokens, channels, groups int }{
		{1, 1, 1, 1}, {2, 3, 4, 2}, {3, 4, 6, 3}, {1, 5, 8, 1}, {2, 4, 6, 6},
	} {
		B, L, C, G := tc.batch, tc.tokens, tc.channels, tc.groups
		cases = append(cases, opCase{
			name: fmt.Sprintf("B%d_L%d_C%d_G%d", B, L, C, G),
			ins: []input{{name: "x", rows: B * L, cols: C, scale: 2}, {name: "w", rows: C, cols: 1, scale: 1.5},
				{name: "b", rows: 1, cols: C}},
			build: func(x []mat.Tensor) mat.Tensor { return GroupNorm(x[0], x[1], x[2], B, G, 1e-5) },
			ref:   groupNormRef(B, L, C, G, 1e-5),
			shape: [2]int{B * L, C},
		})
	}
	runOpCases(t, cases)
}

func TestNormPanics(t *testing.T) {
	x := mat.NewDense[float32](mat.WithShape(6, 4))
	w, b := mat.NewDense[float32](mat.WithShape(4, 1)), mat.NewDense[float32](mat.WithShape(4, 1))
	mustPanic(t, func() { GroupNorm(x, w, b, 4, 2, 1e-5) }, "ops: GroupNorm: 6 rows of x do not split into 4 samples")
	mustPanic(t, func() { GroupNorm(x, w, b, 2, 3, 1e-5) }, "ops: GroupNorm: 4 channels", "3 groups")
	mustPanic(t, func() { GroupNorm(x, w, mat.NewDense[float32](mat.WithShape(2, 2)), 2, 2, 1e-5) }, "ops: GroupNorm: b has shape [2 2]")
	mustPanic(t, func() { RMSNorm(x, mat.NewDense[float32](mat.WithShape(3, 1)), 1e-5) }, "ops: RMSNorm: w has shape [3 1]", "[4 1] or [1 4]")
	mustPanic(t, func() { LayerNorm(x, -1) }, "ops: LayerNorm: eps = -1")
	mustPanic(t, func() { LayerNorm(x, math.NaN()) }, "ops: LayerNorm: eps = NaN")
}

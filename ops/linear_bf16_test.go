package ops

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/nlpodyssey/spago/mat"

	"github.com/dcdit/dcdit/loaders/dtype"
)

// LinearBF16 equals Linear on the widened weight bit for bit, with and
// without a bias, over shapes on both sides of the GEMM's tiles and blocks
// (and large enough to run in parallel), and leaves its inputs unchanged.
func TestLinearBF16MatchesLinear(t *testing.T) {
	for i, tc := range []struct {
		rows, in, out   int
		bias, rowBias   bool
		negZeroAndSmall bool
	}{
		{1, 1, 1, true, false, false},
		{3, 5, 4, false, false, false},
		{7, 6, 5, true, true, false}, // bias given as [1, out]
		{0, 3, 2, true, false, false},
		{17, 33, 9, true, false, true},
		{130, 300, 70, false, false, false},
		{257, 513, 129, true, false, false},
	} {
		t.Run(fmt.Sprintf("%dx%dx%d/bias=%v", tc.rows, tc.in, tc.out, tc.bias), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(i), 11))
			rnd := func(n int) []float32 {
				v := make([]float32, n)
				for j := range v {
					v[j] = float32(rng.NormFloat64())
				}
				return v
			}
			wb := make([]uint16, tc.out*tc.in)
			for j, v := range rnd(len(wb)) {
				wb[j] = dtype.Float32ToBF16(v)
			}
			if tc.negZeroAndSmall {
				// Signed zeros and subnormals widen exactly too.
				wb[0], wb[1] = 0x8000, 0x0001
			}
			ww := make([]float32, len(wb))
			for j, v := range wb {
				ww[j] = dtype.BF16ToFloat32(v)
			}
			xv := rnd(tc.rows * tc.in)
			x := mat.NewDense[float32](mat.WithShape(tc.rows, tc.in), mat.WithBacking(slices.Clone(xv)))
			w := mat.NewDense[float32](mat.WithShape(tc.out, tc.in), mat.WithBacking(ww))
			var b mat.Tensor
			if tc.bias {
				shape := []int{tc.out, 1}
				if tc.rowBias {
					shape = []int{1, tc.out}
				}
				b = mat.NewDense[float32](mat.WithShape(shape...), mat.WithBacking(rnd(tc.out)))
			}
			bm := &BF16Matrix{Rows: tc.out, Cols: tc.in, Data: slices.Clone(wb)}
			got, want := LinearBF16(x, bm, b), Linear(x, w, b)
			if s := got.Shape(); s[0] != tc.rows || s[1] != tc.out {
				t.Fatalf("shape %v, want [%d %d]", s, tc.rows, tc.out)
			}
			g, e := mat.Data[float32](got.Value()), mat.Data[float32](want.Value())
			for j := range e {
				if math.Float32bits(g[j]) != math.Float32bits(e[j]) {
					t.Fatalf("y[%d] = %v, Linear's %v (%d values)", j, g[j], e[j], len(e))
				}
			}
			if !slices.Equal(mat.Data[float32](x), xv) || !slices.Equal(bm.Data, wb) {
				t.Error("LinearBF16 modified its inputs")
			}
		})
	}
}

func TestLinearBF16Panics(t *testing.T) {
	x := mat.NewDense[float32](mat.WithShape(2, 3))
	w := &BF16Matrix{Rows: 4, Cols: 3, Data: make([]uint16, 12)}
	tracked := mat.NewDense[float32](mat.WithShape(2, 3))
	tracked.SetRequiresGrad(true)
	for _, tc := range []struct {
		name string
		f    func()
		want []string
	}{
		{"w columns", func() { LinearBF16(x, &BF16Matrix{Rows: 4, Cols: 2, Data: make([]uint16, 8)}, nil) }, []string{"ops: LinearBF16: w has shape [4 2], want [out 3]"}},
		{"w data", func() { LinearBF16(x, &BF16Matrix{Rows: 4, Cols: 3, Data: make([]uint16, 11)}, nil) }, []string{"w holds 11 values for shape [4 3]"}},
		{"nil w", func() { LinearBF16(x, nil, nil) }, []string{"ops: LinearBF16: w is nil"}},
		{"bias", func() { LinearBF16(x, w, mat.NewDense[float32](mat.WithShape(3, 1))) }, []string{"ops: LinearBF16: b has shape [3 1]", "[4 1]"}},
		{"float64", func() { LinearBF16(mat.NewDense[float64](mat.WithShape(2, 3)), w, nil) }, []string{"x is float64, want float32"}},
		{"gradient", func() { LinearBF16(tracked, w, nil) }, []string{"x requires a gradient", "without a backward pass"}},
		{"nil x", func() { LinearBF16(nil, w, nil) }, []string{"ops: LinearBF16: x is nil"}},
	} {
		t.Run(tc.name, func(t *testing.T) { mustPanic(t, tc.f, tc.want...) })
	}
}

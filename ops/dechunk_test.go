package ops

import (
	"fmt"
	"math"
	"testing"

	"github.com/nlpodyssey/spago/mat"
)

// deChunkRef is the de-chunk smoothing written as the reference's dense
// formula, in float64.
func deChunkRef(h, p []float64, offsets []int, pos []float64, cols int, sigma, clamp float64) []float64 {
	y := make([]float64, len(h))
	q := make([]float64, len(p))
	for i, v := range p {
		q[i] = math.Min(math.Max(v, clamp), 1-clamp)
	}
	for s := 1; s < len(offsets); s++ {
		for i := offsets[s-1]; i < offsets[s]; i++ {
			w := make([]float64, offsets[s]-offsets[s-1])
			var tot float64
			for j := offsets[s-1]; j < offsets[s]; j++ {
				dr, dc := pos[2*i]-pos[2*j], pos[2*i+1]-pos[2*j+1]
				w[j-offsets[s-1]] = math.Exp(-(dr*dr+dc*dc)/(2*sigma*sigma)) * q[j]
				tot += w[j-offsets[s-1]]
			}
			for c := range cols {
				var sm float64
				for j := offsets[s-1]; j < offsets[s]; j++ {
					sm += w[j-offsets[s-1]] / (tot + 1e-8) * h[j*cols+c]
				}
				y[i*cols+c] = q[i]*h[i*cols+c] + (1-q[i])*sm
			}
		}
	}
	return y
}

func TestDeChunk(t *testing.T) {
	var cases []opCase
	for _, tc := range []struct {
		offsets []int
		cols    int
		sigma   float64
		pos     []float64
	}{
		{[]int{0, 1}, 2, 1, []float64{3, 4}},
		{[]int{0, 3, 3, 7}, 3, 1, []float64{0, 0, 0, 2, 1, 1, 0, 0, 0, 1, 1, 0, 2, 2}},
		{[]int{0, 4}, 2, 2, []float64{0.5, 0, 0, 1.5, 1, 1, 3, 0.25}},
	} {
		n := tc.offsets[len(tc.offsets)-1]
		cases = append(cases, opCase{
			name: fmt.Sprintf("offsets=%v/cols=%d/sigma=%g", tc.offsets, tc.cols, tc.sigma),
			// p in [−1, 1) shifted to (0, 1) by the build: values near the
			// clamp would make finite differences straddle its kink.
			ins: []input{{name: "h", rows: n, cols: tc.cols}, {name: "p", rows: n, cols: 1, scale: 0.45}},
			build: func(x []mat.Tensor) mat.Tensor {
				return DeChunk(x[0], x[1], tc.offsets, tc.pos, tc.sigma, 1e-4)
			},
			ref: func(d [][]float64) []float64 {
				return deChunkRef(d[0], d[1], tc.offsets, tc.pos, tc.cols, tc.sigma, 1e-4)
			},
			shape: [2]int{n, tc.cols},
		})
	}
	// Probabilities must lie in (0, 1): run the cases on p + 0.5.
	for i := range cases {
		b, r := cases[i].build, cases[i].ref
		cases[i].build = func(x []mat.Tensor) mat.Tensor { return b([]mat.Tensor{x[0], shift(x[1], 0.5)}) }
		cases[i].ref = func(d [][]float64) []float64 {
			p := make([]float64, len(d[1]))
			for k, v := range d[1] {
				p[k] = v + 0.5
			}
			return r([][]float64{d[0], p})
		}
	}
	runOpCases(t, cases)
}

// shift adds a constant to every element (through ops, so gradients pass).
func shift(x mat.Tensor, c float64) mat.Tensor {
	r, k := x.Shape()[0], x.Shape()[1]
	switch x.Value().(type) {
	case *mat.Dense[float32], *value[float32]:
		v := make([]float32, r*k)
		for i := range v {
			v[i] = float32(c)
		}
		return Add(x, mat.NewDense[float32](mat.WithShape(r, k), mat.WithBacking(v)))
	default:
		v := make([]float64, r*k)
		for i := range v {
			v[i] = c
		}
		return Add(x, mat.NewDense[float64](mat.WithShape(r, k), mat.WithBacking(v)))
	}
}

// TestDeChunkClamp: a probability beyond the clamp gets no gradient and
// acts as the clamp value.
func TestDeChunkClamp(t *testing.T) {
	h := mat.NewDense[float64](mat.WithShape(2, 1), mat.WithBacking([]float64{1, 3}), mat.WithGrad(true))
	p := mat.NewDense[float64](mat.WithShape(2, 1), mat.WithBacking([]float64{1, 0.7}), mat.WithGrad(true))
	y := DeChunk(h, p, []int{0, 2}, []float64{0, 0, 0, 1}, 1, 1e-4)
	want := deChunkRef([]float64{1, 3}, []float64{1, 0.7}, []int{0, 2}, []float64{0, 0, 0, 1}, 1, 1, 1e-4)
	compareData(t, "value", mat.Data[float64](y.Value()), want, 1e-14)
	if err := Backward(Sum(y)); err != nil {
		t.Fatal(err)
	}
	if g := mat.Data[float64](p.Grad())[0]; g != 0 {
		t.Errorf("gradient of a clamped probability = %v, want 0", g)
	}
	if g := mat.Data[float64](p.Grad())[1]; g == 0 {
		t.Errorf("gradient of an unclamped probability is 0")
	}
}

func TestDeChunkShapes(t *testing.T) {
	h := mat.NewDense[float32](mat.WithShape(2, 3))
	p := mat.NewDense[float32](mat.WithShape(2, 1))
	mustPanic(t, func() { DeChunk(h, p, []int{0, 2}, []float64{0, 0}, 1, 1e-4) }, "DeChunk", "pos")
	mustPanic(t, func() {
		DeChunk(h, mat.NewDense[float32](mat.WithShape(3, 1)), []int{0, 2}, make([]float64, 4), 1, 1e-4)
	}, "DeChunk", "p")
	mustPanic(t, func() { DeChunk(h, p, []int{0, 2}, make([]float64, 4), 0, 1e-4) }, "sigma")
}

// TestSTE: ones forward, identity backward; through ScaleRows the
// multiplier receives ⟨dy, x⟩ per row and x receives dy.
func TestSTE(t *testing.T) {
	x := mat.NewDense[float64](mat.WithShape(2, 3), mat.WithBacking([]float64{1, 2, 3, 4, 5, 6}), mat.WithGrad(true))
	c := mat.NewDense[float64](mat.WithShape(2, 1), mat.WithBacking([]float64{0.3, 0.8}), mat.WithGrad(true))
	one := STE(c)
	compareData(t, "STE value", mat.Data[float64](one.Value()), []float64{1, 1}, 0)
	y := ScaleRows(x, one)
	compareData(t, "gated value", mat.Data[float64](y.Value()), mat.Data[float64](x.Value()), 0)
	r := mat.NewDense[float64](mat.WithShape(2, 3), mat.WithBacking([]float64{1, -1, 2, 0.5, 0, -2}))
	if err := seedBackward(y, r); err != nil {
		t.Fatal(err)
	}
	compareData(t, "dc", mat.Data[float64](c.Grad()), []float64{1 - 2 + 6, 2 + 0 - 12}, 1e-15)
	compareData(t, "dx", mat.Data[float64](x.Grad()), mat.Data[float64](r), 0)
}

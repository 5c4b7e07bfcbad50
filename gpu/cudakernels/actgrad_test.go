package cudakernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	cpu "github.com/dcdit/dcdit/kernels"
)

// TestActivationBackward compares GELUBackward, SiLUBackward and their
// FromOutput forms, Sigmoid, SigmoidBackward and Sub with the CPU kernels, over inputs reaching ±30
// (saturation at both ends) and exactly 0 (the FromOutput forms' special
// case), and sizes beyond one grid (the grid-stride loop).
func TestActivationBackward(t *testing.T) {
	r, sc := openScaffold(t)
	rng := rand.New(rand.NewPCG(51, 52))
	for _, n := range []int{1, 1000, 1<<22 + 17} {
		x, dy := randSlice(rng, n, 3, 0), randSlice(rng, n, 1, 0)
		x[0] = -30
		if n > 2 {
			x[1], x[2] = 30, 0
		}
		gelu, silu, sig := make([]float32, n), make([]float32, n), make([]float32, n)
		cpu.GELUForward(gelu, x)
		cpu.SiLUForward(silu, x)
		cpu.SigmoidForward(sig, x)
		gx, gdy, ggelu, gsilu, gsig := upload(t, r, x), upload(t, r, dy), upload(t, r, gelu), upload(t, r, silu), upload(t, r, sig)
		gdx := alloc(t, r, n)
		want := make([]float32, n)
		for _, tc := range []struct {
			name string
			gpu  func() error
			cpu  func()
		}{
			{"GELUBackward", func() error { return sc.GELUBackward(gdx, gdy, gx) }, func() { cpu.GELUBackward(want, dy, x) }},
			{"GELUBackwardFromOutput", func() error { return sc.GELUBackwardFromOutput(gdx, gdy, gx, ggelu) },
				func() { cpu.GELUBackwardFromOutput(want, dy, x, gelu) }},
			{"SiLUBackward", func() error { return sc.SiLUBackward(gdx, gdy, gx) }, func() { cpu.SiLUBackward(want, dy, x) }},
			{"SiLUBackwardFromOutput", func() error { return sc.SiLUBackwardFromOutput(gdx, gdy, gx, gsilu) },
				func() { cpu.SiLUBackwardFromOutput(want, dy, x, silu) }},
			{"Sigmoid", func() error { return sc.Sigmoid(gdx, gx) }, func() { cpu.SigmoidForward(want, x) }},
			{"SigmoidBackward", func() error { return sc.SigmoidBackward(gdx, gdy, gsig) }, func() { cpu.SigmoidBackward(want, dy, sig) }},
			{"Sub", func() error { return sc.Sub(gdx, gx, gdy) }, func() { cpu.Sub(want, x, dy) }},
		} {
			t.Run(fmt.Sprintf("%s/n=%d", tc.name, n), func(t *testing.T) {
				if err := tc.gpu(); err != nil {
					t.Fatal(err)
				}
				tc.cpu()
				check(t, "dx", download(t, gdx), want)
			})
		}
	}
}

// softmaxBackwardRef is y∘(dy − <dy, y>) per row in float64, rounded once:
// the CPU package has no exported row softmax (see softmaxRef).
func softmaxBackwardRef(dy, y []float32, rows, cols int) []float32 {
	out := make([]float32, len(y))
	for r := range rows {
		var d float64
		for i := r * cols; i < (r+1)*cols; i++ {
			d += float64(dy[i]) * float64(y[i])
		}
		for i := r * cols; i < (r+1)*cols; i++ {
			out[i] = float32(float64(y[i]) * (float64(dy[i]) - d))
		}
	}
	return out
}

// TestSoftmaxBackward compares SoftmaxBackward, in place (dx = dy), with
// the float64 reference, y being Softmax's own output.
func TestSoftmaxBackward(t *testing.T) {
	r, sc := openScaffold(t)
	rng := rand.New(rand.NewPCG(53, 54))
	for _, tc := range []struct {
		rows, cols int
		scale      float64
	}{
		{1, 1, 1}, {3, 31, 1}, {100, 257, 4}, {16, 4096, 8}, {2048, 64, 1},
	} {
		t.Run(fmt.Sprintf("%dx%d", tc.rows, tc.cols), func(t *testing.T) {
			n := tc.rows * tc.cols
			x, dy := randSlice(rng, n, tc.scale, 0), randSlice(rng, n, 1, 0)
			gy := upload(t, r, x)
			if err := sc.Set().Softmax(gy, gy, tc.rows, tc.cols); err != nil {
				t.Fatal(err)
			}
			y := download(t, gy)
			want := softmaxBackwardRef(dy, y, tc.rows, tc.cols)
			gdy := upload(t, r, dy)
			if err := sc.SoftmaxBackward(gdy, gdy, gy, tc.rows, tc.cols); err != nil {
				t.Fatal(err)
			}
			got := download(t, gdy)
			if tc.cols == 1 {
				// dx = y·(dy − dy·y) = 0 exactly for y = 1.
				for i, v := range got {
					if v != 0 || math.IsNaN(float64(v)) {
						t.Fatalf("dx[%d] = %v, want 0", i, v)
					}
				}
				return
			}
			check(t, "dx", got, want)
		})
	}
}

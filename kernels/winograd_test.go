package kernels

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/dcdit/dcdit/internal/fixtures"
)

type winoCase struct {
	batch, height, width, cin, cout int
	bias                            bool
	z                               winoSizing // zero: winoDefault
}

func (c winoCase) String() string {
	return fmt.Sprintf("b%d_%dx%d_%d→%d_bias%v_tiles%d", c.batch, c.height, c.width, c.cin, c.cout, c.bias, c.z.maxTiles)
}

func (c winoCase) sizing() winoSizing {
	if c.z == (winoSizing{}) {
		return winoDefault
	}
	return c.z
}

var winoCases = []winoCase{
	{batch: 1, height: 1, width: 1, cin: 3, cout: 2, bias: true},
	{batch: 2, height: 1, width: 5, cin: 4, cout: 3, bias: true},
	{batch: 1, height: 5, width: 1, cin: 2, cout: 2},
	{batch: 3, height: 7, width: 5, cin: 3, cout: 6}, // odd sides: half tiles on two edges
	{batch: 2, height: 4, width: 6, cin: 17, cout: 1, bias: true},
	{batch: 2, height: 8, width: 8, cin: 1, cout: 19},
	// Blocks of 1 to 5 tiles: blocks straddle tile rows and samples.
	{batch: 3, height: 5, width: 6, cin: 5, cout: 4, bias: true, z: winoSizing{budget: 1, minTiles: 1, maxTiles: 1}},
	{batch: 2, height: 6, width: 7, cin: 6, cout: 7, z: winoSizing{budget: 1, minTiles: 5, maxTiles: 5}},
	// The default block (24+ tiles) over several blocks, DC-DiT-like widths.
	{batch: 2, height: 16, width: 16, cin: 32, cout: 48, bias: true},
}

// F(2×2, 3×3) gives PyTorch's convolution: in float64 to rounding, in
// float32 well inside the tolerance the direct kernel is held to; every
// output is written (outputs start as NaN).
func TestWinogradMatchesReference(t *testing.T) {
	for _, c := range winoCases {
		t.Run(c.String(), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(21, uint64(c.batch*c.height*c.width)))
			n := c.batch * c.height * c.width
			x, w := acRandn(rng, n*c.cin), acRandn(rng, c.cout*c.cin*9)
			var bias []float64
			if c.bias {
				bias = acRandn(rng, c.cout)
			}
			want := convRef(x, w, bias, c.batch, c.height, c.width, c.cin, c.cout)
			p := newWinoPlan(c.batch, c.height, c.width, c.cin, c.cout, c.sizing())
			ws := acNaNs[float64](p.scratch(workersFor(p.blocks)))
			y := acNaNs[float64](n * c.cout)
			winograd3x3Forward(y, x, w, bias, c.batch, c.height, c.width, c.cin, c.cout, ws, c.sizing())
			if e := acRelErr(y, want); !fixtures.Within(e, 1e-13) {
				t.Errorf("float64: relative error %.3g", e)
			}
			ws32 := acNaNs[float32](len(ws))
			y32 := acNaNs[float32](n * c.cout)
			var bias32 []float32
			if bias != nil {
				bias32 = acToF32(bias)
			}
			winograd3x3Forward(y32, acToF32(x), acToF32(w), bias32, c.batch, c.height, c.width, c.cin, c.cout, ws32, c.sizing())
			if e := acRelErr(y32, want); !fixtures.Within(e, 2e-6) {
				t.Errorf("float32: relative error %.3g", e)
			}
		})
	}
}

// The public kernels take the Winograd path at DC-DiT's widths, forward and
// for dx, and agree with the direct path (forced by a non-default sizing)
// and the reference; dW and dbias are the direct path's, bit for bit.
func TestConv3x3WinogradDispatch(t *testing.T) {
	const batch, h, w, cin, cout = 2, 9, 8, 16, 24
	if !useWinograd(cin, cout) || !useWinograd(cout, cin) || useWinograd(4, 96) {
		t.Fatal("dispatch thresholds changed; update the test widths")
	}
	rng := rand.New(rand.NewPCG(22, 22))
	n := batch * h * w
	x, wt, bias := acRandn(rng, n*cin), acRandn(rng, cout*cin*9), acRandn(rng, cout)
	dy := acRandn(rng, n*cout)
	direct := convSizing{budget: 1 << 17, minRows: 17} // not convDefault: the direct path

	y := acNaNs[float64](n * cout)
	Conv3x3Forward(y, x, wt, bias, batch, h, w, cin, cout, acNaNs[float64](Conv3x3Scratch(batch, h, w, cin, cout)))
	if e := acRelErr(y, convRef(x, wt, bias, batch, h, w, cin, cout)); !fixtures.Within(e, 1e-13) {
		t.Errorf("forward: relative error %.3g", e)
	}

	dx, dw, db := acNaNs[float64](n*cin), acNaNs[float64](len(wt)), acNaNs[float64](cout)
	Conv3x3Backward(dx, dw, db, dy, x, wt, batch, h, w, cin, cout, acNaNs[float64](Conv3x3Scratch(batch, h, w, cin, cout)))
	dx2, dw2, db2 := acNaNs[float64](n*cin), acNaNs[float64](len(wt)), acNaNs[float64](cout)
	conv3x3Backward(dx2, dw2, db2, dy, x, wt, batch, h, w, cin, cout, acNaNs[float64](conv3x3Scratch(batch, h, w, cin, cout, direct)), direct)
	if e := acRelErr(dx, dx2); !fixtures.Within(e, 1e-13) {
		t.Errorf("dx: relative error %.3g against the direct path", e)
	}
	if e := acRelErr(dw, dw2); !fixtures.Within(e, 1e-13) {
		t.Errorf("dw: relative error %.3g against the direct path", e)
	}
	if e := acRelErr(db, db2); e != 0 {
		t.Errorf("dbias differs from the direct path: %.3g", e)
	}
	// dx alone (no dW, no dbias) takes the same path.
	dx3 := acNaNs[float64](n * cin)
	Conv3x3Backward(dx3, nil, nil, dy, x, wt, batch, h, w, cin, cout, acNaNs[float64](Conv3x3Scratch(batch, h, w, cin, cout)))
	if e := acRelErr(dx3, dx); e != 0 {
		t.Errorf("dx without dW: %.3g from dx with it", e)
	}
}

func TestWinogradPanics(t *testing.T) {
	x, w, y := make([]float32, 2*4*4*16), make([]float32, 16*16*9), make([]float32, 2*4*4*16)
	ws := make([]float32, Conv3x3Scratch(2, 4, 4, 16, 16))
	acExpectPanic(t, "scratch", func() { Winograd3x3Forward(y, x, w, nil, 2, 4, 4, 16, 16, ws[:100]) })
	acExpectPanic(t, "short y", func() { Winograd3x3Forward(y[:10], x, w, nil, 2, 4, 4, 16, 16, ws) })
	acExpectPanic(t, "zero width", func() { Winograd3x3Forward(y, x, w, nil, 2, 4, 0, 16, 16, ws) })
	Winograd3x3Forward(y, x, w, nil, 0, 4, 4, 16, 16, nil) // an empty batch needs nothing
}

// The transform loops (AVX where the CPU has it, with Go tails) against
// their definitions, at every length up to 40 and on offset slices.
func TestWinogradTransforms(t *testing.T) {
	rng := rand.New(rand.NewPCG(23, 23))
	for n := 0; n <= 40; n++ {
		for _, off := range []int{0, 3} {
			x := make([][]float32, 5)
			for i := range x {
				x[i] = acToF32(acRandn(rng, n+off))[off:]
			}
			y := make([][]float32, 4)
			for i := range y {
				y[i] = acNaNs[float32](n + 1)[:n]
			}
			bt4(y[0], y[1], y[2], y[3], x[0], x[1], x[2], x[3])
			for i := range n {
				want := [4]float32{x[0][i] - x[2][i], x[1][i] + x[2][i], x[2][i] - x[1][i], x[1][i] - x[3][i]}
				for k := range 4 {
					if y[k][i] != want[k] {
						t.Fatalf("bt4 n %d off %d: y%d[%d] = %v, want %v", n, off, k, i, y[k][i], want[k])
					}
				}
			}
			at4(y[0], y[1], x[0], x[1], x[2], x[3], x[4])
			for i := range n {
				w0 := x[0][i] + x[1][i] + x[2][i] + x[4][i]
				w1 := x[1][i] - x[2][i] - x[3][i] + x[4][i]
				if y[0][i] != w0 || y[1][i] != w1 {
					t.Fatalf("at4 n %d off %d: [%d] = %v, %v; want %v, %v", n, off, i, y[0][i], y[1][i], w0, w1)
				}
			}
			if n > 0 && y[0][:n+1][n] == y[0][:n+1][n] {
				t.Fatalf("n %d: wrote past the end", n)
			}
		}
	}
}

// convFilterRef is dW[co][c][ki][kj] = Σ dy[t][co]·x[t + (ki−1, kj−1)][c]
// in float64.
func convFilterRef(dy, x []float64, batch, height, width, cin, cout int) []float64 {
	dw := make([]float64, cout*cin*9)
	for b := range batch {
		for i := range height {
			for j := range width {
				for ki := range 3 {
					for kj := range 3 {
						ii, jj := i+ki-1, j+kj-1
						if ii < 0 || ii >= height || jj < 0 || jj >= width {
							continue
						}
						xr := x[((b*height+ii)*width+jj)*cin:][:cin]
						dr := dy[((b*height+i)*width+j)*cout:][:cout]
						for co, d := range dr {
							for c, v := range xr {
								dw[((co*cin+c)*3+ki)*3+kj] += d * v
							}
						}
					}
				}
			}
		}
	}
	return dw
}

// The weight gradient by F(2×2, 3×3), on grids with half tiles and over
// several blocks, in float64 and float32.
func TestWinogradFilter(t *testing.T) {
	for _, c := range []winoCase{
		{batch: 1, height: 1, width: 1, cin: 2, cout: 3},
		{batch: 3, height: 7, width: 5, cin: 3, cout: 6},
		{batch: 2, height: 4, width: 6, cin: 17, cout: 1},
		{batch: 2, height: 16, width: 16, cin: 32, cout: 48}, // several default blocks
	} {
		t.Run(c.String(), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(24, uint64(c.batch*c.height*c.width)))
			n := c.batch * c.height * c.width
			x, dy := acRandn(rng, n*c.cin), acRandn(rng, n*c.cout)
			want := convFilterRef(dy, x, c.batch, c.height, c.width, c.cin, c.cout)
			p := newWinoPlan(c.batch, c.height, c.width, c.cin, c.cout, winoDefault)
			ws := acNaNs[float64](winoFilterScratch(p, workersFor(gradChunks(p.blocks))))
			dw := acNaNs[float64](len(want))
			winoFilter(dw, dy, x, c.batch, c.height, c.width, c.cin, c.cout, ws)
			if e := acRelErr(dw, want); !fixtures.Within(e, 1e-13) {
				t.Errorf("float64: relative error %.3g", e)
			}
			dw32 := acNaNs[float32](len(want))
			winoFilter(dw32, acToF32(dy), acToF32(x), c.batch, c.height, c.width, c.cin, c.cout, acNaNs[float32](len(ws)))
			if e := acRelErr(dw32, want); !fixtures.Within(e, 1e-5) {
				t.Errorf("float32: relative error %.3g", e)
			}
		})
	}
}

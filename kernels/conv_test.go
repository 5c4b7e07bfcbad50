package kernels

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"

	"github.com/dcdit/dcdit/internal/fixtures"
)

// convRef is a direct float64 3×3 convolution (stride 1, zero padding 1)
// over token-major grids, PyTorch's definition written out.
func convRef(x, w, bias []float64, batch, height, width, cin, cout int) []float64 {
	y := make([]float64, batch*height*width*cout)
	for b := range batch {
		for i := range height {
			for j := range width {
				for co := range cout {
					var s float64
					if bias != nil {
						s = bias[co]
					}
					for c := range cin {
						for ki := range 3 {
							for kj := range 3 {
								ii, jj := i+ki-1, j+kj-1
								if ii < 0 || ii >= height || jj < 0 || jj >= width {
									continue
								}
								s += x[((b*height+ii)*width+jj)*cin+c] * w[((co*cin+c)*3+ki)*3+kj]
							}
						}
					}
					y[((b*height+i)*width+j)*cout+co] = s
				}
			}
		}
	}
	return y
}

type convCase struct {
	batch, height, width, cin, cout int
	bias                            bool
	z                               convSizing // zero: convDefault
	probes                          int        // finite-difference probes per input (0: 300)
}

func (c convCase) String() string {
	return fmt.Sprintf("b%d_%dx%d_%d→%d_bias%v_rows%d", c.batch, c.height, c.width, c.cin, c.cout, c.bias, c.z.minRows)
}

func (c convCase) sizing() convSizing {
	if c.z == (convSizing{}) {
		return convDefault
	}
	return c.z
}

func (c convCase) tokens() int { return c.batch * c.height * c.width }

var convCases = []convCase{
	{batch: 1, height: 1, width: 1, cin: 3, cout: 2, bias: true},
	{batch: 2, height: 1, width: 5, cin: 4, cout: 3, bias: true},
	{batch: 1, height: 5, width: 1, cin: 2, cout: 2},
	{batch: 3, height: 7, width: 5, cin: 3, cout: 6},
	{batch: 2, height: 4, width: 6, cin: 5, cout: 1, bias: true},
	{batch: 1, height: 2, width: 2, cin: 1, cout: 1, bias: true},
	// Blocks of 5 and 7 tokens: blocks straddle grid rows and samples, and
	// several blocks per worker accumulate into the dW partial sums.
	{batch: 3, height: 3, width: 4, cin: 2, cout: 3, bias: true, z: convSizing{budget: 1, minRows: 5}},
	{batch: 2, height: 5, width: 3, cin: 4, cout: 2, z: convSizing{budget: 1, minRows: 7}},
	// Default sizing with several blocks (144-token blocks over 196 tokens).
	{batch: 4, height: 7, width: 7, cin: 90, cout: 3, bias: true, probes: 30},
}

func convInputs(c convCase, rng *rand.Rand) (x, w, bias []float64) {
	x = acRandn(rng, c.tokens()*c.cin)
	w = acRandn(rng, c.cout*c.cin*9)
	if c.bias {
		bias = acRandn(rng, c.cout)
	}
	return x, w, bias
}

func TestConv3x3ForwardMatchesReference(t *testing.T) {
	for _, c := range convCases {
		t.Run(c.String(), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(11, uint64(c.tokens())))
			x, w, bias := convInputs(c, rng)
			want := convRef(x, w, bias, c.batch, c.height, c.width, c.cin, c.cout)

			ws := acNaNs[float64](conv3x3Scratch(c.batch, c.height, c.width, c.cin, c.cout, c.sizing()))
			y := acNaNs[float64](c.tokens() * c.cout)
			conv3x3Forward(y, x, w, bias, c.batch, c.height, c.width, c.cin, c.cout, ws, c.sizing())
			if e := acRelErr(y, want); !fixtures.Within(e, 1e-13) {
				t.Errorf("float64: relative error %.3g", e)
			}

			ws32 := acNaNs[float32](len(ws))
			y32 := acNaNs[float32](c.tokens() * c.cout)
			var bias32 []float32
			if bias != nil {
				bias32 = acToF32(bias)
			}
			conv3x3Forward(y32, acToF32(x), acToF32(w), bias32, c.batch, c.height, c.width, c.cin, c.cout, ws32, c.sizing())
			if e := acRelErr(y32, want); !fixtures.Within(e, 1e-5) {
				t.Errorf("float32: relative error %.3g", e)
			}
		})
	}
}

// convGrads runs Conv3x3Backward in T for dy and returns dx, dw, dbias (nil
// where the case has no bias).
func convGrads[T float32 | float64](c convCase, x, w, dy []T) (dx, dw, dbias []T) {
	ws := acNaNs[T](conv3x3Scratch(c.batch, c.height, c.width, c.cin, c.cout, c.sizing()))
	dx = acNaNs[T](c.tokens() * c.cin)
	dw = acNaNs[T](c.cout * c.cin * 9)
	if c.bias {
		dbias = acNaNs[T](c.cout)
	}
	conv3x3Backward(dx, dw, dbias, dy, x, w, c.batch, c.height, c.width, c.cin, c.cout, ws, c.sizing())
	return dx, dw, dbias
}

func TestConv3x3Gradient(t *testing.T) {
	for _, c := range convCases {
		t.Run(c.String(), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(12, uint64(c.tokens())))
			x, w, bias := convInputs(c, rng)
			r := acRandn(rng, c.tokens()*c.cout)
			dx, dw, dbias := convGrads(c, x, w, r)

			ws := make([]float64, conv3x3Scratch(c.batch, c.height, c.width, c.cin, c.cout, c.sizing()))
			y := make([]float64, c.tokens()*c.cout)
			loss := func() float64 {
				conv3x3Forward(y, x, w, bias, c.batch, c.height, c.width, c.cin, c.cout, ws, c.sizing())
				return acWeighted(r, y)
			}
			probes := c.probes
			if probes == 0 {
				probes = 300
			}
			acGradCheck(t, "dx", x, dx, loss, probes, rng)
			acGradCheck(t, "dw", w, dw, loss, probes, rng)
			if c.bias {
				acGradCheck(t, "dbias", bias, dbias, loss, probes, rng)
			}
		})
	}
}

func TestConv3x3Float32MatchesFloat64(t *testing.T) {
	for _, c := range convCases {
		t.Run(c.String(), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(13, uint64(c.tokens())))
			x, w, _ := convInputs(c, rng)
			dy := acRandn(rng, c.tokens()*c.cout)
			dx, dw, dbias := convGrads(c, x, w, dy)
			dx32, dw32, dbias32 := convGrads(c, acToF32(x), acToF32(w), acToF32(dy))
			for _, g := range []struct {
				name string
				got  []float32
				want []float64
			}{{"dx", dx32, dx}, {"dw", dw32, dw}, {"dbias", dbias32, dbias}} {
				if e := acRelErr(g.got, g.want); !fixtures.Within(e, 1e-5) {
					t.Errorf("%s: float32 vs float64 relative error %.3g", g.name, e)
				}
			}
		})
	}
}

// TestConv3x3OptionalGradients checks that each nil gradient is skipped and
// leaves the others unchanged.
func TestConv3x3OptionalGradients(t *testing.T) {
	c := convCase{batch: 2, height: 3, width: 4, cin: 3, cout: 2, bias: true, z: convSizing{budget: 1, minRows: 5}}
	rng := rand.New(rand.NewPCG(14, 14))
	x, w, _ := convInputs(c, rng)
	dy := acRandn(rng, c.tokens()*c.cout)
	dx, dw, dbias := convGrads(c, x, w, dy)
	ws := make([]float64, conv3x3Scratch(c.batch, c.height, c.width, c.cin, c.cout, c.sizing()))
	for mask := range 8 {
		var gx, gw, gb []float64
		if mask&1 != 0 {
			gx = acNaNs[float64](len(dx))
		}
		if mask&2 != 0 {
			gw = acNaNs[float64](len(dw))
		}
		if mask&4 != 0 {
			gb = acNaNs[float64](len(dbias))
		}
		conv3x3Backward(gx, gw, gb, dy, x, w, c.batch, c.height, c.width, c.cin, c.cout, ws, c.sizing())
		for _, g := range []struct {
			name      string
			got, want []float64
		}{{"dx", gx, dx}, {"dw", gw, dw}, {"dbias", gb, dbias}} {
			if g.got != nil && acRelErr(g.got, g.want) != 0 {
				t.Errorf("mask %03b: %s differs from the full backward pass", mask, g.name)
			}
		}
	}
}

func TestConv3x3Panics(t *testing.T) {
	const b, h, w, cin, cout = 2, 3, 3, 2, 4
	n := b * h * w
	x := make([]float32, n*cin)
	y := make([]float32, n*cout)
	wt := make([]float32, cout*cin*9)
	bias := make([]float32, cout)
	ws := make([]float32, Conv3x3Scratch(b, h, w, cin, cout))
	fwd := func(y, x, wt, bias, ws []float32, height int) func() {
		return func() { Conv3x3Forward(y, x, wt, bias, b, height, w, cin, cout, ws) }
	}
	acExpectPanic(t, "height 0", fwd(y, x, wt, bias, ws, 0))
	acExpectPanic(t, "short x", fwd(y, x[1:], wt, bias, ws, h))
	acExpectPanic(t, "short y", fwd(y[1:], x, wt, bias, ws, h))
	acExpectPanic(t, "short w", fwd(y, x, wt[1:], bias, ws, h))
	acExpectPanic(t, "short bias", fwd(y, x, wt, bias[1:], ws, h))
	acExpectPanic(t, "short scratch", fwd(y, x, wt, bias, ws[:9*cin*cout], h))
	acExpectPanic(t, "negative batch", func() { Conv3x3Scratch(-1, h, w, cin, cout) })
	acExpectPanic(t, "cin 0", func() { Conv3x3Scratch(b, h, w, 0, cout) })
	bwd := func(dx, dw, dbias, dy, ws []float32) func() {
		return func() { Conv3x3Backward(dx, dw, dbias, dy, x, wt, b, h, w, cin, cout, ws) }
	}
	dx := make([]float32, n*cin)
	dw := make([]float32, len(wt))
	acExpectPanic(t, "short dx", bwd(dx[1:], dw, bias, y, ws))
	acExpectPanic(t, "short dw", bwd(dx, dw[1:], bias, y, ws))
	acExpectPanic(t, "short dbias", bwd(dx, dw, bias[1:], y, ws))
	acExpectPanic(t, "short dy", bwd(dx, dw, bias, y[1:], ws))
	acExpectPanic(t, "short backward scratch", bwd(dx, dw, bias, y, ws[:len(ws)/2]))
}

func TestConv3x3EmptyBatch(t *testing.T) {
	if n := Conv3x3Scratch(0, 4, 4, 3, 3); n != 0 {
		t.Errorf("scratch for an empty batch: %d", n)
	}
	Conv3x3Forward[float32](nil, nil, make([]float32, 27), nil, 0, 4, 4, 1, 3, nil)
	dw := acNaNs[float32](27)
	db := acNaNs[float32](3)
	Conv3x3Backward(nil, dw, db, nil, nil, make([]float32, 27), 0, 4, 4, 1, 3, nil)
	for _, v := range append(dw, db...) {
		if v != 0 {
			t.Fatalf("gradients of an empty batch should be zero, got %v", v)
		}
	}
}

func TestConv3x3NoAllocation(t *testing.T) {
	perGemm := gemmAllocsPerCall()
	// Blocks of 16 tokens: a per-block allocation would show many times
	// over.
	z := convSizing{budget: 1, minRows: 16}
	allocs := func(batch, hw, ch int) float64 {
		rng := rand.New(rand.NewPCG(15, 15))
		n := batch * hw * hw
		x := acToF32(acRandn(rng, n*ch))
		w := acToF32(acRandn(rng, ch*ch*9))
		bias := acToF32(acRandn(rng, ch))
		y := make([]float32, n*ch)
		dx := make([]float32, n*ch)
		dw := make([]float32, len(w))
		db := make([]float32, ch)
		ws := make([]float32, conv3x3Scratch(batch, hw, hw, ch, ch, z))
		a := testing.AllocsPerRun(5, func() {
			conv3x3Forward(y, x, w, bias, batch, hw, hw, ch, ch, ws, z)
			conv3x3Backward(dx, dw, db, y, x, w, batch, hw, hw, ch, ch, ws, z)
		})
		// One product per block forward, two backward.
		return a - perGemm*float64(3*newConvPlan(batch, hw, hw, ch, ch, z).blocks)
	}
	small := allocs(1, 3, 2)
	large := allocs(3, 16, 24) // 48 blocks
	limit := float64(8 + 8*runtime.GOMAXPROCS(0))
	if !(large <= limit && large <= small+float64(3*runtime.GOMAXPROCS(0))) {
		t.Errorf("allocations per forward+backward beyond the GEMMs': %v (small problem %v, limit %v)", large, small, limit)
	}
}

// conv1x1Ref is y = x·wᵀ + bias in float64.
func conv1x1Ref(x, w, bias []float64, tokens, cin, cout int) []float64 {
	y := make([]float64, tokens*cout)
	for t := range tokens {
		for co := range cout {
			var s float64
			if bias != nil {
				s = bias[co]
			}
			for c := range cin {
				s += x[t*cin+c] * w[co*cin+c]
			}
			y[t*cout+co] = s
		}
	}
	return y
}

func TestConv1x1(t *testing.T) {
	for _, c := range []struct {
		tokens, cin, cout int
		bias              bool
	}{
		{1, 1, 1, true}, {7, 3, 5, false}, {40, 17, 33, true}, {300, 8, 2, true}, {0, 3, 4, true},
	} {
		t.Run(fmt.Sprintf("%dx%d→%d_bias%v", c.tokens, c.cin, c.cout, c.bias), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(16, uint64(c.tokens)))
			x := acRandn(rng, c.tokens*c.cin)
			w := acRandn(rng, c.cout*c.cin)
			var bias []float64
			if c.bias {
				bias = acRandn(rng, c.cout)
			}
			want := conv1x1Ref(x, w, bias, c.tokens, c.cin, c.cout)
			y := acNaNs[float64](c.tokens * c.cout)
			Conv1x1Forward(y, x, w, bias, c.tokens, c.cin, c.cout)
			if e := acRelErr(y, want); !fixtures.Within(e, 1e-13) {
				t.Errorf("forward: relative error %.3g", e)
			}

			r := acRandn(rng, c.tokens*c.cout)
			dx := acNaNs[float64](len(x))
			dw := acNaNs[float64](len(w))
			var db []float64
			if c.bias {
				db = acNaNs[float64](c.cout)
			}
			Conv1x1Backward(dx, dw, db, r, x, w, c.tokens, c.cin, c.cout)
			loss := func() float64 {
				Conv1x1Forward(y, x, w, bias, c.tokens, c.cin, c.cout)
				return acWeighted(r, y)
			}
			acGradCheck(t, "dx", x, dx, loss, 200, rng)
			acGradCheck(t, "dw", w, dw, loss, 200, rng)
			if c.bias {
				acGradCheck(t, "dbias", bias, db, loss, 200, rng)
			}

			// float32 against float64.
			var b32, db32 []float32
			if c.bias {
				b32, db32 = acToF32(bias), make([]float32, c.cout)
			}
			y32 := make([]float32, len(y))
			Conv1x1Forward(y32, acToF32(x), acToF32(w), b32, c.tokens, c.cin, c.cout)
			dx32, dw32 := make([]float32, len(x)), make([]float32, len(w))
			Conv1x1Backward(dx32, dw32, db32, acToF32(r), acToF32(x), acToF32(w), c.tokens, c.cin, c.cout)
			for _, g := range []struct {
				name string
				got  []float32
				want []float64
			}{{"y", y32, want}, {"dx", dx32, dx}, {"dw", dw32, dw}, {"dbias", db32, db}} {
				if e := acRelErr(g.got, g.want); !fixtures.Within(e, 1e-5) {
					t.Errorf("%s: float32 vs float64 relative error %.3g", g.name, e)
				}
			}
		})
	}
}

func TestConv1x1Panics(t *testing.T) {
	x, w, y := make([]float32, 6), make([]float32, 6), make([]float32, 9)
	acExpectPanic(t, "cin 0", func() { Conv1x1Forward(y, x, w, nil, 3, 0, 3) })
	acExpectPanic(t, "short x", func() { Conv1x1Forward(y, x[1:], w, nil, 3, 2, 3) })
	acExpectPanic(t, "short y", func() { Conv1x1Forward(y[1:], x, w, nil, 3, 2, 3) })
	acExpectPanic(t, "short w", func() { Conv1x1Forward(y, x, w[1:], nil, 3, 2, 3) })
	acExpectPanic(t, "short bias", func() { Conv1x1Forward(y, x, w, []float32{1}, 3, 2, 3) })
	acExpectPanic(t, "short dx", func() { Conv1x1Backward(x[1:], w, nil, y, x, w, 3, 2, 3) })
	acExpectPanic(t, "short dw", func() { Conv1x1Backward(x, w[1:], nil, y, x, w, 3, 2, 3) })
	acExpectPanic(t, "short dbias", func() { Conv1x1Backward(x, w, []float32{1}, y, x, w, 3, 2, 3) })
	acExpectPanic(t, "short dy", func() { Conv1x1Backward(x, w, nil, y[1:], x, w, 3, 2, 3) })
}

// BenchmarkConv3x3FwdBwd matches PyTorch's conv3x3_fwd_bwd case: 96→96
// channels over 32×32 grids, batch 8, forward and the backward pass of
// sum(y) for dx, dw and dbias, in float32.
func BenchmarkConv3x3FwdBwd(b *testing.B) {
	const batch, hw, ch = 8, 32, 96
	rng := rand.New(rand.NewPCG(17, 17))
	n := batch * hw * hw
	x := acToF32(acRandn(rng, n*ch))
	w := acToF32(acRandn(rng, ch*ch*9))
	bias := acToF32(acRandn(rng, ch))
	y := make([]float32, n*ch)
	dy := make([]float32, n*ch)
	for i := range dy {
		dy[i] = 1
	}
	dx := make([]float32, n*ch)
	dw := make([]float32, len(w))
	db := make([]float32, ch)
	ws := make([]float32, Conv3x3Scratch(batch, hw, hw, ch, ch))
	cpu0 := acCPUSeconds()
	var best time.Duration
	for b.Loop() {
		t0 := time.Now()
		Conv3x3Forward(y, x, w, bias, batch, hw, hw, ch, ch, ws)
		Conv3x3Backward(dx, dw, db, dy, x, w, batch, hw, hw, ch, ch, ws)
		if d := time.Since(t0); best == 0 || d < best {
			best = d
		}
	}
	flops := 3 * 2 * float64(n) * 9 * ch * ch
	b.ReportMetric(flops/b.Elapsed().Seconds()*float64(b.N)/1e9, "GFLOP/s")
	b.ReportMetric(b.Elapsed().Seconds()*1e3/float64(b.N), "ms/op")
	b.ReportMetric((acCPUSeconds()-cpu0)*1e3/float64(b.N), "cpu-ms/op")
	// PyTorch's reference reports the best of several repetitions.
	b.ReportMetric(best.Seconds()*1e3, "best-ms")
}

// BenchmarkConv3x3Backward times the backward pass alone (dx, dw and
// dbias) on DC-DiT's convolution shapes: the toy model's E = 32 channels
// and a 96-channel grid (Winograd), and the 4-channel latent embedder and
// output (im2col), where dW sums many blocks.
func BenchmarkConv3x3Backward(b *testing.B) {
	for _, c := range []struct {
		name                            string
		batch, height, width, cin, cout int
	}{
		{"wino_32x32_b16_16x16", 16, 16, 16, 32, 32},
		{"wino_96x96_b8_32x32", 8, 32, 32, 96, 96},
		{"im2col_4to32_b16_16x16", 16, 16, 16, 4, 32},
		{"im2col_32to4_b16_16x16", 16, 16, 16, 32, 4},
	} {
		b.Run(c.name, func(b *testing.B) {
			rng := rand.New(rand.NewPCG(18, 18))
			n := c.batch * c.height * c.width
			x := acToF32(acRandn(rng, n*c.cin))
			w := acToF32(acRandn(rng, c.cout*c.cin*9))
			dy := acToF32(acRandn(rng, n*c.cout))
			dx, dw, db := make([]float32, n*c.cin), make([]float32, len(w)), make([]float32, c.cout)
			ws := make([]float32, Conv3x3Scratch(c.batch, c.height, c.width, c.cin, c.cout))
			for b.Loop() {
				Conv3x3Backward(dx, dw, db, dy, x, w, c.batch, c.height, c.width, c.cin, c.cout, ws)
			}
			b.ReportMetric(b.Elapsed().Seconds()*1e3/float64(b.N), "ms/op")
		})
	}
}

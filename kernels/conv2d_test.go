package kernels

import (
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/dcdit/dcdit/internal/fixtures"
)

// conv2DRef is PyTorch's F.conv2d after F.pad written out directly in
// float64 over token-major grids.
func conv2DRef(x, w, bias []float64, p Conv2D) []float64 {
	oh, ow := p.OutH(), p.OutW()
	y := make([]float64, p.Batch*oh*ow*p.Cout)
	for b := range p.Batch {
		for oi := range oh {
			for oj := range ow {
				for co := range p.Cout {
					var s float64
					if bias != nil {
						s = bias[co]
					}
					for c := range p.Cin {
						for kh := range p.KH {
							for kw := range p.KW {
								i := oi*p.StrideH - p.PadTop + kh
								j := oj*p.StrideW - p.PadLeft + kw
								if i < 0 || i >= p.H || j < 0 || j >= p.W {
									continue
								}
								s += x[((b*p.H+i)*p.W+j)*p.Cin+c] * w[((co*p.Cin+c)*p.KH+kh)*p.KW+kw]
							}
						}
					}
					y[((b*oh+oi)*ow+oj)*p.Cout+co] = s
				}
			}
		}
	}
	return y
}

type conv2DCase struct {
	name string
	p    Conv2D
	bias bool
}

// conv2DShape is a Conv2D from its fields in declaration order.
func conv2DShape(batch, h, w, cin, cout, kh, kw, sh, sw, pt, pb, pl, pr int) Conv2D {
	return Conv2D{Batch: batch, H: h, W: w, Cin: cin, Cout: cout, KH: kh, KW: kw, StrideH: sh, StrideW: sw,
		PadTop: pt, PadBottom: pb, PadLeft: pl, PadRight: pr}
}

// conv2DCases cover every kernel, stride and padding Inception v3 and the
// SD VAE use, at odd sizes, plus edge cases: one input channel, kernels
// wider than the input, padding wider than the kernel.
func conv2DCases() []conv2DCase {
	return []conv2DCase{
		{"stem_3x3s2p0_cin3", conv2DShape(2, 13, 11, 3, 8, 3, 3, 2, 2, 0, 0, 0, 0), true},
		{"3x3s1p0", conv2DShape(1, 9, 10, 5, 7, 3, 3, 1, 1, 0, 0, 0, 0), false},
		{"3x3s1p1_im2col", conv2DShape(2, 7, 6, 3, 4, 3, 3, 1, 1, 1, 1, 1, 1), true},
		{"3x3s1p1_winograd", conv2DShape(2, 7, 9, 16, 17, 3, 3, 1, 1, 1, 1, 1, 1), true},
		{"3x3s1p0_3x3s1_wide", conv2DShape(2, 9, 8, 16, 18, 3, 3, 1, 1, 0, 0, 0, 0), true},
		{"3x3s1p0101_3x3s1_wide", conv2DShape(1, 6, 7, 17, 16, 3, 3, 1, 1, 0, 1, 0, 1), false},
		{"3x3s1p1010_3x3s1_wide", conv2DShape(2, 7, 6, 16, 16, 3, 3, 1, 1, 1, 0, 1, 0), true},
		{"3x3s1p0_3x3s1_wide_1x1out", conv2DShape(2, 3, 3, 16, 20, 3, 3, 1, 1, 0, 0, 0, 0), true},
		{"3x3s1p2_im2col_wide", conv2DShape(1, 5, 4, 16, 16, 3, 3, 1, 1, 2, 2, 0, 1), true},
		{"3x3s2p0_wide", conv2DShape(1, 9, 8, 40, 33, 3, 3, 2, 2, 0, 0, 0, 0), false},
		{"3x3s2p1", conv2DShape(2, 8, 9, 6, 5, 3, 3, 2, 2, 1, 1, 1, 1), true},
		{"vae_down_3x3s2_p0101", conv2DShape(2, 8, 8, 4, 6, 3, 3, 2, 2, 0, 1, 0, 1), true},
		{"vae_down_odd", conv2DShape(1, 9, 7, 5, 3, 3, 3, 2, 2, 0, 1, 0, 1), false},
		{"1x1", conv2DShape(2, 5, 6, 7, 9, 1, 1, 1, 1, 0, 0, 0, 0), true},
		{"1x1_nobias", conv2DShape(1, 3, 3, 16, 20, 1, 1, 1, 1, 0, 0, 0, 0), false},
		{"1x1s2", conv2DShape(1, 7, 7, 4, 5, 1, 1, 2, 2, 0, 0, 0, 0), true},
		{"1x1_padded", conv2DShape(1, 3, 4, 2, 3, 1, 1, 1, 1, 1, 2, 2, 1), true},
		{"5x5p2", conv2DShape(1, 8, 7, 6, 5, 5, 5, 1, 1, 2, 2, 2, 2), true},
		{"1x7p03", conv2DShape(2, 6, 9, 8, 6, 1, 7, 1, 1, 0, 0, 3, 3), true},
		{"7x1p30", conv2DShape(2, 9, 6, 8, 6, 7, 1, 1, 1, 3, 3, 0, 0), false},
		{"1x3p01", conv2DShape(1, 5, 4, 9, 7, 1, 3, 1, 1, 0, 0, 1, 1), true},
		{"3x1p10", conv2DShape(1, 4, 5, 9, 7, 3, 1, 1, 1, 1, 1, 0, 0), true},
		{"cin1", conv2DShape(3, 6, 5, 1, 4, 3, 3, 1, 1, 1, 1, 1, 1), true},
		{"5x5p2_tiny_input", conv2DShape(2, 2, 3, 3, 4, 5, 5, 1, 1, 2, 2, 2, 2), true},
		{"7x1p30_one_row", conv2DShape(1, 1, 4, 5, 3, 7, 1, 1, 1, 3, 3, 0, 0), true},
		{"1x7p03_one_col", conv2DShape(1, 4, 1, 5, 3, 1, 7, 1, 1, 0, 0, 3, 3), false},
		{"kernel_equals_input", conv2DShape(2, 3, 4, 3, 2, 3, 4, 1, 1, 0, 0, 0, 0), true},
		{"stride_hw_differ", conv2DShape(1, 7, 9, 3, 4, 2, 3, 1, 2, 0, 1, 1, 0), true},
		{"stride_past_input", conv2DShape(1, 5, 5, 2, 3, 2, 2, 4, 4, 0, 0, 0, 0), true},
		{"2x2s2", conv2DShape(2, 6, 8, 4, 4, 2, 2, 2, 2, 0, 0, 0, 0), false},
	}
}

// conv2DInputs are random inputs for c, exactly representable in float32.
func conv2DInputs(c conv2DCase, seed uint64) (x, w, bias []float64) {
	rng := rand.New(rand.NewPCG(seed, 7))
	round := func(s []float64) []float64 {
		for i, v := range s {
			s[i] = float64(float32(v))
		}
		return s
	}
	x = round(acRandn(rng, c.p.Batch*c.p.H*c.p.W*c.p.Cin))
	w = round(acRandn(rng, c.p.Cout*c.p.Cin*c.p.KH*c.p.KW))
	if c.bias {
		bias = round(acRandn(rng, c.p.Cout))
	}
	return x, w, bias
}

// conv2DScratchFor is Conv2DScratch for a test sizing (convDefault: the
// public function, fast paths included).
func conv2DScratchFor(p Conv2D, z convSizing) int {
	if z == convDefault {
		return Conv2DScratch(p)
	}
	q := newConv2DPlan(p, z)
	return q.scratch(p.Cout, workersFor(q.blocks))
}

func runConv2D[T float32 | float64](x, w, bias []T, p Conv2D, z convSizing) []T {
	y := acNaNs[T](p.Batch * p.OutH() * p.OutW() * p.Cout)
	conv2DForward(y, x, w, bias, p, acNaNs[T](conv2DScratchFor(p, z)), z)
	return y
}

func f64To32(s []float64) []float32 {
	if s == nil {
		return nil
	}
	return acToF32(s)
}

func TestConv2DForwardMatchesReference(t *testing.T) {
	sizings := []struct {
		name string
		z    convSizing
	}{
		{"default", convDefault},
		// Blocks of 5 pixels span rows and samples; the fast paths are
		// bypassed, so their shapes run through im2col too.
		{"blocks5", convSizing{budget: 1, minRows: 5}},
	}
	for _, c := range conv2DCases() {
		x, w, bias := conv2DInputs(c, 1)
		want := conv2DRef(x, w, bias, c.p)
		for _, s := range sizings {
			t.Run(c.name+"/"+s.name, func(t *testing.T) {
				if err := c.p.Validate(); err != nil {
					t.Fatal(err)
				}
				if e := acRelErr(runConv2D(x, w, bias, c.p, s.z), want); !fixtures.Within(e, 1e-12) {
					t.Errorf("float64: rel err %.3g", e)
				}
				got := runConv2D(acToF32(x), acToF32(w), f64To32(bias), c.p, s.z)
				if e := acRelErr(got, want); !fixtures.Within(e, 1e-5) {
					t.Errorf("float32: rel err %.3g", e)
				}
			})
		}
	}
}

// TestConv2DDeterministic checks that every path gives the same bits on
// repeated runs and under every core count.
func TestConv2DDeterministic(t *testing.T) {
	cases := []conv2DCase{
		{"im2col", conv2DShape(3, 17, 15, 24, 40, 3, 3, 2, 2, 0, 1, 0, 1), true},
		{"winograd", conv2DShape(2, 12, 13, 16, 32, 3, 3, 1, 1, 1, 1, 1, 1), true},
		{"im2col_3x3p0", conv2DShape(3, 21, 19, 24, 16, 3, 3, 1, 1, 0, 0, 0, 0), true},
		{"pointwise", conv2DShape(2, 12, 13, 48, 32, 1, 1, 1, 1, 0, 0, 0, 0), true},
	}
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			x, w, bias := conv2DInputs(c, 2)
			xf, wf, bf := acToF32(x), acToF32(w), f64To32(bias)
			var first []float32
			for _, n := range coreCounts {
				runtime.GOMAXPROCS(n)
				for run := range 2 {
					got := runConv2D(xf, wf, bf, c.p, convDefault)
					if first == nil {
						first = got
					} else if !slices.Equal(got, first) {
						t.Fatalf("GOMAXPROCS %d, run %d: bits differ from the first run", n, run)
					}
				}
			}
		})
	}
}

func TestConv2DValidate(t *testing.T) {
	ok := conv2DShape(1, 5, 5, 3, 4, 3, 3, 1, 1, 1, 1, 1, 1)
	for _, c := range []struct {
		name string
		edit func(p *Conv2D)
		want string // a fragment of the message; "" when valid
	}{
		{"valid", func(*Conv2D) {}, ""},
		{"empty batch", func(p *Conv2D) { p.Batch = 0 }, ""},
		{"negative batch", func(p *Conv2D) { p.Batch = -1 }, "batch"},
		{"zero height", func(p *Conv2D) { p.H = 0 }, "input"},
		{"zero width", func(p *Conv2D) { p.W = 0 }, "input"},
		{"zero cin", func(p *Conv2D) { p.Cin = 0 }, "channels"},
		{"zero cout", func(p *Conv2D) { p.Cout = 0 }, "channels"},
		{"zero kernel", func(p *Conv2D) { p.KW = 0 }, "kernel"},
		{"zero stride", func(p *Conv2D) { p.StrideH = 0 }, "stride"},
		{"negative padding", func(p *Conv2D) { p.PadRight = -1 }, "padding"},
		{"kernel too tall", func(p *Conv2D) { p.KH, p.PadTop, p.PadBottom = 8, 1, 1 }, "larger than padded input"},
		{"kernel too wide", func(p *Conv2D) { p.KW = 8 }, "larger than padded input"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := ok
			c.edit(&p)
			err := p.Validate()
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("unexpected error %v", err)
			case c.want == "":
			case err == nil:
				t.Fatalf("no error, want one mentioning %q", c.want)
			case !strings.HasPrefix(err.Error(), "kernels: conv2d: ") || !strings.Contains(err.Error(), c.want):
				t.Fatalf("error %q, want a \"kernels: conv2d: \" message mentioning %q", err, c.want)
			}
		})
	}
}

func TestConv2DPanics(t *testing.T) {
	for _, c := range []conv2DCase{
		{"im2col", conv2DShape(2, 5, 6, 3, 4, 3, 3, 2, 2, 0, 1, 0, 1), true},
		{"winograd", conv2DShape(1, 4, 4, 16, 16, 3, 3, 1, 1, 1, 1, 1, 1), true},
		{"im2col_3x3p0", conv2DShape(2, 5, 4, 16, 16, 3, 3, 1, 1, 0, 0, 0, 0), true},
		{"pointwise", conv2DShape(1, 4, 4, 3, 5, 1, 1, 1, 1, 0, 0, 0, 0), true},
	} {
		p := c.p
		x := make([]float32, p.Batch*p.H*p.W*p.Cin)
		y := make([]float32, p.Batch*p.OutH()*p.OutW()*p.Cout)
		w := make([]float32, p.Cout*p.Cin*p.KH*p.KW)
		bias := make([]float32, p.Cout)
		ws := make([]float32, Conv2DScratch(p))
		fwd := func(y, x, w, bias, ws []float32, p Conv2D) func() {
			return func() { Conv2DForward(y, x, w, bias, p, ws) }
		}
		acExpectPanic(t, c.name+" short x", fwd(y, x[1:], w, bias, ws, p))
		acExpectPanic(t, c.name+" short y", fwd(y[1:], x, w, bias, ws, p))
		acExpectPanic(t, c.name+" short w", fwd(y, x, w[1:], bias, ws, p))
		acExpectPanic(t, c.name+" short bias", fwd(y, x, w, bias[1:], ws, p))
		if len(ws) > 0 {
			acExpectPanic(t, c.name+" short scratch", fwd(y, x, w, bias, ws[:len(ws)/4], p))
		}
		bad := p
		bad.StrideW = 0
		acExpectPanic(t, c.name+" invalid", fwd(y, x, w, bias, ws, bad))
		acExpectPanic(t, c.name+" invalid scratch", func() { Conv2DScratch(bad) })
	}
}

func TestConv2DEmptyBatch(t *testing.T) {
	p := conv2DShape(0, 5, 5, 3, 4, 3, 3, 2, 2, 0, 0, 0, 0)
	if n := Conv2DScratch(p); n != 0 {
		t.Errorf("scratch for an empty batch: %d", n)
	}
	Conv2DForward[float32](nil, nil, make([]float32, 4*3*9), nil, p, nil)
}

// TestConv2DFewerWorkers checks that a scratch sized for one worker is
// enough: the call runs fewer workers instead of failing.
func TestConv2DFewerWorkers(t *testing.T) {
	c := conv2DCase{"im2col", conv2DShape(4, 20, 20, 8, 8, 3, 3, 2, 2, 0, 1, 0, 1), true}
	x, w, bias := conv2DInputs(c, 3)
	z := convSizing{budget: 1, minRows: 16}
	q := newConv2DPlan(c.p, z)
	if q.blocks < 2 {
		t.Fatalf("%d blocks, want several", q.blocks)
	}
	y := acNaNs[float64](c.p.Batch * c.p.OutH() * c.p.OutW() * c.p.Cout)
	conv2DForward(y, x, w, bias, c.p, make([]float64, q.scratch(c.p.Cout, 1)), z)
	if e := acRelErr(y, conv2DRef(x, w, bias, c.p)); !fixtures.Within(e, 1e-12) {
		t.Errorf("rel err %.3g", e)
	}
}

// TestConv2DPath checks which shapes take the fast paths, so that the
// reference tests above exercise each of them.
func TestConv2DPath(t *testing.T) {
	for _, c := range []struct {
		name string
		p    Conv2D
		want conv2DPath
	}{
		{"1x1", conv2DShape(1, 4, 4, 3, 5, 1, 1, 1, 1, 0, 0, 0, 0), pathPointwise},
		{"1x1s2", conv2DShape(1, 4, 4, 3, 5, 1, 1, 2, 2, 0, 0, 0, 0), pathIm2col},
		{"1x1_padded", conv2DShape(1, 4, 4, 3, 5, 1, 1, 1, 1, 0, 1, 0, 0), pathIm2col},
		{"3x3p1", conv2DShape(1, 4, 4, 16, 16, 3, 3, 1, 1, 1, 1, 1, 1), pathWinograd},
		{"3x3p1_cin15", conv2DShape(1, 4, 4, 15, 16, 3, 3, 1, 1, 1, 1, 1, 1), pathIm2col},
		{"3x3p0", conv2DShape(1, 4, 4, 16, 16, 3, 3, 1, 1, 0, 0, 0, 0), pathIm2col},
		{"3x3p0101", conv2DShape(1, 4, 4, 16, 16, 3, 3, 1, 1, 0, 1, 0, 1), pathIm2col},
		{"3x3p2", conv2DShape(1, 4, 4, 16, 16, 3, 3, 1, 1, 2, 2, 2, 2), pathIm2col},
		{"3x3s2p1", conv2DShape(1, 4, 4, 16, 16, 3, 3, 2, 2, 1, 1, 1, 1), pathIm2col},
		{"1x7", conv2DShape(1, 4, 9, 16, 16, 1, 7, 1, 1, 0, 0, 3, 3), pathIm2col},
	} {
		if got := c.p.path(); got != c.want {
			t.Errorf("%s: path %d, want %d", c.name, got, c.want)
		}
	}
}

package kernels

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// poolRef computes max or average pooling directly: every window's taps in
// row-major order, the padding skipped (max) or counted as zeros (average
// with countIncludePad).
func poolRef[T float32 | float64](x []T, batch, h, w, c, k, stride, pad int, isMax, includePad bool) []T {
	oh, ow := (h+2*pad-k)/stride+1, (w+2*pad-k)/stride+1
	y := make([]T, batch*oh*ow*c)
	for b := range batch {
		for oi := range oh {
			for oj := range ow {
				for ci := range c {
					acc := T(math.Inf(-1))
					if !isMax {
						acc = 0
					}
					n := 0
					for di := range k {
						for dj := range k {
							i, j := oi*stride-pad+di, oj*stride-pad+dj
							if i < 0 || i >= h || j < 0 || j >= w {
								continue
							}
							v := x[((b*h+i)*w+j)*c+ci]
							n++
							switch {
							case !isMax:
								acc += v
							case math.IsNaN(float64(v)) || v > acc:
								acc = v
							}
						}
					}
					if !isMax {
						if includePad {
							n = k * k
						}
						acc /= T(n)
					}
					y[((b*oh+oi)*ow+oj)*c+ci] = acc
				}
			}
		}
	}
	return y
}

type poolCase struct {
	name                        string
	batch, h, w, c, k, str, pad int
}

// poolCases include Inception's pools (3×3 stride 2, 3×3 stride 1 pad 1),
// odd sizes, one channel and windows as large as the input.
func poolCases() []poolCase {
	return []poolCase{
		{"3x3s2", 2, 11, 9, 5, 3, 2, 0},
		{"3x3s1p1", 2, 7, 8, 6, 3, 1, 1},
		{"3x3s2p1", 1, 8, 9, 3, 3, 2, 1},
		{"2x2s2", 3, 6, 7, 4, 2, 2, 0},
		{"5x5s1p2_c1", 1, 4, 6, 1, 5, 1, 2},
		{"window_is_input", 2, 3, 3, 7, 3, 3, 0},
		{"1x1s2", 1, 5, 5, 2, 1, 2, 0},
		// Widths that run the vector loops, with and without a tail.
		{"3x3s2_c64", 2, 7, 9, 64, 3, 2, 0},
		{"3x3s1p1_c19", 1, 6, 5, 19, 3, 1, 1},
		{"5x5s3p2_c8", 2, 9, 8, 8, 5, 3, 2},
	}
}

// randF32 returns n random values, a few of them NaN when nans is set.
func randF32(rng *rand.Rand, n int, nans bool) []float32 {
	s := acToF32(acRandn(rng, n))
	if nans {
		for i := 0; i < n; i += 13 {
			s[i] = float32(math.NaN())
		}
	}
	return s
}

// poolSameBits reports whether got and want are equal element for element,
// NaN matching NaN.
func poolSameBits[T float32 | float64](got, want []T) bool {
	return slices.EqualFunc(got, want, func(a, b T) bool { return a == b || a != a && b != b })
}

func TestPool2D(t *testing.T) {
	for _, c := range poolCases() {
		oh, ow := (c.h+2*c.pad-c.k)/c.str+1, (c.w+2*c.pad-c.k)/c.str+1
		for _, mode := range []struct {
			name              string
			isMax, includePad bool
			nans              bool
		}{
			{"max", true, false, false},
			{"max_nan", true, false, true},
			{"avg_include_pad", false, true, false},
			{"avg_exclude_pad", false, false, false},
		} {
			t.Run(c.name+"/"+mode.name, func(t *testing.T) {
				x := randF32(rand.New(rand.NewPCG(5, 5)), c.batch*c.h*c.w*c.c, mode.nans)
				want := poolRef(x, c.batch, c.h, c.w, c.c, c.k, c.str, c.pad, mode.isMax, mode.includePad)
				got := acNaNs[float32](c.batch * oh * ow * c.c)
				x64 := make([]float64, len(x))
				for i, v := range x {
					x64[i] = float64(v)
				}
				want64 := poolRef(x64, c.batch, c.h, c.w, c.c, c.k, c.str, c.pad, mode.isMax, mode.includePad)
				got64 := acNaNs[float64](len(want64))
				if mode.isMax {
					MaxPool2D(got, x, c.batch, c.h, c.w, c.c, c.k, c.str, c.pad)
					MaxPool2D(got64, x64, c.batch, c.h, c.w, c.c, c.k, c.str, c.pad)
				} else {
					AvgPool2D(got, x, c.batch, c.h, c.w, c.c, c.k, c.str, c.pad, mode.includePad)
					AvgPool2D(got64, x64, c.batch, c.h, c.w, c.c, c.k, c.str, c.pad, mode.includePad)
				}
				if !poolSameBits(got, want) {
					t.Errorf("float32 differs from the direct computation:\n got %v\nwant %v", got, want)
				}
				if !poolSameBits(got64, want64) {
					t.Errorf("float64 differs from the direct computation:\n got %v\nwant %v", got64, want64)
				}
			})
		}
	}
}

// TestMaxPoolPaddingNeverWins checks that all-negative inputs stay negative
// next to the padding.
func TestMaxPoolPaddingNeverWins(t *testing.T) {
	x := []float64{-3, -1, -2, -4}
	y := make([]float64, 4)
	MaxPool2D(y, x, 1, 2, 2, 1, 3, 1, 1)
	if want := []float64{-1, -1, -1, -1}; !slices.Equal(y, want) {
		t.Errorf("got %v, want %v", y, want)
	}
}

func TestUpsampleNearest2x(t *testing.T) {
	for _, c := range []struct {
		name           string
		batch, h, w, c int
	}{{"odd", 2, 3, 5, 4}, {"one_pixel", 1, 1, 1, 3}, {"c1", 1, 4, 2, 1}} {
		t.Run(c.name, func(t *testing.T) {
			x := randF32(rand.New(rand.NewPCG(6, 6)), c.batch*c.h*c.w*c.c, false)
			got := acNaNs[float32](c.batch * 4 * c.h * c.w * c.c)
			UpsampleNearest2x(got, x, c.batch, c.h, c.w, c.c)
			for b := range c.batch {
				for i := range 2 * c.h {
					for j := range 2 * c.w {
						for ci := range c.c {
							g := got[((b*2*c.h+i)*2*c.w+j)*c.c+ci]
							if want := x[((b*c.h+i/2)*c.w+j/2)*c.c+ci]; g != want {
								t.Fatalf("y[%d,%d,%d,%d] = %v, want %v", b, i, j, ci, g, want)
							}
						}
					}
				}
			}
		})
	}
}

func TestGlobalAvgPool(t *testing.T) {
	for _, c := range []struct {
		name           string
		batch, h, w, c int
	}{{"inception_like", 3, 8, 8, 130}, {"one_pixel", 2, 1, 1, 5}, {"odd", 1, 3, 5, 64}} {
		t.Run(c.name, func(t *testing.T) {
			x := randF32(rand.New(rand.NewPCG(7, 7)), c.batch*c.h*c.w*c.c, false)
			got := acNaNs[float32](c.batch * c.c)
			GlobalAvgPool(got, x, c.batch, c.h, c.w, c.c)
			for b := range c.batch {
				for ci := range c.c {
					var s float64
					for t := range c.h * c.w {
						s += float64(x[(b*c.h*c.w+t)*c.c+ci])
					}
					if want := float32(s / float64(c.h*c.w)); got[b*c.c+ci] != want {
						t.Fatalf("y[%d,%d] = %v, want %v", b, ci, got[b*c.c+ci], want)
					}
				}
			}
		})
	}
}

func TestPoolPanics(t *testing.T) {
	x := make([]float32, 2*5*5*3)
	y := make([]float32, 2*10*10*3)
	for _, c := range []struct {
		name string
		f    func()
	}{
		{"max pad > k/2", func() { MaxPool2D(y, x, 2, 5, 5, 3, 3, 1, 2) }},
		{"avg pad > k/2", func() { AvgPool2D(y, x, 2, 5, 5, 3, 3, 1, 2, false) }},
		{"max stride 0", func() { MaxPool2D(y, x, 2, 5, 5, 3, 3, 0, 0) }},
		{"max window too large", func() { MaxPool2D(y, x, 2, 5, 5, 3, 6, 1, 0) }},
		{"max short x", func() { MaxPool2D(y, x[1:], 2, 5, 5, 3, 3, 2, 0) }},
		{"avg short y", func() { AvgPool2D(y[:2*2*2*3-1], x, 2, 5, 5, 3, 3, 2, 0, true) }},
		{"upsample short y", func() { UpsampleNearest2x(y[:2*100*3-1], x, 2, 5, 5, 3) }},
		{"upsample short x", func() { UpsampleNearest2x(y, x[1:], 2, 5, 5, 3) }},
		{"upsample c 0", func() { UpsampleNearest2x(y, x, 2, 5, 5, 0) }},
		{"gap short y", func() { GlobalAvgPool(y[:5], x, 2, 5, 5, 3) }},
		{"gap short x", func() { GlobalAvgPool(y, x[1:], 2, 5, 5, 3) }},
		{"gap negative batch", func() { GlobalAvgPool(y, x, -1, 5, 5, 3) }},
	} {
		acExpectPanic(t, c.name, c.f)
	}
}

package inception

import (
	"math"
	"math/big"
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/dcdit/dcdit/internal/fixtures"
)

// exactFMA32 is a·b + c computed exactly and rounded once to float32 (ties
// to even).
func exactFMA32(a, b, c float32) float32 {
	x := new(big.Float).SetPrec(200).SetFloat64(float64(a))
	x.Mul(x, new(big.Float).SetPrec(200).SetFloat64(float64(b)))
	x.Add(x, new(big.Float).SetPrec(200).SetFloat64(float64(c)))
	f, _ := x.Float32()
	return f
}

// fma32 is one rounding of the exact a·b + c, also where rounding the
// float64 sum to float32 would round twice (the exact value lies just off a
// float32 midpoint that float64 rounds onto).
func TestFMA32(t *testing.T) {
	const u = 1.0 / (1 << 23) // float32 ulp of 1
	a := float32(math.Ldexp(1+u, -12))
	b := float32(math.Ldexp(1-u, -12)) // a·b = 2^-24 − 2^-70
	cases := []struct {
		name    string
		a, b, c float32
		twice   bool // rounding the float64 sum to float32 is wrong
	}{
		{"below midpoint", a, b, 1 + u, true},
		{"below midpoint, negative", -a, b, -(1 + u), true},
		{"above midpoint", a, a, 1 + u, false},
		{"above midpoint, negative", -a, a, -(1 + u), false},
		{"cancellation", a, b, -float32(math.Ldexp(1, -24)), false},
		{"exact", 0.5, 0.25, 1, false},
		{"zero", 0, 0.7, 0, false},
		{"negative zero", float32(math.Copysign(0, -1)), 0.7, float32(math.Copysign(0, -1)), false},
		{"subnormal", float32(math.Ldexp(1, -140)), 0.75, float32(math.Ldexp(3, -149)), false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, want := fma32(c.a, c.b, c.c), exactFMA32(c.a, c.b, c.c)
			naive := float32(float64(c.a)*float64(c.b) + float64(c.c))
			if math.Float32bits(got) != math.Float32bits(want) {
				t.Errorf("fma32(%g, %g, %g) = %g, want %g", c.a, c.b, c.c, got, want)
			}
			if twice := naive != want; twice != c.twice {
				t.Errorf("rounding the float64 sum gives %g (wrong: %v), want wrong: %v", naive, twice, c.twice)
			}
		})
	}
	// Random operands shaped like the resize's (values and weights in
	// [0, 1], the addend a rounded product) and of any magnitude.
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 100000 {
		var x, y, z float32
		if i%2 == 0 {
			x, y = rng.Float32(), rng.Float32()
			z = rng.Float32() * rng.Float32()
		} else {
			r := func() float32 { return float32(math.Ldexp(rng.NormFloat64(), rng.IntN(40)-20)) }
			x, y, z = r(), r(), r()
		}
		if got, want := fma32(x, y, z), exactFMA32(x, y, z); math.Float32bits(got) != math.Float32bits(want) {
			t.Fatalf("fma32(%g, %g, %g) = %g, want %g", x, y, z, got, want)
		}
	}
}

// Upscaling and downscaling sample where PyTorch does: 299 → 299 is the
// identity, and the weights of each output sample sum to 1.
func TestPlanAxis(t *testing.T) {
	for _, n := range []int{1, 2, 24, 48, 64, 298, 299, 300, 512, 1024} {
		p := planAxis(n)
		for d := range InputSize {
			if p.i0[d] < 0 || p.i1[d] >= n || p.i1[d] < p.i0[d] || p.i1[d] > p.i0[d]+1 {
				t.Fatalf("n=%d, d=%d: neighbours %d, %d outside [0, %d)", n, d, p.i0[d], p.i1[d], n)
			}
			if !(p.l1[d] >= 0 && p.l1[d] < 1) || p.l0[d] != 1-p.l1[d] {
				t.Fatalf("n=%d, d=%d: weights %g, %g", n, d, p.l0[d], p.l1[d])
			}
			if n == InputSize && (p.i0[d] != d || p.l1[d] != 0) {
				t.Fatalf("299 → 299, d=%d: reads %d with weight %g, want the identity", d, p.i0[d], p.l1[d])
			}
		}
	}
}

// resizeOnly resizes the fixture's NCHW images and returns the network
// input, NHWC.
func resizeOnly(t *testing.T, io *fixtures.File, name string) ([]float32, int) {
	t.Helper()
	s := io.Shape(name)
	b, h, w := int(s[0]), int(s[2]), int(s[3])
	x := toNHWC(io.F32(name), b, 3, h, w)
	rs := newResizer(h, w)
	out := make([]float32, b*pixelsIn)
	tmp := make([]float32, rs.tmpLen())
	for i := range b {
		rs.image(out[i*pixelsIn:(i+1)*pixelsIn], x[i*h*w*3:(i+1)*h*w*3], nil, tmp)
	}
	return out, b
}

// The resize reproduces PyTorch's bit for bit (this runs without the
// fixture's weights): resized.<i> is image i of images, and a 299×299
// input is only mapped to 2x − 1.
func TestFixtureResize(t *testing.T) {
	fixtures.Run(t, fixtureKind, func(t *testing.T, c fixtures.Case) {
		io := c.Open(t, "io.safetensors")
		x, b := resizeOnly(t, io, "images")
		for i := range b {
			name := "resized." + strconv.Itoa(i)
			if !io.Has(name) {
				continue
			}
			want := io.F32(name)
			got := imageCHW(x, i, InputSize, InputSize, 3)
			if len(got) != len(want) {
				t.Fatalf("%s: %d values, want %d", name, len(got), len(want))
			}
			diff := 0
			for k := range want {
				if math.Float32bits(got[k]) != math.Float32bits(want[k]) {
					diff++
				}
			}
			if diff != 0 {
				t.Errorf("%s: %d of %d values differ (relative error %.3g), want bit-exact", name, diff, len(want), fixtures.RelErr(got, want))
			}
		}
		if io.Has("images299") {
			y, _ := resizeOnly(t, io, "images299")
			src := toNHWC(io.F32("images299"), len(y)/pixelsIn, 3, InputSize, InputSize)
			for k, v := range src {
				if y[k] != 2*v-1 {
					t.Fatalf("images299 element %d: %g, want 2·%g − 1", k, y[k], v)
				}
			}
		}
	})
}

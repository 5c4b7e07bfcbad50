package inception

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/dcdit/dcdit/internal/fixtures"
	"github.com/dcdit/dcdit/loaders/dtype"
)

// randomParams is a state dict of random weights in the fixture's style
// (He-scaled convolutions, BatchNorm shifts that keep activations O(1)),
// every value exactly representable in float16.
func randomParams(seed uint64) map[string][]float32 {
	rng := rand.New(rand.NewPCG(seed, seed+1))
	f16 := func(v float64) float32 { return dtype.F16ToFloat32(dtype.Float32ToF16(float32(v))) }
	params := map[string][]float32{}
	for _, e := range expectedTensors() {
		n := 1
		for _, d := range e.shape {
			n *= int(d)
		}
		v := make([]float32, n)
		var gen func() float64
		switch {
		case strings.HasSuffix(e.name, ".conv.weight"):
			scale := math.Sqrt(2 / float64(e.shape[1]*e.shape[2]*e.shape[3]))
			gen = func() float64 { return rng.NormFloat64() * scale }
		case strings.HasSuffix(e.name, ".bn.weight"):
			gen = func() float64 { return 0.75 + 0.5*rng.Float64() }
		case strings.HasSuffix(e.name, ".bn.bias"):
			gen = func() float64 { return 1 + 0.25*rng.NormFloat64() }
		case strings.HasSuffix(e.name, ".running_mean"):
			gen = func() float64 { return 0.5 * rng.NormFloat64() }
		case strings.HasSuffix(e.name, ".running_var"):
			gen = func() float64 { return 0.5 + 1.5*rng.Float64() }
		default: // fc
			gen = func() float64 { return 0.02 * rng.NormFloat64() }
		}
		for i := range v {
			v[i] = f16(gen())
		}
		params[e.name] = v
	}
	return params
}

// randomImages returns n h×w×3 uint8 images and the same values as float32
// in [0, 1] (u/255).
func randomImages(seed uint64, n, h, w int) ([]uint8, []float32) {
	rng := rand.New(rand.NewPCG(seed, 7))
	u := make([]uint8, n*h*w*3)
	f := make([]float32, len(u))
	for i := range u {
		u[i] = uint8(rng.IntN(256))
		f[i] = float32(u[i]) / 255
	}
	return u, f
}

// uint8 images are the float32 images u/255, and results do not depend on
// how the batch is cut into chunks: images run alone give their features
// in a batch that spans several chunks.
func TestRunConsistency(t *testing.T) {
	n := build(randomParams(1))
	n.chunk = 2
	const batch, h, w = 3, 40, 23
	u, f := randomImages(2, batch, h, w)
	want := Outputs{Pooled: true, Logits: true, Mixed7c: true}
	rf, err := n.Run(f, batch, h, w, want)
	if err != nil {
		t.Fatal(err)
	}
	ru, err := n.RunUint8(u, batch, h, w, want)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name     string
		got, ref []float32
	}{
		{"features", ru.Features, rf.Features},
		{"features768", ru.Features768, rf.Features768},
		{"logits", ru.Logits, rf.Logits},
		{"mixed7c", ru.Mixed7c, rf.Mixed7c},
	} {
		for i := range c.ref {
			if math.Float32bits(c.got[i]) != math.Float32bits(c.ref[i]) {
				t.Fatalf("uint8 %s element %d: %g, float32 input gives %g", c.name, i, c.got[i], c.ref[i])
			}
		}
	}
	if v := rf.Features[0]; !(v > 0) {
		t.Fatalf("features[0] = %g: the random network is degenerate", v)
	}
	per := h * w * 3
	for i := range batch {
		one, err := n.Run(f[i*per:(i+1)*per], 1, h, w, want)
		if err != nil {
			t.Fatal(err)
		}
		if e := fixtures.RelErr(one.Features, rf.Features[i*FeatureDim:(i+1)*FeatureDim]); !fixtures.Within(e, 1e-6) {
			t.Errorf("image %d alone: features differ from the batch's by %.3g", i, e)
		}
		if e := fixtures.RelErr(one.Logits, rf.Logits[i*NumClasses:(i+1)*NumClasses]); !fixtures.Within(e, 1e-6) {
			t.Errorf("image %d alone: logits differ from the batch's by %.3g", i, e)
		}
	}
}

// Logits are LogitsNoBias plus the head's bias; Outputs left unset stay
// nil.
func TestRunOutputs(t *testing.T) {
	n := build(randomParams(3))
	_, f := randomImages(4, 1, 299, 299)
	r, err := n.Run(f, 1, 299, 299, Outputs{Logits: true})
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range r.Logits {
		if v != r.LogitsNoBias[i]+n.fcB[i] {
			t.Fatalf("logit %d: %g, want %g + %g", i, v, r.LogitsNoBias[i], n.fcB[i])
		}
	}
	if r.Resized != nil || r.Features64 != nil || r.Mixed7c != nil {
		t.Fatal("outputs that were not asked for are set")
	}
	if len(r.Features) != FeatureDim {
		t.Fatalf("%d features, want %d", len(r.Features), FeatureDim)
	}
}

func TestRunErrors(t *testing.T) {
	n := build(randomParams(5))
	cases := []struct {
		name           string
		values         int
		batch, h, w    int
		wantSubstrings []string
	}{
		{"no images", 0, 0, 10, 10, []string{"batch 0", "at least one image"}},
		{"zero height", 0, 1, 0, 10, []string{"1×1"}},
		{"short", 10*10*3 - 1, 1, 10, 10, []string{"299 input values", "want 300", "NHWC"}},
		{"long", 2 * 10 * 10 * 3, 1, 10, 10, []string{"600 input values", "want 300"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := n.Run(make([]float32, c.values), c.batch, c.h, c.w, Outputs{})
			_, errU := n.RunUint8(make([]uint8, c.values), c.batch, c.h, c.w, Outputs{})
			for _, e := range []error{err, errU} {
				if e == nil {
					t.Fatal("no error")
				}
				for _, s := range c.wantSubstrings {
					if !strings.Contains(e.Error(), s) {
						t.Errorf("error %q lacks %q", e, s)
					}
				}
			}
		})
	}
}

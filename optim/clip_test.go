package optim

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/dcdit/dcdit/internal/fixtures"
)

func TestClip(t *testing.T) {
	const n = 200_003 // several blocks and a tail
	frozen := []Range{{10, 20}, {70_000, 140_000}}
	mask, err := FreezeMask(n, frozen...)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(13, 14))
	base := randn(r, n, 0.01)
	var sq float64
	for i, g := range base {
		if !mask.IsFrozen(i) {
			sq += float64(g) * float64(g)
		}
	}
	norm := math.Sqrt(sq) // about 0.01·√130000 ≈ 3.6
	cases := []struct {
		name     string
		maxNorm  float64
		poison   float32 // written at a trainable index when not 0
		frozenNa bool    // NaN at frozen positions (must be ignored)
		wantErr  error
		scaled   bool
	}{
		{"below threshold", 2 * norm, 0, false, nil, false},
		{"above threshold", norm / 3, 0, false, nil, true},
		{"frozen NaN ignored", norm / 3, 0, true, nil, true},
		{"NaN", 1, float32(math.NaN()), false, ErrNonFiniteNorm, false},
		{"+Inf", 1, float32(math.Inf(1)), false, ErrNonFiniteNorm, false},
	}
	eachKernels(t, func(t *testing.T) {
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				g := append([]float32(nil), base...)
				if c.poison != 0 {
					g[n-1] = c.poison
				}
				if c.frozenNa {
					for _, fr := range frozen {
						for i := fr.Lo; i < fr.Hi; i++ {
							g[i] = float32(math.NaN())
						}
					}
				}
				before := append([]float32(nil), g...)
				clipper := NewGradClipper(mask, c.maxNorm)
				got, err := clipper.Clip(g)
				if c.wantErr != nil {
					if !errors.Is(err, c.wantErr) {
						t.Fatalf("err = %v, want %v", err, c.wantErr)
					}
					if i := sameBits(g, before); i >= 0 {
						t.Fatalf("grads changed at %d despite the error", i)
					}
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				if !fixtures.Within(math.Abs(got-norm), 1e-12*norm) {
					t.Errorf("norm = %.15g, want %.15g", got, norm)
				}
				coef := float32(c.maxNorm / (norm + 1e-6))
				for i := range g {
					want := before[i]
					if c.scaled && !mask.IsFrozen(i) {
						want = before[i] * coef
					}
					if math.Float32bits(g[i]) != math.Float32bits(want) {
						t.Fatalf("g[%d] = %v, want %v", i, g[i], want)
					}
				}
				if c.scaled {
					if after := clipper.Norm(g); !fixtures.Within(math.Abs(after-c.maxNorm), 1e-5*c.maxNorm) {
						t.Errorf("norm after clipping = %v, want %v", after, c.maxNorm)
					}
				}
			})
		}
	})
}

// Huge but finite gradients have a norm beyond float32's range; summed in
// float64 it is still finite, so they are clipped rather than rejected.
func TestClipHugeGradients(t *testing.T) {
	g := []float32{3e38, -3e38}
	norm, err := ClipGradNorm(g, AllTrainable(2), 1)
	if err != nil || !fixtures.Within(math.Abs(norm-3e38*math.Sqrt2), 1e-6*norm) {
		t.Fatalf("norm %v, err %v; want %v", norm, err, 3e38*math.Sqrt2)
	}
	if !fixtures.Within(math.Abs(float64(g[0])-math.Sqrt(0.5)), 1e-6) || !fixtures.Within(math.Abs(float64(g[1])+math.Sqrt(0.5)), 1e-6) {
		t.Errorf("clipped grads %v, want ±0.7071", g)
	}
}

// The norm is summed in fixed blocks, so it has the same bits whatever the
// number of workers.
func TestNormDeterministic(t *testing.T) {
	const n = 1_000_003
	r := rand.New(rand.NewPCG(15, 16))
	g := randn(r, n, 1)
	c := NewGradClipper(AllTrainable(n), 1)
	want := c.Norm(g)
	for range 5 {
		if got := c.Norm(g); math.Float64bits(got) != math.Float64bits(want) {
			t.Fatalf("Norm = %v then %v", want, got)
		}
	}
}

func TestClipBadMaxNorm(t *testing.T) {
	for _, m := range []float64{0, -1, math.NaN(), math.Inf(1)} {
		if _, err := ClipGradNorm([]float32{1, 2}, AllTrainable(2), m); err == nil {
			t.Errorf("max norm %v accepted", m)
		}
	}
	norm, err := ClipGradNorm([]float32{3, 4}, AllTrainable(2), 1)
	if err != nil || norm != 5 {
		t.Errorf("ClipGradNorm([3 4], 1) = %v, %v; want 5", norm, err)
	}
}

package optim

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/dcdit/dcdit/internal/fixtures"
)

func TestEMA(t *testing.T) {
	const n = 150_001
	frozen := []Range{{0, 3}, {65_000, 70_000}}
	mask, err := FreezeMask(n, frozen...)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name  string
		decay float64
	}{{"DiT", 0.9999}, {"half", 0.5}, {"copy", 0}, {"hold", 1}}
	eachKernels(t, func(t *testing.T) {
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				r := rand.New(rand.NewPCG(17, 18))
				p := randn(r, n, 1)
				e, err := NewEMA(mask, p, c.decay)
				if err != nil {
					t.Fatal(err)
				}
				ref := make([]float64, n)
				for i := range p {
					ref[i] = float64(p[i])
				}
				for range 4 {
					p = randn(r, n, 1)
					for i, x := range p {
						if !mask.IsFrozen(i) {
							ref[i] = c.decay*ref[i] + (1-c.decay)*float64(x)
						}
					}
					e.Update(p)
				}
				for i, w := range e.Weights() {
					// Four steps of two roundings each, plus the rounding of
					// decay and 1−decay, relative to the terms' size (≤ ~4).
					if d := math.Abs(float64(w) - ref[i]); !fixtures.Within(d, 16*unitRoundoff*4) {
						t.Fatalf("ema[%d] = %.9g, float64 reference %.9g", i, w, ref[i])
					}
				}
			})
		}
	})
	if _, err := NewEMA(mask, make([]float32, 3), 0.9); err == nil {
		t.Error("NewEMA accepted params of the wrong length")
	}
	if _, err := NewEMA(mask, make([]float32, n), 1.5); err == nil {
		t.Error("NewEMA accepted decay 1.5")
	}
}

// One update by hand, PyTorch's way: decay and 1−decay (computed in
// float64) are each rounded to float32; frozen elements keep their copy.
func TestEMAKnownValues(t *testing.T) {
	mask, _ := FreezeMask(64, Range{0, 32})
	p := make([]float32, 64)
	for i := range p {
		p[i] = 1
	}
	e, _ := NewEMA(mask, p, 0.9999)
	q := make([]float32, 64)
	for i := range q {
		q[i] = 2
	}
	e.Update(q)
	for i, w := range e.Weights() {
		want := float32(1)
		if i >= 32 {
			want = float32(float32(0.9999)*1) + float32(float32(1-0.9999)*2)
		}
		if w != want {
			t.Fatalf("ema[%d] = %v, want %v", i, w, want)
		}
	}
}

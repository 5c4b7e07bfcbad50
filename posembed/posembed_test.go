package posembed

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/dcdit/dcdit/internal/fixtures"
)

// Fractional positions interpolate the same formula (the DC scaffold
// evaluates the table at kept tokens' original positions).
func TestPosEmbedFractional(t *testing.T) {
	d := 16
	a, b := make([]float32, d), make([]float32, d)
	SinCos2D(a, 2, 3)
	SinCos2D(b, 2.0000001, 3)
	var diff float64
	for i := range a {
		diff = math.Max(diff, math.Abs(float64(a[i]-b[i])))
	}
	if diff == 0 || !fixtures.Within(diff, 1e-6) {
		t.Errorf("a 1e-7 move of the row changed the embedding by %g", diff)
	}
	// Column first, row second: a pure column move leaves the row half alone.
	SinCos2D(b, 2, 4)
	for i := d / 2; i < d; i++ {
		if a[i] != b[i] {
			t.Fatalf("moving the column changed dimension %d of the row half", i)
		}
	}
}

// Packed builds each distinct coordinate's half once; every token
// must still get exactly SinCos2D's values, for repeated grid positions
// and fractional (DC chunk) ones alike, at several patch sizes.
func TestPackedMatchesSinCos2D(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	grid := func(b, side int) []float64 {
		var pos []float64
		for range b {
			for i := range side {
				for j := range side {
					pos = append(pos, float64(i), float64(j))
				}
			}
		}
		return pos
	}
	fractional := make([]float64, 2*300)
	for i := range fractional {
		fractional[i] = float64(rng.IntN(64)) / 4 // repeats among fractional values
		if i%7 == 0 {
			fractional[i] = 31 * rng.Float64()
		}
	}
	cases := []struct {
		name string
		pos  []float64
		d, p int
	}{
		{"grid batch 3, p 1", grid(3, 8), 64, 1},
		{"grid batch 2, p 2", grid(2, 16), 1152, 2},
		{"fractional, p 1", fractional, 96, 1},
		{"fractional, p 4", fractional, 32, 4},
		{"empty", nil, 16, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := Packed(c.pos, c.d, c.p)
			n := len(c.pos) / 2
			if len(got) != n*c.d {
				t.Fatalf("%d values, want %d", len(got), n*c.d)
			}
			want := make([]float32, c.d)
			for r := range n {
				SinCos2D(want, GridPos(c.pos[2*r], c.p), GridPos(c.pos[2*r+1], c.p))
				for k, w := range want {
					if g := got[r*c.d+k]; math.Float32bits(g) != math.Float32bits(w) {
						t.Fatalf("token %d, dim %d: %v, want %v", r, k, g, w)
					}
				}
			}
		})
	}
}

// BenchmarkPacked builds the position embedding of a DC-DiT-XL
// batch's main-network tokens (32 samples × 256 fractional positions,
// D 1152), every forward pass's host work; "per-token" is the same by
// SinCos2D for each token, as Packed once did.
func BenchmarkPacked(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	pos := make([]float64, 2*32*256)
	for i := range pos {
		pos[i] = float64(rng.IntN(128)) / 4
	}
	const d = 1152
	b.Run("distinct", func(b *testing.B) {
		for b.Loop() {
			Packed(pos, d, 1)
		}
	})
	b.Run("per-token", func(b *testing.B) {
		pe := make([]float32, len(pos)/2*d)
		for b.Loop() {
			for r := range len(pos) / 2 {
				SinCos2D(pe[r*d:(r+1)*d], GridPos(pos[2*r], 1), GridPos(pos[2*r+1], 1))
			}
		}
	})
}

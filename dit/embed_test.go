package dit

import (
	"math"
	"testing"

	"github.com/dcdit/dcdit/internal/fixtures"
)

// The computed position table equals the reference's stored pos_embed, and
// the timestep features equal the reference's t_freq.
func TestFixtureEmbeddings(t *testing.T) {
	fixtures.Run(t, "dit-tiny", func(t *testing.T, c fixtures.Case) {
		w := c.Open(t, "weights.safetensors")
		io := c.Open(t, "io.safetensors")
		shape := w.Shape("pos_embed")
		tokens, d := int(shape[1]), int(shape[2])
		grid, _ := c.Int("grid")
		if grid*grid != tokens {
			t.Fatalf("grid %d does not match %d tokens", grid, tokens)
		}
		got := make([]float32, tokens*d)
		PosEmbedGrid(got, grid, d)
		if e := fixtures.RelErr(got, w.F32("pos_embed")); e > 1e-7 {
			t.Errorf("pos_embed: err %.3g", e)
		}

		steps := io.Ints("t")
		ts := make([]float32, len(steps))
		for i, s := range steps {
			ts[i] = float32(s)
		}
		dim := int(io.Shape("t_freq")[1])
		freq := make([]float32, len(ts)*dim)
		TimestepFrequencies(freq, ts, dim)
		// The reference's vectorised float32 exp is not correctly rounded:
		// 15 of its 128 frequencies differ from ours by one ulp, which at
		// t ≈ 1000 moves a sinusoid by up to ~3e-5. That is the forward
		// tolerance, and it moves the model output by ~4e-6.
		if e := fixtures.RelErr(freq, io.F32("t_freq")); e > 5e-5 {
			t.Errorf("t_freq: err %.3g > 5e-5", e)
		}
	})
}

// Fractional positions interpolate the same formula (the DC scaffold
// evaluates the table at kept tokens' original positions).
func TestPosEmbedFractional(t *testing.T) {
	d := 16
	a, b := make([]float32, d), make([]float32, d)
	PosEmbed2D(a, 2, 3)
	PosEmbed2D(b, 2.0000001, 3)
	var diff float64
	for i := range a {
		diff = math.Max(diff, math.Abs(float64(a[i]-b[i])))
	}
	if diff == 0 || diff > 1e-6 {
		t.Errorf("a 1e-7 move of the row changed the embedding by %g", diff)
	}
	// Column first, row second: a pure column move leaves the row half alone.
	PosEmbed2D(b, 2, 4)
	for i := d / 2; i < d; i++ {
		if a[i] != b[i] {
			t.Fatalf("moving the column changed dimension %d of the row half", i)
		}
	}
}

package dit

import (
	"math"
	"testing"

	"github.com/dcdit/dcdit/internal/fixtures"
)

// The computed position table equals the reference's stored pos_embed
// (the timestep features are compared with the rest of io.safetensors in
// TestFixtureForward).
func TestFixtureEmbeddings(t *testing.T) {
	fixtures.Run(t, "dit-tiny", func(t *testing.T, c fixtures.Case) {
		w := c.Open(t, "weights.safetensors")
		shape := w.Shape("pos_embed")
		tokens, d := int(shape[1]), int(shape[2])
		grid, _ := c.Int("grid")
		if grid*grid != tokens {
			t.Fatalf("grid %d does not match %d tokens", grid, tokens)
		}
		got := make([]float32, tokens*d)
		PosEmbedGrid(got, grid, d)
		if e := fixtures.RelErr(got, w.F32("pos_embed")); !fixtures.Within(e, 1e-7) {
			t.Errorf("weights.safetensors pos_embed: err %.3g > 1e-7", e)
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
	if diff == 0 || !fixtures.Within(diff, 1e-6) {
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

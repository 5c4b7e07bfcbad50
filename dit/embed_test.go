package dit

import (
	"testing"

	"github.com/dcdit/dcdit/internal/fixtures"
	"github.com/dcdit/dcdit/posembed"
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
		posembed.SinCosGrid(got, grid, d)
		if e := fixtures.RelErr(got, w.F32("pos_embed")); !fixtures.Within(e, 1e-7) {
			t.Errorf("weights.safetensors pos_embed: err %.3g > 1e-7", e)
		}
	})
}

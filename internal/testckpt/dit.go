package testckpt

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/dcdit/dcdit/dit"
	"github.com/dcdit/dcdit/loaders/arch"
)

// RandomDiT is a freshly initialised DiT of cfg (dit.Init, seed 7) whose
// adaLN-Zero layers and final projection are drawn from N(0, 0.05²) too,
// so that every block changes its input and the model predicts
// something.
func RandomDiT(tb testing.TB, cfg *arch.DiTConfig) *dit.Model {
	tb.Helper()
	m, err := dit.Init(cfg, 7)
	if err != nil {
		tb.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for _, p := range m.Params.List() {
		if strings.Contains(p.Name, "adaLN_modulation") || strings.HasPrefix(p.Name, "final_layer.linear") {
			for i, v := 0, p.Values(); i < len(v); i++ {
				v[i] = float32(0.05 * rng.NormFloat64())
			}
		}
	}
	return m
}

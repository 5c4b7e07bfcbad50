package dit

import (
	"math"
	"testing"

	"github.com/dcdit/dcdit/internal/fixtures"
	"github.com/dcdit/dcdit/loaders/arch"
)

// The fixed-patch baselines at 256 px and 250 steps land within 1% of the
// DC-DiT paper's TFLOPs per image. Our figures are 0.3–0.5% higher because
// the reference's printout skips the first sampling step: with 249 steps
// they agree to 0.2%.
func TestBaselineFLOPsMatchPaper(t *testing.T) {
	cases := []struct {
		preset string
		paper  float64 // TFLOPs per image
	}{
		{"DiT-S/2", 3.02}, {"DiT-B/2", 11.46}, {"DiT-L/2", 40.21}, {"DiT-XL/2", 59.00},
	}
	for _, c := range cases {
		p, _ := arch.LookupDiTPreset(c.preset)
		cfg := &arch.DiTConfig{Depth: p.Depth, HiddenSize: p.Hidden, NumHeads: p.NumHeads, PatchSize: p.Patch,
			InChannels: 4, InputSize: 32, LearnSigma: true, NumClasses: 1000, MLPRatio: 4, FrequencySize: 256}
		fwd := ForwardFLOPs(cfg, cfg.NumTokens()).Total()
		got := SamplingFLOPs(fwd, 250, false) / 1e12
		if rel := math.Abs(got-c.paper) / c.paper; !fixtures.Within(rel, 0.01) {
			t.Errorf("%s: %.3f TFLOPs/img, paper %.2f (%.2f%% off)", c.preset, got, c.paper, 100*rel)
		}
		if rel := math.Abs(SamplingFLOPs(fwd, 249, false)/1e12-c.paper) / c.paper; !fixtures.Within(rel, 0.002) {
			t.Errorf("%s: 249 steps are %.2f%% off the paper", c.preset, 100*rel)
		}
	}
	// DiT-XL/2: 118.62 G multiply-adds per forward in the DiT paper's count.
	p, _ := arch.LookupDiTPreset("DiT-XL/2")
	cfg := &arch.DiTConfig{Depth: p.Depth, HiddenSize: p.Hidden, NumHeads: p.NumHeads, PatchSize: p.Patch, InChannels: 4,
		InputSize: 32, LearnSigma: true, NumClasses: 1000, MLPRatio: 4, FrequencySize: 256}
	if got := ForwardFLOPs(cfg, 256).Total() / 2e9; !fixtures.Within(math.Abs(got-118.62), 0.1) {
		t.Errorf("DiT-XL/2: %.2f G-MAC per forward, want 118.62", got)
	}
}

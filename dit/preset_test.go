package dit

import (
	"strings"
	"testing"
)

// PresetConfig gives DiT's published model sizes (DiT-XL/2 at 256 px has
// 675,129,632 parameters, pos_embed included) and rejects unknown names
// and grids that do not divide into patches.
func TestPresetConfig(t *testing.T) {
	cases := []struct {
		name   string
		input  int
		params int64
		tokens int
	}{
		{"DiT-XL/2", 32, 675_129_632, 256},
		{"DiT-S/2", 32, 0, 256},
		{"DiT-B/4", 64, 0, 256},
	}
	for _, c := range cases {
		cfg, err := PresetConfig(c.name, c.input)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if cfg.NumTokens() != c.tokens || cfg.Preset != c.name || !cfg.LearnSigma {
			t.Errorf("%s: %+v", c.name, cfg)
		}
		if c.params == 0 {
			continue
		}
		var n int64
		for _, s := range paramSpecs(cfg) {
			n += int64(s.Rows * s.Cols)
		}
		n += int64(cfg.NumTokens() * cfg.HiddenSize) // pos_embed, a fixed table
		if n != c.params {
			t.Errorf("%s: %d parameters, want %d", c.name, n, c.params)
		}
	}
	for _, c := range []struct {
		name  string
		input int
		msg   string
	}{
		{"DiT-M/2", 32, "no preset \"DiT-M/2\"; the presets are DiT-XL/2"},
		{"DiT-S/8", 36, "latent size 36 is not a multiple of the patch size 8"},
		{"DiT-S/2", 0, "latent size 0"},
	} {
		if _, err := PresetConfig(c.name, c.input); err == nil || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("PresetConfig(%q, %d): err = %v, want %q", c.name, c.input, err, c.msg)
		}
	}
}

package hnet

import (
	"math"
	"testing"

	"github.com/dcdit/dcdit/dc"
	"github.com/dcdit/dcdit/internal/fixtures"
)

// The presets reproduce the parameter counts of the paper's main table,
// which pins every width, depth and block count. The paper counts
// model.parameters(), which includes the fixed sin-cos pos_embed
// [1, L, D] over the full latent grid, and truncates: DC-DiT-S has
// 34.76 M at 256 px ("34.7"), DC-DiT-XL 693.13 M at 512 px ("693").
func TestPresetParameters(t *testing.T) {
	cases := []struct {
		name  string
		side  int     // latent grid side: 32 at 256 px, 64 at 512 px
		paper float64 // millions, as printed
		unit  float64 // the printed precision
	}{
		{"DC-DiT-S", 32, 34.7, 0.1}, {"DC-DiT-B", 32, 137, 1}, {"DC-DiT-L", 32, 469, 1}, {"DC-DiT-XL", 32, 689, 1},
		{"DC-DiT-B", 64, 139, 1}, {"DC-DiT-XL", 64, 693, 1},
	}
	for _, c := range cases {
		p, ok := dc.LookupPreset(c.name)
		if !ok {
			t.Fatalf("preset %s missing", c.name)
		}
		cfg := p.Config(c.side)
		if err := cfg.Validate(); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		n := cfg.Tokens() * p.Width // pos_embed
		for _, shapes := range []map[string][]int{dc.ScaffoldShapes(cfg), Shapes(PresetConfig(p))} {
			for _, sh := range shapes {
				k := 1
				for _, d := range sh {
					k *= d
				}
				n += k
			}
		}
		got := float64(n) / 1e6
		if truncated := math.Floor(got/c.unit+1e-9) * c.unit; !fixtures.Within(math.Abs(truncated-c.paper), 1e-9) {
			t.Errorf("%s at %d×%d: %.3f M parameters, the paper prints %v M", c.name, c.side, c.side, got, c.paper)
		}
	}
	if _, ok := dc.LookupPreset("DC-DiT-M"); ok {
		t.Error("LookupPreset found a preset that does not exist")
	}
}

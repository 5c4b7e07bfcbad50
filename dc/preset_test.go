package dc

import (
	"math"
	"strings"
	"testing"
)

// The kept count of a budget is what TailDrop leaves: for every natural
// count and ρ, KeptAfterDrop agrees with the mask TailDrop returns, and
// the float32 truncation shows where float64 would differ (n = 10,
// ρ = 0.3: float32(10)·float32(0.3) = 3.0000001, so 3 are dropped; 7
// kept).
func TestKeptAfterDrop(t *testing.T) {
	cases := []struct {
		natural int
		rho     float32
		want    int
	}{
		{256, 0, 256}, {256, 0.3, 180}, {256, 0.6, 103}, {256, 0.9, 26},
		{10, 0.3, 7}, {59, 0.3, 42}, {88, 0.6, 36}, {76, 0.9, 8}, {1, 0.5, 1}, {2, 0.5, 1},
	}
	for _, c := range cases {
		got, err := KeptAfterDrop(c.natural, c.rho)
		if err != nil || got != c.want {
			t.Errorf("KeptAfterDrop(%d, %v) = %d, %v; want %d", c.natural, c.rho, got, err, c.want)
		}
		// The same count from the mask TailDrop keeps, on one sample whose
		// natural boundaries are the first c.natural tokens.
		L := c.natural + 3
		prob, natural := make([]float32, L), make([]bool, L)
		for i := range c.natural {
			prob[i], natural[i] = 0.5+float32(i%7)/20, true
		}
		kept, err := TailDrop(prob, natural, 1, []float32{c.rho})
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, k := range kept {
			if k {
				n++
			}
		}
		if n != got {
			t.Errorf("natural %d, ρ %v: TailDrop keeps %d, KeptAfterDrop says %d", c.natural, c.rho, n, got)
		}
	}
	for _, c := range []struct {
		natural int
		rho     float32
		msg     string
	}{
		{10, 1, "want 0 ≤ ρ < 1"}, {10, -0.1, "want 0 ≤ ρ < 1"}, {10, float32(math.NaN()), "want 0 ≤ ρ < 1"},
	} {
		if _, err := KeptAfterDrop(c.natural, c.rho); err == nil || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("KeptAfterDrop(%d, %v): err = %v, want %q", c.natural, c.rho, err, c.msg)
		}
	}
}

func TestAssumedBoundaries(t *testing.T) {
	cases := []struct {
		ratio  float64
		tokens int
		want   int
		msg    string
	}{
		{0.25, 1024, 256, ""}, {0.25, 4096, 1024, ""}, {1, 1024, 1024, ""}, {0.1, 100, 10, ""},
		{0.3, 10, 3, ""}, {0.29, 10, 2, ""}, {0.001, 100, 1, ""}, {0.5, 1, 1, ""}, {1.0 / 3, 1024, 341, ""},
		{0, 1024, 0, "want 0 < ratio ≤ 1"}, {1.5, 1024, 0, "want 0 < ratio ≤ 1"}, {0.5, 0, 0, "want at least 1"},
	}
	for _, c := range cases {
		got, err := AssumedBoundaries(c.ratio, c.tokens)
		if c.msg != "" {
			if err == nil || !strings.Contains(err.Error(), c.msg) {
				t.Errorf("AssumedBoundaries(%v, %d): err = %v, want %q", c.ratio, c.tokens, err, c.msg)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("AssumedBoundaries(%v, %d) = %d, %v; want %d", c.ratio, c.tokens, got, err, c.want)
		}
	}
}

// With ratio 1/N the two steps are AssumedKept, the planning assumption
// inspect reports.
func TestAssumedMatchesAssumedKept(t *testing.T) {
	for _, tokens := range []int{1, 7, 256, 1000, 1024, 4096} {
		for _, N := range []float64{2, 3, 4, 8} {
			for _, rho := range []float64{0, 0.1, 0.3, 0.5, 0.6, 0.9} {
				n, err := AssumedBoundaries(1/N, tokens)
				if err != nil {
					t.Fatal(err)
				}
				kept, err := KeptAfterDrop(n, float32(rho))
				if want := AssumedKept(tokens, N, rho); err != nil || kept != want {
					t.Errorf("L %d, N %v, ρ %v: %d kept (%v), AssumedKept %d", tokens, N, rho, kept, err, want)
				}
			}
		}
	}
}

// Presets: the scaffold sizes follow the paper's rules (E = R = D/4, two
// conv blocks each side, N = 4) and validate at both paper resolutions.
func TestPresetConfig(t *testing.T) {
	if len(Presets) != 4 {
		t.Fatalf("%d presets, want S, B, L, XL", len(Presets))
	}
	for _, p := range Presets {
		for _, side := range []int{32, 64} {
			c := p.Config(side)
			if err := c.Validate(); err != nil {
				t.Errorf("%s at %d: %v", p.Name, side, err)
			}
			if c.EncDecDim*4 != p.Width || c.RouterDim*4 != p.Width || c.ModelDim != p.Width || c.CondDim != p.Width ||
				c.EncoderBlocks != 2 || c.DecoderBlocks != 2 || c.TargetN != 4 || c.Tokens() != side*side {
				t.Errorf("%s at %d: config %+v", p.Name, side, c)
			}
		}
	}
	if got := PresetNames(); got != "DC-DiT-S, DC-DiT-B, DC-DiT-L, DC-DiT-XL" {
		t.Errorf("PresetNames() = %q", got)
	}
}

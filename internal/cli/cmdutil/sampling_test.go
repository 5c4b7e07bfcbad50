package cmdutil

import (
	"strings"
	"testing"

	"github.com/dcdit/dcdit/dc"
)

// A flag wins over the checkpoint, the checkpoint over the default, and
// the line says which gave each value.
func TestPick(t *testing.T) {
	cases := []struct {
		given, recorded bool
		want            float64
		from            Source
	}{
		{true, true, 1, FromFlag},
		{true, false, 1, FromFlag},
		{false, true, 2, FromCheckpoint},
		{false, false, 3, FromDefault},
	}
	for _, c := range cases {
		var used []Setting
		got := Pick(&used, "--cfg", c.given, 1.0, c.recorded, 2.0, 3.0)
		if got != c.want || len(used) != 1 || used[0].From != c.from {
			t.Errorf("given %v, recorded %v: %v from %v, want %v from %s", c.given, c.recorded, got, used, c.want, c.from)
		}
	}
	var used []Setting
	Pick(&used, "--steps", false, 250, true, 25, 250)
	Pick(&used, "--dense-below", true, 0.0, true, 600.0, 0.0)
	if got, want := SettingsLine("sampling", used), "sampling with --steps 25 (checkpoint), --dense-below 0 (flag)"; got != want {
		t.Errorf("line %q, want %q", got, want)
	}
}

// Only fractions outside a recorded trained set warn, each once.
func TestRhoWarning(t *testing.T) {
	trained := []float64{0, 0.2, 0.6}
	cases := []struct {
		rhos, trained []float64
		want          string // "" for no warning
	}{
		{[]float64{0.6, 0}, trained, ""},
		{[]float64{0.3}, nil, ""},
		{[]float64{0.3, 0.6, 0.3, 0.9}, trained, "ρ 0.3, 0.9: m.safetensors was trained for ρ 0, 0.2, 0.6 only"},
		{[]float64{0.6000000001}, trained, ""}, // the same fraction in float32
	}
	for _, c := range cases {
		got := RhoWarning("m.safetensors", c.rhos, c.trained)
		if (c.want == "") != (got == "") || !strings.Contains(got, c.want) {
			t.Errorf("ρ %v of %v: warning %q, want %q", c.rhos, c.trained, got, c.want)
		}
	}
}

func TestSetDrop(t *testing.T) {
	for _, tc := range []struct {
		rule       string
		was, want  bool
		wantErrSub string
	}{
		{rule: "", was: true, want: true},
		{rule: "", was: false, want: false},
		{rule: "lowest", was: true, want: false},
		{rule: "spread", was: false, want: true},
		{rule: "spreads", wantErrSub: `--drop "spreads": want one of lowest|spread`},
	} {
		cfg := &dc.Config{SpreadDrop: tc.was}
		err := SetDrop(cfg, tc.rule)
		if tc.wantErrSub != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErrSub) {
				t.Errorf("%q: error %v, want %q", tc.rule, err, tc.wantErrSub)
			}
			continue
		}
		if err != nil || cfg.SpreadDrop != tc.want {
			t.Errorf("%q on %v: spread %v, %v; want %v", tc.rule, tc.was, cfg.SpreadDrop, err, tc.want)
		}
	}
}

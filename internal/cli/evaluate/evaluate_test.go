package evaluate

import (
	"slices"
	"strings"
	"testing"

	"github.com/dcdit/dcdit/internal/cli/iostreams"
)

// The random-router baseline is on unless --random-router=false; the
// random router kept apart is off unless --spread-random, which needs it;
// --lookback-spacing needs --lookback.
func TestKeptCellFlags(t *testing.T) {
	for _, tc := range []struct {
		flags          []string
		random, spread bool
		err            string
	}{
		{nil, true, false, ""},
		{[]string{"--random-router=false"}, false, false, ""},
		{[]string{"--random-router"}, true, false, ""},
		{[]string{"--spread-random"}, true, true, ""},
		{[]string{"--spread-random", "--random-router=false"}, false, true, "drop --random-router=false"},
		{[]string{"--lookback", "--lookback-spacing", "4"}, true, false, ""},
		{[]string{"--lookback-spacing", "4"}, true, false, "add --lookback"},
		{[]string{"--lookback", "--lookback-spacing", "NaN"}, true, false, "finite spacing"},
	} {
		ios, _, _, _ := iostreams.Test()
		var got *Options
		cmd := NewCmd(ios, func(o *Options) error { got = o; return nil })
		cmd.SetArgs(append([]string{"model.safetensors", "--teacher", "t.safetensors", "--data", "d.safetensors"}, tc.flags...))
		err := cmd.Execute()
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%v: err = %v, want %q", tc.flags, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%v: %v", tc.flags, err)
		}
		if got == nil || got.RandomRouter != tc.random || got.SpreadRandom != tc.spread {
			t.Errorf("%v: options %+v, want RandomRouter %v, SpreadRandom %v", tc.flags, got, tc.random, tc.spread)
		}
	}
}

// --teacache takes a list of thresholds to sweep, each finite and ≥ 0.
func TestTeaCacheFlag(t *testing.T) {
	for _, tc := range []struct {
		value string
		want  []float64
		ok    bool
	}{{"0.5", []float64{0.5}, true}, {"0,0.75,1.5", []float64{0, 0.75, 1.5}, true}, {"0.5,-1", nil, false}, {"NaN", nil, false}, {"1,+Inf", nil, false}} {
		ios, _, _, _ := iostreams.Test()
		var got *Options
		cmd := NewCmd(ios, func(o *Options) error { got = o; return nil })
		cmd.SetArgs([]string{"model.safetensors", "--teacher", "t.safetensors", "--data", "d.safetensors", "--teacache", tc.value})
		err := cmd.Execute()
		if (err == nil) != tc.ok {
			t.Fatalf("--teacache %s: err = %v, want ok %v", tc.value, err, tc.ok)
		}
		if tc.ok && !slices.Equal(got.TeaCache, tc.want) {
			t.Errorf("--teacache %s: thresholds %v, want %v", tc.value, got.TeaCache, tc.want)
		}
	}
}

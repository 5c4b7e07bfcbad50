package evaluate

import (
	"slices"
	"testing"

	"github.com/dcdit/dcdit/internal/cli/iostreams"
)

// The random-router baseline is on unless --random-router=false.
func TestRandomRouterFlag(t *testing.T) {
	for _, tc := range []struct {
		flags []string
		want  bool
	}{{nil, true}, {[]string{"--random-router=false"}, false}, {[]string{"--random-router"}, true}} {
		ios, _, _, _ := iostreams.Test()
		var got *Options
		cmd := NewCmd(ios, func(o *Options) error { got = o; return nil })
		cmd.SetArgs(append([]string{"model.safetensors", "--teacher", "t.safetensors", "--data", "d.safetensors"}, tc.flags...))
		if err := cmd.Execute(); err != nil {
			t.Fatalf("%v: %v", tc.flags, err)
		}
		if got == nil || got.RandomRouter != tc.want {
			t.Errorf("%v: options %+v, want RandomRouter %v", tc.flags, got, tc.want)
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

package evaluate

import (
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

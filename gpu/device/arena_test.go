package device

import (
	"strings"
	"testing"

	"github.com/dcdit/dcdit/params"
)

// TestNewArenaArgs: NewArena refuses missing arguments before touching a device
// (the GPU checks of the arena are in package gpu/integration).
func TestNewArenaArgs(t *testing.T) {
	set, err := params.New([]params.Spec{{Name: "w", Rows: 2, Cols: 2}})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		set  *params.Set
	}{
		{"nil device", set},
		{"nil device and set", nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if _, err := NewArena(nil, c.set); err == nil || !strings.Contains(err.Error(), "nil device or set") {
				t.Errorf("error %v, want one about a nil device or set", err)
			}
		})
	}
	if set.Get("w").Bound() != nil {
		t.Errorf("a refused NewArena bound a parameter")
	}
}

package device

import (
	"strings"
	"testing"

	"github.com/nlpodyssey/spago/mat"
)

// TestHostOnlyPanics: methods that need host data panic with a message
// that names the method and the way out, instead of copying silently.
func TestHostOnlyPanics(t *testing.T) {
	x := &Tensor{rows: 2, cols: 3}
	cases := []struct {
		method string
		call   func()
	}{
		{"Data", func() { x.Data() }},
		{"Item", func() { x.Item() }},
		{"At", func() { x.At(0, 0) }},
		{"Add", func() { x.Add(x) }},
		{"Clone", func() { x.Clone() }},
		{"SetData", func() { x.SetData(nil) }},
	}
	for _, c := range cases {
		t.Run(c.method, func(t *testing.T) {
			defer func() {
				msg, _ := recover().(string)
				for _, want := range []string{"device: " + c.method + " needs host data", "device.ToHost"} {
					if !strings.Contains(msg, want) {
						t.Errorf("panic %q does not mention %q", msg, want)
					}
				}
			}()
			c.call()
		})
	}
}

// TestGraphMethods: the methods spago's graph calls work without touching
// the device.
func TestGraphMethods(t *testing.T) {
	x := &Tensor{rows: 2, cols: 3}
	if s := x.Shape(); len(s) != 2 || s[0] != 2 || s[1] != 3 || x.Size() != 6 || x.Dims() != 2 {
		t.Errorf("shape %v size %d dims %d, want [2 3], 6, 2", s, x.Size(), x.Dims())
	}
	if x.Grad() != nil || x.HasGrad() {
		t.Errorf("a new tensor has a gradient")
	}
	x.SetRequiresGrad(true)
	if !x.RequiresGrad() {
		t.Errorf("SetRequiresGrad(true) did not stick")
	}
	if x.Value() != mat.Tensor(x) {
		t.Errorf("Value is not the tensor itself")
	}
	defer func() {
		if msg, _ := recover().(string); !strings.Contains(msg, "on the host") {
			t.Errorf("AccGrad of a host gradient: panic %q, want one saying it is on the host", msg)
		}
	}()
	x.AccGrad(mat.NewDense[float32](mat.WithShape(2, 3)))
}

func TestOpenErrors(t *testing.T) {
	if _, err := Open(nil, Options{}); err == nil || !strings.Contains(err.Error(), "nil runtime") {
		t.Errorf("Open(nil): %v, want a nil-runtime error", err)
	}
	if _, err := ToDevice(nil, mat.NewDense[float64](mat.WithShape(1, 1))); err == nil || !strings.Contains(err.Error(), "want a float32 matrix") {
		t.Errorf("ToDevice of float64: %v, want a float32 error", err)
	}
	if _, err := ToHost(mat.NewDense[float32](mat.WithShape(1, 1))); err == nil || !strings.Contains(err.Error(), "not a device tensor") {
		t.Errorf("ToHost of a host matrix: %v", err)
	}
}

package accel

import (
	"strings"
	"testing"

	"github.com/dcdit/dcdit/params"
)

func TestCheck(t *testing.T) {
	cases := []struct {
		device, precision string
		err               string // "" for accepted
	}{
		{"", "", ""},
		{CPU, "", ""},
		{CPU, FP32, ""},
		{CUDA, "", ""},
		{CUDA, FP32, ""},
		{CUDA, TF32, ""},
		{CPU, TF32, `precision "tf32" applies to a CUDA device`},
		{CUDA, "bf16", `precision "bf16", want fp32 or tf32`},
		{"gpu", "", `device "gpu", want cpu or cuda`},
	}
	for _, c := range cases {
		err := Check(c.device, c.precision)
		switch {
		case c.err == "" && err != nil:
			t.Errorf("Check(%q, %q): %v", c.device, c.precision, err)
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("Check(%q, %q) = %v, want an error containing %q", c.device, c.precision, err, c.err)
		}
	}
}

// The CPU is a nil Accelerator whose bindings do nothing, so callers need
// no branches.
func TestCPUIsNoOp(t *testing.T) {
	a, err := Open(CPU, "")
	if err != nil || a != nil {
		t.Fatalf("Open(cpu) = %v, %v; want nil, nil", a, err)
	}
	set, err := params.New([]params.Spec{{Name: "w", Rows: 2, Cols: 3}})
	if err != nil {
		t.Fatal(err)
	}
	b, err := a.Attach(set)
	if err != nil || b != nil {
		t.Fatalf("Attach on the CPU = %v, %v; want nil, nil", b, err)
	}
	for name, f := range map[string]func() error{"Close": b.Close, "Accelerator.Close": a.Close} {
		if err := f(); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	if s := a.String(); s != CPU {
		t.Errorf("String() = %q, want %q", s, CPU)
	}
}

// Without a CUDA driver, Open names the library and where it looked.
func TestOpenWithoutDriver(t *testing.T) {
	t.Setenv("DCDIT_CUDA_LIB_PATH", t.TempDir())
	a, err := Open(CUDA, "")
	if err == nil {
		a.Close()
		t.Fatal("Open(cuda) with an empty library folder succeeded")
	}
	for _, want := range []string{"CUDA device", "libcuda"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	}
}

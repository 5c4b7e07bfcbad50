package kernels

import (
	"math"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/dcdit/dcdit/internal/fixtures"
)

// asmSwitches are this build's assembly switches, by name: every one must
// honour DCDIT_KERNELS=generic.
func asmSwitches() map[string]bool {
	return map[string]bool{"actAsm": actAsm, "siluAsm": siluAsm, "winoAsm": winoAsm}
}

func TestUseAsm(t *testing.T) {
	saved := genericOnly
	defer func() { genericOnly = saved }()
	tests := []struct {
		cpuHas, generic, want bool
	}{
		{true, false, true},
		{true, true, false},
		{false, false, false},
		{false, true, false},
	}
	for _, tt := range tests {
		genericOnly = tt.generic
		if got := useAsm(tt.cpuHas); got != tt.want {
			t.Errorf("useAsm(%v) with genericOnly %v = %v, want %v", tt.cpuHas, tt.generic, got, tt.want)
		}
	}
}

// childEnv marks the copy of the test binary that TestKernelsEnvGeneric
// starts.
const childEnv = "DCDIT_KERNELS_TEST_CHILD"

// Under DCDIT_KERNELS=generic every assembly switch of the package is off
// from start-up: the GroupNorm+SiLU and Winograd loops as well as the
// activations. The switches are set during package initialisation, so the
// test runs itself again in a process started with the variable.
func TestKernelsEnvGeneric(t *testing.T) {
	if os.Getenv(childEnv) == "1" {
		if os.Getenv(kernelsEnv) != "generic" || !genericOnly {
			t.Fatalf("child started without %s=generic", kernelsEnv)
		}
		for name, on := range asmSwitches() {
			if on {
				t.Errorf("%s is on under %s=generic", name, kernelsEnv)
			}
		}
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestKernelsEnvGeneric$", "-test.v")
	cmd.Env = append(os.Environ(), kernelsEnv+"=generic", childEnv+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child with %s=generic: %v\n%s", kernelsEnv, err, out)
	}
	if !strings.Contains(string(out), "--- PASS: TestKernelsEnvGeneric") {
		t.Fatalf("the child did not run the check:\n%s", out)
	}
}

// acRelErr, the kernel tests' metric, fails NaN and infinities on either
// side, an infinity in the reference included (its old form divided Inf
// by Inf and passed the NaN).
func TestAcRelErrNonFinite(t *testing.T) {
	nan, inf := float32(math.NaN()), math.Inf(1)
	tests := []struct {
		name string
		got  []float32
		want []float64
	}{
		{"NaN result", []float32{1, nan}, []float64{1, 2}},
		{"Inf result", []float32{float32(inf), 2}, []float64{1, 2}},
		{"Inf reference", []float32{1, 2}, []float64{inf, 2}},
		{"both Inf", []float32{float32(inf)}, []float64{inf}},
		{"NaN reference", []float32{1}, []float64{math.NaN()}},
	}
	for _, tt := range tests {
		if e := acRelErr(tt.got, tt.want); fixtures.Within(e, 1) {
			t.Errorf("%s: acRelErr = %g passes", tt.name, e)
		}
	}
	if e := acRelErr([]float32{1, 2.5}, []float64{1, 2}); !fixtures.Within(math.Abs(e-0.25), 1e-12) {
		t.Errorf("acRelErr = %g, want 0.25 (0.5 over the scale 2)", e)
	}
}

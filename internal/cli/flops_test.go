package cli

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

// `dcdit flops` is registered, prints one JSON object with
// tflops_per_image, and ends bad input with status 1 and usage mistakes
// with 2, each as one line on stderr.
func TestFlopsCommand(t *testing.T) {
	code, out, errOut := run(t, "flops", "DiT-XL/2", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var res map[string]any
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("not one JSON object: %v\n%s", err, out)
	}
	if tf, _ := res["tflops_per_image"].(float64); !(tf >= 58.4 && tf <= 59.6) {
		t.Errorf("tflops_per_image = %v, want 59.00 ± 1%%", res["tflops_per_image"])
	}
	for _, c := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"flops", filepath.Join(testdata, "bad", "truncated.pt")}, 1, "truncated.pt"},
		{[]string{"flops", "DiT-S/2", "--rho", "0.5"}, 2, "DC models only"},
		{[]string{"flops", "DC-DiT-S", "--rho", "1.2"}, 2, "--rho 1.2"},
		{[]string{"flops", "no-such-model"}, 2, "not a preset"},
		{[]string{"flops"}, 2, "takes 1 argument"},
	} {
		code, _, errOut := run(t, c.args...)
		if code != c.code || !strings.Contains(errOut, c.msg) || strings.Count(errOut, "\n") != 1 {
			t.Errorf("%v: exit %d, stderr %q; want %d and one line containing %q", c.args, code, errOut, c.code, c.msg)
		}
	}
}

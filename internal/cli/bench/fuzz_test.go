package bench

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzReadReference reads arbitrary bytes as a `bench --compare` file and
// applies it to a fixed set of results, as bench does: no panic, a
// rejection names the file in one line, and an accepted reference yields
// a table and a --json object (finite ratios only: JSON has no Inf).
func FuzzReadReference(f *testing.F) {
	seed, err := os.ReadFile(filepath.Join("testdata", "torch_small.json"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(seed)
	f.Add([]byte(`{"cases": [{"name": "adamw", "ns_per_param": 1e-320}, {"name": "gemm_64x32x16", "ms": -1, "gflops": 1e308}]}`))
	f.Add([]byte(`{"best": []}`))
	cases := []CaseResult{
		{Name: "gemm_64x32x16", MS: 0.5, GFLOP: 0.02, GFLOPS: 0.04},
		{Name: "adamw", MS: 1.5, NsPerParam: 7.25},
		{Name: "attention_fwd_bwd", MS: 90},
	}
	path := filepath.Join(f.TempDir(), "ref.json")
	f.Fuzz(func(t *testing.T, data []byte) {
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		ref, err := readReference(path)
		if err != nil {
			if !strings.Contains(err.Error(), path) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("error is not one line naming the file: %q", err)
			}
			return
		}
		res := &Result{Cases: append([]CaseResult(nil), cases...)}
		res.Reference = ref.apply(res.Cases, nil)
		var buf bytes.Buffer
		writeTable(&buf, res)
		if _, err := json.Marshal(res); err != nil {
			t.Fatalf("--json fails on an accepted reference: %v", err)
		}
	})
}

package bench

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A reference figure that would make a ratio meaningless or infinite is
// refused, naming the file, the case, the key and the value (the fuzzer
// found that 1e-320 ms made --json fail on +Inf).
func TestReadReferenceBounds(t *testing.T) {
	cases := []struct {
		name, json string
		want       []string // empty: accepted
	}{
		{"valid", `{"best": [{"name": "adamw", "ns_per_param": 6.5}, {"name": "gemm", "ms": 0.25, "gflops": 0.3}]}`, nil},
		{"tiny ms", `{"best": [{"name": "gemm", "ms": 1e-320}]}`, []string{`case 0 ("gemm")`, "ms = 1e-320"}},
		{"negative gflops", `{"cases": [{"name": "a", "ms": 1}, {"name": "gemm", "ms": 1, "gflops": -3}]}`, []string{`case 1 ("gemm")`, "gflops = -3"}},
		{"huge ns", `{"best": [{"name": "adamw", "ns_per_param": 1e300}]}`, []string{"ns_per_param = 1e+300"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "ref.json")
			if err := os.WriteFile(path, []byte(c.json), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := readReference(path)
			if len(c.want) == 0 {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil {
				t.Fatalf("accepted; want an error mentioning %q", c.want)
			}
			for _, w := range append(c.want, path) {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

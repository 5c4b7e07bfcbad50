package bench

import (
	"encoding/json"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/dcdit/dcdit/internal/cli/cmdutil"
	"github.com/dcdit/dcdit/internal/cli/iostreams"
)

// referenceNames are torch_reference.py's case names, in its order, and
// the DC-DiT-S cases of shared/bench/README.md.
var referenceNames = []string{
	"gemm_2048x384x1152", "gemm_2048x384x1536", "gemm_2048x1536x384", "gemm_256x1152x1152", "gemm_1024x1024x1024",
	"attention_fwd_bwd", "conv3x3_fwd_bwd", "dit_s_block_fwd", "dit_s_block_fwd_bwd",
	"dit_s2_train_step", "dit_s2_forward",
	// The DC-DiT-S cases (shared/bench/README.md's workload);
	// torch_reference.py has no DC-DiT.
	"dcdit_s_forward_rho0", "dcdit_s_forward_rho0.3", "dcdit_s_forward_rho0.6",
	"dcdit_s_train_step_rho0", "dcdit_s_train_step_rho0.3", "dcdit_s_train_step_rho0.6",
	"adamw",
}

// Every case must carry a reference name, in the reference's order, so the
// two outputs compare line by line.
func TestCaseNamesMatchReference(t *testing.T) {
	last := -1
	seen := map[string]bool{}
	for _, c := range allCases() {
		i := slices.Index(referenceNames, c.name)
		if i < 0 {
			t.Errorf("case %q is not a torch_reference.py case", c.name)
			continue
		}
		if i < last || seen[c.name] {
			t.Errorf("case %q is out of the reference's order or repeated", c.name)
		}
		last, seen[c.name] = i, true
	}
	for _, want := range referenceNames {
		if !seen[want] {
			t.Errorf("case %q missing", want)
		}
	}
}

// fakeCases are instant stand-ins for the suite.
func fakeCases() []benchCase {
	noop := func() {}
	return []benchCase{
		{name: "gemm_64x32x16", setup: func() workload { return workload{run: noop, flops: 2 * 64 * 32 * 16} }},
		{name: "gemm_8x8x8", setup: func() workload { return workload{run: noop, flops: 1024} }},
		{name: "adamw", setup: func() workload { return workload{run: noop, params: 1000} }},
	}
}

func runBench(t *testing.T, opts *Options) (string, error) {
	t.Helper()
	ios, _, out, _ := iostreams.Test()
	opts.IO = ios
	err := Run(opts)
	return out.String(), err
}

func decode(t *testing.T, out string) (map[string]json.RawMessage, []map[string]any) {
	t.Helper()
	var top map[string]json.RawMessage
	if err := json.Unmarshal([]byte(out), &top); err != nil {
		t.Fatalf("output is not one JSON object: %v\n%s", err, out)
	}
	var cases []map[string]any
	if err := json.Unmarshal(top["cases"], &cases); err != nil {
		t.Fatalf("cases: %v", err)
	}
	return top, cases
}

func TestJSONShape(t *testing.T) {
	out, err := runBench(t, &Options{JSON: true, Quick: true, cases: fakeCases()})
	if err != nil {
		t.Fatal(err)
	}
	top, cases := decode(t, out)
	if keys := slices.Sorted(maps.Keys(top)); !slices.Equal(keys, []string{"cases", "cpu", "threads"}) {
		t.Errorf("top-level keys %v, want cases, cpu, threads", keys)
	}
	var cpu map[string]any
	if err := json.Unmarshal(top["cpu"], &cpu); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"model", "features", "kernels"} {
		if _, ok := cpu[k]; !ok {
			t.Errorf("cpu.%s missing: %v", k, cpu)
		}
	}
	var threads int
	if err := json.Unmarshal(top["threads"], &threads); err != nil || threads < 1 {
		t.Errorf("threads = %s", top["threads"])
	}
	var names []string
	for _, c := range cases {
		names = append(names, c["name"].(string))
		if _, ok := c["ms"].(float64); !ok {
			t.Errorf("case %v: no ms", c["name"])
		}
		_, gf := c["gflops"]
		_, np := c["ns_per_param"]
		if c["name"] == "adamw" && (!np || gf) || c["name"] != "adamw" && (np || !gf) {
			t.Errorf("case %v: gflops %v, ns_per_param %v", c["name"], c["gflops"], c["ns_per_param"])
		}
		// gflop is the work of one run: 2·64·32·16 FLOPs for the first GEMM.
		if g, ok := c["gflop"].(float64); c["name"] == "gemm_64x32x16" && (!ok || g != 0.000066) || c["name"] == "adamw" && ok {
			t.Errorf("case %v: gflop %v", c["name"], c["gflop"])
		}
	}
	if want := []string{"gemm_64x32x16", "gemm_8x8x8", "adamw"}; !slices.Equal(names, want) {
		t.Errorf("cases %v, want %v", names, want)
	}
}

// Real cases end to end: the smallest GEMM and a DiT-S block forward.
func TestRealCases(t *testing.T) {
	if testing.Short() {
		t.Skip("times real kernels")
	}
	for _, name := range []string{"gemm_256x1152x1152", "dit_s_block_fwd"} {
		t.Run(name, func(t *testing.T) {
			ios, _, out, _ := iostreams.Test()
			cmd := NewCmd(ios, nil)
			cmd.SetArgs([]string{"--json", "--quick", "--filter", "^" + name + "$"})
			if err := cmd.Execute(); err != nil {
				t.Fatal(err)
			}
			_, cases := decode(t, out.String())
			if len(cases) != 1 || cases[0]["name"] != name {
				t.Fatalf("cases = %v", cases)
			}
			if ms, gf := cases[0]["ms"].(float64), cases[0]["gflops"].(float64); !(ms > 0 && gf > 0) {
				t.Errorf("ms %v, gflops %v", ms, gf)
			}
		})
	}
}

func TestFilter(t *testing.T) {
	cases := []struct {
		filter  string
		want    []string
		wantErr string
	}{
		{"^gemm_", []string{"gemm_64x32x16", "gemm_8x8x8"}, ""},
		{"adamw|8x8", []string{"gemm_8x8x8", "adamw"}, ""},
		{"", []string{"gemm_64x32x16", "gemm_8x8x8", "adamw"}, ""},
		{"^conv", nil, "matches no case; the cases are gemm_64x32x16, gemm_8x8x8, adamw"},
		{"gemm_(", nil, "is not a regular expression"},
	}
	for _, c := range cases {
		t.Run(c.filter, func(t *testing.T) {
			out, err := runBench(t, &Options{JSON: true, Filter: c.filter, cases: fakeCases()})
			if c.wantErr != "" {
				var usage *cmdutil.UsageError
				if !errors.As(err, &usage) || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("err = %v, want a usage error containing %q", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			_, got := decode(t, out)
			var names []string
			for _, g := range got {
				names = append(names, g["name"].(string))
			}
			if !slices.Equal(names, c.want) {
				t.Errorf("cases %v, want %v", names, c.want)
			}
		})
	}
}

func TestTable(t *testing.T) {
	out, err := runBench(t, &Options{cases: fakeCases()})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"cpu ", "threads ", "kernels  optim ", "CASE", "GFLOP ", "GFLOP/S", "NS/PARAM", "gemm_64x32x16", "0.000066", "adamw"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "RATIO") {
		t.Errorf("ratio columns without --compare:\n%s", out)
	}
}

func TestCompare(t *testing.T) {
	fixture := filepath.Join("testdata", "torch_small.json")
	t.Run("json", func(t *testing.T) {
		out, err := runBench(t, &Options{JSON: true, Compare: fixture, cases: fakeCases()})
		if err != nil {
			t.Fatal(err)
		}
		var res Result
		if err := json.Unmarshal([]byte(out), &res); err != nil {
			t.Fatal(err)
		}
		if res.Reference == nil || res.Reference.Torch != "1.13.0a0" || res.Reference.File != fixture {
			t.Fatalf("reference = %+v", res.Reference)
		}
		if len(res.Reference.Missing) != 1 || res.Reference.Missing[0].Name != "attention_fwd_bwd" {
			t.Errorf("missing = %+v, want attention_fwd_bwd", res.Reference.Missing)
		}
		byName := map[string]CaseResult{}
		for _, c := range res.Cases {
			byName[c.Name] = c
		}
		if g := byName["gemm_64x32x16"]; g.Ref == nil || g.Ref.MS != 0.25 || g.Ref.GFLOPS != 0.3 {
			t.Errorf("gemm reference = %+v, want the \"best\" entry (ms 0.25, gflops 0.3)", g.Ref)
		}
		if a := byName["adamw"]; a.Ref == nil || a.Ref.NsPerParam != 6.5 {
			t.Errorf("adamw reference = %+v", a.Ref)
		}
		if byName["gemm_8x8x8"].Ref != nil {
			t.Errorf("gemm_8x8x8 has a reference it does not have in the file")
		}
	})
	t.Run("table", func(t *testing.T) {
		out, err := runBench(t, &Options{Compare: fixture, Filter: "gemm|attention", cases: fakeCases()})
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"compare  " + fixture + ", torch 1.13.0a0", "TIME RATIO", "GFLOP/S RATIO", "attention_fwd_bwd", "80.000", "dcdit does not run yet"} {
			if !strings.Contains(out, want) {
				t.Errorf("table lacks %q:\n%s", want, out)
			}
		}
		if strings.Contains(out, "6.50") {
			t.Errorf("adamw's reference shown although the filter excludes it:\n%s", out)
		}
	})
}

// The ratios: dcdit time over reference time (ms, or ns per parameter when
// the reference has no ms), and dcdit GFLOP/s over the reference's.
func TestRatios(t *testing.T) {
	ref := &refFile{path: "r.json", Best: []RefCase{
		{Name: "g", MS: 4, GFLOPS: 100},
		{Name: "adamw", NsPerParam: 6},
		{Name: "attention_fwd_bwd", MS: 80},
		{Name: "other", MS: 1},
	}}
	cases := []CaseResult{
		{Name: "g", MS: 2, GFLOPS: 200},
		{Name: "adamw", MS: 33, NsPerParam: 1.5},
		{Name: "attention_fwd_bwd", MS: 40, GFLOPS: 12},
		{Name: "new", MS: 1},
	}
	got := ref.apply(cases, regexp.MustCompile("g|adamw|attention|new"))
	want := []struct{ time, gflops float64 }{{0.5, 2}, {0.25, 0}, {0.5, 0}, {0, 0}}
	for i, w := range want {
		if cases[i].TimeRatio != w.time || cases[i].GFLOPSRatio != w.gflops {
			t.Errorf("%s: ratios %v, %v; want %v, %v", cases[i].Name, cases[i].TimeRatio, cases[i].GFLOPSRatio, w.time, w.gflops)
		}
	}
	if len(got.Missing) != 0 {
		t.Errorf("missing = %v; \"other\" does not match the filter", got.Missing)
	}
}

func TestCompareErrors(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	cases := []struct {
		name, path, wantErr string
	}{
		{"missing file", filepath.Join(dir, "nope.json"), "no such file"},
		{"not JSON", write("bad.json", "{"), "not the JSON of torch_reference.py"},
		{"no list", write("empty.json", `{"torch": "2.0"}`), `no "best"`},
	}
	ran := false
	opts := func(p string) *Options {
		return &Options{Compare: p, cases: []benchCase{{name: "x", setup: func() workload { ran = true; return workload{run: func() {}} }}}}
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := runBench(t, opts(c.path))
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Fatalf("err = %v, want one containing %q", err, c.wantErr)
			}
		})
	}
	if ran {
		t.Error("cases ran although the reference file was unusable")
	}
	// Two dcdit runs compare too: a file of "cases" stands in for "best".
	p := write("dcdit.json", `{"cases": [{"name": "x", "ms": 2}]}`)
	if _, err := runBench(t, opts(p)); err != nil {
		t.Errorf("dcdit bench --json as reference: %v", err)
	}
}

func TestFlags(t *testing.T) {
	var got *Options
	cmd := NewCmd(&iostreams.IO{}, func(o *Options) error { got = o; return nil })
	cmd.SetArgs([]string{"--json", "--quick", "--filter", "^gemm", "--compare", "t.json"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	if !got.JSON || !got.Quick || got.Filter != "^gemm" || got.Compare != "t.json" {
		t.Errorf("options = %+v", got)
	}
	cmd = NewCmd(&iostreams.IO{}, func(*Options) error { return nil })
	cmd.SetArgs([]string{"extra"})
	cmd.SilenceErrors, cmd.SilenceUsage = true, true
	var usage *cmdutil.UsageError
	if err := cmd.Execute(); !errors.As(err, &usage) {
		t.Errorf("positional argument: err = %v, want a usage error", err)
	}
}

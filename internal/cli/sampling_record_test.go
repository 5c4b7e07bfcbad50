package cli

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/dcdit/dcdit/dc/checkpoint"
	"github.com/dcdit/dcdit/internal/dctest"
)

// eval takes the sampling settings a DC checkpoint records for every flag
// not given, says which came from where, and warns of an untrained ρ.
func TestEvalSamplingDefaults(t *testing.T) {
	m, rhos := dctest.Model(t, dctest.Cases(t)[0])
	if len(rhos) == 0 {
		t.Fatal("the fixture case lists no trained ρ")
	}
	// Three steps respaced over 1000, the last one below dense_below.
	rec := checkpoint.Sampling{Process: checkpoint.ProcessDDPM, DenseBelow: 500, CFG: 2, Steps: 3}
	model := filepath.Join(t.TempDir(), "recorded.safetensors")
	if err := checkpoint.Save(model, m, checkpoint.Info{TrainedRhos: rhos, Sampling: &rec}); err != nil {
		t.Fatal(err)
	}
	teacher, data := randomTeacherFile(t), shapesFile(t, 8)
	f := func(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
	trained := rhos[len(rhos)-1]
	type report struct {
		Steps  int     `json:"steps"`
		CFG    float64 `json:"cfg"`
		Tokens float64 `json:"tokens"`
		Rows   []struct {
			KeptPerStep []float64 `json:"kept_per_step"`
		} `json:"rows"`
	}
	evaluate := func(extra ...string) (report, string) {
		t.Helper()
		args := append([]string{"eval", model, "--teacher", teacher, "--teacher-heads", teacherHeads, "--data", data,
			"--num", "2", "--samples", "2", "--no-lite", "--probe-t", "", "--json"}, extra...)
		code, stdout, stderr := run(t, args...)
		if code != 0 {
			t.Fatalf("exit %d: %s", code, stderr)
		}
		var r report
		if err := json.Unmarshal([]byte(stdout), &r); err != nil {
			t.Fatalf("%v: %s", err, stdout)
		}
		return r, stderr
	}

	r, stderr := evaluate("--rho", f(trained))
	kept := r.Rows[0].KeptPerStep
	if r.Steps != rec.Steps || r.CFG != rec.CFG || len(kept) != rec.Steps || kept[0] == r.Tokens || kept[len(kept)-1] != r.Tokens {
		t.Errorf("%d steps, cfg %g, kept per step %v of %g: want the recorded %d steps, cfg %g and the last step dense", r.Steps, r.CFG, kept, r.Tokens, rec.Steps, rec.CFG)
	}
	want := fmt.Sprintf("evaluating with --steps %d (checkpoint), --cfg %s (checkpoint), --dense-below %s (checkpoint)", rec.Steps, f(rec.CFG), f(rec.DenseBelow))
	if !strings.Contains(stderr, want) || strings.Contains(stderr, "warning: ρ") {
		t.Errorf("stderr %q: want %q and no ρ warning", stderr, want)
	}

	untrained := (trained + 1) / 2
	r, stderr = evaluate("--rho", f(untrained), "--steps", "2")
	if r.Steps != 2 || !strings.Contains(stderr, "--steps 2 (flag)") || !strings.Contains(stderr, "warning: ρ "+f(untrained)+": ") {
		t.Errorf("%d steps, stderr %q: want --steps 2 from the flag and a warning for ρ %s", r.Steps, stderr, f(untrained))
	}

	// Without --rho the rows are the trained budgets, sorted, with no
	// warning.
	r, stderr = evaluate()
	sorted := slices.Sorted(slices.Values(rhos))
	if len(r.Rows) != len(slices.Compact(sorted)) || !strings.Contains(stderr, "--rho "+fmt.Sprint(slices.Compact(sorted))+" (checkpoint)") || strings.Contains(stderr, "warning: ρ") {
		t.Errorf("%d rows, stderr %q: want one row per trained ρ %v, from the checkpoint, and no warning", len(r.Rows), stderr, sorted)
	}
}

// inspect shows the sampling settings a DC checkpoint records (and counts
// its FLOPs per image over the recorded steps), or says there are none.
func TestInspectDCSampling(t *testing.T) {
	m, rhos := dctest.Model(t, dctest.Cases(t)[0])
	rec := checkpoint.Sampling{Process: checkpoint.ProcessDDPM, DenseBelow: 600, CFG: 4, Steps: 25}
	path := filepath.Join(t.TempDir(), "recorded.safetensors")
	if err := checkpoint.Save(path, m, checkpoint.Info{TrainedRhos: rhos, Sampling: &rec}); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		path string
		want []string
	}{
		{path, []string{"sampling       ddpm, 25 steps, cfg 4, dense below t = 600", "over 25 steps"}},
		{dctest.Checkpoint(t), []string{"sampling       not recorded"}},
	}
	for _, c := range cases {
		code, out, stderr := run(t, "inspect", c.path)
		for _, w := range c.want {
			if code != 0 || !strings.Contains(out, w) {
				t.Errorf("exit %d, table lacks %q:\n%s%s", code, w, out, stderr)
			}
		}
	}
	res := inspectJSON(t, path)
	got, _ := res["config"].(map[string]any)["sampling"].(map[string]any)
	want := map[string]any{"process": "ddpm", "dense_below": 600.0, "cfg": 4.0, "sampling_steps": 25.0}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("--json config.sampling %v, want %v", got, want)
	}
}

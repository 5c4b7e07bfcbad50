package recipe

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	_ "github.com/dcdit/dcdit/families" // the planner prices bases through the registry
	"github.com/dcdit/dcdit/internal/cli/iostreams"
	"github.com/dcdit/dcdit/internal/testckpt"
	"github.com/dcdit/dcdit/loaders/arch"
	"github.com/dcdit/dcdit/loaders/dtype"
	"github.com/dcdit/dcdit/recipes"
)

const recipesDir = "../../../recipes"

// toyTeacher writes a header-only checkpoint of the toy teacher's size.
func toyTeacher(t *testing.T) string {
	t.Helper()
	c := &arch.DiTConfig{Depth: 4, HiddenSize: 128, NumHeads: 4, PatchSize: 2, InChannels: 4, InputSize: 16,
		LearnSigma: true, NumClasses: 10, MLPRatio: 4, FrequencySize: 256}
	p := filepath.Join(t.TempDir(), "teacher.safetensors")
	if err := testckpt.WriteSparseFile(p, arch.ExpectedDiT(c, arch.Original), dtype.F32); err != nil {
		t.Fatal(err)
	}
	return p
}

func run(t *testing.T, args ...string) (err error, stdout, stderr string) {
	t.Helper()
	ios, _, out, errOut := iostreams.Test()
	cmd := NewCmd(ios, nil)
	cmd.SetArgs(args)
	cmd.SetOut(out)
	cmd.SetErr(errOut)
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	err = cmd.Execute()
	return err, out.String(), errOut.String()
}

func TestValidate(t *testing.T) {
	toy := filepath.Join(recipesDir, "toy-dit.toml")
	base := toyTeacher(t)
	// The recipe moved away from the bundled teacher: its relative base
	// path no longer resolves.
	moved := filepath.Join(t.TempDir(), "toy-dit.toml")
	text, err := os.ReadFile(toy)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(moved, text, 0o644)
	bad := filepath.Join(t.TempDir(), "bad.toml")
	os.WriteFile(bad, []byte("name = \"b\"\ncolour = 1\n[model]\npreset = \"DiT-S/2\"\n[[stage]]\nkind = \"train\"\nsteps = \"many\"\nlr = -1.0\n"), 0o644)
	cases := []struct {
		name     string
		args     []string
		problems int      // 0: success
		out      string   // stdout prefix on success
		lines    []string // fragments of the stderr lines, in order
	}{
		{"valid", []string{"validate", toy, "--base", base}, 0, "ok: toy-dit (", nil},
		{"missing base", []string{"validate", moved}, 2, "", []string{
			moved + ":" + strconv.Itoa(lineOf(t, moved, "path = ")) + ": base.path: the base checkpoint ../testdata/teacher/model.safetensors",
			moved + ":" + strconv.Itoa(lineOf(t, moved, "feature_net = ")) + ": eval.feature_net: the feature network ../testdata/featnet/model.safetensors"}},
		{"bundled base", []string{"validate", toy}, 0, "ok: toy-dit (", nil},
		{"a type error stops before values", []string{"validate", bad}, 2, "", []string{
			bad + ":2: colour: unknown key", bad + `:7: stage[0].steps: found a string ("many"), expected an integer`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err, out, errOut := run(t, c.args...)
			if c.problems == 0 {
				if err != nil || !strings.HasPrefix(out, c.out) || strings.Count(out, "\n") != 1 || errOut != "" {
					t.Errorf("err %v, stdout %q, stderr %q", err, out, errOut)
				}
				return
			}
			var pe *ProblemsError
			if !errors.As(err, &pe) || pe.N != c.problems {
				t.Fatalf("err %v, want %d problems", err, c.problems)
			}
			lines := strings.Split(strings.TrimSuffix(errOut, "\n"), "\n")
			if len(lines) != c.problems || out != "" {
				t.Fatalf("stderr has %d lines, want one per problem:\n%s", len(lines), errOut)
			}
			for i, frag := range c.lines {
				if !strings.HasPrefix(lines[i], frag) {
					t.Errorf("line %d: %q, want it to start with %q", i, lines[i], frag)
				}
			}
		})
	}
}

// plan --json is one object with the documented fields.
func TestPlanJSON(t *testing.T) {
	err, out, errOut := run(t, "plan", filepath.Join(recipesDir, "toy-dit.toml"), "--base", toyTeacher(t), "--json")
	if err != nil {
		t.Fatalf("%v\n%s", err, errOut)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(out), &m); err != nil {
		t.Fatalf("not one JSON object: %v", err)
	}
	fields := func(what string, obj any, keys ...string) {
		t.Helper()
		o, ok := obj.(map[string]any)
		if !ok {
			t.Fatalf("%s is %T, want an object", what, obj)
		}
		for _, k := range keys {
			if _, ok := o[k]; !ok {
				t.Errorf("%s lacks %q", what, k)
			}
		}
	}
	fields("plan", m, "recipe", "settings", "base", "backbone", "dc", "main_network", "parameters", "flops", "data", "stages", "warnings")
	fields("recipe", m["recipe"], "file", "name", "run_dir", "kind")
	fields("backbone", m["backbone"], "architecture", "source", "config")
	fields("backbone.config", m["backbone"].(map[string]any)["config"], "depth", "hidden_size", "num_heads", "patch_size", "input_size")
	fields("dc", m["dc"], "enc_dec_dim", "model_dim", "router_dim", "grid_rows", "target_n", "dechunk_sigma", "ratio_loss_weight")
	fields("parameters", m["parameters"], "total", "new", "copied", "base", "dropped", "by_group")
	fields("flops", m["flops"], "convention", "kept_tokens", "sampling_steps", "rows")
	rows := m["flops"].(map[string]any)["rows"].([]any)
	r, err := recipes.Load(filepath.Join(recipesDir, "toy-dit.toml"), recipes.LoadOptions{BasePath: toyTeacher(t)})
	if err != nil {
		t.Fatal(err)
	}
	if want := 2 + len(r.Eval.Rho); len(rows) != want { // base, each ρ, Lite-CFG
		t.Errorf("%d FLOPs rows, want %d", len(rows), want)
	}
	for _, r := range rows {
		fields("flops row", r, "model", "rho", "kept_tokens", "tokens", "gflops_per_forward", "tflops_per_image")
	}
	stages := m["stages"].([]any)
	if len(stages) != 2 {
		t.Fatalf("%d stages", len(stages))
	}
	for _, s := range stages {
		fields("stage", s, "name", "kind", "steps", "batch_size", "samples_seen", "epochs", "lr", "loss", "rho", "multi_budget_start",
			"trainable_params", "frozen_params", "trainable_groups", "gflops_per_sample", "tflops_per_step", "pflops_total", "memory")
		fields("stage.lr", s.(map[string]any)["lr"], "peak", "min", "warmup_steps", "schedule", "text")
		fields("stage.memory", s.(map[string]any)["memory"], "weights", "grads", "optimizer", "ema", "teacher", "activations", "total", "formula")
	}
	for _, s := range m["settings"].([]any) {
		fields("setting", s, "key", "value", "default", "source")
	}
}

// The table shows every section, and the settings mark defaults.
func TestPlanTable(t *testing.T) {
	err, out, errOut := run(t, "plan", filepath.Join(recipesDir, "toy-dit.toml"), "--base", toyTeacher(t))
	if err != nil {
		t.Fatalf("%v\n%s", err, errOut)
	}
	for _, frag := range []string{"backbone", "scaffold", "main network", "parameters:", "FLOPs per image", "dc-lite-cfg",
		"stages", "stage 2 (distill-2):", "memory estimate:", "settings", "stage[0].ema_decay = 0.0", "default", "--base"} {
		if !strings.Contains(out, frag) {
			t.Errorf("table lacks %q", frag)
		}
	}
	if !regexp.MustCompile(`stage\[0\]\.steps = \d+ +line \d+\n`).MatchString(out) {
		t.Error("settings do not give the lines of written keys")
	}
}

// lineOf is the line of the first occurrence of substr in the file.
func lineOf(t *testing.T, file, substr string) int {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	i := strings.Index(string(b), substr)
	if i < 0 {
		t.Fatalf("%s lacks %q", file, substr)
	}
	return strings.Count(string(b[:i]), "\n") + 1
}

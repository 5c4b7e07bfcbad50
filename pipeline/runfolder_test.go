package pipeline

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dcdit/dcdit/datasets"
	"github.com/dcdit/dcdit/dc/checkpoint"
	"github.com/dcdit/dcdit/distill"
	"github.com/dcdit/dcdit/loaders/atomicfile"
)

// Killed mid-distillation or mid-way through multi-budget finetuning
// (after a save of each was torn), the run resumes and writes the same
// model file, bit for bit, as an uninterrupted one, and leaves no
// temporary file and no lock behind.
func TestResumeIsExactEndToEnd(t *testing.T) {
	dir := t.TempDir()
	writeTeacher(t, dir)
	full, err := Run(load(t, dir, upcycleRecipe), Options{Out: filepath.Join(dir, "full")})
	if err != nil {
		t.Fatal(err)
	}
	want, _ := os.ReadFile(full.Model)
	tests := []struct {
		stage string
		after int // steps done when stopped
	}{
		{"distill", 1}, // before its first checkpoint
		{"finetune", 3},
	}
	for _, tt := range tests {
		t.Run(tt.stage, func(t *testing.T) {
			out := filepath.Join(dir, "out-"+tt.stage)
			ctx, stop := context.WithCancelCause(context.Background())
			_, err := Run(load(t, dir, upcycleRecipe), Options{Out: out, Context: ctx, OnStep: func(p distill.Progress) {
				if p.Stage == tt.stage && p.Step == tt.after {
					stop(errors.New("killed"))
				}
			}})
			if err == nil || !strings.Contains(err.Error(), "killed") {
				t.Fatalf("err = %v, want the stop", err)
			}
			torn := []string{filepath.Join(out, ".model.safetensors.tmp-31337"), filepath.Join(out, "stages", tt.stage, ".state-00000004.safetensors.tmp-5")}
			for _, p := range torn {
				if err := os.WriteFile(p, []byte("torn"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			sum, err := Run(load(t, dir, upcycleRecipe), Options{Out: out})
			if err != nil {
				t.Fatal(err)
			}
			got, _ := os.ReadFile(sum.Model)
			if string(got) != string(want) {
				t.Fatal("the resumed run wrote another model than the uninterrupted one")
			}
			filepath.WalkDir(out, func(path string, d os.DirEntry, err error) error {
				if _, tmp := atomicfile.TempTarget(d.Name()); tmp || d.Name() == atomicfile.LockName {
					t.Errorf("%s left behind", path)
				}
				return nil
			})
		})
	}
}

// writeOtherTeacher saves a teacher of writeTeacher's shape with other
// weights.
func writeOtherTeacher(t *testing.T, dir string) {
	t.Helper()
	saveTeacher(t, dir, 9)
}

// Editing any setting that changes the training between two runs of one
// folder is refused, naming the setting with its old and new value;
// settings that cannot change the weights are not. The model embeds the
// recipe as the run read it, even when the file is edited while it runs.
func TestEditedRecipeIsRefused(t *testing.T) {
	dir := t.TempDir()
	writeTeacher(t, dir)
	out := filepath.Join(dir, "out")
	r := load(t, dir, upcycleRecipe)
	if err := os.WriteFile(r.File, []byte(strings.Replace(upcycleRecipe, "rho = [0.0, 0.5]", "rho = [0.0, 0.4]", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	sum, err := Run(r, Options{Out: out})
	if err != nil {
		t.Fatal(err)
	}
	_, meta, err := checkpoint.Load(sum.Model)
	if err != nil {
		t.Fatal(err)
	}
	if meta.Recipe != upcycleRecipe {
		t.Fatalf("the model embeds another recipe than the one that ran:\n%s", meta.Recipe)
	}
	edit := func(old, new string) string {
		if !strings.Contains(upcycleRecipe, old) {
			t.Fatalf("the recipe has no %q", old)
		}
		return strings.Replace(upcycleRecipe, old, new, 1)
	}
	tests := []struct {
		name, recipe string
		teacher      bool   // write another teacher first
		want         string // "" when the edit must resume
	}{
		{"finetune rho", edit("rho = [0.0, 0.5]", "rho = [0.0, 0.4]"), false, "stage[1].rho: was [0.0, 0.5], now [0.0, 0.4]"},
		{"distill loss", edit(`kind = "distill"`, `kind = "distill"`+"\nloss = \"l2\""), false, `stage[0].loss: was "l1", now "l2"`},
		{"distill target", edit(`kind = "distill"`, `kind = "distill"`+"\ntarget = \"eps\""), false, `stage[0].target: was "output", now "eps"`},
		{"multi-budget start", edit("multi_budget_start = 1", "multi_budget_start = 2"), false, "stage[1].multi_budget_start: was 1, now 2"},
		{"stage ratio loss weight", edit("router_lr_scale = 5.0", "router_lr_scale = 5.0\nratio_loss_weight = 0.1"), false, "stage[1].ratio_loss_weight: was 0.03, now 0.1"},
		{"router ratio loss weight", edit("ratio_batch_size = 1", "ratio_batch_size = 1\nratio_loss_weight = 0.1"), false, "scaffold.router.ratio_loss_weight: was 0.03, now 0.1"},
		{"target N", edit("encoder_init", "target_n = 2.0\nencoder_init"), false, "scaffold.target_n: was 4.0, now 2.0"},
		{"sigma", edit("encoder_init", "sigma = 2.0\nencoder_init"), false, "scaffold.sigma: was 1.0, now 2.0"},
		{"data samples", edit("samples = 12", "samples = 16"), false, "data.samples: was 12, now 16"},
		{"seed", edit("seed = 3", "seed = 4"), false, "seed: was 3, now 4"},
		{"another teacher", upcycleRecipe, true, "teacher: was DiT depth 1"},
		{"eval settings", edit("held_out = 4", "held_out = 3"), false, ""},
		{"checkpoint cadence", edit("every = 2", "every = 3"), false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.teacher {
				writeOtherTeacher(t, dir)
				defer writeTeacher(t, dir)
			}
			_, err := Run(load(t, dir, tt.recipe), Options{Out: out})
			if tt.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("an edited recipe was resumed")
			}
			if !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "holds another run") {
				t.Fatalf("err = %v, want %q", err, tt.want)
			}
		})
	}
}

// A second run into a folder in use is refused, naming the holder, and
// leaves the folder alone; a run that fails before writing anything
// leaves no output folder behind.
func TestOutputFolder(t *testing.T) {
	dir := t.TempDir()
	writeTeacher(t, dir)
	busy := filepath.Join(dir, "busy")
	os.MkdirAll(busy, 0o755)
	l, err := atomicfile.Lock(busy)
	if err != nil {
		t.Fatal(err)
	}
	_, err = Run(load(t, dir, upcycleRecipe), Options{Out: busy})
	l.Unlock()
	if want := fmt.Sprintf("in use by process %d", os.Getpid()); err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("err = %v, want %q", err, want)
	}
	if _, err := os.Stat(busy); err != nil {
		t.Fatalf("the busy folder went: %v", err)
	}

	os.WriteFile(filepath.Join(dir, "broken.safetensors"), []byte("not a checkpoint"), 0o644)
	out := filepath.Join(dir, "new", "out")
	_, err = Run(load(t, dir, strings.Replace(upcycleRecipe, "teacher.safetensors", "broken.safetensors", 1)), Options{Out: out})
	if err == nil {
		t.Fatal("a broken teacher was accepted")
	}
	if _, statErr := os.Stat(out); !errors.Is(statErr, os.ErrNotExist) {
		t.Fatalf("a failed run left %s behind (%v); it failed with: %v", out, statErr, err)
	}
}

// diffusion.steps reaches every schedule: training (the objectives'
// settings show it), the teacher's samples and the evaluation, which
// would refuse a boundary-map timestep of 1500 on DiT's 1000 steps.
func TestDiffusionStepsHonoured(t *testing.T) {
	dir := t.TempDir()
	writeTeacher(t, dir, map[string]string{"dcdit.recipe": "[diffusion]\nsteps = 2000\n"})
	text := strings.Replace(upcycleRecipe, "[data]", "[diffusion]\nsteps = 2000\n[data]", 1)
	text = strings.Replace(text, "= [500]", "= [1500]", 1)
	text = strings.Replace(text, `source = "shapes"`, `source = "teacher"`, 1)
	text = strings.Replace(text, "samples = 12", "samples = 4\nsampling_steps = 2", 1)
	out := filepath.Join(dir, "out")
	if _, err := Run(load(t, dir, text), Options{Out: out}); err != nil {
		t.Fatal(err)
	}
	set, err := datasets.Read(filepath.Join(out, "data.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	if key := set.Metadata["dcdit.generated_by"]; !strings.Contains(key, "steps=2/2000") {
		t.Fatalf("teacher samples made with %q, want a 2000-step schedule", key)
	}
	text, err = readFile(filepath.Join(out, "stages", "distill", "run.json"))
	if err != nil || !strings.Contains(text, `"objective.diffusion_steps": "2000"`) {
		t.Fatalf("the distillation's settings lack the 2000-step schedule (%v):\n%s", err, text)
	}
}

func readFile(path string) (string, error) {
	b, err := os.ReadFile(path)
	return string(b), err
}

// diffusion.steps must be the schedule the base was trained with: the one
// its embedded recipe names, else DiT's 1000 steps.
func TestBaseScheduleMustMatch(t *testing.T) {
	tests := []struct {
		name     string
		metadata map[string]string
		steps    int
		want     string // "" when accepted
	}{
		{"DiT checkpoint, 1000", nil, 1000, ""},
		{"DiT checkpoint, 500", nil, 500, "diffusion.steps: found 500, expected 1000"},
		{"dcdit teacher, its default", map[string]string{"dcdit.recipe": "name = \"t\"\n"}, 1000, ""},
		{"dcdit teacher, 2000", map[string]string{"dcdit.recipe": "[diffusion]\nsteps = 2000\n"}, 1000, "found 1000, expected 2000"},
		{"dcdit teacher, unreadable recipe", map[string]string{"dcdit.recipe": "[diffusion"}, 1000, "dcdit.recipe metadata does not decode"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			writeTeacher(t, dir, tt.metadata)
			r := load(t, dir, strings.Replace(strings.Replace(upcycleRecipe, "[data]", fmt.Sprintf("[diffusion]\nsteps = %d\n[data]", tt.steps), 1), "= [500]", "= [400]", 1))
			err := checkBaseSchedule(r)
			if tt.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want %q", err, tt.want)
			}
		})
	}
}

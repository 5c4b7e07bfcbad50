package distill_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/dcdit/dcdit/diffusion/ddpm"
	"github.com/dcdit/dcdit/distill"
	"github.com/dcdit/dcdit/dit"
	"github.com/dcdit/dcdit/loaders/arch"
	"github.com/dcdit/dcdit/loaders/atomicfile"
	"github.com/dcdit/dcdit/upcycle"
)

// dcRun is a tiny DC stage: a new process's view of it (fresh teacher,
// graft and data, the same seeds every time).
type dcRun struct {
	finetune bool // multi-budget hybrid finetuning, else L1 distillation
	steps    int
}

func (c dcRun) trainer(t *testing.T, dir string) *distill.Trainer {
	t.Helper()
	teacher, rng := randomTeacher(t, &arch.DiTConfig{Depth: 1, HiddenSize: 64, NumHeads: 2, PatchSize: 2, InChannels: 4, InputSize: 8,
		LearnSigma: true, NumClasses: 3, MLPRatio: 2, FrequencySize: 64})
	s := upcycle.DefaultScaffold()
	s.EncoderBlocks, s.DecoderBlocks, s.NormGroups, s.RatioBatchSize = 1, 1, 8, 1
	s.EncoderInit = "patch"
	g, err := upcycle.NewGrafted(dit.Teacher{Model: teacher}, s, teacher.Config.InputSize, teacher.Config.InputSize, 3)
	if err != nil {
		t.Fatal(err)
	}
	x, y := make([]float32, 6*4*8*8), make([]int, 6)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	for i := range y {
		y[i] = i % 3
	}
	data, err := distill.NewDataset(x, y, 4, 8, 8)
	if err != nil {
		t.Fatal(err)
	}
	obj := &distill.DCObjective{Model: g.Model, Teacher: dit.Teacher{Model: teacher}, Schedule: ddpm.Linear(1000), Loss: distill.DistillL1, RatioWeight: 0.03}
	conf := distill.Config{Stage: "distill", Steps: c.steps, BatchSize: 2, LR: 1e-3, Warmup: 1, ClipNorm: 1,
		Seed: 5, LabelDropout: 0.2, NullClass: 3, SaveEvery: 2, Keep: 1,
		Frozen: func(name string) bool {
			return !strings.HasPrefix(name, "hnet.") || strings.HasPrefix(name, "hnet.main_network.")
		}}
	if c.finetune {
		obj.Loss, obj.Teacher = distill.Hybrid, nil
		obj.Budget = distill.Budget{Rhos: []float64{0, 0.5}, Warmup: 2}
		conf.Stage, conf.EMADecay, conf.Schedule, conf.MinLR = "finetune", 0.5, "cosine", 1e-4
		conf.Frozen = func(name string) bool { return strings.HasPrefix(name, "t_embedder.") }
		conf.Groups = []distill.LRGroup{{Name: "router", Scale: 3, Match: func(n string) bool { return strings.Contains(n, "routing") }}}
	}
	return &distill.Trainer{Config: conf, Params: g.Params, Objective: obj, Data: data, Dir: dir,
		Identity: map[string]string{"teacher": "tiny"}}
}

// A DC stage stopped mid-way (here after step 5, a checkpoint at step 4),
// with the torn temporary files of a save it was killed in, resumes to
// exactly the weights and EMA of an uninterrupted run, and leaves no
// temporary file, nor its lock, behind.
func TestResumeIsExactDC(t *testing.T) {
	for _, tt := range []struct {
		name string
		run  dcRun
	}{
		{"distillation", dcRun{steps: 6}},
		{"multi-budget finetune", dcRun{finetune: true, steps: 6}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			full := tt.run.trainer(t, t.TempDir())
			if _, err := full.Run(); err != nil {
				t.Fatal(err)
			}

			dir := t.TempDir()
			first := tt.run.trainer(t, dir)
			ctx, stop := context.WithCancelCause(context.Background())
			first.Context = ctx
			first.OnStep = func(p distill.Progress) {
				if p.Step == 5 {
					stop(errors.New("killed"))
				}
			}
			_, err := first.Run()
			if err == nil || !strings.Contains(err.Error(), "stopped before step 6: killed") || !strings.Contains(err.Error(), "(step 4)") {
				t.Fatalf("err = %v, want a stop before step 6 naming step 4's checkpoint", err)
			}
			for _, name := range []string{".state-00000006.safetensors.tmp-2846", ".run.json.tmp-17", ".metrics.jsonl.tmp-4"} {
				os.WriteFile(filepath.Join(dir, name), []byte("torn"), 0o644)
			}

			again := tt.run.trainer(t, dir)
			res, err := again.Run()
			if err != nil {
				t.Fatal(err)
			}
			if res.Resumed != 4 {
				t.Fatalf("resumed from step %d, want 4", res.Resumed)
			}
			if !slices.Equal(again.Params.Data, full.Params.Data) || !slices.Equal(again.EMAWeights(), full.EMAWeights()) {
				t.Fatal("the resumed run differs from the uninterrupted one")
			}
			entries, _ := os.ReadDir(dir)
			for _, e := range entries {
				if _, tmp := atomicfile.TempTarget(e.Name()); tmp || e.Name() == atomicfile.LockName {
					t.Errorf("%s left in the run folder", e.Name())
				}
			}
		})
	}
}

// Resuming with any setting that changes the trajectory changed is
// refused, and the message names each setting with its old and new value.
func TestResumeRefusesChangedSettings(t *testing.T) {
	run := dcRun{finetune: true, steps: 2}
	dir := t.TempDir()
	if _, err := run.trainer(t, dir).Run(); err != nil {
		t.Fatal(err)
	}
	obj := func(tr *distill.Trainer) *distill.DCObjective { return tr.Objective.(*distill.DCObjective) }
	tests := []struct {
		name string
		edit func(tr *distill.Trainer)
		want []string
	}{
		{"lr", func(tr *distill.Trainer) { tr.Config.LR = 5e-4 }, []string{"trainer.lr: was 0.001, now 0.0005"}},
		{"rho set", func(tr *distill.Trainer) { obj(tr).Budget.Rhos = []float64{0, 0.3} }, []string{"objective.rho: was [0, 0.5], now [0, 0.3]"}},
		{"multi-budget start", func(tr *distill.Trainer) { obj(tr).Budget.Warmup = 1 }, []string{"objective.multi_budget_start: was 2, now 1"}},
		{"ratio loss weight", func(tr *distill.Trainer) { obj(tr).RatioWeight = 0.1 }, []string{"objective.ratio_loss_weight: was 0.03, now 0.1"}},
		{"loss", func(tr *distill.Trainer) { obj(tr).Loss = distill.DistillL2 }, []string{"objective.loss: was hybrid, now l2"}},
		{"target", func(tr *distill.Trainer) { obj(tr).EpsOnly = true }, []string{"objective.eps_only: was false, now true"}},
		{"timestep weights", func(tr *distill.Trainer) { obj(tr).WeightCap = 20 }, []string{"objective.weight_cap: was 0, now 20"}},
		{"P2 weights", func(tr *distill.Trainer) { obj(tr).P2 = distill.P2{K: 1, Gamma: 1} }, []string{"objective.p2_gamma", "now 1"}},
		{"sigma", func(tr *distill.Trainer) { obj(tr).Model.Config.Sigma = 2 }, []string{"objective.dechunk_sigma: was 1, now 2"}},
		{"target N", func(tr *distill.Trainer) { obj(tr).Model.Config.TargetN = 2 }, []string{"objective.target_n: was 4, now 2"}},
		{"diffusion steps", func(tr *distill.Trainer) { obj(tr).Schedule = ddpm.Linear(500) }, []string{"objective.diffusion_steps: was 1000, now 500"}},
		{"data content", func(tr *distill.Trainer) { tr.Data.Latents[7] += 1 }, []string{"data: was latents and labels sha256 "}},
		{"data identity", func(tr *distill.Trainer) { tr.Data.Identity = "shapes/v2 seed 1" }, []string{"data: was latents and labels sha256 ", ", now shapes/v2 seed 1"}},
		{"caller's identity", func(tr *distill.Trainer) { tr.Identity["teacher"] = "other" }, []string{"teacher: was tiny, now other"}},
		{"frozen", func(tr *distill.Trainer) { tr.Config.Frozen = nil }, []string{"params.frozen: was 4 tensors"}},
		{"two at once", func(tr *distill.Trainer) { tr.Config.EMADecay, tr.Config.Seed = 0.9, 6 },
			[]string{"trainer.ema_decay: was 0.5, now 0.9; trainer.seed: was 5, now 6"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := run.trainer(t, dir)
			tt.edit(tr)
			_, err := tr.Run()
			if err == nil {
				t.Fatal("a changed setting was resumed")
			}
			for _, want := range append(tt.want, "holds another run", filepath.Join(dir, "run.json")) {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("message %q lacks %q", err, want)
				}
			}
		})
	}
	// The unchanged stage still resumes (as complete).
	if res, err := run.trainer(t, dir).Run(); err != nil || !res.Complete {
		t.Fatalf("unchanged: %+v, %v", res, err)
	}
}

// A folder another process is training in is refused, naming the holder.
func TestRunFolderIsLocked(t *testing.T) {
	dir := t.TempDir()
	l, err := atomicfile.Lock(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Unlock()
	_, err = dcRun{steps: 1}.trainer(t, dir).Run()
	if want := fmt.Sprintf("in use by process %d on host ", os.Getpid()); err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("err = %v, want %q", err, want)
	}
}

// A stage that fails before writing anything leaves no run folder behind;
// one that existed before stays.
func TestFailedStageLeavesNoFolder(t *testing.T) {
	for _, existed := range []bool{false, true} {
		t.Run(fmt.Sprintf("existed %v", existed), func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "stages", "distill")
			if existed {
				os.MkdirAll(dir, 0o755)
			}
			tr := dcRun{steps: 1}.trainer(t, dir)
			tr.Config.Frozen = func(string) bool { return true }
			if _, err := tr.Run(); err == nil || !strings.Contains(err.Error(), "every parameter is frozen") {
				t.Fatalf("err = %v, want every parameter frozen", err)
			}
			if _, err := os.Stat(dir); (err == nil) != existed {
				t.Fatalf("folder there afterwards: %v, want %v", err == nil, existed)
			}
		})
	}
}

package pipeline

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/dcdit/dcdit/dc/checkpoint"
	"github.com/dcdit/dcdit/dc/hnet"
	"github.com/dcdit/dcdit/dit"
	"github.com/dcdit/dcdit/internal/oracle"
	"github.com/dcdit/dcdit/loaders/arch"
	"github.com/dcdit/dcdit/loaders/dtype"
	"github.com/dcdit/dcdit/loaders/safetensors"
	"github.com/dcdit/dcdit/recipes"
)

// writeTeacher saves a small random DiT/2 on 8×8 latents, with the
// metadata given (at most one map).
func writeTeacher(t *testing.T, dir string, metadata ...map[string]string) string {
	t.Helper()
	return saveTeacher(t, dir, 2, metadata...)
}

// saveTeacher is writeTeacher with the weights drawn from stream seed.
func saveTeacher(t *testing.T, dir string, seed uint64, metadata ...map[string]string) string {
	t.Helper()
	cfg := &arch.DiTConfig{Depth: 1, HiddenSize: 64, NumHeads: 2, PatchSize: 2, InChannels: 4, InputSize: 8,
		LearnSigma: true, NumClasses: 10, MLPRatio: 2, FrequencySize: 256}
	m, err := dit.Init(cfg, 1)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(seed, seed))
	for i := range m.Params.Data {
		m.Params.Data[i] = float32(0.05 * rng.NormFloat64())
	}
	path := filepath.Join(dir, "teacher.safetensors")
	var md map[string]string
	if len(metadata) > 0 {
		md = metadata[0]
	}
	if err := dit.Save(path, m, nil, md); err != nil {
		t.Fatal(err)
	}
	return path
}

const upcycleRecipe = `
name = "tiny"
seed = 3
[base]
path = "teacher.safetensors"
[scaffold]
width_factor = 4
norm_groups = 8
encoder_blocks = 1
decoder_blocks = 1
encoder_init = "patch"
[scaffold.router]
groups = 8
ratio_batch_size = 1
[data]
source = "shapes"
samples = 12
[[stage]]
kind = "distill"
steps = 3
batch_size = 4
lr = 1e-3
[[stage]]
kind = "finetune"
steps = 4
batch_size = 4
lr = 1e-3
rho = [0.0, 0.5]
multi_budget_start = 1
router_lr_scale = 5.0
ema_decay = 0.5
[save]
every = 2
keep = 1
[eval]
rho = [0.0, 0.5]
lite_cfg = [0.0, 0.9]
held_out = 4
samples = 2
sampling_steps = 2
boundary_map_timesteps = [500]
`

func load(t *testing.T, dir, text string) *recipes.Recipe {
	t.Helper()
	path := filepath.Join(dir, "recipe.toml")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := recipes.Load(path, recipes.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// A tiny end-to-end upcycle: graft, distill, finetune with multi-budget ρ,
// save a DC checkpoint that loads, evaluate; running again resumes every
// stage as complete and writes the same model.
func TestUpcycleEndToEnd(t *testing.T) {
	dir := t.TempDir()
	writeTeacher(t, dir, map[string]string{"license": "cc-by-nc-4.0"})
	r := load(t, dir, upcycleRecipe)
	out := filepath.Join(dir, "out")
	sum, err := Run(r, Options{Out: out})
	if err != nil {
		t.Fatal(err)
	}
	if len(sum.Stages) != 2 || sum.Stages[0].Stage != "distill" || sum.Stages[1].Complete {
		t.Fatalf("stages %+v", sum.Stages)
	}
	m, meta, err := checkpoint.Load(sum.Model)
	if err != nil {
		t.Fatal(err)
	}
	if m.Config.GridRows != 8 || len(meta.TrainedRhos) != 2 || !strings.Contains(meta.Recipe, `name = "tiny"`) {
		t.Fatalf("checkpoint: grid %d, trained ρ %v", m.Config.GridRows, meta.TrainedRhos)
	}
	if sum.Eval == nil || len(sum.Eval.Rows) != 2 || sum.Eval.LiteCFG == nil {
		t.Fatalf("evaluation %+v", sum.Eval)
	}
	// The model samples as it was evaluated.
	want := checkpoint.Sampling{Process: checkpoint.ProcessDDPM, DenseBelow: r.Eval.DenseBelow, CFG: r.Eval.CFG, Steps: r.Eval.SamplingSteps}
	if meta.Sampling == nil || *meta.Sampling != want || sum.Eval.Steps != want.Steps || sum.Eval.CFG != want.CFG {
		t.Errorf("sampling record %+v, want %+v (the evaluation's %d steps, cfg %g)", meta.Sampling, want, sum.Eval.Steps, sum.Eval.CFG)
	}
	if !(sum.Eval.Rows[1].KeptTokens <= sum.Eval.Rows[0].KeptTokens) {
		t.Errorf("kept tokens grow with ρ: %+v", sum.Eval.Rows)
	}
	var js map[string]any
	text, err := os.ReadFile(filepath.Join(out, "eval.json"))
	if err != nil || json.Unmarshal(text, &js) != nil || js["rows"] == nil {
		t.Fatalf("eval.json: %v", err)
	}
	// Every safetensors file of the run (model, stage checkpoints) reads
	// the same in an independent reader.
	oracle.CheckTree(t, out)
	// The model card: hub front matter with the base's licence, the
	// recipe, the evaluation table and pictures, how to sample.
	card, err := os.ReadFile(filepath.Join(out, "README.md"))
	if err != nil || sum.Card != filepath.Join(out, "README.md") {
		t.Fatalf("model card %q: %v", sum.Card, err)
	}
	for _, want := range []string{"---\nlibrary_name: dcdit", `license: "cc-by-nc-4.0"`, "base_model: ", "# tiny", `name = "tiny"`,
		"| DC | 0 |", "| teacher |", "![elastic_grid](elastic_grid.png)", "dcdit sample model.safetensors"} {
		if !strings.Contains(string(card), want) {
			t.Errorf("the model card lacks %q:\n%s", want, card)
		}
	}
	first, _ := os.ReadFile(sum.Model)

	again, err := Run(load(t, dir, upcycleRecipe), Options{Out: out})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range again.Stages {
		if !s.Complete {
			t.Fatalf("stage %s ran again", s.Stage)
		}
	}
	second, _ := os.ReadFile(again.Model)
	if string(first) != string(second) {
		t.Fatal("a resumed run wrote another model")
	}
}

const trainRecipe = `
name = "scratch"
[model]
depth = 1
hidden_size = 32
num_heads = 2
patch_size = 2
input_size = 8
num_classes = 10
[data]
source = "shapes"
samples = 8
[[stage]]
kind = "train"
steps = 3
batch_size = 4
lr = 1e-3
[save]
every = 0
`

// Training a DiT from scratch writes a DiT that loads with its head count.
func TestTrainFromScratch(t *testing.T) {
	dir := t.TempDir()
	sum, err := Run(load(t, dir, trainRecipe), Options{Out: filepath.Join(dir, "out")})
	if err != nil {
		t.Fatal(err)
	}
	w, err := dit.Load(sum.Model, dit.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if w.Config.NumHeads != 2 || w.Config.HiddenSize != 32 || sum.Eval != nil {
		t.Fatalf("config %+v, eval %v", w.Config, sum.Eval)
	}
	card, err := os.ReadFile(sum.Card)
	if err != nil || !strings.Contains(string(card), "A DiT trained from scratch") || strings.Contains(string(card), "license") {
		t.Errorf("model card (%v):\n%s", err, card)
	}
}

func TestRunErrors(t *testing.T) {
	dir := t.TempDir()
	writeTeacher(t, dir)
	tests := []struct {
		name, recipe, want string
	}{
		{"distill without scaffold", strings.Replace(trainRecipe, `kind = "train"`, `kind = "distill"`, 1), "distill"},
		// 3 heads do not divide the teacher's width 64: refused before
		// anything reaches attention.
		{"heads that do not divide the width", strings.Replace(upcycleRecipe, `path = "teacher.safetensors"`, "path = \"teacher.safetensors\"\nnum_heads = 3", 1), "heads"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(dir, "r.toml")
			os.WriteFile(path, []byte(tt.recipe), 0o644)
			r, err := recipes.Load(path, recipes.LoadOptions{})
			if err == nil {
				_, err = Run(r, Options{Out: filepath.Join(dir, "out-"+tt.name)})
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want %q", err, tt.want)
			}
		})
	}
}

// scratchScaffold turns trainRecipe (with patch_size 1) into a DC-DiT
// trained from scratch.
const scratchScaffold = `
[scaffold]
width_factor = 4
norm_groups = 8
encoder_blocks = 1
decoder_blocks = 1
[scaffold.router]
groups = 8
ratio_batch_size = 0
`

// A DC-DiT trained from scratch ([model] with [scaffold]) writes a DC
// checkpoint whose main network lives on the latent grid's own patch size.
func TestTrainDCFromScratch(t *testing.T) {
	dir := t.TempDir()
	text := strings.Replace(trainRecipe, "patch_size = 2\n", "patch_size = 1\n", 1)
	text = strings.Replace(text, "lr = 1e-3\n", "lr = 1e-3\nrho = [0.0, 0.3]\nmulti_budget_start = 1\n", 1) + scratchScaffold
	sum, err := Run(load(t, dir, text), Options{Out: filepath.Join(dir, "out")})
	if err != nil {
		t.Fatal(err)
	}
	m, meta, err := checkpoint.Load(sum.Model)
	if err != nil {
		t.Fatal(err)
	}
	if m.Config.ModelDim != 32 || meta.Backbone.Config().(*hnet.Config).PatchSize != 1 || sum.Eval != nil {
		t.Fatalf("model dim %d, backbone %+v", m.Config.ModelDim, meta.Backbone)
	}
	// Nothing evaluated it: it records no sampling settings.
	if meta.Sampling != nil {
		t.Errorf("sampling record %+v for a model nobody evaluated", meta.Sampling)
	}
}

// Settings the pipeline cannot honour fail before any work: the recipe
// itself is refused.
func TestUnsupportedSettings(t *testing.T) {
	dir := t.TempDir()
	text := trainRecipe + "[eval]\nevery = 2\n"
	path := filepath.Join(dir, "recipe.toml")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := recipes.Load(path, recipes.LoadOptions{})
	if err == nil {
		_, err = Run(r, Options{Out: filepath.Join(dir, "out")})
	}
	if err == nil || !strings.Contains(err.Error(), `eval.every`) {
		t.Fatalf("err = %v, want eval.every named", err)
	}
	if _, statErr := os.Stat(filepath.Join(dir, "out", "stages")); statErr == nil {
		t.Fatal("a stage ran before the refusal")
	}
}

// save.dtype stores the final model's tensors in that type, DiT and DC
// models alike, and both load back (to float32).
func TestSaveDType(t *testing.T) {
	tests := []struct {
		name, dtype string
		dc          bool
		want        dtype.DType
	}{
		{"dit bf16", "bf16", false, dtype.BF16},
		{"dit f16", "f16", false, dtype.F16},
		{"dc bf16", "bf16", true, dtype.BF16},
		{"dc f32", "f32", true, dtype.F32},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			text := strings.Replace(trainRecipe, "every = 0\n", "every = 0\ndtype = \""+tt.dtype+"\"\n", 1)
			if tt.dc {
				text = strings.Replace(text, "patch_size = 2\n", "patch_size = 1\n", 1)
				text = strings.Replace(text, "lr = 1e-3\n", "lr = 1e-3\nrho = [0.0]\n", 1) + scratchScaffold
			}
			sum, err := Run(load(t, dir, text), Options{Out: filepath.Join(dir, "out")})
			if err != nil {
				t.Fatal(err)
			}
			f, err := safetensors.Open(sum.Model)
			if err != nil {
				t.Fatal(err)
			}
			for _, ti := range f.Header.Tensors {
				if ti.DType != tt.want {
					t.Fatalf("tensor %q stored as %s, want %s", ti.Name, ti.DType, tt.want)
				}
			}
			f.Close()
			if tt.dc {
				_, _, err = checkpoint.Load(sum.Model) // checksums included
			} else {
				_, err = dit.Load(sum.Model, dit.LoadOptions{})
			}
			if err != nil {
				t.Fatal(err)
			}
			// The model and the stage checkpoints, to an independent reader.
			oracle.CheckTree(t, filepath.Join(dir, "out"))
		})
	}
}

// eval.every evaluates during training without changing it: the log has a
// line per evaluated step, and the weights come out bit-identical to a run
// without it.
func TestPeriodicEval(t *testing.T) {
	run := func(text string) (string, []float32) {
		dir := t.TempDir()
		writeTeacher(t, dir)
		out := filepath.Join(dir, "out")
		sum, err := Run(load(t, dir, text), Options{Out: out})
		if err != nil {
			t.Fatal(err)
		}
		m, _, err := checkpoint.Load(sum.Model)
		if err != nil {
			t.Fatal(err)
		}
		return out, slices.Clone(m.Params.Data)
	}
	_, plain := run(upcycleRecipe)
	out, evaluated := run(upcycleRecipe + "every = 2\n") // the [eval] table comes last
	if !slices.Equal(plain, evaluated) {
		t.Fatal("evaluating during training changed the trained weights")
	}
	text, err := os.ReadFile(filepath.Join(out, EvalLogFile))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, line := range strings.Split(strings.TrimSpace(string(text)), "\n") {
		var e EvalLogEntry
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("%s: %v", EvalLogFile, err)
		}
		if e.Report == nil || len(e.Report.Rows) != 2 {
			t.Fatalf("step %d: report %+v", e.Step, e.Report)
		}
		got = append(got, fmt.Sprintf("%s/%d", e.Stage, e.Step))
	}
	// distill runs 3 steps, finetune 4; a stage's last step is left to what follows.
	if want := []string{"distill/2", "finetune/2"}; !slices.Equal(got, want) {
		t.Fatalf("evaluated %v, want %v", got, want)
	}
}

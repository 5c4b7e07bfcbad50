package recipes

import (
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/dcdit/dcdit/dc"
	"github.com/dcdit/dcdit/dc/hnet"
	"github.com/dcdit/dcdit/dit"
	"github.com/dcdit/dcdit/internal/testckpt"
	"github.com/dcdit/dcdit/loaders/arch"
	"github.com/dcdit/dcdit/loaders/dtype"
	"github.com/dcdit/dcdit/params"
)

// paperScale holds the paper's figures for one DC-DiT scale: parameters
// (Table "Main ImageNet results"), bottleneck width (Table "Basic
// architecture shapes"), the DiT baseline's TFLOPs per image and DC-DiT's
// at two tail-drop fractions (256×256, no guidance, 250 steps).
type paperScale struct {
	recipe, preset string
	paramsM        float64
	bottleneck     int
	ditTFLOPs      float64
	dcTFLOPs       map[float64]float64
}

var paperScales = []paperScale{
	{"dit-s-2-256.toml", "DiT-S/2", 34.7, 96, 3.02, map[float64]float64{0.2: 3.06, 0.5: 2.14}},
	{"dit-b-2-256.toml", "DiT-B/2", 137, 192, 11.46, map[float64]float64{0.2: 11.94, 0.5: 8.55}},
	{"dit-l-2-256.toml", "DiT-L/2", 469, 256, 40.21, map[float64]float64{0.1: 39.61, 0.3: 31.86}},
	{"dit-xl-2-256.toml", "DiT-XL/2", 689, 288, 59.00, map[float64]float64{0.0: 62.99, 0.2: 51.60, 0.4: 40.26}},
}

// Every real-checkpoint recipe plans against a header-only checkpoint of
// its DiT's shapes (full size, its data a hole) and gives the paper's
// DC-DiT: its bottleneck, its parameter count within 1%, the DiT
// baseline's FLOPs within 1%, and DC-DiT's FLOPs per ρ within 10% (the
// plan assumes the router keeps exactly L/N tokens; trained routers keep
// a few less).
func TestRealRecipesPlan(t *testing.T) {
	for _, s := range paperScales {
		t.Run(s.preset, func(t *testing.T) {
			c, ok := testckpt.DiTPreset(s.preset, 32)
			if !ok {
				t.Fatalf("no preset %s", s.preset)
			}
			base := filepath.Join(t.TempDir(), "dit.safetensors")
			writeBase(t, base, c)
			r, pl, err := Check(s.recipe, LoadOptions{BasePath: base})
			if err != nil {
				t.Fatalf("plan: %v", err)
			}
			if pl.Backbone.Config.(*arch.DiTConfig).Preset != s.preset || pl.DC.EncDecDim != s.bottleneck || pl.DC.GridRows != 32 || pl.MainNetwork.(*hnet.Config).PatchSize != 2 {
				t.Errorf("backbone %+v, dc %+v", pl.Backbone.Config, pl.DC)
			}
			if got := float64(pl.Parameters.Total) / 1e6; !(math.Abs(got/s.paramsM-1) <= 0.01) {
				t.Errorf("%.1fM parameters, paper %.1fM", got, s.paramsM)
			}
			if pl.Parameters.Copied+pl.Parameters.New != pl.Parameters.Total || pl.Parameters.Copied+pl.Parameters.Dropped != pl.Parameters.Base {
				t.Errorf("parameter accounting: %+v", pl.Parameters)
			}
			rows := map[float64]FLOPsRow{}
			for _, row := range pl.FLOPs.Rows {
				switch row.Model {
				case "base":
					if !(math.Abs(row.TFLOPsPerImage/s.ditTFLOPs-1) <= 0.01) {
						t.Errorf("DiT %.2f TFLOPs/img, paper %.2f", row.TFLOPsPerImage, s.ditTFLOPs)
					}
				case "dc":
					rows[row.Rho] = row
				}
			}
			for rho, paper := range s.dcTFLOPs {
				if row, ok := rows[rho]; ok {
					if !(math.Abs(row.TFLOPsPerImage/paper-1) <= 0.10) {
						t.Errorf("ρ %g: %.2f TFLOPs/img, paper %.2f", rho, row.TFLOPsPerImage, paper)
					}
					t.Logf("ρ %g: %.2f TFLOPs/img (paper %.2f), %d kept", rho, row.TFLOPsPerImage, paper, row.Kept)
				}
			}
			// The paper's schedule: distill 5K steps training only the
			// scaffold, finetune 10K with ρ from 5K on, embedders frozen.
			d, f := pl.Stages[0], pl.Stages[1]
			if d.Steps != 5000 || f.Steps != 10000 || f.MultiBudgetStart != 5000 || d.BatchSize != 256 || f.LR.Peak != 1e-4 {
				t.Errorf("stages %+v / %+v", d, f)
			}
			if d.Trainable != pl.Parameters.New || f.Frozen != groupParams(pl, params.GroupTimestepEmbedder)+groupParams(pl, params.GroupClassEmbedder) {
				t.Errorf("distill trains %d (new %d); finetune freezes %d", d.Trainable, pl.Parameters.New, f.Frozen)
			}
			if !slices.Equal(r.Stages[1].Rho, PaperRho) || r.Stages[1].EMADecay != 0.9999 || r.Stages[1].GradClip != 1 || r.Scaffold.Router.RatioLossWeight != 0.03 {
				t.Errorf("finetune hyper-parameters differ from the paper's: %+v", r.Stages[1])
			}
			if d.Memory.Total <= d.Memory.Activations || d.Memory.Teacher != 4*pl.Parameters.Base || f.Memory.Teacher != 0 || f.Memory.EMA != 4*f.Trainable {
				t.Errorf("memory %+v / %+v", d.Memory, f.Memory)
			}
		})
	}
}

func groupParams(pl *Plan, g string) int64 {
	for _, c := range pl.Parameters.ByGroup {
		if c.Group == g {
			return c.Params
		}
	}
	return 0
}

// The same checkpoint in diffusers naming plans the same model: the layout
// is detected, not configured.
func TestPlanDiffusersLayout(t *testing.T) {
	c, _ := testckpt.DiTPreset("DiT-S/2", 32)
	dir := t.TempDir()
	orig, diff := filepath.Join(dir, "o.safetensors"), filepath.Join(dir, "d.safetensors")
	writeBase(t, orig, c)
	if err := testckpt.WriteSparseFile(diff, arch.ExpectedDiT(c, arch.Diffusers), dtype.F32); err != nil {
		t.Fatal(err)
	}
	_, a, err := Check("dit-s-2-256.toml", LoadOptions{BasePath: orig})
	if err != nil {
		t.Fatal(err)
	}
	_, b, err := Check("dit-s-2-256.toml", LoadOptions{BasePath: diff})
	if err != nil {
		t.Fatal(err)
	}
	if b.Base.Layout != arch.Diffusers || *a.DC != *b.DC || a.Parameters.Total != b.Parameters.Total {
		t.Errorf("diffusers plan differs: layout %s, %+v vs %+v", b.Base.Layout, b.DC, a.DC)
	}
}

// The main job's recipe names the bundled teacher, which validate reports
// as missing until it exists, clearly and once; against a teacher of the
// planned size (hidden 128, 4 blocks, patch 2, 16×16 latents) it plans a
// small run whose FLOPs fall as ρ grows.
func TestToyRecipe(t *testing.T) {
	const file = "toy-dit.toml"
	text, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	_, err = Load(file, LoadOptions{})
	if _, statErr := os.Stat(filepath.Join("..", "testdata", "teacher", "model.safetensors")); statErr != nil {
		ps := Problems(err)
		if len(ps) != 1 || ps[0].Key != "base.path" || ps[0].Line != lineOf(t, string(text), "path = ", 1) || !strings.Contains(ps[0].Msg, "does not exist") {
			t.Errorf("missing teacher: got %v", err)
		}
	} else if err != nil {
		t.Errorf("toy recipe with its teacher: %v", err)
	}

	teacher := &arch.DiTConfig{Depth: 6, HiddenSize: 128, NumHeads: 4, PatchSize: 2, InChannels: 4, InputSize: 16,
		LearnSigma: true, NumClasses: 10, MLPRatio: 4, FrequencySize: 256}
	base := filepath.Join(t.TempDir(), "teacher.safetensors")
	writeBase(t, base, teacher)
	r, pl, err := Check(file, LoadOptions{BasePath: base})
	if err != nil {
		t.Fatalf("toy plan: %v", err)
	}
	if pl.DC.EncDecDim != 16 || pl.DC.Tokens() != 256 || pl.DC.Cells() != 64 || pl.MainNetwork.(*hnet.Config).Depth != 6 {
		t.Errorf("dc %+v", pl.DC)
	}
	// The recipe is sized so that the DC model at ρ = 0 costs about the
	// teacher (at most 1.1×) and higher ρ saves compute, per
	// forward and per image (the steps below eval.dense_below at the full
	// grid's cost).
	var teacherFLOPs, teacherImage float64
	for _, row := range pl.FLOPs.Rows {
		if row.Model == "base" {
			teacherFLOPs, teacherImage = row.GFLOPsPerForward, row.TFLOPsPerImage
		}
	}
	prev, prevImage := math.Inf(1), math.Inf(1)
	for _, row := range pl.FLOPs.Rows {
		if row.Model != "dc" {
			continue
		}
		if want := int(float64(pl.DC.Cells()) / pl.DC.TargetN); row.Rho == 0 && row.Kept != want {
			t.Errorf("ρ 0 keeps %d of %d, want ⌊L/N⌋ = %d", row.Kept, pl.DC.Cells(), want)
		}
		if row.Rho == 0 && !(row.TFLOPsPerImage <= 1.1*teacherImage) {
			t.Errorf("ρ 0 costs %.4g TFLOP per image, more than 1.1× the teacher's %.4g", row.TFLOPsPerImage, teacherImage)
		}
		if !(row.TFLOPsPerImage < prevImage) {
			t.Errorf("FLOPs per image do not fall with ρ: %+v", pl.FLOPs.Rows)
		}
		prevImage = row.TFLOPsPerImage
		if row.Rho == 0 && !(row.GFLOPsPerForward <= 1.1*teacherFLOPs) {
			t.Errorf("ρ 0 costs %.4g GFLOP per forward, more than 1.1× the teacher's %.4g", row.GFLOPsPerForward, teacherFLOPs)
		}
		if !(row.GFLOPsPerForward < prev) {
			t.Errorf("FLOPs do not fall with ρ: %+v", pl.FLOPs.Rows)
		}
		prev = row.GFLOPsPerForward
	}
	// Coarse steps cost what their ρ keeps: every row with a budget below
	// coarse_rho is cheaper with them, and the others (ρ 0 among them)
	// cost the same.
	coarse := filepath.Join(t.TempDir(), file)
	testdata, err := filepath.Abs(filepath.Join("..", "testdata"))
	if err != nil {
		t.Fatal(err)
	}
	edited := strings.Replace(string(text), "\ndense_below = 600.0     # every", "\ncoarse_from = 900.0\ncoarse_rho = 0.7\ndense_below = 600.0     # every", 1)
	os.WriteFile(coarse, []byte(strings.ReplaceAll(edited, `"../testdata`, `"`+testdata)), 0o644)
	_, cpl, err := Check(coarse, LoadOptions{BasePath: base})
	if err != nil {
		t.Fatalf("toy plan with coarse steps: %v", err)
	}
	for i, row := range cpl.FLOPs.Rows {
		was := pl.FLOPs.Rows[i].TFLOPsPerImage
		if cheaper := row.TFLOPsPerImage < was; !(row.TFLOPsPerImage > 0) || row.Model == "dc" && cheaper != (row.Rho > 0 && row.Rho < 0.7) || row.Model != "dc" && row.Model != "dc-lite-cfg" && row.TFLOPsPerImage != was {
			t.Errorf("%s at ρ %g: %.4g TFLOP per image with coarse steps from t = 900 at ρ 0.7, %.4g without", row.Model, row.Rho, row.TFLOPsPerImage, was)
		}
	}
	// Trained by no stage, the encoder stays as grafted (encoder_init =
	// "patch": its blocks' residual branches zero), and sampling skips
	// those branches: every DC row is cheaper, its encoder down to the
	// last block's skip projection (E → D), and the base row unchanged.
	if pl.FLOPs.Idle != "" {
		t.Errorf("the toy recipe trains its encoder, yet the plan calls blocks idle: %s", pl.FLOPs.Idle)
	}
	frozen := filepath.Join(t.TempDir(), "frozen-"+file)
	edited = strings.ReplaceAll(string(text), `frozen = ["wide_head"]`, `frozen = ["wide_head", "encoder"]`)
	os.WriteFile(frozen, []byte(strings.ReplaceAll(edited, `"../testdata`, `"`+testdata)), 0o644)
	_, fpl, err := Check(frozen, LoadOptions{BasePath: base})
	if err != nil {
		t.Fatalf("toy plan with the encoder frozen: %v", err)
	}
	if fpl.FLOPs.Idle == "" {
		t.Errorf("the encoder frozen in every stage: no idle blocks planned")
	}
	skipOnly := 2 * float64(pl.DC.Cells()) * float64(pl.DC.EncDecDim) * float64(pl.DC.ModelDim)
	for i, row := range fpl.FLOPs.Rows {
		was := pl.FLOPs.Rows[i]
		switch {
		case row.Parts == nil:
			if row.TFLOPsPerImage != was.TFLOPsPerImage {
				t.Errorf("%s: %.4g TFLOP per image with the encoder frozen, %.4g without", row.Model, row.TFLOPsPerImage, was.TFLOPsPerImage)
			}
		default:
			samples := 1.0 // a Lite-CFG row prices both branches' forwards
			if row.Model == "dc-lite-cfg" {
				samples = 2
			}
			if !(row.TFLOPsPerImage < was.TFLOPsPerImage) || row.Parts.Encoder != samples*skipOnly {
				t.Errorf("%s at ρ %g, the encoder frozen: %.4g TFLOP per image (%.4g trained), encoder %.4g FLOP per forward, want %.4g",
					row.Model, row.Rho, row.TFLOPsPerImage, was.TFLOPsPerImage, row.Parts.Encoder, samples*skipOnly)
			}
		}
	}
	// With eval.dense_teacher the dense sampling steps run the backbone
	// and the wide head alone: every DC row is cheaper, the base row not.
	teacherDense := filepath.Join(t.TempDir(), "teacher-"+file)
	edited = strings.Replace(string(text), "\ndense_below = 600.0     # every", "\ndense_teacher = true\ndense_below = 600.0     # every", 1)
	os.WriteFile(teacherDense, []byte(strings.ReplaceAll(edited, `"../testdata`, `"`+testdata)), 0o644)
	_, tpl, err := Check(teacherDense, LoadOptions{BasePath: base})
	if err != nil {
		t.Fatalf("toy plan with the dense steps as the teacher: %v", err)
	}
	if !strings.Contains(tpl.FLOPs.KeptTokens, "eval.dense_teacher") {
		t.Errorf("the plan's kept-token line does not say the dense steps run as the teacher: %s", tpl.FLOPs.KeptTokens)
	}
	for i, row := range tpl.FLOPs.Rows {
		was := pl.FLOPs.Rows[i].TFLOPsPerImage
		if cheaper := row.TFLOPsPerImage < was; !(row.TFLOPsPerImage > 0) || cheaper != (row.Parts != nil) {
			t.Errorf("%s at ρ %g: %.4g TFLOP per image with the dense steps as the teacher, %.4g without", row.Model, row.Rho, row.TFLOPsPerImage, was)
		}
	}
	// Dense training steps cost the full grid: the more of them, the
	// dearer a sample, up to the dense forward itself.
	st := r.Stages[0]
	dense := dcForward(pl.DC, pl.mainSpec, pl.DC.Cells()).Total()
	prevCost := 0.0
	for _, tt := range []struct{ fraction, below float64 }{{0, 0}, {0.25, 0}, {0.25, 500}, {0, 1000}} {
		s := st
		s.DenseFraction, s.DenseBelow = tt.fraction, tt.below
		cost := meanForward(pl, nil, &s, 1000)
		if !(cost > prevCost) || !(cost <= dense*(1+1e-12)) {
			t.Errorf("dense_fraction %g, dense_below %g: %.4g FLOP per sample, want above %.4g and at most the dense forward's %.4g",
				tt.fraction, tt.below, cost, prevCost, dense)
		}
		prevCost = cost
	}
	if !(math.Abs(prevCost-dense) <= 1e-9*dense) {
		t.Errorf("every sample below dense_below: %.6g FLOP per sample, want the dense forward's %.6g", prevCost, dense)
	}
	// Coarse training samples cost what coarse_rho keeps: a stage whose ρ
	// are all below it is cheaper with them, one at ρ 0 alone is not.
	for _, tt := range []struct {
		rho     []float64
		cheaper bool
	}{{[]float64{0, 0.3, 0.6}, true}, {[]float64{0}, false}} {
		s := st
		s.Rho, s.DenseBelow = tt.rho, 500
		was := meanForward(pl, nil, &s, 1000)
		s.CoarseFrom, s.CoarseRho = 800, 0.9
		if got := meanForward(pl, nil, &s, 1000); (got < was) != tt.cheaper || !(got > 0) {
			t.Errorf("ρ %v, coarse from t = 800 at 0.9: %.4g FLOP per sample, %.4g without, want cheaper: %v", tt.rho, got, was, tt.cheaper)
		}
	}
	// Lookback's twins run their budget samples again: a stage with budgets
	// costs more with them, one at ρ 0 alone the same.
	for _, tt := range []struct {
		rho    []float64
		dearer bool
	}{{[]float64{0, 0.3, 0.6}, true}, {[]float64{0}, false}} {
		s := st
		s.Rho, s.DenseBelow, s.Lookback = tt.rho, 500, 1
		was := meanForward(pl, nil, &s, 1000)
		s.LookbackTwins = true
		if got := meanForward(pl, nil, &s, 1000); (got > was) != tt.dearer || !(got >= was) {
			t.Errorf("ρ %v with lookback twins: %.4g FLOP per sample, %.4g without, want dearer: %v", tt.rho, got, was, tt.dearer)
		}
	}
	var total float64
	for _, s := range pl.Stages {
		total += s.PFLOPsTotal * 1e15
	}
	total += pl.Data.GenerationTFLOPs * 1e12
	// Ten minutes on 2 cores at a pessimistic 20 GFLOP/s sustained is 12
	// TFLOP (the recipe's 8 TFLOP took 5m37s on 2 shared cores).
	if !(total <= 12e12) {
		t.Errorf("the toy run costs %.3g FLOP, more than 10 minutes on 2 cores", total)
	}
	t.Logf("toy run: %.3g TFLOP in all", total/1e12)
}

// A recipe with [model] trains from scratch: a fixed-patch DiT without a
// scaffold, DC-DiT (positions on the latent grid) with one.
func TestFromScratch(t *testing.T) {
	dir := t.TempDir()
	dit := "name = \"s\"\n[model]\npreset = \"DiT-S/2\"\n[[stage]]\nkind = \"train\"\nsteps = 10000\n"
	p := filepath.Join(dir, "dit.toml")
	os.WriteFile(p, []byte(dit), 0o644)
	r, pl, err := Check(p, LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if pl.Recipe.Kind != "train-dit" || pl.DC != nil || r.Data.Source != SourceShapes || !slices.Equal(r.Stages[0].Rho, []float64{0}) ||
		r.Stages[0].RatioLossWeight != 0 || len(pl.FLOPs.Rows) != 1 || pl.FLOPs.Rows[0].Model != "dit" {
		t.Errorf("DiT from scratch: %+v", pl.Recipe)
	}
	if n := pl.Parameters.Total; n < 32e6 || n > 34e6 || pl.Parameters.New != n {
		t.Errorf("DiT-S/2 has %d parameters, all new", n)
	}
	dc := dit + "[scaffold]\n"
	p2 := filepath.Join(dir, "dc.toml")
	os.WriteFile(p2, []byte(dc), 0o644)
	r, pl, err = Check(p2, LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if pl.Recipe.Kind != "train-dc" || pl.DC == nil || pl.MainNetwork.(*hnet.Config).PatchSize != 1 || r.Model.PatchSize != 1 || !slices.Equal(r.Stages[0].Rho, PaperRho) {
		t.Errorf("DC-DiT from scratch: %+v %+v", pl.Recipe, pl.MainNetwork)
	}
}

// A data file's header sizes the data; its labels may be a tensor or the
// metadata `dcdit sample` writes.
func TestPlanDataFile(t *testing.T) {
	text := edit(validRecipe, "samples = 64\nsampling_steps = 10\n", "source = \"file\"\npath = \"latents.safetensors\"\n", 1)
	path := recipeDir(t, text)
	writeLatents(t, filepath.Join(filepath.Dir(path), "latents.safetensors"), []int64{48, 4, 8, 8}, false)
	_, pl, err := Check(path, LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if pl.Data.Samples != 48 || pl.Data.Labels != `tensor "labels"` || pl.Stages[0].Epochs != 10*16/48.0 {
		t.Errorf("data %+v, epochs %g", pl.Data, pl.Stages[0].Epochs)
	}
}

// Defaults are filled in per kind and marked; written values are not.
func TestDefaults(t *testing.T) {
	r, err := Load(recipeDir(t, validRecipe), LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	d, f := r.Stages[0], r.Stages[1]
	if d.Loss != LossL1 || !slices.Equal(d.Trainable, []string{params.GroupScaffold}) || d.EMADecay != 0 || !slices.Equal(d.Rho, []float64{0}) || d.Target != "output" {
		t.Errorf("distill defaults: %+v", d)
	}
	if f.Loss != LossHybrid || !slices.Equal(f.Frozen, []string{params.GroupEmbedders}) || f.EMADecay != DefaultEMADecay || f.LR != DefaultLR || f.GradClip != 1 {
		t.Errorf("finetune defaults: %+v", f)
	}
	if r.Scaffold.TargetN != 4 || r.Scaffold.NormGroups != 8 || r.Scaffold.Router.RatioBatchSize != 16 || r.Data.Source != SourceTeacher || r.Save.Keep != 3 {
		t.Errorf("defaults: %+v %+v", r.Scaffold, r.Data)
	}
	if !r.IsDefault("stage[0].loss") || r.IsDefault("stage[1].rho") || r.IsDefault("scaffold.norm_groups") || !r.IsDefault("scaffold.target_n") {
		t.Error("default marks are wrong")
	}
	src := map[string]Setting{}
	for _, s := range r.Settings() {
		src[s.Key] = s
	}
	if s := src["stage[1].rho"]; s.Source != "file" || s.Line != lineOf(t, validRecipe, "rho", 1) || s.Value != "[0.0, 0.3, 0.6]" {
		t.Errorf("stage[1].rho setting: %+v", s)
	}
	if s := src["stage[0].ema_decay"]; s.Source != "default" || !s.Default || s.Value != "0.0" {
		t.Errorf("stage[0].ema_decay setting: %+v", s)
	}
	if _, ok := src["model.preset"]; ok {
		t.Error("settings list a table the recipe does not have")
	}
}

// Group names and patterns select the parameters they say.
func TestStageTrains(t *testing.T) {
	cases := []struct {
		trainable, frozen []string
		name              string
		dc, want          bool
	}{
		{[]string{"scaffold"}, nil, "hnet.encoder.layers.0.conv1.weight", true, true},
		{[]string{"scaffold"}, nil, "x_embedder.proj.weight", true, true},
		{[]string{"scaffold"}, nil, "hnet.main_network.main_network.rmsnorm.weight", true, true},
		{[]string{"scaffold"}, nil, "hnet.main_network.main_network.layers.3.attn.qkv.weight", true, false},
		{[]string{"scaffold"}, nil, "t_embedder.mlp.0.weight", true, false},
		{[]string{"all"}, []string{"embedders"}, "y_embedder.embedding_table.weight", true, false},
		{[]string{"all"}, []string{"embedders"}, "x_embedder.proj.weight", true, true},
		{[]string{"all"}, []string{"embedders"}, "x_embedder.proj.weight", false, false},
		{[]string{"adaln"}, nil, "hnet.main_network.main_network.layers.3.adaLN_modulation.1.bias", true, true},
		{[]string{"adaln"}, nil, "blocks.3.adaLN_modulation.1.bias", false, true},
		{[]string{"backbone"}, []string{"attention"}, "blocks.0.attn.proj.weight", false, false},
		{[]string{"backbone"}, []string{"attention"}, "blocks.0.mlp.fc1.weight", false, true},
		{[]string{"hnet.routing_module.*"}, nil, "hnet.routing_module.residual_scorer.3.bias", true, true},
		{[]string{"hnet.*"}, []string{"router"}, "hnet.routing_module.proj.weight", true, false},
		{[]string{"final_layer"}, nil, "final_layer.linear.weight", false, true},
		{[]string{"scaffold"}, nil, "final_layer.linear.weight", false, false},
	}
	for _, c := range cases {
		st := Stage{Trainable: c.trainable, Frozen: c.frozen}
		groups := dit.ParamGroups(c.name)
		if c.dc {
			groups = dc.ParamGroups(c.name, hnet.ParamGroups)
		}
		if got := st.Trains(c.name, groups); got != c.want {
			t.Errorf("trainable %v frozen %v dc %v: Trains(%s) = %v", c.trainable, c.frozen, c.dc, c.name, got)
		}
	}
	// Every parameter of a planned model falls in exactly one finest group.
	_, pl, err := Check(recipeDir(t, validRecipe), LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pl.Params {
		if p.Group == "other" {
			t.Errorf("%s belongs to no group", p.Name)
		}
	}
}

// recipes/zimage-turbo.toml plans against a header-only Z-Image-Turbo
// (full size, its data holes) and gives the paper's DC-Z-Image (Table
// "DPG-Bench preservation after upcycling Z-Image": 5603 TFLOPs per image
// for Z-Image, 5901 / 4211 / 2570 for DC-Z-Image at ρ 0 / 0.3 / 0.6):
// the base's 6.15 B parameters copied, the scaffold at D/4 on the 128²
// latent cells, and each ρ's cost relative to the base within 5% of the
// paper's ratio.
func TestZImageTurboRecipePlans(t *testing.T) {
	dir := t.TempDir()
	if _, err := testckpt.WriteSparseSharded(dir, "diffusion_pytorch_model", arch.ExpectedZImage(testckpt.ZImageTurbo(), arch.Diffusers), dtype.F32, 10_000_000_000); err != nil {
		t.Fatal(err)
	}
	_, pl, err := Check("zimage-turbo.toml", LoadOptions{BasePath: dir})
	if err != nil {
		t.Fatalf("plan: %v", err)
	}
	if got := float64(pl.Parameters.Copied) / 1e9; !(math.Abs(got/6.15-1) <= 0.01) {
		t.Errorf("%.3fG parameters copied, want Z-Image's 6.15G", got)
	}
	if pl.DC.EncDecDim != 960 || pl.DC.GridRows != 128 || !pl.DC.CondNorm {
		t.Errorf("scaffold %+v: want E = 3840/4 on a 128² grid with the adaptor", pl.DC)
	}
	paper := map[float64]float64{0: 5901.0 / 5603, 0.3: 4211.0 / 5603, 0.6: 2570.0 / 5603}
	seen := 0
	for _, row := range pl.FLOPs.Rows {
		want, ok := paper[row.Rho]
		if row.Model != "dc" || !ok {
			continue
		}
		seen++
		if !(math.Abs(row.RelativeToBase/want-1) <= 0.05) {
			t.Errorf("ρ %g: %.3f× the base, paper %.3f×", row.Rho, row.RelativeToBase, want)
		}
		t.Logf("ρ %g: %.3f× the base (paper %.3f×), %d tokens kept", row.Rho, row.RelativeToBase, want, row.Kept)
	}
	if seen != len(paper) {
		t.Errorf("%d of the paper's %d budgets planned", seen, len(paper))
	}
}

// A token embedder starts as the base's patch embedding: on cells of the
// base's patch the toy recipe plans with it (and its parameters), on
// other cells the plan refuses it at its key.
func TestTokenEmbedderNeedsTheBasePatch(t *testing.T) {
	text, err := os.ReadFile("toy-dit.toml")
	if err != nil {
		t.Fatal(err)
	}
	teacher := &arch.DiTConfig{Depth: 6, HiddenSize: 128, NumHeads: 4, PatchSize: 2, InChannels: 4, InputSize: 16,
		LearnSigma: true, NumClasses: 10, MLPRatio: 4, FrequencySize: 256}
	dir := t.TempDir()
	base := filepath.Join(dir, "teacher.safetensors")
	writeBase(t, base, teacher)
	for _, tt := range []struct {
		patch string
		ok    bool
	}{{"patch_size = 2", true}, {"patch_size = 1", false}} {
		t.Run(tt.patch, func(t *testing.T) {
			edited := strings.Replace(string(text), "[scaffold]\npatch_size = 2", "[scaffold]\ntoken_embedder = true\n"+tt.patch, 1)
			if edited == string(text) {
				t.Fatal("the toy recipe's [scaffold] no longer starts with patch_size = 2")
			}
			featnet, err := filepath.Abs(filepath.Join("..", "testdata", "featnet", "model.safetensors"))
			if err != nil {
				t.Fatal(err)
			}
			edited = strings.ReplaceAll(edited, `"../testdata/featnet/model.safetensors"`, strconv.Quote(featnet))
			file := filepath.Join(dir, "recipe.toml")
			if err := os.WriteFile(file, []byte(edited), 0o644); err != nil {
				t.Fatal(err)
			}
			_, pl, err := Check(file, LoadOptions{BasePath: base})
			if tt.ok {
				if err != nil {
					t.Fatalf("on the base's patch: %v", err)
				}
				if !pl.DC.TokenEmbedder {
					t.Error("the plan's scaffold has no token embedder")
				}
				return
			}
			ps := Problems(err)
			if len(ps) != 1 || ps[0].Key != "scaffold.token_embedder" || !strings.Contains(ps[0].Msg, "patch_size") {
				t.Fatalf("on cells of 1×1: got %v, want one problem at scaffold.token_embedder", err)
			}
		})
	}
}

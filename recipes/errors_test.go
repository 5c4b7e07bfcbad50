package recipes

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/BurntSushi/toml"

	"github.com/dcdit/dcdit/family"
	"github.com/dcdit/dcdit/internal/testckpt"
	"github.com/dcdit/dcdit/loaders/arch"
	"github.com/dcdit/dcdit/loaders/dtype"
	"github.com/dcdit/dcdit/params"
)

func TestValidRecipeHasNoProblems(t *testing.T) {
	r, pl, err := Check(recipeDir(t, validRecipe), LoadOptions{})
	if err != nil {
		t.Fatalf("valid recipe: %v", err)
	}
	if r.Name != "t" || len(pl.Stages) != 2 || pl.DC == nil || pl.DC.EncDecDim != 16 {
		t.Errorf("unexpected plan: name %q, %d stages, dc %+v", r.Name, len(pl.Stages), pl.DC)
	}
}

// A stage with DyDiT's keys validates, and the plan adds the width
// routers, new, from that stage on.
func TestDyDiTKeysValidate(t *testing.T) {
	text := edit(validRecipe, "multi_budget_start = 5\n", "multi_budget_start = 5\ndydit_lambda = 0.7\ndydit_weight = 2.0\ndydit_lr_scale = 20.0\n", 1)
	r, pl, err := Check(recipeDir(t, text), LoadOptions{})
	if err != nil {
		t.Fatalf("recipe with dydit keys: %v", err)
	}
	if st := r.Stages[1]; st.DyDiTLambda != 0.7 || st.DyDiTWeight != 2 || st.DyDiTLRScale != 20 || r.Stages[0].DyDiTWeight != 1 {
		t.Errorf("stages %+v", r.Stages)
	}
	var routers int64
	for _, prm := range pl.Params {
		if strings.Contains(prm.Name, ".dydit.") {
			routers += prm.Numel()
			if prm.From != "" || prm.Group != params.GroupWidthRouter {
				t.Errorf("router %s: from %q, group %q", prm.Name, prm.From, prm.Group)
			}
		}
	}
	s0, s1 := pl.Stages[0], pl.Stages[1]
	if !(routers > 0) || s0.Trainable+s0.Frozen+routers != pl.Parameters.Total || s1.Trainable+s1.Frozen != pl.Parameters.Total {
		t.Errorf("%d router values; stage 0 counts %d + %d, stage 1 %d + %d, of %d", routers, s0.Trainable, s0.Frozen, s1.Trainable, s1.Frozen, pl.Parameters.Total)
	}
}

// want is one expected problem: its key, a fragment of its message, and
// the text whose line it must carry (the n-th occurrence; "" for none).
type want struct {
	key, msg string
	at       string
	n        int
}

// Every class of recipe error names the file, the key, its line, what was
// expected and what was found, and all of a file's problems come at once.
func TestRecipeErrors(t *testing.T) {
	cases := []struct {
		name  string
		text  string
		setup func(t *testing.T, dir string)
		want  []want
		only  bool // the listed problems are all there are
	}{
		// Unknown keys, at every level, with their lines.
		{name: "unknown top-level key",
			text: edit(validRecipe, "seed = 1\n", "seed = 1\ncolour = \"blue\"\n", 1),
			want: []want{{"colour", "unknown key", "colour", 1}}, only: true},
		{name: "unknown key in a table, with a suggestion",
			text: edit(validRecipe, "norm_groups = 8\n", "norm_groups = 8\ntargt_n = 4.0\n", 1),
			want: []want{{"scaffold.targt_n", "did you mean target_n?", "targt_n", 1}}, only: true},
		{name: "unknown key in the second stage",
			text: edit(validRecipe, "multi_budget_start = 5\n", "multi_budget_start = 5\nstepz = 3\n", 1),
			want: []want{{"stage[1].stepz", "valid keys in [stage]: name, kind, steps", "stepz", 1}}, only: true},
		{name: "keys are case-sensitive",
			text: edit(validRecipe, "\nsteps = 10", "\nSteps = 10", 1),
			want: []want{{"stage[0].Steps", "did you mean steps? keys are case-sensitive", "Steps", 1}}, only: true},
		{name: "unknown key in an inline table",
			text: edit(validRecipe, "norm_groups = 8\n", "norm_groups = 8\nrouter = { groups = 8, colour = 1 }\n", 1),
			want: []want{{"scaffold.router.colour", "unknown key", "colour", 1}}, only: true},
		{name: "unknown key in a dotted key",
			text: edit(validRecipe, "norm_groups = 8\n", "norm_groups = 8\nrouter.colour = 1\n", 1),
			want: []want{{"scaffold.router.colour", "unknown key", "router.colour", 1}}, only: true},

		// Wrong types.
		{name: "string for an integer",
			text: edit(validRecipe, "\nsteps = 10", "\nsteps = \"10\"", 1),
			want: []want{{"stage[0].steps", `found a string ("10"), expected an integer`, `steps = "10"`, 1}}, only: true},
		{name: "float for an integer",
			text: edit(validRecipe, "batch_size = 16", "batch_size = 16.0", 2),
			want: []want{{"stage[1].batch_size", "found a float (16.0), expected an integer", "batch_size = 16.0", 1}}, only: true},
		{name: "string for a number",
			text: edit(validRecipe, "norm_groups = 8\n", "norm_groups = 8\nsigma = \"wide\"\n", 1),
			want: []want{{"scaffold.sigma", `found a string ("wide"), expected a number`, "sigma", 1}}, only: true},
		{name: "number for an array",
			text: edit(validRecipe, "rho = [0.0, 0.3, 0.6]", "rho = 0.5", 1),
			want: []want{{"stage[1].rho", "found a float (0.5), expected an array of numbers", "rho = 0.5", 1}}, only: true},
		{name: "wrong element in a multi-line array",
			text: edit(validRecipe, "rho = [0.0, 0.3, 0.6]", "rho = [\n  0.0,\n  \"x\",\n  0.6,\n]", 1),
			want: []want{{"stage[1].rho[1]", `found a string ("x"), expected a number`, `"x"`, 1}}, only: true},
		{name: "value for a table",
			text: edit(edit(validRecipe, "[eval]\nsampling_steps = 10\n", "", 1), "seed = 1\n", "seed = 1\neval = \"all\"\n", 1),
			want: []want{{"eval", `found a string ("all"), expected a table`, "eval =", 1}}, only: true},
		{name: "every type error at once, in line order",
			text: edit(edit(validRecipe, "steps = 20", "steps = true", 1), "samples = 64", `samples = "many"`, 1),
			want: []want{{"data.samples", "expected an integer", "samples", 1}, {"stage[1].steps", "found a boolean (true)", "steps = true", 1}}, only: true},
		{name: "TOML syntax",
			text: edit(validRecipe, "\nsteps = 10", "\nsteps = = 10", 1),
			want: []want{{"stage.steps", "TOML syntax: expected value but found", "steps = = 10", 1}}, only: true},

		// Values out of range.
		{name: "zero steps",
			text: edit(validRecipe, "\nsteps = 10", "\nsteps = 0", 1),
			want: []want{{"stage[0].steps", "found 0, expected an integer ≥ 1", "steps = 0", 1}}, only: true},
		{name: "missing steps",
			text: edit(validRecipe, "\nsteps = 10\n", "\n", 1),
			want: []want{{"stage[0].steps", "missing, expected the number of steps", "[[stage]]", 1}}, only: true},
		{name: "zero learning rate",
			text: edit(validRecipe, "batch_size = 16\n", "batch_size = 16\nlr = 0.0\n", 1),
			want: []want{{"stage[0].lr", "found 0.0, expected a learning rate > 0", "lr = 0.0", 1}}, only: true},
		{name: "unknown loss",
			text: edit(validRecipe, "batch_size = 16\n", "batch_size = 16\nloss = \"l3\"\n", 1),
			want: []want{{"stage[0].loss", `found "l3", expected one of "l1", "l2" (did you mean "l1"?)`, "loss", 1}}, only: true},
		{name: "distillation loss in a finetune stage",
			text: edit(validRecipe, "multi_budget_start = 5\n", "multi_budget_start = 5\nloss = \"l1\"\n", 1),
			want: []want{{"stage[1].loss", `found "l1", expected "hybrid" (the only one supported)`, `loss = "l1"`, 1}}, only: true},
		{name: "unknown kind",
			text: edit(validRecipe, `kind = "distill"`, `kind = "distil"`, 1),
			want: []want{{"stage[0].kind", `did you mean "distill"?`, "distil", 1}}, only: true},
		{name: "unknown group",
			text: edit(validRecipe, "batch_size = 16\n", "batch_size = 16\ntrainable = [\"scafold\"]\n", 1),
			want: []want{{"stage[0].trainable[0]", "did you mean scaffold?", "scafold", 1}}, only: true},
		{name: "bad glob",
			text: edit(validRecipe, "batch_size = 16\n", "batch_size = 16\nfrozen = [\"hnet.[\"]\n", 1),
			want: []want{{"stage[0].frozen[0]", "valid glob pattern", "hnet.[", 1}}, only: true},
		{name: "pattern that selects nothing",
			text: edit(validRecipe, "batch_size = 16\n", "batch_size = 16\ntrainable = [\"scaffold\", \"nothing.*\"]\n", 1),
			want: []want{{"stage[0].trainable[1]", `"nothing.*" selects no parameter`, "nothing", 1}}, only: true},
		{name: "everything frozen",
			text: edit(validRecipe, "batch_size = 16\n", "batch_size = 16\nfrozen = [\"all\"]\n", 1),
			want: []want{{"stage[0].trainable", "selects no trainable parameter", "[[stage]]", 1}}, only: true},
		{name: "EMA decay of 1",
			text: edit(validRecipe, "multi_budget_start = 5\n", "multi_budget_start = 5\nema_decay = 1.0\n", 1),
			want: []want{{"stage[1].ema_decay", "found 1.0, expected a decay in [0, 1)", "ema_decay", 1}}, only: true},
		{name: "router learning-rate scale not positive",
			text: edit(validRecipe, "multi_budget_start = 5\n", "multi_budget_start = 5\nrouter_lr_scale = 0.0\n", 1),
			want: []want{{"stage[1].router_lr_scale", "found 0.0, expected a finite factor > 0", "router_lr_scale", 1}}, only: true},
		{name: "DyDiT's λ above 1",
			text: edit(validRecipe, "multi_budget_start = 5\n", "multi_budget_start = 5\ndydit_lambda = 1.5\n", 1),
			want: []want{{"stage[1].dydit_lambda", "found 1.5, expected a FLOPs ratio in (0, 1], or 0 (off)", "dydit_lambda", 1}}, only: true},
		{name: "DyDiT's weight without λ",
			text: edit(validRecipe, "multi_budget_start = 5\n", "multi_budget_start = 5\ndydit_weight = 2.0\n", 1),
			want: []want{{"stage[1].dydit_weight", "found 2 with dydit_lambda = 0, expected dydit_lambda > 0", "dydit_weight", 1}}, only: true},
		{name: "DyDiT on the GPU",
			text: edit(edit(validRecipe, "multi_budget_start = 5\n", "multi_budget_start = 5\ndydit_lambda = 0.7\n", 1), "seed = 1\n", "seed = 1\ndevice = \"cuda\"\n", 1),
			want: []want{{"stage[1].dydit_lambda", "expected 0 with device = \"cuda\"", "dydit_lambda", 1}}, only: true},
		{name: "guided distillation on an odd batch",
			text: edit(validRecipe, "batch_size = 16\n", "batch_size = 15\nguided_scale = 4.0\n", 1),
			want: []want{{"stage[0].batch_size", "found 15, expected an even number with guided_scale", "batch_size", 1}}},
		{name: "router targets with a negative weight",
			text: edit(validRecipe, "batch_size = 16\n", "batch_size = 16\nrouter_target_weight = -1.0\n", 1),
			want: []want{{"stage[0].router_target_weight", "found -1.0, expected a finite weight ≥ 0", "router_target_weight", 1}}, only: true},
		{name: "router targets outside distillation",
			text: edit(validRecipe, "multi_budget_start = 5\n", "multi_budget_start = 5\nrouter_target_weight = 0.5\n", 1),
			want: []want{{"stage[1].router_target_weight", "found 0.5 in a finetune stage, expected it only in distill stages", "router_target_weight", 1}}, only: true},
		{name: "dense fraction of 1",
			text: edit(validRecipe, "multi_budget_start = 5\n", "multi_budget_start = 5\ndense_fraction = 1.0\n", 1),
			want: []want{{"stage[1].dense_fraction", "found 1.0, expected a number in [0, 1)", "dense_fraction", 1}}, only: true},
		{name: "dense below past the schedule",
			text: edit(validRecipe, "multi_budget_start = 5\n", "multi_budget_start = 5\ndense_below = 1500.0\n", 1),
			want: []want{{"stage[1].dense_below", "found 1500.0, expected a timestep in 0..1000", "dense_below", 1}}, only: true},
		{name: "warm-up longer than the stage",
			text: edit(validRecipe, "batch_size = 16\n", "batch_size = 16\nwarmup_steps = 50\n", 1),
			want: []want{{"stage[0].warmup_steps", "found 50, expected an integer in 0..steps = 10", "warmup_steps", 1}}, only: true},
		{name: "betas of the wrong length",
			text: edit(validRecipe, "batch_size = 16\n", "batch_size = 16\nbetas = [0.9]\n", 1),
			want: []want{{"stage[0].betas", "found [0.9], expected two numbers", "betas", 1}}, only: true},
		{name: "multi-budget warm-up as long as the stage",
			text: edit(validRecipe, "multi_budget_start = 5", "multi_budget_start = 20", 1),
			want: []want{{"stage[1].multi_budget_start", "found 20 (as written), expected fewer than steps = 20", "multi_budget_start", 1}}, only: true},
		{name: "default multi-budget warm-up too long",
			text: edit(validRecipe, "multi_budget_start = 5\n", "", 1),
			want: []want{{"stage[1].multi_budget_start", "found 5000 (the default)", "[[stage]]", 2}}, only: true},
		{name: "batch not divisible by the ratio-loss group",
			text: edit(validRecipe, "batch_size = 16", "batch_size = 24", 2),
			want: []want{{"stage[1].batch_size", "found 24, expected a multiple of scaffold.router.ratio_batch_size = 16", "batch_size = 24", 1}}, only: true},
		{name: "name that cannot name a folder",
			text: edit(validRecipe, `name = "t"`, `name = "my run"`, 1),
			want: []want{{"name", `found "my run", expected a name of letters`, "name", 1}}, only: true},
		{name: "two stages of one name",
			text: edit(validRecipe, `kind = "finetune"`, "kind = \"finetune\"\nname = \"distill\"", 1),
			want: []want{{"stage[1].name", "expected unique stage names", `name = "distill"`, 1}}, only: true},

		// Bad ρ sets.
		{name: "ρ of 1",
			text: edit(validRecipe, "rho = [0.0, 0.3, 0.6]", "rho = [0.0, 1.0]", 1),
			want: []want{{"stage[1].rho[1]", "found 1.0, expected a tail-drop fraction 0 ≤ ρ < 1", "rho", 1}}, only: true},
		{name: "negative ρ",
			text: edit(validRecipe, "rho = [0.0, 0.3, 0.6]", "rho = [-0.1, 0.0]", 1),
			want: []want{{"stage[1].rho[0]", "found -0.1, expected a tail-drop fraction", "rho", 1}}, only: true},
		{name: "unsorted ρ",
			text: edit(validRecipe, "rho = [0.0, 0.3, 0.6]", "rho = [0.0, 0.6, 0.3]", 1),
			want: []want{{"stage[1].rho[2]", "found 0.3, expected values in increasing order (it follows 0.6)", "rho", 1}}, only: true},
		{name: "repeated ρ",
			text: edit(validRecipe, "rho = [0.0, 0.3, 0.6]", "rho = [0.0, 0.3, 0.3]", 1),
			want: []want{{"stage[1].rho[2]", "expected unique values", "rho", 1}}, only: true},
		{name: "ρ set without 0",
			text: edit(validRecipe, "rho = [0.0, 0.3, 0.6]", "rho = [0.3, 0.6]", 1),
			want: []want{{"stage[1].rho", "found [0.3, 0.6], expected a set including 0.0", "rho", 1}}, only: true},
		{name: "empty ρ set",
			text: edit(validRecipe, "rho = [0.0, 0.3, 0.6]", "rho = []", 1),
			want: []want{{"stage[1].rho", "found an empty list", "rho", 1}}, only: true},
		{name: "ρ element on its own line",
			text: edit(validRecipe, "rho = [0.0, 0.3, 0.6]", "rho = [\n  0.0,\n  0.3,\n  1.5,\n]", 1),
			want: []want{{"stage[1].rho[2]", "found 1.5", "1.5", 1}}, only: true},
		{name: "evaluation ρ out of order",
			text: edit(validRecipe, "[eval]\n", "[eval]\nrho = [0.0, 0.5, 0.2]\n", 1),
			want: []want{{"eval.rho[2]", "increasing order", "rho = [0.0, 0.5", 1}}, only: true},
		{name: "coarse steps below the dense ones",
			text: edit(validRecipe, "[eval]\n", "[eval]\ndense_below = 500.0\ncoarse_from = 400.0\ncoarse_rho = 0.9\n", 1),
			want: []want{{"eval.coarse_from", "found 400.0, expected a timestep above eval.dense_below = 500", "coarse_from", 1}}, only: true},
		{name: "coarse drop of 1",
			text: edit(validRecipe, "[eval]\n", "[eval]\ncoarse_from = 800.0\ncoarse_rho = 1.0\n", 1),
			want: []want{{"eval.coarse_rho", "found 1.0, expected a tail-drop fraction 0 ≤ ρ < 1", "coarse_rho", 1}}, only: true},
		{name: "random router kept apart without the random router",
			text: edit(validRecipe, "[eval]\n", "[eval]\nrandom_router = false\nspread_random = true\n", 1),
			want: []want{{"eval.spread_random", "found true, expected false without eval.random_router", "spread_random", 1}}, only: true},
		{name: "lookback spacing without lookback",
			text: edit(validRecipe, "[eval]\n", "[eval]\nlookback_spacing = 4.0\n", 1),
			want: []want{{"eval.lookback_spacing", "found 4 without eval.lookback, expected 0", "lookback_spacing", 1}}, only: true},
		{name: "negative lookback spacing",
			text: edit(validRecipe, "batch_size = 16\n", "batch_size = 16\nlookback = 1.0\nlookback_spacing = -1.0\n", 1),
			want: []want{{"stage[0].lookback_spacing", "found -1.0, expected a finite spacing ≥ 0", "lookback_spacing", 1}}, only: true},
		{name: "coarse drop without coarse steps",
			text: edit(validRecipe, "[eval]\n", "[eval]\ncoarse_rho = 0.9\n", 1),
			want: []want{{"eval.coarse_rho", "found 0.9, expected 0 without eval.coarse_from", "coarse_rho", 1}}, only: true},
		{name: "coarse training steps below the dense ones",
			text: edit(validRecipe, "multi_budget_start = 5\n", "multi_budget_start = 5\ndense_below = 500.0\ncoarse_from = 400.0\ncoarse_rho = 0.9\n", 1),
			want: []want{{"stage[1].coarse_from", "found 400.0, expected a timestep above dense_below = 500", "coarse_from", 1}}, only: true},
		{name: "coarse training drop without coarse steps",
			text: edit(validRecipe, "multi_budget_start = 5\n", "multi_budget_start = 5\ncoarse_rho = 0.9\n", 1),
			want: []want{{"stage[1].coarse_rho", "found 0.9, expected 0 without coarse_from", "coarse_rho", 1}}, only: true},
		{name: "lookback without a teacher's estimate",
			text: edit(validRecipe, "multi_budget_start = 5\n", "multi_budget_start = 5\nlookback = 0.5\n", 1),
			want: []want{{"stage[1].lookback", `found 0.5, expected 0 in a finetune stage with loss "hybrid"`, "lookback", 1}}, only: true},
		{name: "lookback share above 1",
			text: edit(validRecipe, "batch_size = 16\n", "batch_size = 16\nlookback = 1.5\n", 1),
			want: []want{{"stage[0].lookback", "found 1.5, expected a share in [0, 1]", "lookback", 1}}, only: true},
		{name: "lookback twins without lookback",
			text: edit(validRecipe, "batch_size = 16\n", "batch_size = 16\nlookback_twins = true\n", 1),
			want: []want{{"stage[0].lookback_twins", "found true with lookback 0, expected lookback > 0 (the twins are lookback's samples)", "lookback_twins", 1}}, only: true},
		{name: "lookback twins with guided distillation",
			text: edit(validRecipe, "batch_size = 16\n", "batch_size = 16\nlookback = 1.0\nlookback_twins = true\nguided_scale = 2.0\n", 1),
			want: []want{{"stage[0].lookback_twins", "found true with guided_scale 2, expected one of them: both pair the batch", "lookback_twins", 1}}, only: true},
		{name: "Lite-CFG not a pair",
			text: edit(validRecipe, "[eval]\n", "[eval]\nlite_cfg = [0.9]\n", 1),
			want: []want{{"eval.lite_cfg", "found [0.9], expected a pair", "lite_cfg", 1}}, only: true},

		// Structure and files.
		{name: "missing base checkpoint",
			text: edit(validRecipe, `path = "base.safetensors"`, `path = "../teacher/model.safetensors"`, 1),
			want: []want{{"base.path", "the base checkpoint ../teacher/model.safetensors (resolved against the recipe's folder:", "path =", 1}}, only: true},
		{name: "base and model",
			text: edit(validRecipe, "[scaffold]", "[model]\npreset = \"DiT-S/2\"\n\n[scaffold]", 1),
			want: []want{{"model", "found both [base] and [model]", "[model]", 1}}, only: true},
		{name: "neither base nor model",
			text: edit(validRecipe, "[base]\npath = \"base.safetensors\"\n", "", 1),
			want: []want{{"", "found neither [base] nor [model]", "", 0}, {"stage[0].kind", `"distill" without [base]`, `kind = "distill"`, 1}}},
		{name: "no stages",
			text: validRecipe[:strings.Index(validRecipe, "[[stage]]")],
			want: []want{{"", "found no [[stage]]", "", 0}}, only: true},
		{name: "distillation without a scaffold",
			text: edit(validRecipe, "[scaffold]\nnorm_groups = 8\n", "", 1),
			want: []want{{"stage[0].kind", `"distill" without [scaffold]`, `kind = "distill"`, 1}, {"stage[1].rho", "expected [0.0] without [scaffold]", "rho", 1}}},
		{name: "missing data file",
			text: edit(validRecipe, "samples = 64\nsampling_steps = 10\n", "source = \"file\"\npath = \"latents.safetensors\"\n", 1),
			want: []want{{"data.path", "the data file latents.safetensors does not exist", "path = \"latents", 1}}, only: true},
		{name: "teacher data without a teacher",
			text: edit(edit(validRecipe, "[base]\npath = \"base.safetensors\"\n", "[model]\npreset = \"DiT-S/2\"\ninput_size = 8\n", 1), "samples = 64\n", "source = \"teacher\"\n", 1),
			want: []want{{"data.source", `found "teacher" without [base]`, "source", 1}}},

		// Problems found in the headers.
		{name: "width factor that does not divide the backbone",
			text: edit(validRecipe, "norm_groups = 8\n", "norm_groups = 8\nwidth_factor = 3\n", 1),
			want: []want{{"scaffold.width_factor", "found 3, expected a divisor of the backbone width D = 64", "width_factor", 1}}, only: true},
		{name: "GroupNorm groups that do not divide the scaffold",
			text: edit(validRecipe, "norm_groups = 8", "norm_groups = 32", 1),
			want: []want{{"scaffold.norm_groups", "found 32, expected a divisor of the encoder/decoder width E = D/width_factor = 16", "norm_groups", 1}}, only: true},
		{name: "class beyond the model's",
			text: edit(validRecipe, "samples = 64\n", "samples = 64\nclasses = [3, 12]\n", 1),
			want: []want{{"data.classes[1]", "found 12, expected a class label below the model's 10 classes", "classes", 1}}, only: true},
		{name: "prompts without a flow-matching base",
			text: edit(validRecipe, "samples = 64\n", "samples = 64\nprompts = \"prompts.txt\"\n", 1),
			want: []want{{"data.prompts", "found without a [base] trained with flow matching", "prompts", 1}}, only: true},
		{name: "Z-Image base without its latent size",
			text: edit(validRecipe, `path = "base.safetensors"`, `path = "zimage.safetensors"`, 1),
			setup: func(t *testing.T, dir string) {
				exp := arch.ExpectedZImage(testckpt.TinyZImage(), arch.Comfy)
				if err := testckpt.WriteSparseFile(filepath.Join(dir, "zimage.safetensors"), exp, dtype.BF16); err != nil {
					t.Fatal(err)
				}
			},
			want: []want{{"base.latent_size", "missing, expected the latent grid side to graft the Z-Image transformer for", "[base]", 1}}, only: true},
		{name: "data file of the wrong shape",
			text: edit(validRecipe, "samples = 64\nsampling_steps = 10\n", "source = \"file\"\npath = \"latents.safetensors\"\n", 1),
			setup: func(t *testing.T, dir string) {
				writeLatents(t, filepath.Join(dir, "latents.safetensors"), []int64{10, 4, 16, 16}, false)
			},
			want: []want{{"data.latents_key", "has shape [10 4 16 16], expected [N, 4, 8, 8]", "[data]", 1}}, only: true},
		{name: "data file without labels",
			text: edit(validRecipe, "samples = 64\nsampling_steps = 10\n", "source = \"file\"\npath = \"latents.safetensors\"\n", 1),
			setup: func(t *testing.T, dir string) {
				writeLatents(t, filepath.Join(dir, "latents.safetensors"), []int64{10, 4, 8, 8}, true)
			},
			want: []want{{"data.labels_key", `has neither a tensor "labels" nor metadata dcdit.labels`, "[data]", 1}}, only: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := recipeDir(t, c.text)
			if c.setup != nil {
				c.setup(t, filepath.Dir(path))
			}
			_, _, err := Check(path, LoadOptions{})
			var re *Error
			if !errors.As(err, &re) {
				t.Fatalf("got %v, want an *Error", err)
			}
			if c.only && len(re.Problems) != len(c.want) {
				t.Errorf("%d problems, want %d:\n%v", len(re.Problems), len(c.want), err)
			}
			for _, w := range c.want {
				line := 0
				if w.at != "" {
					line = lineOf(t, c.text, w.at, w.n)
				}
				found := false
				for _, p := range re.Problems {
					if p.Key == w.key && strings.Contains(p.Msg, w.msg) && p.Line == line && p.File == path {
						found = true
					}
				}
				if !found {
					t.Errorf("no problem at %s:%d with key %q saying %q; got:\n%v", path, line, w.key, w.msg, err)
				}
			}
			for i := 1; i < len(re.Problems); i++ {
				if a, b := re.Problems[i-1].Line, re.Problems[i].Line; b != 0 && (a == 0 || a > b) {
					t.Errorf("problems out of line order:\n%v", err)
				}
			}
			// The printed form names file, line and key.
			first := re.Problems[0]
			if s := first.String(); !strings.HasPrefix(s, path) || (first.Line > 0 && !strings.Contains(s, ":"+strconv.Itoa(first.Line)+":")) {
				t.Errorf("problem formatted as %q", s)
			}
		})
	}
}

// A recipe that cannot be read is one problem naming the file.
func TestUnreadableRecipe(t *testing.T) {
	_, err := Load(filepath.Join(t.TempDir(), "nope.toml"), LoadOptions{})
	ps := Problems(err)
	if len(ps) != 1 || !strings.Contains(ps[0].String(), "nope.toml: cannot read the recipe") {
		t.Errorf("got %v", err)
	}
}

// Keys the TOML decoder leaves undecoded are found, with their lines,
// by scanning the file for the key within its table: in an array of
// tables, in every entry that has it.
func TestUndecodedKeyLines(t *testing.T) {
	text := "name = \"x\"\n[[stage]]\nkind = \"distill\"\nstepz = 1\n[[stage]]\nkind = \"train\"\n\n# comment\nstepz = 2\n[eval]\nstepz = 3\n"
	p := &problems{file: "r.toml", lines: scanLines(text), seen: map[string]bool{}}
	p.unknownUndecoded(toml.Key{"stage", "stepz"})
	p.unknownUndecoded(toml.Key{"eval", "stepz"})
	got := map[string]int{}
	for _, pr := range p.list {
		got[pr.Key] = pr.Line
	}
	wantLines := map[string]int{"stage[0].stepz": 4, "stage[1].stepz": 9, "eval.stepz": 11}
	if len(got) != len(wantLines) {
		t.Errorf("got %v, want %v", got, wantLines)
	}
	for k, l := range wantLines {
		if got[k] != l {
			t.Errorf("%s at line %d, want %d (all: %v)", k, got[k], l, got)
		}
	}
	// Keys typeCheck already reported are not reported twice.
	p2 := &problems{file: "r.toml", lines: scanLines(text), seen: map[string]bool{"stage[0].stepz": true}}
	p2.unknownUndecoded(toml.Key{"stage", "stepz"})
	if len(p2.list) != 1 || p2.list[0].Key != "stage[1].stepz" {
		t.Errorf("got %+v", p2.list)
	}
}

// The recipe file's own folder anchors relative paths, wherever the
// command runs from; --base and --out replace the recipe's paths.
func TestRelativePathsAndOverrides(t *testing.T) {
	path := recipeDir(t, validRecipe)
	wd, _ := os.Getwd()
	defer os.Chdir(wd)
	if err := os.Chdir(os.TempDir()); err != nil {
		t.Fatal(err)
	}
	r, err := Load(path, LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := r.BasePath(), filepath.Join(filepath.Dir(path), "base.safetensors"); got != want {
		t.Errorf("base resolved to %s, want %s", got, want)
	}
	other := filepath.Join(t.TempDir(), "other.safetensors")
	writeBase(t, other, tinyDiT())
	r, err = Load(path, LoadOptions{BasePath: other, OutDir: "out"})
	if err != nil {
		t.Fatal(err)
	}
	if r.BasePath() != other || !filepath.IsAbs(r.Save.Dir) || filepath.Base(r.Save.Dir) != "out" {
		t.Errorf("overrides: base %s, out %s", r.BasePath(), r.Save.Dir)
	}
	for _, s := range r.Settings() {
		if s.Key == "base.path" && s.Source != "--base" || s.Key == "save.dir" && s.Source != "--out" {
			t.Errorf("setting %+v does not name its flag", s)
		}
	}
}

// Parse never panics, whatever the text: it returns a recipe or problems.
func FuzzParse(f *testing.F) {
	f.Add(validRecipe)
	f.Add("[[stage]]\nkind = \"train\"\nsteps = 1\nrho = [0.0, \"x\"]\n[model]\npreset = \"DiT-S/2\"\n")
	f.Add("stage = [{kind = 1}, 2]\nscaffold = {router = 3}\n")
	f.Fuzz(func(t *testing.T, text string) {
		r, err := Parse("f.toml", text, "testdata", LoadOptions{})
		if err == nil && r == nil {
			t.Error("no recipe and no error")
		}
		if err != nil && len(Problems(err)) == 0 {
			t.Error("an error without problems")
		}
	})
}

// Every [model] key a registered family's rules declare is a key of the
// table, its default of the key's type, so that defaulting never drops it.
func TestFamilyModelKeysFitTheTable(t *testing.T) {
	for _, kind := range family.Kinds() {
		rules := rulesOf(kind)
		if rules == nil {
			continue
		}
		for _, k := range rules.ModelKeys() {
			t.Run(kind+"/"+k.Key, func(t *testing.T) {
				if !slices.Contains(familyModelKeys(), k.Key) {
					t.Fatalf("%q is not a family key of [model] (%v)", k.Key, familyModelKeys())
				}
				var typ reflect.Type
				for f := range reflect.TypeFor[Model]().Fields() {
					if tomlName(f) == k.Key {
						typ = f.Type
					}
				}
				if k.Default == nil || !reflect.TypeOf(k.Default).ConvertibleTo(typ) {
					t.Errorf("default %#v does not convert to the key's %v", k.Default, typ)
				}
			})
		}
	}
}

package recipes

import (
	"errors"
	"strings"
	"testing"
)

// Settings a run would accept and then not use are refused at the line
// they are written on, saying why; the same values left to their defaults
// are not.
func TestIgnoredSettingsAreRefused(t *testing.T) {
	scratch := "name = \"s\"\n[model]\npreset = \"DiT-S/2\"\ninput_size = 8\n[[stage]]\nkind = \"train\"\nsteps = 10\n"
	cases := []struct {
		name, text string
		key, msg   string
	}{
		{"a file path for procedural data", edit(scratch, "[[stage]]", "[data]\npath = \"x.safetensors\"\n[[stage]]", 1),
			"data.path", `data.source = "shapes", expected it only with source "file" or "teacher"`},
		{"tensor names without a file", edit(validRecipe, "samples = 64\n", "samples = 64\nlatents_key = \"x\"\n", 1),
			"data.latents_key", `data.source = "teacher", expected it only with source "file"`},
		{"labels name without a file", edit(validRecipe, "samples = 64\n", "samples = 64\nlabels_key = \"y\"\n", 1),
			"data.labels_key", `expected it only with source "file"`},
		{"sampling settings without the teacher", edit(scratch, "[[stage]]", "[data]\ncfg = 2.0\nclasses = [1]\n[[stage]]", 1),
			"data.cfg", "only the teacher samples"},
		{"classes without the teacher", edit(scratch, "[[stage]]", "[data]\nclasses = [1]\n[[stage]]", 1),
			"data.classes", "only the teacher's samples take classes"},
		{"a floor without a decay", edit(validRecipe, "batch_size = 16\nrho", "batch_size = 16\nmin_lr = 1e-5\nrho", 1),
			"stage[1].min_lr", `lr_schedule = "constant", expected min_lr only with "cosine" or "linear"`},
		{"a warm-up without budgets", edit(validRecipe, "batch_size = 16\n\n[[stage]]", "batch_size = 16\nmulti_budget_start = 3\n\n[[stage]]", 1),
			"stage[0].multi_budget_start", "found 3 with rho = [0.0], expected it only with more than one ρ"},
		{"an EMA no one reads", edit(validRecipe, "batch_size = 16\n\n[[stage]]", "batch_size = 16\nema_decay = 0.99\n\n[[stage]]", 1),
			"stage[0].ema_decay", "found 0.99 in stage 1 of 2, expected 0: the next stage starts from the trained weights"},
		{"evaluation without a teacher", scratch + "[eval]\nheld_out = 8\n",
			"eval.held_out", "without [base] and [scaffold], expected no [eval] settings"},
		{"a Lite-CFG scale without a pair", edit(validRecipe, "[eval]\n", "[eval]\nlite_cfg = []\nlite_cfg_scale = 2.0\n", 1),
			"eval.lite_cfg_scale", "found with an empty eval.lite_cfg"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := recipeDir(t, c.text)
			_, err := Load(path, LoadOptions{})
			var re *Error
			if !errors.As(err, &re) {
				t.Fatalf("got %v, want an *Error", err)
			}
			// Each case writes its key once: the problem is on that line.
			line := lineOf(t, c.text, c.key[strings.LastIndex(c.key, ".")+1:]+" = ", 1)
			for _, p := range re.Problems {
				if p.Key == c.key && strings.Contains(p.Msg, c.msg) {
					if p.Line != line {
						t.Errorf("problem at line %d, want %d", p.Line, line)
					}
					return
				}
			}
			t.Fatalf("no problem for %s saying %q; got:\n%v", c.key, c.msg, err)
		})
	}
	// Left to their defaults, the same settings are fine.
	if _, err := Load(recipeDir(t, scratch), LoadOptions{}); err != nil {
		t.Fatalf("defaults refused: %v", err)
	}
	// An EMA left to its default is off on a stage that is not the last,
	// on by kind on the last one.
	two := edit(validRecipe, `kind = "distill"`, "kind = \"finetune\"\nmulti_budget_start = 5", 1)
	r, err := Load(recipeDir(t, two), LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if r.Stages[0].EMADecay != 0 || r.Stages[1].EMADecay != 0.9999 || !r.IsDefault("stage[0].ema_decay") {
		t.Fatalf("default EMA decays %g, %g; want 0 on the first of two finetunes, 0.9999 on the last", r.Stages[0].EMADecay, r.Stages[1].EMADecay)
	}
}

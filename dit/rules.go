package dit

import (
	"math"
	"strings"

	"github.com/dcdit/dcdit/family"
	"github.com/dcdit/dcdit/loaders/arch"
)

var _ family.ModelRules = Family{}

// ModelKeys are the [model] keys of a class-conditional DiT: a preset
// naming its sizes, its classes, the learned variance, the MLP ratio and
// the class table's initial scale, with DiT's defaults (ImageNet's 1000
// classes, learned σ, ratio 4, N(0, 0.02²)).
func (Family) ModelKeys() []family.ModelKey {
	return []family.ModelKey{
		{Key: "preset", Default: ""}, {Key: "num_classes", Default: 1000}, {Key: "learn_sigma", Default: true},
		{Key: "mlp_ratio", Default: 4.0}, {Key: "class_embedding_std", Default: 0.02},
	}
}

// ModelPreset is the sizes of one of DiT's presets (arch.DiTPresets).
func (Family) ModelPreset(name string) (family.ModelSettings, bool) {
	p, ok := arch.LookupDiTPreset(name)
	if !ok {
		return family.ModelSettings{}, false
	}
	return family.ModelSettings{Depth: p.Depth, Width: p.Hidden, Heads: p.NumHeads, Patch: p.Patch}, true
}

// ModelTraining is DDPM on class labels.
func (Family) ModelTraining() family.ModelTraining {
	return family.ModelTraining{Process: family.ProcessDDPM}
}

// CheckModel refuses an unknown preset, a model without classes, a width
// the 2-D sin-cos position table cannot split in four, and a
// non-positive MLP ratio or class-table scale.
func (Family) CheckModel(r family.ModelRecipe) []family.RecipeProblem {
	var out []family.RecipeProblem
	bad := func(key string, found any, expected string) {
		out = append(out, family.RecipeProblem{Key: key, Found: found, Expected: expected})
	}
	s := r.Settings
	if r.Preset != "" {
		if _, ok := arch.LookupDiTPreset(r.Preset); !ok {
			names := make([]string, len(arch.DiTPresets))
			for i, p := range arch.DiTPresets {
				names[i] = p.Name
			}
			bad("model.preset", r.Preset, "one of "+strings.Join(names, ", "))
		}
	}
	switch {
	case s.Classes == 0 && r.Preset == "":
		out = append(out, family.RecipeProblem{Key: "model.num_classes", Msg: "missing, expected an integer ≥ 1 (or a preset)"})
	case s.Classes < 1:
		bad("model.num_classes", s.Classes, "an integer ≥ 1")
	}
	if s.Width > 0 && s.Width%4 != 0 {
		bad("model.hidden_size", s.Width, "a multiple of 4 (the 2-D sin-cos position embedding)")
	}
	if !(s.MLPRatio > 0) {
		bad("model.mlp_ratio", s.MLPRatio, "a number > 0")
	}
	if !(r.ClassStd > 0) || math.IsInf(r.ClassStd, 0) {
		bad("model.class_embedding_std", r.ClassStd, "a finite standard deviation > 0")
	}
	return out
}

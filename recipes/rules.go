package recipes

import (
	"reflect"
	"slices"

	"github.com/dcdit/dcdit/family"
)

// sharedModelKeys are the [model] keys that size every family's model;
// the table's other keys belong to the families that read them
// (family.ModelRules).
var sharedModelKeys = []string{"kind", "depth", "hidden_size", "num_heads", "patch_size", "in_channels", "input_size"}

// familyModelKeys are the [model] keys of one family or another, in the
// table's declaration order.
func familyModelKeys() []string {
	var keys []string
	t := reflect.TypeFor[Model]()
	for i := range t.NumField() {
		if k := tomlName(t.Field(i)); k != "" && !slices.Contains(sharedModelKeys, k) {
			keys = append(keys, k)
		}
	}
	return keys
}

// rulesOf returns the ModelRules of the family of a kind; nil for an
// unknown kind or a family without rules.
func rulesOf(kind string) family.ModelRules {
	f, err := family.Lookup(kind)
	if err != nil {
		return nil
	}
	rules, _ := f.(family.ModelRules)
	return rules
}

// reads says whether a family reads a [model] key of its own: a family
// without rules reads every key.
func reads(rules family.ModelRules, key string) bool {
	_, ok := keyDefault(rules, key)
	return ok || rules == nil
}

// keyDefault is the default a family's rules give a [model] key.
func keyDefault(rules family.ModelRules, key string) (any, bool) {
	if rules == nil {
		return nil, false
	}
	for _, k := range rules.ModelKeys() {
		if k.Key == key {
			return k.Default, true
		}
	}
	return nil, false
}

// readerKinds are the registered kinds whose rules read a [model] key,
// in kind order.
func readerKinds(key string) []string {
	var kinds []string
	for _, k := range family.Kinds() {
		if _, ok := keyDefault(rulesOf(k), key); ok {
			kinds = append(kinds, k)
		}
	}
	return kinds
}

// defaultModelKeys fills the family keys [model] leaves out: with the
// default of the family of model.kind when it reads the key, else of the
// first family that does (so that every recipe lists every key), else
// the zero value.
func defaultModelKeys(d *defaulter, m *Model) {
	rules := rulesOf(m.Kind)
	v := reflect.ValueOf(m).Elem()
	for i := range v.NumField() {
		key := tomlName(v.Type().Field(i))
		if key == "" || slices.Contains(sharedModelKeys, key) || d.has["model."+key] {
			continue
		}
		def, ok := keyDefault(rules, key)
		if kinds := readerKinds(key); !ok && len(kinds) > 0 {
			def, _ = keyDefault(rulesOf(kinds[0]), key)
		}
		field := v.Field(i)
		field.SetZero()
		if dv := reflect.ValueOf(def); def != nil && dv.Type().ConvertibleTo(field.Type()) {
			field.Set(dv.Convert(field.Type()))
		}
		d.mark["model."+key] = true
	}
}

// training is what the recipe's model trains with: its family's answer
// (family.ModelTraining) for a [model], DDPM on class labels for a kind
// without rules and for a [base], whose process the recipe states.
func (r *Recipe) training() family.ModelTraining {
	if r.Model != nil {
		if rules := rulesOf(r.Model.Kind); rules != nil {
			return rules.ModelTraining()
		}
	}
	return family.ModelTraining{Process: ProcessDDPM}
}

// flowMatchingBase says whether the recipe upcycles a [base] trained with
// flow matching (diffusion.process = "flow_matching"): a
// caption-conditioned teacher, which the pipeline checks the file against.
func (r *Recipe) flowMatchingBase() bool {
	return r.Base != nil && r.Diffusion.Process == ProcessFlowMatching
}

// checkModelRules refuses the [model] keys the family of model.kind does
// not read and reports what its rules refuse (family.ModelRules).
func checkModelRules(p *problems, r *Recipe, written func(string) bool) {
	m := r.Model
	rules := rulesOf(m.Kind)
	if rules == nil {
		return
	}
	for _, k := range familyModelKeys() {
		key := "model." + k
		if reads(rules, k) || !written(key) {
			continue
		}
		if kinds := readerKinds(k); len(kinds) > 0 {
			p.add(key, "found with model.kind = %q, expected it only with model.kind = %s", m.Kind, quoteJoin(kinds))
		} else {
			p.add(key, "found with model.kind = %q, expected it only with a family that reads it (no registered one does)", m.Kind)
		}
	}
	kinds := make([]string, len(r.Stages))
	for i, st := range r.Stages {
		kinds[i] = st.Kind
	}
	for _, pr := range rules.CheckModel(family.ModelRecipe{Kind: m.Kind, Preset: m.Preset, Settings: m.Settings(),
		ClassStd: m.ClassEmbeddingStd, Scaffold: r.Scaffold != nil, StageKinds: kinds, SaveDType: r.Save.DType, Written: written}) {
		if pr.Expected != "" {
			p.bad(pr.Key, pr.Found, "%s", pr.Expected)
		} else {
			p.add(pr.Key, "%s", pr.Msg)
		}
	}
}

// captionKinds are the registered kinds whose models train on captions
// (family.ModelTraining), in kind order.
func captionKinds() []string {
	var kinds []string
	for _, k := range family.Kinds() {
		if rules := rulesOf(k); rules != nil && rules.ModelTraining().Captions {
			kinds = append(kinds, k)
		}
	}
	return kinds
}

// processWords names a diffusion process for people.
func processWords(process string) string {
	if process == ProcessFlowMatching {
		return "flow matching"
	}
	return "DDPM"
}

package pipeline

import (
	"encoding/binary"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/dcdit/dcdit/diffusion/ddpm"
	"github.com/dcdit/dcdit/distill"
	"github.com/dcdit/dcdit/eval"
	"github.com/dcdit/dcdit/loaders/dtype"
	"github.com/dcdit/dcdit/loaders/safetensors"
	"github.com/dcdit/dcdit/recipes"
)

// The recipes the key walk edits, as tables of lines.
var (
	keyWalkUpcycle = []section{
		{"", []string{`name = "walk"`, `seed = 3`}},
		{"[base]", []string{`path = "teacher.safetensors"`}},
		{"[scaffold]", []string{`norm_groups = 8`, `encoder_blocks = 1`, `decoder_blocks = 1`, `encoder_init = "patch"`}},
		{"[scaffold.router]", []string{`groups = 8`, `ratio_batch_size = 1`}},
		{"[data]", []string{`source = "shapes"`, `samples = 4`}},
		{"[[stage]]", []string{`kind = "distill"`, `steps = 2`, `batch_size = 4`, `lr = 1e-3`}},
		{"[[stage]]", []string{`kind = "finetune"`, `steps = 3`, `batch_size = 4`, `lr = 1e-3`, `lr_schedule = "cosine"`,
			`rho = [0.0, 0.5]`, `multi_budget_start = 1`, `router_lr_scale = 5.0`, `ema_decay = 0.5`}},
		{"[eval]", []string{`rho = [0.0, 0.5]`, `held_out = 2`, `samples = 2`, `sampling_steps = 2`, `boundary_map_timesteps = [500]`}},
	}
	keyWalkTeacher = withLines(keyWalkUpcycle, "[data]", `source = "teacher"`, `samples = 4`, `sampling_steps = 2`)
	keyWalkFile    = withLines(keyWalkUpcycle, "[data]", `source = "file"`, `path = "data.safetensors"`)
	keyWalkZImage  = []section{
		{"", []string{`name = "walk"`}},
		{"[model]", []string{`kind = "zimage"`, `depth = 1`, `hidden_size = 32`, `num_heads = 2`, `input_size = 8`, `caption_dim = 8`}},
		{"[data]", []string{`samples = 4`}},
		{"[[stage]]", []string{`kind = "train"`, `steps = 2`, `batch_size = 4`}},
	}
	keyWalkScratch = []section{
		{"", []string{`name = "walk"`}},
		{"[model]", []string{`depth = 1`, `hidden_size = 32`, `num_heads = 2`, `input_size = 8`, `num_classes = 10`}},
		{"[data]", []string{`samples = 4`}},
		{"[[stage]]", []string{`kind = "train"`, `steps = 2`, `batch_size = 4`}},
	}
)

// An edit's expected outcome.
const (
	changes  = "changes"  // the run gets other inputs
	rejected = "rejected" // loading or running the recipe refuses it, naming the key
	embedded = "embedded" // free text, used only as part of the recipe the model embeds
)

// Every documented recipe key is used or refused, never accepted and
// ignored: for each key the recipes package lists (Recipe.Settings), an
// edit either changes what the pipeline hands to the model builder, the
// data, the trainer, the objectives, the evaluation or the saver (the
// footprint), or is refused with the key named. A key added to package
// recipes fails this test until it has an entry here.
func TestEveryRecipeKeyIsUsedOrRefused(t *testing.T) {
	dir := t.TempDir()
	writeTeacher(t, dir)
	os.MkdirAll(filepath.Join(dir, "other"), 0o755)
	writeOtherTeacher(t, filepath.Join(dir, "other"))
	writeKeyedData(t, filepath.Join(dir, "data.safetensors"))
	bases := map[string][]section{"upcycle": keyWalkUpcycle, "teacher": keyWalkTeacher, "file": keyWalkFile, "scratch": keyWalkScratch, "zimage": keyWalkZImage}

	type entry struct {
		value string
		base  string // "": upcycle
		stage int    // the stage a stage key edits (upcycle: 1, the finetune, unless set)
		want  string
	}
	d0 := func(v, want string) entry { return entry{value: v, want: want, stage: 0} }
	e := func(v, want string) entry { return entry{value: v, want: want, stage: 1} }
	m := func(v string) entry { return entry{value: v, base: "scratch", want: changes} }
	table := map[string]entry{
		"name": e(`"other"`, changes), "description": e(`"notes"`, embedded), "seed": e(`4`, changes), "log_every": e(`3`, changes), "device": e(`"cuda"`, changes), "precision": e(`"tf32"`, rejected),
		"base.path": e(`"other/teacher.safetensors"`, changes), "base.num_heads": e(`4`, changes), "base.latent_size": e(`16`, rejected),

		"model.preset": m(`"DiT-S/4"`), "model.depth": m(`2`), "model.hidden_size": m(`64`), "model.num_heads": m(`4`),
		"model.patch_size": m(`4`), "model.in_channels": m(`3`), "model.input_size": m(`16`), "model.num_classes": m(`5`),
		"model.learn_sigma": m(`false`), "model.mlp_ratio": m(`2.0`), "model.class_embedding_std": m(`1.0`),
		"model.kind": {value: `"dit"`, base: "zimage", want: rejected}, "model.refiner_depth": {value: `2`, base: "zimage", want: changes},
		"model.caption_dim": {value: `16`, base: "zimage", want: changes}, "model.seq_multi_of": {value: `16`, base: "zimage", want: changes},
		"diffusion.process": e(`"flow_matching"`, rejected),
		"diffusion.shift":   {value: `2.0`, base: "zimage", want: changes}, "data.captions": {value: `false`, base: "zimage", want: rejected},
		"data.caption_table_seed": {value: `5`, base: "zimage", want: changes},

		"scaffold.target_n": e(`2.0`, changes), "scaffold.encoder_blocks": e(`2`, changes), "scaffold.decoder_blocks": e(`2`, changes),
		"scaffold.width_factor": e(`2`, changes), "scaffold.norm_groups": e(`4`, changes), "scaffold.sigma": e(`2.0`, changes),
		"scaffold.plug_back": e(`"nearest_1d"`, rejected), "scaffold.encoder_init": e(`"official"`, changes),
		"scaffold.backbone_norm": e(`"none"`, rejected), "scaffold.patch_size": e(`2`, changes),
		"scaffold.head": e(`"wide"`, changes), "scaffold.encoder_norm": e(`"none"`, changes),
		"scaffold.residual": e(`"relative"`, changes), "scaffold.latent_skip": e(`true`, changes), "scaffold.cond_norm": e(`true`, changes),
		"scaffold.token_embedder": e(`true`, rejected), "scaffold.dropped_context": e(`true`, changes), "scaffold.chosen_embedding": e(`true`, changes),
		"scaffold.router.kind": e(`"cosine"`, rejected), "scaffold.router.init": e(`"predictability"`, changes), "scaffold.router.drop": e(`"spread"`, changes),
		"scaffold.router.dim_factor": e(`2`, changes), "scaffold.router.groups": e(`4`, changes),
		"scaffold.router.ratio_loss_weight": e(`0.1`, changes), "scaffold.router.ratio_batch_size": e(`2`, changes),

		"diffusion.schedule": e(`"cosine"`, rejected), "diffusion.steps": {value: `2000`, base: "scratch", want: changes},

		"data.source": e(`"teacher"`, changes), "data.path": {value: `"cache.safetensors"`, base: "teacher", want: changes},
		"data.latents_key": {value: `"x"`, base: "file", want: changes}, "data.labels_key": {value: `"y"`, base: "file", want: changes},
		"data.samples": e(`6`, changes), "data.sampling_steps": {value: `3`, base: "teacher", want: changes},
		"data.cfg": {value: `2.0`, base: "teacher", want: changes}, "data.classes": {value: `[1, 2]`, base: "teacher", want: changes}, "data.prompts": e(`"prompts.txt"`, rejected),

		"stage.name": e(`"ft"`, changes), "stage.kind": e(`"train"`, changes), "stage.steps": e(`5`, changes),
		"stage.batch_size": e(`2`, changes), "stage.lr": e(`2e-3`, changes), "stage.lr_schedule": e(`"linear"`, changes),
		"stage.min_lr": e(`1e-4`, changes), "stage.warmup_steps": e(`1`, changes), "stage.loss": d0(`"l2"`, changes),
		"stage.target": d0(`"eps"`, changes), "stage.trainable": e(`["scaffold"]`, changes), "stage.frozen": e(`["router"]`, changes),
		"stage.rho": e(`[0.0, 0.4]`, changes), "stage.multi_budget_start": e(`2`, changes), "stage.dense_fraction": e(`0.25`, changes), "stage.dense_below": e(`500.0`, changes),
		"stage.coarse_from": d0(`800.0`, changes), "stage.coarse_rho": d0(`0.9`, rejected), "stage.lookback": d0(`0.5`, changes), "stage.lookback_twins": d0(`true`, rejected),
		"stage.lookback_spacing":  d0(`4.0`, rejected),
		"stage.ratio_loss_weight": e(`0.1`, changes), "stage.class_dropout": e(`0.3`, changes), "stage.grad_clip": e(`0.5`, changes),
		"stage.router_lr_scale": e(`2.0`, changes), "stage.class_embedder_lr_scale": e(`10.0`, changes), "stage.ema_decay": e(`0.9`, changes), "stage.weight_decay": e(`0.01`, changes),
		"stage.betas": e(`[0.8, 0.99]`, changes), "stage.eps": e(`1e-6`, changes),
		"stage.timestep_weight_cap": d0(`5.0`, changes), "stage.guided_scale": d0(`2.0`, changes), "stage.router_target_weight": d0(`0.5`, changes), "stage.router_targets": d0(`"spread"`, rejected), "stage.router_gate": e(`"kept"`, changes), "stage.p2_gamma": e(`1.0`, changes), "stage.p2_k": e(`2.0`, rejected),
		"stage.dydit_lambda": e(`0.7`, changes), "stage.dydit_weight": e(`2.0`, rejected), "stage.dydit_lr_scale": e(`5.0`, rejected),

		"save.dir": e(`"elsewhere"`, changes), "save.every": e(`3`, changes), "save.keep": e(`2`, changes), "save.dtype": e(`"bf16"`, changes),

		"eval.rho": e(`[0.0, 0.4]`, changes), "eval.lite_cfg": e(`[0.0, 0.8]`, changes), "eval.lite_cfg_scale": e(`1.5`, changes),
		"eval.cfg": e(`1.5`, changes), "eval.dense_below": e(`500.0`, changes), "eval.held_out": e(`3`, changes), "eval.samples": e(`3`, changes),
		"eval.sampling_steps": e(`3`, changes), "eval.boundary_map_timesteps": e(`[300]`, changes), "eval.every": e(`2`, changes),
		"eval.seed": e(`9`, changes), "eval.feature_net": e(`"no-such-net.safetensors"`, rejected),
		"eval.vae": e(`"no-such-vae"`, rejected), "eval.random_router": e(`false`, changes), "eval.spread_random": e(`true`, changes),
		"eval.lookback": e(`true`, changes), "eval.lookback_spacing": e(`4.0`, rejected), "eval.dense_teacher": e(`true`, rejected), "eval.coarse_from": e(`800.0`, changes), "eval.coarse_rho": e(`0.9`, rejected),
	}

	// The documented keys: every setting of the three recipes, stage
	// indices folded.
	index := regexp.MustCompile(`\[\d+\]`)
	keys := map[string]bool{}
	prints := map[string]string{}
	for name, base := range bases {
		r := parseSections(t, dir, base)
		for _, s := range r.Settings() {
			keys[index.ReplaceAllString(s.Key, "")] = true
		}
		fp, err := footprint(t, r)
		if err != nil {
			t.Fatalf("base recipe %s: %v", name, err)
		}
		prints[name] = fp
	}
	for _, key := range slices.Sorted(maps.Keys(keys)) {
		tt, ok := table[key]
		if !ok {
			t.Errorf("%s: a documented key without an entry here: add one showing what it changes, or refuse it", key)
			continue
		}
		t.Run(key, func(t *testing.T) {
			base := tt.base
			if base == "" {
				base = "upcycle"
			}
			display := key
			if rest, ok := strings.CutPrefix(key, "stage."); ok {
				display = fmt.Sprintf("stage[%d].%s", tt.stage, rest)
			}
			text := render(setKey(bases[base], display, tt.value))
			r, err := parse(dir, text)
			var fp string
			if err == nil {
				fp, err = footprint(t, r)
			}
			switch {
			case err != nil && tt.want == rejected:
				if !strings.Contains(err.Error(), display) {
					t.Fatalf("refused without naming %s: %v", display, err)
				}
			case err != nil:
				t.Fatalf("%s = %s refused, want %s: %v", display, tt.value, tt.want, err)
			case tt.want == rejected:
				t.Fatalf("%s = %s accepted, want it refused", display, tt.value)
			case tt.want == changes && fp == prints[base]:
				t.Fatalf("%s = %s accepted and ignored: the run's inputs are the same", display, tt.value)
			case tt.want == embedded && (fp != prints[base] || r.Text != text):
				t.Fatalf("%s: want the recipe text to change and nothing else", display)
			}
		})
	}
}

// footprint is what the pipeline derives from a recipe before it trains,
// through its own functions: the output folder, teacher, model (its
// config and initial weights), data, each stage's trainer settings and
// objective, the evaluation's data and options, and the saved dtype. Two
// recipes with one footprint run alike.
func footprint(t *testing.T, r *recipes.Recipe) (string, error) {
	t.Helper()
	if err := unsupported(r); err != nil {
		return "", err
	}
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	dt, err := saveDType(r.Save.DType)
	if err != nil {
		return "", err
	}
	w("out %s, model stored as %s, log every %d", r.Save.Dir, dt, r.LogEvery) // as Run and stageConfig read them
	w("device %s, precision %s", r.Device, r.Precision)                       // as Run opens the accelerator
	teacher, err := loadBase(r)
	if err != nil {
		return "", err
	}
	w("teacher %s", teacher.identity())
	seed := uint64(r.Seed)
	m, err := buildModel(r, teacher, seed)
	if err != nil {
		return "", err
	}
	w("model %s, %d values, %s", m.describe(), m.params.Len(), digest(m.params.Data))
	if m.dc != nil {
		w("dc %+v", m.dc.Config)
	}
	out := t.TempDir()
	set, err := trainingData(r, teacher, out, seed, func(string, ...any) {})
	if err != nil {
		return "", err
	}
	w("data %s %v %q", digest(set.Latents), set.Labels, set.Metadata["dcdit.generated_by"])
	if r.Data.Source == recipes.SourceTeacher && r.Data.Path != "" {
		w("data cached at %s", r.DataPath()) // as trainingData chooses it
	}
	sched := ddpm.Linear(r.Diffusion.Steps)
	for i := range r.Stages {
		st := &r.Stages[i]
		c := stageConfig(r, st, m, seed+uint64(i))
		var frozen []string
		for _, p := range m.params.List() {
			if c.Frozen(p.Name) {
				frozen = append(frozen, p.Name)
			}
		}
		var groups []string
		for _, g := range c.Groups {
			n := 0
			for _, p := range m.params.List() {
				if g.Match(p.Name) {
					n++
				}
			}
			groups = append(groups, fmt.Sprintf("%s×%g over %d", g.Name, g.Scale, n))
		}
		c.Frozen, c.Groups = nil, nil
		w("stage %d: %+v frozen %v groups %v", i, c, frozen, groups)
		obj, err := m.objective(r, st, teacher, sched)
		if err != nil {
			return "", err
		}
		w("objective %d: %s", i, objectiveFields(obj))
	}
	if m.dc != nil && teacher != nil {
		held, err := evalData(r, set, teacher.rows, seed)
		if err != nil {
			return "", err
		}
		o := evalOptionsOf(r)
		lite := o.Lite
		o.Lite = nil
		w("eval on %d samples %s: %+v lite %+v, every %d", held.N, digest(held.Latents), o, lite, r.Eval.Every) // Run reads eval.every itself
	}
	return b.String(), nil
}

// objectiveFields prints an objective's settings and its plain fields
// (pointers to the model, teacher and schedule left out: the footprint
// covers them).
func objectiveFields(obj distill.Objective) string {
	var parts []string
	if d, ok := obj.(distill.Describer); ok {
		s := d.Settings()
		for _, k := range slices.Sorted(maps.Keys(s)) {
			parts = append(parts, k+"="+s[k])
		}
	}
	v := reflect.ValueOf(obj).Elem()
	for i := range v.NumField() {
		f := v.Field(i)
		if f.Kind() == reflect.Pointer || f.Kind() == reflect.Interface || !v.Type().Field(i).IsExported() {
			continue
		}
		parts = append(parts, fmt.Sprintf("%s=%v", v.Type().Field(i).Name, f.Interface()))
	}
	return strings.Join(parts, " ")
}

// evalOptionsOf calls evalOptions with zero values for any parameter
// beyond the recipe, so that this test does not pin its signature (it
// grows as the evaluation does).
func evalOptionsOf(r *recipes.Recipe) eval.Options {
	f := reflect.ValueOf(evalOptions)
	args := []reflect.Value{reflect.ValueOf(r)}
	for i := 1; i < f.Type().NumIn(); i++ {
		args = append(args, reflect.Zero(f.Type().In(i)))
	}
	return f.Call(args)[0].Interface().(eval.Options)
}

func digest(v []float32) string {
	h := uint64(14695981039346656037)
	for _, x := range dtype.F32Bytes(v) {
		h = (h ^ uint64(x)) * 1099511628211
	}
	return fmt.Sprintf("%016x", h)
}

// section is one table of a recipe: its header ("" for the top level)
// and its lines.
type section struct {
	header string
	lines  []string
}

func withLines(secs []section, header string, lines ...string) []section {
	out := slices.Clone(secs)
	for i := range out {
		if out[i].header == header {
			out[i].lines = lines
		}
	}
	return out
}

// setKey sets a display key ("stage[1].lr", "scaffold.router.groups",
// "seed") to a TOML value, replacing the key's line or adding it, and
// adding its table when the recipe has none.
func setKey(secs []section, key, value string) []section {
	out := make([]section, len(secs))
	for i, s := range secs {
		out[i] = section{s.header, slices.Clone(s.lines)}
	}
	header, name := "", key
	nth := 0
	if i := strings.LastIndex(key, "."); i >= 0 {
		header, name = "["+key[:i]+"]", key[i+1:]
	}
	if rest, ok := strings.CutPrefix(key, "stage["); ok {
		fmt.Sscanf(rest, "%d]", &nth)
		header = "[[stage]]"
	}
	line := name + " = " + value
	for i := range out {
		if out[i].header != header {
			continue
		}
		if nth > 0 {
			nth--
			continue
		}
		for j, l := range out[i].lines {
			if strings.HasPrefix(l, name+" = ") {
				out[i].lines[j] = line
				return out
			}
		}
		out[i].lines = append(out[i].lines, line)
		return out
	}
	return append(out, section{header, []string{line}})
}

func render(secs []section) string {
	var b strings.Builder
	for _, s := range secs {
		if s.header != "" {
			b.WriteString(s.header + "\n")
		}
		b.WriteString(strings.Join(s.lines, "\n") + "\n\n")
	}
	return b.String()
}

func parse(dir, text string) (*recipes.Recipe, error) {
	return recipes.Parse(filepath.Join(dir, "recipe.toml"), text, dir, recipes.LoadOptions{})
}

func parseSections(t *testing.T, dir string, secs []section) *recipes.Recipe {
	t.Helper()
	r, err := parse(dir, render(secs))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// writeKeyedData writes 6 latents of the tiny teacher's shape under two
// pairs of names: latents/labels and x/y, with other values.
func writeKeyedData(t *testing.T, path string) {
	t.Helper()
	rng := rand.New(rand.NewPCG(4, 4))
	var ts []safetensors.WriteTensor
	for _, names := range [][2]string{{"latents", "labels"}, {"x", "y"}} {
		x := make([]float32, 6*4*8*8)
		for i := range x {
			x[i] = float32(rng.NormFloat64())
		}
		y := make([]byte, 8*6)
		for i := range 6 {
			binary.LittleEndian.PutUint64(y[8*i:], uint64(rng.IntN(10)))
		}
		ts = append(ts, safetensors.WriteTensor{Name: names[0], DType: dtype.F32, Shape: []int64{6, 4, 8, 8}, Data: dtype.F32Bytes(x)},
			safetensors.WriteTensor{Name: names[1], DType: dtype.I64, Shape: []int64{6}, Data: y})
	}
	if err := safetensors.Write(path, ts, map[string]string{"dcdit.num_classes": "10"}); err != nil {
		t.Fatal(err)
	}
}

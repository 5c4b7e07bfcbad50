package recipes

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/dcdit/dcdit/datasets/shapes"
	"github.com/dcdit/dcdit/dc"
	"github.com/dcdit/dcdit/diffusion/ddpm"
	"github.com/dcdit/dcdit/diffusion/flowmatch"
	"github.com/dcdit/dcdit/family"
	"github.com/dcdit/dcdit/loaders"
	"github.com/dcdit/dcdit/loaders/arch"
	"github.com/dcdit/dcdit/loaders/dtype"
	"github.com/dcdit/dcdit/loaders/safetensors"
	"github.com/dcdit/dcdit/params"
)

// Plan is everything a recipe will do, decided from the recipe and the
// headers of the files it names (no tensor data is read). It is also the
// schema of `dcdit recipe plan --json`.
type Plan struct {
	Recipe   RecipeInfo `json:"recipe"`
	Settings []Setting  `json:"settings"`
	// Base describes the base checkpoint; nil when training from scratch.
	Base *BaseInfo `json:"base"`
	// Backbone is the transformer's architecture and config (from the
	// base checkpoint's shapes, or [model]).
	Backbone BackboneInfo `json:"backbone"`
	// DC is the scaffold's config; nil for a fixed-patch DiT.
	DC *dc.Config `json:"dc"`
	// MainNetwork is the DC model's transformer (the backbone's blocks
	// under DC-DiT's names); nil for a fixed-patch DiT.
	// It is the family's config (Spec.Settings) of the backbone the DiT's
	// blocks are adopted into (family.Adopter: DC-DiT's main network).
	MainNetwork any          `json:"main_network"`
	Parameters  ParamSummary `json:"parameters"`
	FLOPs       FLOPsInfo    `json:"flops"`
	Data        DataInfo     `json:"data"`
	Stages      []StagePlan  `json:"stages"`
	Warnings    []string     `json:"warnings"`

	// Params lists every parameter of the model being trained, in a
	// stable order, with its group and, for copied ones, its name in the
	// base checkpoint (DiT's original naming).
	Params []Param `json:"-"`

	// costs is the family that prices the base or the model trained from
	// scratch, base its description of the base.
	costs family.BaseCosted
	base  family.Base
	// adopter builds the DC model's backbone from the base, described by
	// mainSpec.
	adopter  family.Adopter
	mainSpec family.Spec
	// idle marks the conv blocks (encoder, then decoder) whose residual
	// branches sampling skips (idleBlocks).
	idle []bool
}

// idleBlocks marks the encoder's conv blocks idle at sampling when they
// are sure to stay as grafted: encoder_init = "patch" starts their
// residual branches at exactly zero (conv2 zero), and no stage trains any
// encoder tensor. Sampling then skips those branches (dc.Model's idle
// conv blocks), and the plan prices them so.
func idleBlocks(r *Recipe, pl *Plan) []bool {
	if pl.DC == nil || r.Scaffold == nil || r.Scaffold.EncoderInit != "patch" {
		return nil
	}
	for _, sp := range pl.Stages {
		for _, g := range sp.TrainableGroups {
			if strings.TrimSuffix(g, " (partly)") == params.GroupEncoder {
				return nil
			}
		}
	}
	idle := make([]bool, pl.DC.EncoderBlocks+pl.DC.DecoderBlocks)
	for i := range pl.DC.EncoderBlocks {
		idle[i] = true
	}
	return idle
}

// MainNetworkSummary is a line naming the DC model's backbone's sizes
// (family.Summarized), or "" for a plan without one or a family that
// gives none.
func (pl *Plan) MainNetworkSummary() string {
	if s, ok := pl.mainSpec.(family.Summarized); ok {
		return s.Summary()
	}
	return ""
}

// RecipeInfo names the recipe and where the run goes.
type RecipeInfo struct {
	File   string `json:"file"`
	Name   string `json:"name"`
	RunDir string `json:"run_dir"`
	Kind   string `json:"kind"` // "upcycle", "train-dc" (DC-DiT from scratch) or "train-dit"
}

// BaseInfo describes the base checkpoint from its headers.
type BaseInfo struct {
	Path       string         `json:"path"`     // as written (or given by --base)
	Resolved   string         `json:"resolved"` // resolved against the recipe's folder
	Format     loaders.Format `json:"format"`
	Layout     arch.Layout    `json:"layout"`
	Tensors    int            `json:"tensors"`
	Bytes      int64          `json:"bytes"`
	Parameters int64          `json:"parameters"`
	Warnings   []string       `json:"warnings"`
}

// BackboneInfo is the transformer the model is built on.
type BackboneInfo struct {
	// Architecture is the base's, in detection's terms, or the family's
	// kind for a model sized by [model].
	Architecture arch.Architecture
	Source       string // "base" or "model"
	// Config is the family's config of the fixed-patch model, as its
	// family prints it (family.ModelPlan).
	Config any
	// ShapesCaptions is set when the base records a shapes caption table
	// (shapes.CaptionTableKey): a caption-conditioned model trained on the
	// shapes captions, whose prompts are a few words long.
	ShapesCaptions bool

	// configKey is the JSON key of Config ("": "config").
	configKey string
	model     family.ModelPlan
}

// Name, Sizes and Details describe the model for people
// (family.ModelPlan).
func (b BackboneInfo) Name() string    { return b.model.Name }
func (b BackboneInfo) Sizes() string   { return b.model.Sizes }
func (b BackboneInfo) Details() string { return b.model.Details }

// MarshalJSON writes {"architecture", "source", "config", …}, the config
// under its family's key (a family printing it elsewhere leaves "config"
// null), and "shapes_captions" when set.
func (b BackboneInfo) MarshalJSON() ([]byte, error) {
	var buf strings.Builder
	field := func(key string, v any) error {
		data, err := json.Marshal(v)
		if err != nil {
			return err
		}
		if buf.Len() > 0 {
			buf.WriteByte(',')
		}
		fmt.Fprintf(&buf, "%q:%s", key, data)
		return nil
	}
	var cfg any
	if b.configKey == "" {
		cfg = b.Config
	}
	if err := errors.Join(field("architecture", b.Architecture), field("source", b.Source), field("config", cfg)); err != nil {
		return nil, err
	}
	if b.configKey != "" {
		if err := field(b.configKey, b.Config); err != nil {
			return nil, err
		}
	}
	if b.ShapesCaptions {
		if err := field("shapes_captions", true); err != nil {
			return nil, err
		}
	}
	return []byte("{" + buf.String() + "}"), nil
}

// Param is one parameter of the model being trained.
type Param struct {
	Name  string `json:"name"`
	Shape []int  `json:"shape"`
	Group string `json:"group"` // its finest group
	// From is the base checkpoint tensor it is copied from (DiT's
	// original naming); empty for a new parameter.
	From string `json:"from,omitempty"`

	// groups are its groups, as the planned model's ParamGroups would
	// answer them; the stages select by them.
	groups []string
	// fromStage is the stage that adds it (a width router: the first
	// stage with dydit_lambda); 0 for the model's own.
	fromStage int
}

// newParam is a parameter of the planned model whose groups are groups.
func newParam(name string, shape []int, groups []string) Param {
	return Param{Name: name, Shape: shape, Group: finestGroup(groups), groups: groups}
}

// Numel is the parameter's element count.
func (p Param) Numel() int64 {
	n := int64(1)
	for _, d := range p.Shape {
		n *= int64(d)
	}
	return n
}

// ParamSummary counts parameters.
type ParamSummary struct {
	Total  int64 `json:"total"`  // the model being trained
	New    int64 `json:"new"`    // initialised fresh
	Copied int64 `json:"copied"` // copied from the base checkpoint
	// Base counts the base checkpoint's parameters (the teacher) and
	// Dropped those of them the DC model does not use (patch embedding,
	// final layer; pos_embed is a fixed table), listed in DroppedNames.
	Base         int64        `json:"base"`
	Dropped      int64        `json:"dropped"`
	DroppedNames []string     `json:"dropped_names"`
	ByGroup      []GroupCount `json:"by_group"`
}

// GroupCount is the size of one finest group.
type GroupCount struct {
	Group  string `json:"group"`
	Params int64  `json:"params"`
	Source string `json:"source"` // "base" (copied) or "new"
}

// FLOPsInfo is the model's compute per image.
type FLOPsInfo struct {
	Convention string `json:"convention"`
	// KeptTokens says how kept-token counts are estimated.
	KeptTokens string `json:"kept_tokens"`
	// Idle says which conv blocks sampling skips the residual branch of
	// (dc's idle conv blocks), when any.
	Idle          string     `json:"idle,omitempty"`
	SamplingSteps int        `json:"sampling_steps"`
	CFG           float64    `json:"cfg"`
	Rows          []FLOPsRow `json:"rows"`
}

// FLOPsRow is the compute of one model at one budget.
type FLOPsRow struct {
	Model string  `json:"model"` // "base", "dc", "dc-lite-cfg", or the kind of a model trained without a scaffold ("dit")
	Rho   float64 `json:"rho"`
	// RhoUncond is the unconditional branch's ρ of a Lite-CFG row.
	RhoUncond *float64 `json:"rho_uncond,omitempty"`
	Tokens    int      `json:"tokens"`      // full grid (DC) or patch tokens (DiT)
	Kept      int      `json:"kept_tokens"` // tokens the transformer sees (conditional branch for Lite-CFG)
	// GFLOPsPerForward is one model evaluation for one image (Lite-CFG:
	// the conditional and unconditional branches together).
	GFLOPsPerForward float64 `json:"gflops_per_forward"`
	// TFLOPsPerImage is the cost of sampling one image with
	// SamplingSteps steps (guided rows count both branches).
	TFLOPsPerImage float64 `json:"tflops_per_image"`
	// RelativeToBase is TFLOPsPerImage over the base model's (0 without
	// a base).
	RelativeToBase float64 `json:"relative_to_base,omitempty"`
	// Parts splits a DC model's forward; nil in a fixed-patch model's
	// row (the base, or a model trained without a scaffold), which has no
	// ρ.
	Parts *dc.FLOPs `json:"parts,omitempty"`
}

// DataInfo describes the training data.
type DataInfo struct {
	Source  string  `json:"source"`
	Path    string  `json:"path,omitempty"` // resolved; the cache file for teacher data
	Samples int     `json:"samples"`
	Shape   []int64 `json:"shape,omitempty"` // latents [N, C, H, W] of a data file
	Labels  string  `json:"labels,omitempty"`
	// GenerationTFLOPs is the teacher's cost of generating the samples.
	GenerationTFLOPs float64 `json:"generation_tflops,omitempty"`
}

// StagePlan is one stage's schedule, parameters, compute and memory.
type StagePlan struct {
	Name             string    `json:"name"`
	Kind             string    `json:"kind"`
	Steps            int       `json:"steps"`
	BatchSize        int       `json:"batch_size"`
	SamplesSeen      int64     `json:"samples_seen"`
	Epochs           float64   `json:"epochs"`
	LR               LRPlan    `json:"lr"`
	Loss             string    `json:"loss"`
	Target           string    `json:"target,omitempty"`
	Rho              []float64 `json:"rho"`
	MultiBudgetStart int       `json:"multi_budget_start"`
	Budgets          string    `json:"budgets"`
	RatioLossWeight  float64   `json:"ratio_loss_weight"`
	Optimizer        string    `json:"optimizer"`
	Trainable        int64     `json:"trainable_params"`
	Frozen           int64     `json:"frozen_params"`
	TrainableGroups  []string  `json:"trainable_groups"`
	FrozenGroups     []string  `json:"frozen_groups"`
	// GFLOPsPerSample is the mean forward cost per sample over the ρ
	// schedule; TFLOPsPerStep ≈ 3 × forward × batch (forward and
	// backward) plus, when distilling, the teacher's forward.
	GFLOPsPerSample float64 `json:"gflops_per_sample"`
	TFLOPsPerStep   float64 `json:"tflops_per_step"`
	PFLOPsTotal     float64 `json:"pflops_total"`
	Memory          Memory  `json:"memory"`
}

// LRPlan is a stage's learning-rate schedule.
type LRPlan struct {
	Peak     float64 `json:"peak"`
	Min      float64 `json:"min"`
	Warmup   int     `json:"warmup_steps"`
	Schedule string  `json:"schedule"`
	Text     string  `json:"text"`
}

// Memory estimates a stage's training memory in bytes (float32).
type Memory struct {
	Weights     int64 `json:"weights"`
	Grads       int64 `json:"grads"`
	Optimizer   int64 `json:"optimizer"`
	EMA         int64 `json:"ema"`
	Teacher     int64 `json:"teacher"`
	Activations int64 `json:"activations"`
	// ActivationsPerSample is Activations / batch, for choosing a
	// micro-batch.
	ActivationsPerSample int64  `json:"activations_per_sample"`
	Total                int64  `json:"total"`
	Formula              string `json:"formula"`
}

// MemoryFormula states how Memory is estimated.
const MemoryFormula = "4 B × (P weights + T grads + 2T AdamW m,v + T EMA when on + P_teacher when distilling) + activations; " +
	"activations ≈ 4 B × batch × [L × (scaffold floats per grid position: conv blocks 2·in+4·inner+2·out, router 6·D/4, ~5·D of residual, de-chunk and norms) " +
	"+ depth × (M × (12·D + 2·mlp) + heads × M²)] at the stage's largest kept count M (ρ = 0), × 2 with lookback_twins; P all parameters, T trainable"

// FLOPsConvention is the counting convention of every FLOPs figure.
const FLOPsConvention = "2 FLOPs per multiply-add of matmuls and convolutions, attention H·Σ M_b²·(4·d_h+3), no elementwise work (the DC-DiT reference counter's)"

// Check loads a recipe and, when it has no problems, plans it from the
// headers of the files it names. Every problem comes back in one *Error.
func Check(path string, opts LoadOptions) (*Recipe, *Plan, error) {
	r, err := Load(path, opts)
	if err != nil {
		return r, nil, err
	}
	pl, err := NewPlan(r)
	return r, pl, err
}

// NewPlan plans a loaded recipe: it reads the base checkpoint's headers
// (and a data file's), builds the model's configuration and parameter
// list, and counts parameters, FLOPs, steps and memory, through the
// family that opens the base or sizes [model] (family.Planned,
// family.BaseCosted). Problems (a base no family opens, sizes the
// scaffold cannot divide, patterns that select nothing, a data file of
// the wrong shape) come back as an *Error.
func NewPlan(r *Recipe) (pl *Plan, err error) {
	p := &problems{file: r.File, lines: r.lines}
	defer func() {
		if v := recover(); v != nil { // a bug here must not take the caller down
			p.add("", "internal error while planning: %v (please report it with the recipe)", v)
			pl, err = nil, p.err()
		}
	}()
	pl = &Plan{Recipe: RecipeInfo{File: r.File, Name: r.Name, RunDir: r.Save.Dir}, Settings: r.Settings(), Warnings: []string{}}
	var m *planned
	switch {
	case r.Base != nil:
		m = planBase(p, r, pl)
		pl.Recipe.Kind = "upcycle"
	case r.Model != nil:
		m = planModelTable(p, r, pl)
		pl.Recipe.Kind = "train-" + r.Model.Kind
		if r.Scaffold != nil {
			pl.Recipe.Kind = "train-dc"
		}
	}
	if m == nil {
		return pl, p.err()
	}
	if m.captioned() {
		if r.Base != nil {
			planCaptioned(p, r, pl, m)
		} else {
			planCaptionedModel(p, r, pl, m)
		}
		return pl, p.err()
	}
	if r.Scaffold != nil {
		pl.DC = dcConfigs(p, r, pl, m)
		if pl.DC == nil {
			return pl, p.err()
		}
	}
	pl.Params = modelParams(pl, m, r.Base != nil, r.Scaffold)
	addWidthRouters(p, r, pl)
	countParams(pl, m, r.Base != nil)
	planData(p, r, pl, m)
	planStages(p, r, pl, m)
	pl.idle = idleBlocks(r, pl)
	planFLOPs(pl, r, m)
	return pl, p.err()
}

// planned is the fixed-patch model a recipe starts from, as its family
// describes it: the base, or the model [model] sizes.
type planned struct {
	family.ModelPlan
	kind string
	cfg  any
	// grid is the latent side the model works on; captionLen the caption
	// length its costs count.
	grid, captionLen int
}

// captioned says whether the model is conditioned on captions rather
// than class labels.
func (m *planned) captioned() bool { return m.Classes == 0 }

// describeModel asks the family f for the plan of its model of config cfg on
// a grid×grid latent; key is the recipe key a problem is reported at
// (an OptionError at its option's key under base.).
func describeModel(p *problems, f family.Family, key string, cfg any, grid, captionLen int) *planned {
	pf, ok := f.(family.Planned)
	if !ok {
		p.add(key, "the %q family does not describe its models for a plan (family.Planned)", f.Kind())
		return nil
	}
	mp, err := pf.PlanModel(cfg, grid, grid, captionLen)
	if err != nil {
		var oe *family.OptionError
		if key == "base.path" && errors.As(err, &oe) {
			p.add("base."+oe.Option, "%v (set base.%s)", err, oe.Option)
		} else {
			p.add(key, "%v", err)
		}
		return nil
	}
	return &planned{ModelPlan: mp, kind: f.Kind(), cfg: cfg, grid: grid, captionLen: captionLen}
}

// planBase reads the base checkpoint's headers, finds the registered
// family that opens it (family.Opener, as family.OpenTeacher chooses)
// and has it describe the model; nil after a problem.
func planBase(p *problems, r *Recipe, pl *Plan) *planned {
	ck, err := loaders.Open(r.BasePath())
	if err != nil {
		p.add("base.path", "cannot read the base checkpoint: %v", err)
		return nil
	}
	defer ck.Close()
	c := family.CandidateOf(r.BasePath(), ck, family.OpenOptions{NumHeads: r.Base.NumHeads})
	rep := c.Report
	info := &BaseInfo{Path: r.Base.Path, Resolved: r.BasePath(), Format: ck.Format, Tensors: len(ck.Tensors), Bytes: ck.TotalBytes()}
	for _, t := range ck.Tensors {
		info.Parameters += t.NumElements()
	}
	info.Layout = rep.Layout
	info.Warnings = append(append([]string{}, ck.Warnings...), rep.Warnings...)
	pl.Base = info
	f, _, err := family.Opener(c)
	if err != nil {
		what := fmt.Sprintf("a %s checkpoint", rep.Architecture)
		switch rep.Architecture {
		case arch.DCDiT:
			what = "a DC checkpoint (already upcycled)"
		case arch.Unknown:
			what = "a checkpoint of no known architecture"
		}
		p.add("base.path", "found %s, expected a base that a registered family (%s) opens as a teacher", what, family.KindList())
		return nil
	}
	b, costs, ok := family.DescribeTeacher(f, c)
	if ok && len(rep.Missing)+len(rep.Mismatched) > 0 && rep.Architecture == b.Architecture {
		p.add("base.path", "the base checkpoint is not a complete %s: %s", b.What, incomplete(rep))
		return nil
	}
	if !ok || b.Config == nil || costs == nil {
		p.add("base.path", "the %q family does not describe the base checkpoint from its headers (family.BaseCosted, family.TeacherDescriber)", f.Kind())
		return nil
	}
	pl.base, pl.costs = b, costs
	grid := b.Grid
	switch {
	case b.AnyGrid && r.Base.LatentSize < 1:
		p.add("base.latent_size", "missing, expected the latent grid side to graft the %s for (it has no fixed resolution: a Z-Image's 128 is 1024² images through its 8× VAE)", b.What)
		return nil
	case b.AnyGrid:
		grid = r.Base.LatentSize
	case r.Base.LatentSize != 0:
		p.bad("base.latent_size", r.Base.LatentSize, "0 for a %s base (its latents are %d×%d, its own)", b.What, b.Grid, b.Grid)
		return nil
	}
	// A base trained on the shapes captions reads a few words; a real
	// caption-conditioned model its family's typical caption.
	_, toy := ck.Metadata[shapes.CaptionTableKey]
	captionLen := b.CaptionLen
	if toy && captionLen > 0 {
		captionLen = toyCaptionLen
	}
	m := describeModel(p, f, "base.path", b.Config, grid, captionLen)
	if m == nil {
		return nil
	}
	if r.Diffusion.Process != m.Process {
		p.add("diffusion.process", "found %q with a %s base, expected %q (the process it was trained with)", r.Diffusion.Process, b.What, m.Process)
	}
	pl.Backbone = BackboneInfo{Architecture: b.Architecture, Source: "base", Config: m.Config, configKey: m.ConfigKey,
		ShapesCaptions: toy && m.captioned(), model: m.ModelPlan}
	return m
}

// incomplete says which expected tensors a detection found missing or
// mis-shaped.
func incomplete(rep *arch.Report) string {
	var parts []string
	if n := len(rep.Missing); n > 0 {
		parts = append(parts, fmt.Sprintf("%d missing (%s)", n, abbreviate(rep.Missing)))
	}
	if n := len(rep.Mismatched); n > 0 {
		var names []string
		for _, m := range rep.Mismatched {
			names = append(names, fmt.Sprintf("%s %v, want %v", m.Name, m.Found, m.Expected))
		}
		parts = append(parts, fmt.Sprintf("%d mis-shaped (%s)", n, abbreviate(names)))
	}
	return strings.Join(parts, "; ")
}

func abbreviate(names []string) string {
	if len(names) <= 4 {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s, … and %d more", strings.Join(names[:4], ", "), len(names)-4)
}

// planModelTable turns [model] into the config of the family model.kind
// names (family.Configurer), which also prices it (family.BaseCosted) and
// describes it (family.Planned); nil after a problem.
func planModelTable(p *problems, r *Recipe, pl *Plan) *planned {
	f, err := family.Lookup(r.Model.Kind)
	if err != nil {
		p.add("model.kind", "%v", err)
		return nil
	}
	c, okC := f.(family.Configurer)
	costs, okB := f.(family.BaseCosted)
	if !okC || !okB {
		p.add("model.kind", "the %q family does not size models from a recipe's [model] and price them (family.Configurer, family.BaseCosted)", r.Model.Kind)
		return nil
	}
	cfg, err := c.ModelConfig(r.Model.Settings())
	if err != nil {
		p.add("model", "%v", err)
		return nil
	}
	pl.costs = costs
	L := r.Model.InputSize
	// A model trained from scratch reads the shapes captions.
	m := describeModel(p, f, "model", cfg, L, toyCaptionLen)
	if m == nil {
		return nil
	}
	if !m.captioned() {
		m.captionLen = 0
	}
	if g, ok := f.(family.GraftSpecer); ok {
		spec, err := g.GraftSpec(cfg, L, L, m.captionLen)
		if err == nil {
			err = spec.Validate()
		}
		if err != nil {
			p.add("model", "%v", err)
			return nil
		}
	}
	pl.Backbone = BackboneInfo{Architecture: arch.Architecture(m.kind), Source: "model", Config: m.Config, configKey: m.ConfigKey, model: m.ModelPlan}
	return m
}

// mainNetwork is the DC model's backbone around the base or [model] m:
// the one a registered family adopts it into (family.Adopter: DC-DiT's
// main network takes a DiT's blocks), else a copy of its own network
// (family.GraftSpecer), for a rows×cols grid; nil after a problem. The
// adopter is nil for a grafted one.
func mainNetwork(p *problems, pl *Plan, m *planned) (family.Adopter, family.Spec) {
	if a, spec, found := family.AdopterOf(m.cfg); found {
		if err := spec.Validate(); err != nil {
			p.add("scaffold", "the DC model's main network: %v", err)
			return nil, nil
		}
		return a, spec
	}
	g, ok := pl.costs.(family.GraftSpecer)
	if !ok {
		p.add("base.path", "no registered family (%s) adopts the %s into a DC model, and its family does not describe its grafts (family.GraftSpecer)", family.KindList(), m.Name)
		return nil, nil
	}
	spec, err := g.GraftSpec(m.cfg, m.grid, m.grid, m.captionLen)
	if err != nil {
		p.add("base.path", "%v", err)
		return nil, nil
	}
	return nil, spec
}

// dcConfigs builds the scaffold's and the main network's configs from the
// backbone as upcycle.Graft does, after checking what the recipe's
// factors must divide (so that a problem names its recipe key).
func dcConfigs(p *problems, r *Recipe, pl *Plan, m *planned) *dc.Config {
	a, spec := mainNetwork(p, pl, m)
	if spec == nil || !scaffoldDivides(p, r.Scaffold, spec.Width()) {
		return nil
	}
	c, err := r.Scaffold.Upcycle().Config(m.InChannels, m.OutChannels, m.grid, m.grid, spec.Width(), spec.CondWidth())
	if err != nil {
		p.add("scaffold", "%v", strings.TrimPrefix(err.Error(), "upcycle: "))
		return nil
	}
	if c.TokenEmbedder && c.Cells() != m.Tokens {
		p.add("scaffold.token_embedder", "starts as the base's patch embedding, which embeds %d patches of the %d×%d grid, but scaffold.patch_size = %d makes %d cells: set patch_size to the base's patch",
			m.Tokens, m.grid, m.grid, c.Patch(), c.Cells())
		return nil
	}
	pl.adopter, pl.mainSpec = a, spec
	if a != nil {
		// A grafted network is the base's own, which Backbone describes.
		pl.MainNetwork = spec.Settings()
	}
	return c
}

// scaffoldDivides checks what the scaffold's factors must divide around a
// backbone of width D, naming the recipe key of each problem.
func scaffoldDivides(p *problems, s *Scaffold, D int) bool {
	ok := true
	if D%s.WidthFactor != 0 {
		p.bad("scaffold.width_factor", s.WidthFactor, "a divisor of the backbone width D = %d", D)
		ok = false
	}
	if D%s.Router.DimFactor != 0 {
		p.bad("scaffold.router.dim_factor", s.Router.DimFactor, "a divisor of the backbone width D = %d", D)
		ok = false
	}
	if !ok {
		return false
	}
	E, R := D/s.WidthFactor, D/s.Router.DimFactor
	if E%s.NormGroups != 0 || D%s.NormGroups != 0 {
		p.bad("scaffold.norm_groups", s.NormGroups, "a divisor of the encoder/decoder width E = D/width_factor = %d and of D = %d", E, D)
		ok = false
	}
	if R%s.Router.Groups != 0 {
		p.bad("scaffold.router.groups", s.Router.Groups, "a divisor of the router width D/dim_factor = %d", R)
		ok = false
	}
	return ok
}

// modelParams lists the parameters of the model being trained: the DC
// model (scaffold plus main network, reference names) or the fixed-patch
// model m. A parameter copied from the base names its tensor there (the
// adopter's, or the grafted network's own name).
func modelParams(pl *Plan, m *planned, fromBase bool, s *Scaffold) []Param {
	var out []Param
	c, main := pl.DC, pl.mainSpec
	if c == nil {
		for _, t := range m.Tensors {
			if t.Fixed {
				continue // a table, not a parameter
			}
			prm := newParam(t.Name, t.Shape, t.Groups)
			if fromBase {
				prm.From = t.Name
			}
			out = append(out, prm)
		}
		return out
	}
	own := map[string]bool{}
	for _, t := range m.Tensors {
		own[t.Name] = true
	}
	shapes := dc.ScaffoldShapes(c)
	for name, sh := range main.Shapes() {
		if s.BackboneNorm == "none" && slices.Contains(main.ParamGroups(name), params.GroupBackboneNorm) {
			continue
		}
		shapes[name] = sh
	}
	names := make([]string, 0, len(shapes))
	for n := range shapes {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		prm := newParam(name, shapes[name], dc.ParamGroups(name, main.ParamGroups))
		switch {
		case !fromBase:
		case pl.adopter != nil:
			prm.From = pl.adopter.AdoptedFrom(name)
		case strings.HasPrefix(name, dc.BackbonePrefix) && own[strings.TrimPrefix(name, dc.BackbonePrefix)]:
			prm.From = strings.TrimPrefix(name, dc.BackbonePrefix)
		}
		out = append(out, prm)
	}
	return out
}

// addWidthRouters adds to a DC model's parameters the width routers the
// first stage with dydit_lambda gives its main network, new from that
// stage on; a main network that takes none refuses the key.
func addWidthRouters(p *problems, r *Recipe, pl *Plan) {
	first := slices.IndexFunc(r.Stages, func(st Stage) bool { return st.DyDiTLambda > 0 })
	if first < 0 || pl.DC == nil {
		return
	}
	g, ok := pl.mainSpec.(family.WidthGatedSpec)
	if !ok {
		p.add(indexKey("stage", first)+".dydit_lambda", "found %v, expected 0: the %s main network takes no width gates (DC-DiT's does)", r.Stages[first].DyDiTLambda, pl.mainSpec.Kind())
		return
	}
	gated, have := g.WithWidthGates(), pl.mainSpec.Shapes()
	shapes := gated.Shapes()
	for _, name := range slices.Sorted(maps.Keys(shapes)) {
		if _, ok := have[name]; ok {
			continue
		}
		prm := newParam(name, shapes[name], dc.ParamGroups(name, gated.ParamGroups))
		prm.fromStage = first
		pl.Params = append(pl.Params, prm)
	}
}

// forward is one forward of a base or model of config cfg over a rows×cols
// latent with captions of captionLen tokens, as its family prices it
// (family.BaseCosted); NaN when the family cannot.
func (pl *Plan) forward(cfg any, rows, cols, captionLen int) float64 {
	if pl.costs == nil {
		return math.NaN()
	}
	c, err := pl.costs.BaseFLOPs(cfg, rows, cols, captionLen)
	if err != nil {
		return math.NaN()
	}
	return c.Forward
}

// samplingFLOPs is a sampling run's cost per image: forward FLOPs times the
// steps, twice with guidance's second branch.
func samplingFLOPs(forward float64, steps int, guided bool) float64 {
	n := float64(steps)
	if guided {
		n *= 2
	}
	return forward * n
}

// groupOrder is the order of finest groups in reports: the groups that
// split a model into disjoint parts, then "other" for a parameter in none
// of them.
func groupOrder() []string {
	return []string{
		params.GroupTimestepEmbedder, params.GroupClassEmbedder, params.GroupLatentEmbedder, params.GroupEncoder,
		params.GroupRouter, params.GroupResidual, params.GroupWidthRouter, params.GroupBackbone, params.GroupBackboneNorm, params.GroupDecoder,
		params.GroupFinalLayer, params.GroupWideHead, params.GroupLatentSkip, params.GroupCondNorm, params.GroupTokenEmbedder, params.GroupDroppedContext, "other",
	}
}

// finestGroup is the first of groupOrder among a parameter's groups.
func finestGroup(groups []string) string {
	for _, g := range groupOrder() {
		if slices.Contains(groups, g) {
			return g
		}
	}
	return "other"
}

func ints(s []int64) []int {
	out := make([]int, len(s))
	for i, d := range s {
		out[i] = int(d)
	}
	return out
}

// countParams counts the model's parameters by source and group and,
// with a base, the base's: those the DC model does not use are the ones it
// does not copy and those it copies into its backbone's patch embedding
// and final layer, which the scaffold's encoder and head replace.
func countParams(pl *Plan, m *planned, fromBase bool) {
	s := &pl.Parameters
	s.DroppedNames = []string{}
	by := map[string]*GroupCount{}
	used := map[string]bool{}
	for _, prm := range pl.Params {
		n := prm.Numel()
		s.Total += n
		src := "new"
		if prm.From != "" {
			src = "base"
			s.Copied += n
			var replaced bool
			if pl.DC != nil {
				own := pl.mainSpec.ParamGroups(prm.Name)
				replaced = slices.Contains(own, params.GroupLatentEmbedder) || slices.Contains(own, params.GroupFinalLayer)
			}
			used[prm.From] = used[prm.From] || !replaced
		} else {
			s.New += n
		}
		g := by[prm.Group]
		if g == nil {
			g = &GroupCount{Group: prm.Group, Source: src}
			by[prm.Group] = g
		}
		g.Params += n
	}
	for _, g := range groupOrder() {
		if c, ok := by[g]; ok {
			s.ByGroup = append(s.ByGroup, *c)
		}
	}
	if !fromBase {
		return
	}
	dropped := map[string]bool{}
	for _, t := range m.Tensors {
		n := Param{Shape: t.Shape}.Numel()
		s.Base += n
		if !used[t.Name] {
			s.Dropped += n
			dropped[strings.SplitN(t.Name, ".", 2)[0]] = true
		}
	}
	for k := range dropped {
		s.DroppedNames = append(s.DroppedNames, k)
	}
	sort.Strings(s.DroppedNames)
}

// keptTokens is the tokens a DC model keeps per image at ρ under the
// planning assumption shared with `dcdit inspect` (dc.AssumedKept): the
// router marks ⌊L/N⌋ boundaries, the ratio loss's target, and tail
// dropping removes ⌊n·ρ⌋ of them.
func keptTokens(c *dc.Config, rho float64) int { return dc.AssumedKept(c.Cells(), c.TargetN, rho) }

// dcForward is the forward cost of a DC model on a batch with these kept
// counts, every conv block's residual branch counted.
func dcForward(c *dc.Config, main family.Spec, kept ...int) dc.FLOPs {
	return dc.ConfigFLOPs(c, main, kept)
}

// sampledForward is dcForward as sampling runs the plan's model: its
// idle conv blocks skipped.
func (pl *Plan) sampledForward(kept ...int) dc.FLOPs {
	return dc.ConfigFLOPsIdle(pl.DC, pl.mainSpec, kept, pl.idle)
}

// denseForward is the cost of a sampling step that keeps every cell of
// batch grids: the scaffold's whole pass, or the backbone and the wide head
// alone with eval.dense_teacher.
func (pl *Plan) denseForward(r *Recipe, batch int) float64 {
	if r.Eval.DenseTeacher {
		return dc.ConfigDenseFLOPs(pl.DC, pl.mainSpec, batch, pl.idle).Total()
	}
	return pl.sampledForward(slices.Repeat([]int{pl.DC.Cells()}, batch)...).Total()
}

func planFLOPs(pl *Plan, r *Recipe, m *planned) {
	steps, cfg := r.Eval.SamplingSteps, r.Eval.CFG
	guided := cfg > 1
	f := &pl.FLOPs
	f.Convention, f.SamplingSteps, f.CFG = FLOPsConvention, steps, cfg
	ditRow := func(model string) FLOPsRow {
		fwd := pl.forward(m.cfg, m.grid, m.grid, m.captionLen)
		return FLOPsRow{Model: model, Tokens: m.Tokens, Kept: m.Tokens, GFLOPsPerForward: fwd / 1e9,
			TFLOPsPerImage: samplingFLOPs(fwd, steps, guided) / 1e12}
	}
	if pl.DC == nil {
		f.Rows = append(f.Rows, ditRow(m.kind))
		return
	}
	if r.Base != nil {
		f.Rows = append(f.Rows, ditRow("base"))
	}
	c := pl.DC
	if slices.Contains(pl.idle, true) {
		f.Idle = `the encoder's conv blocks stay as grafted (encoder_init = "patch", trained by no stage): sampling skips their zero residual branches`
	}
	f.KeptTokens = fmt.Sprintf("assumed: the router marks ⌊L/N⌋ = ⌊%d/%g⌋ = %d boundaries (the ratio loss's target), tail dropping removes ⌊n·ρ⌋", c.Cells(), c.TargetN, keptTokens(c, 0))
	// eval.dense_below runs its steps on every cell; the steps from
	// eval.coarse_from drop at least eval.coarse_rho.
	perImage := stepKinds(r, c, f, steps)
	branches := 1
	if guided {
		branches = 2
	}
	f.Rows = append(f.Rows, pl.dcRows(r, perImage, branches)...)
	if r.Base != nil {
		for i := range f.Rows {
			f.Rows[i].RelativeToBase = f.Rows[i].TFLOPsPerImage / f.Rows[0].TFLOPsPerImage
		}
	}
}

// dcRows are the DC model's FLOPs rows, one per eval.rho and the
// Lite-CFG pair's, each run costed by perImage (stepKinds) over branches.
func (pl *Plan) dcRows(r *Recipe, perImage func(fwd, coarseFwd, denseFwd float64, branches int) float64, branches int) []FLOPsRow {
	c, cr := pl.DC, r.Eval.CoarseRho
	var rows []FLOPsRow
	denseOne := pl.denseForward(r, 1)
	for _, rho := range r.Eval.Rho {
		k := keptTokens(c, rho)
		parts := pl.sampledForward(k)
		fwd := parts.Total()
		coarseFwd := pl.sampledForward(keptTokens(c, coarseRho(rho, cr))).Total()
		rows = append(rows, FLOPsRow{Model: "dc", Rho: rho, Tokens: c.Cells(), Kept: k, GFLOPsPerForward: fwd / 1e9,
			TFLOPsPerImage: perImage(fwd, coarseFwd, denseOne, branches) / 1e12, Parts: &parts})
	}
	if len(r.Eval.LiteCFG) == 2 {
		rc, ru := r.Eval.LiteCFG[0], r.Eval.LiteCFG[1]
		parts := pl.sampledForward(keptTokens(c, rc), keptTokens(c, ru))
		fwd := parts.Total()
		coarseFwd := pl.sampledForward(keptTokens(c, coarseRho(rc, cr)), keptTokens(c, coarseRho(ru, cr))).Total()
		rows = append(rows, FLOPsRow{Model: "dc-lite-cfg", Rho: rc, RhoUncond: &ru, Tokens: c.Cells(), Kept: keptTokens(c, rc),
			GFLOPsPerForward: fwd / 1e9, TFLOPsPerImage: perImage(fwd, coarseFwd, pl.denseForward(r, 2), 1) / 1e12, Parts: &parts})
	}
	return rows
}

// stepKinds counts an evaluation's dense steps (below eval.dense_below:
// every cell kept) and coarse ones (from eval.coarse_from: at least
// eval.coarse_rho dropped), says so on f's kept-token line, and returns
// what a run costs with fwd at its routed steps, coarseFwd at the coarse
// ones and denseFwd at the dense ones, in each of branches.
func stepKinds(r *Recipe, c *dc.Config, f *FLOPsInfo, steps int) func(fwd, coarseFwd, denseFwd float64, branches int) float64 {
	dense, coarse := 0, 0
	if r.Eval.DenseBelow > 0 || r.Eval.CoarseFrom > 0 {
		for _, t := range samplingTimesteps(r, steps) {
			switch {
			case t < r.Eval.DenseBelow:
				dense++
			case r.Eval.CoarseFrom > 0 && t >= r.Eval.CoarseFrom:
				coarse++
			}
		}
	}
	if r.Eval.DenseBelow > 0 {
		f.KeptTokens += fmt.Sprintf("; the %d of %d steps below t = %g (eval.dense_below) keep all %d", dense, steps, r.Eval.DenseBelow, c.Cells())
		if r.Eval.DenseTeacher {
			f.KeptTokens += " through the backbone and the wide head alone (eval.dense_teacher)"
		}
	}
	if coarse > 0 {
		f.KeptTokens += fmt.Sprintf("; the %d from t = %g (eval.coarse_from) drop at least ρ = %g", coarse, r.Eval.CoarseFrom, r.Eval.CoarseRho)
	}
	return func(fwd, coarseFwd, denseFwd float64, branches int) float64 {
		return (float64(steps-dense-coarse)*fwd + float64(coarse)*coarseFwd + float64(dense)*denseFwd) * float64(branches)
	}
}

// samplingTimesteps are the timesteps an evaluation of steps steps
// samples at, on the scale of eval.dense_below: DDPM's respaced
// timesteps, flow matching's σ·T of its sampling schedule (nil where the
// diffusion settings give none; their own checks say why).
func samplingTimesteps(r *Recipe, steps int) []float64 {
	var ts []float64
	if r.Diffusion.Process == ProcessFlowMatching {
		sched, err := flowmatch.Config{NumTrainTimesteps: r.Diffusion.Steps, Shift: r.Diffusion.Shift}.Schedule(flowmatch.Tongyi, steps)
		if err != nil {
			return nil
		}
		for _, t := range sched.Timesteps {
			ts = append(ts, float64(t))
		}
		return ts
	}
	its, err := ddpm.SpaceTimesteps(r.Diffusion.Steps, strconv.Itoa(steps))
	if err != nil {
		return nil
	}
	for _, t := range its {
		ts = append(ts, float64(t))
	}
	return ts
}

// coarseRho is the drop fraction of a coarse step in a row at ρ
// (dc.Schedule): at least coarse in a row with a budget, 0 at ρ 0.
func coarseRho(rho, coarse float64) float64 {
	if rho > 0 {
		return max(rho, coarse)
	}
	return 0
}

// planData checks a data file's header and sizes the data.
func planData(p *problems, r *Recipe, pl *Plan, m *planned) {
	d := &pl.Data
	d.Source, d.Path, d.Samples = r.Data.Source, r.DataPath(), r.Data.Samples
	for i, c := range r.Data.Classes {
		if c >= m.Classes {
			p.bad(indexKey("data.classes", i), c, "a class label below the model's %d classes", m.Classes)
		}
	}
	switch r.Data.Source {
	case SourceTeacher:
		fwd := pl.forward(m.cfg, m.grid, m.grid, m.captionLen)
		d.GenerationTFLOPs = samplingFLOPs(fwd, r.Data.SamplingSteps, r.Data.CFG > 1) * float64(r.Data.Samples) / 1e12
	case SourceFile:
		f, err := safetensors.Open(d.Path)
		if err != nil {
			p.add("data.path", "cannot read the data file: %v", err)
			return
		}
		defer f.Close()
		var lat *safetensors.TensorInfo
		var labels *safetensors.TensorInfo
		for i, t := range f.Tensors() {
			switch t.Name {
			case r.Data.LatentsKey:
				lat = &f.Tensors()[i]
			case r.Data.LabelsKey:
				labels = &f.Tensors()[i]
			}
		}
		if lat == nil {
			p.add("data.latents_key", "the data file %s has no tensor %q", d.Path, r.Data.LatentsKey)
			return
		}
		want := []int64{-1, int64(m.InChannels), int64(m.grid), int64(m.grid)}
		if len(lat.Shape) != 4 || lat.Shape[1] != want[1] || lat.Shape[2] != want[2] || lat.Shape[3] != want[3] {
			p.add("data.latents_key", "tensor %q of %s has shape %v, expected [N, %d, %d, %d] for the model", lat.Name, d.Path, lat.Shape, want[1], want[2], want[3])
			return
		}
		d.Shape, d.Samples = lat.Shape, int(lat.Shape[0])
		switch {
		case labels != nil:
			isInt := slices.Contains([]dtype.DType{dtype.I64, dtype.I32, dtype.I16, dtype.I8, dtype.U8, dtype.U16, dtype.U32, dtype.U64}, labels.DType)
			if len(labels.Shape) != 1 || labels.Shape[0] != lat.Shape[0] || !isInt {
				p.add("data.labels_key", "tensor %q of %s is %s %v, expected integer labels [%d]", labels.Name, d.Path, labels.DType, labels.Shape, lat.Shape[0])
				return
			}
			d.Labels = fmt.Sprintf("tensor %q", labels.Name)
		case f.Metadata()["dcdit.labels"] != "":
			d.Labels = "metadata dcdit.labels"
		default:
			p.add("data.labels_key", "the data file %s has neither a tensor %q nor metadata dcdit.labels", d.Path, r.Data.LabelsKey)
		}
	}
}

func planStages(p *problems, r *Recipe, pl *Plan, m *planned) {
	isDC := pl.DC != nil
	var teacherFwd float64
	if r.Base != nil {
		teacherFwd = pl.forward(m.cfg, m.grid, m.grid, m.captionLen)
	}
	for i := range r.Stages {
		st := &r.Stages[i]
		sp := newStagePlan(p, pl, i, st, isDC)

		sp.setCompute(st, meanForward(pl, m, st, r.Diffusion.Steps), teacherFwd)
		sp.Memory = memoryWith(pl, st, sp.Trainable, activationFloats(pl, m, st.Rho[0], 0))
		pl.Stages = append(pl.Stages, sp)
	}
}

// newStagePlan plans what stage i trains — its schedule, budgets,
// optimiser and the parameters its trainable and frozen lists select
// (every entry must select something; the width routers of a stage with
// dydit_lambda whatever they say) — for any backbone.
func newStagePlan(p *problems, pl *Plan, i int, st *Stage, isDC bool) StagePlan {
	key := indexKey("stage", i)
	sp := StagePlan{Name: st.Name, Kind: st.Kind, Steps: st.Steps, BatchSize: st.BatchSize,
		SamplesSeen: int64(st.Steps) * int64(st.BatchSize), Loss: st.Loss, Target: st.Target,
		Rho: st.Rho, MultiBudgetStart: st.MultiBudgetStart, RatioLossWeight: st.RatioLossWeight,
		TrainableGroups: []string{}, FrozenGroups: []string{}}
	if pl.Data.Samples > 0 {
		sp.Epochs = float64(sp.SamplesSeen) / float64(pl.Data.Samples)
	}
	sp.LR = lrPlan(st)
	sp.Budgets = budgets(st, isDC)
	sp.Optimizer = fmt.Sprintf("AdamW β=(%g, %g) ε=%g, weight decay %g, grad clip %s, EMA %s",
		st.Betas[0], st.Betas[1], st.Eps, st.WeightDecay, offOr(st.GradClip), offOr(st.EMADecay))

	// Which parameters train; every entry must select something.
	for j, sel := range st.Trainable {
		if !selectsAny(sel, pl.Params) {
			p.add(indexKey(key+".trainable", j), "%q selects no parameter of this model", sel)
		}
	}
	for j, sel := range st.Frozen {
		if !selectsAny(sel, pl.Params) {
			p.add(indexKey(key+".frozen", j), "%q selects no parameter of this model", sel)
		}
	}
	trainG, frozenG := map[string]bool{}, map[string]bool{}
	for _, prm := range pl.Params {
		if prm.fromStage > i {
			continue
		}
		if st.Trains(prm.Name, prm.groups) || (st.DyDiTLambda > 0 && params.InGroup(params.GroupWidthRouter, prm.groups)) {
			sp.Trainable += prm.Numel()
			trainG[prm.Group] = true
		} else {
			sp.Frozen += prm.Numel()
			frozenG[prm.Group] = true
		}
	}
	for _, g := range groupOrder() {
		switch {
		case trainG[g] && frozenG[g]:
			sp.TrainableGroups = append(sp.TrainableGroups, g+" (partly)")
			sp.FrozenGroups = append(sp.FrozenGroups, g+" (partly)")
		case trainG[g]:
			sp.TrainableGroups = append(sp.TrainableGroups, g)
		case frozenG[g]:
			sp.FrozenGroups = append(sp.FrozenGroups, g)
		}
	}
	if sp.Trainable == 0 {
		p.add(key+".trainable", "selects no trainable parameter once frozen is applied (trainable %v, frozen %v)", st.Trainable, st.Frozen)
	}
	return sp
}

// setCompute sets a stage's compute from its mean forward cost per
// sample over the ρ schedule and, when distilling, the teacher's.
func (sp *StagePlan) setCompute(st *Stage, fwd, teacherFwd float64) {
	sp.GFLOPsPerSample = fwd / 1e9
	step := 3 * fwd * float64(st.BatchSize)
	if st.Kind == KindDistill {
		step += teacherFwd * float64(st.BatchSize)
	}
	sp.TFLOPsPerStep = step / 1e12
	sp.PFLOPsTotal = step * float64(st.Steps) / 1e15
}

func selectsAny(sel string, ps []Param) bool {
	for _, prm := range ps {
		if matches(sel, prm.Name, prm.groups) {
			return true
		}
	}
	return false
}

func offOr(v float64) string {
	if v == 0 {
		return "off"
	}
	return fmt.Sprintf("%g", v)
}

func lrPlan(st *Stage) LRPlan {
	l := LRPlan{Peak: st.LR, Min: st.MinLR, Warmup: st.WarmupSteps, Schedule: st.LRSchedule}
	var parts []string
	if st.WarmupSteps > 0 {
		parts = append(parts, fmt.Sprintf("linear warm-up 0→%g over %d steps", st.LR, st.WarmupSteps))
	}
	switch st.LRSchedule {
	case ScheduleConstant:
		parts = append(parts, fmt.Sprintf("constant %g", st.LR))
	default:
		parts = append(parts, fmt.Sprintf("%s decay %g→%g by step %d", st.LRSchedule, st.LR, st.MinLR, st.Steps))
	}
	l.Text = strings.Join(parts, ", then ")
	return l
}

func budgets(st *Stage, isDC bool) string {
	if !isDC {
		return "fixed patches"
	}
	if len(st.Rho) == 1 {
		return fmt.Sprintf("ρ = %g throughout", st.Rho[0])
	}
	set := make([]string, len(st.Rho))
	for i, x := range st.Rho {
		set[i] = fmt.Sprintf("%g", x)
	}
	s := fmt.Sprintf("ρ drawn uniformly from {%s} per step", strings.Join(set, ", "))
	if st.DenseFraction > 0 {
		s = fmt.Sprintf("%s, or every cell kept on %g%% of the steps", s, 100*st.DenseFraction)
	}
	if st.DenseBelow > 0 {
		s = fmt.Sprintf("%s; every cell kept below t = %g", s, st.DenseBelow)
	}
	if st.CoarseFrom > 0 {
		s = fmt.Sprintf("%s; a budget drops at least ρ = %g from t = %g", s, st.CoarseRho, st.CoarseFrom)
	}
	switch {
	case st.Lookback >= 1:
		s += "; every budget keeps the cells ranked on the teacher's clean estimate"
	case st.Lookback > 0:
		s = fmt.Sprintf("%s; a share %g of the budgets keeps the cells ranked on the teacher's clean estimate", s, st.Lookback)
	}
	if st.Lookback > 0 && st.LookbackTwins {
		s += ", each with a twin on the router's own cells"
	}
	if st.MultiBudgetStart > 0 {
		s = fmt.Sprintf("ρ = 0 for steps 1–%d, then %s", st.MultiBudgetStart, s)
	}
	if st.DyDiTLambda > 0 {
		s = fmt.Sprintf("%s; the main network's width gates toward %g of its blocks' FLOPs (DyDiT, weight %g)", s, st.DyDiTLambda, st.DyDiTWeight)
	}
	return s
}

// meanForward is a stage's mean forward cost per sample over its ρ
// schedule.
func meanForward(pl *Plan, m *planned, st *Stage, diffusionSteps int) float64 {
	if pl.DC == nil {
		return pl.forward(m.cfg, m.grid, m.grid, m.captionLen)
	}
	at := func(rho float64) float64 { return dcForward(pl.DC, pl.mainSpec, keptTokens(pl.DC, rho)).Total() }
	dense := dcForward(pl.DC, pl.mainSpec, pl.DC.Cells()).Total()
	// Timesteps are drawn uniformly, so a share dense_below/steps of the
	// samples keeps every cell whatever the step's ρ.
	below := min(st.DenseBelow/float64(diffusionSteps), 1)
	// and a share of them at or above coarse_from drops at least coarse_rho.
	coarse := 0.0
	if st.CoarseFrom > 0 {
		coarse = max(1-st.CoarseFrom/float64(diffusionSteps), 0)
	}
	// lookback_twins runs each of lookback's samples (a share of the
	// routed samples with a budget) a second time.
	twins := 0.0
	if st.LookbackTwins {
		twins = st.Lookback
	}
	mix := func(rho float64) float64 {
		sparse := at(rho)
		noisy := sparse
		if rho > 0 && coarse > 0 {
			noisy = at(max(rho, st.CoarseRho))
		}
		routed := coarse*noisy + (1-below-coarse)*sparse
		if rho > 0 {
			routed *= 1 + twins
		}
		return below*dense + routed
	}
	var mean float64
	for _, rho := range st.Rho {
		mean += mix(rho)
	}
	mean = st.DenseFraction*dense + (1-st.DenseFraction)*mean/float64(len(st.Rho))
	warm := float64(min(st.MultiBudgetStart, st.Steps))
	if len(st.Rho) == 1 && st.DenseFraction == 0 {
		warm = 0
	}
	return (warm*mix(0) + (float64(st.Steps)-warm)*mean) / float64(st.Steps)
}

// memoryWith is memory given one sample's activation floats.
func memoryWith(pl *Plan, st *Stage, trainable, activations int64) Memory {
	const f32 = 4
	m := Memory{Formula: MemoryFormula}
	m.Weights = f32 * pl.Parameters.Total
	m.Grads = f32 * trainable
	m.Optimizer = 2 * f32 * trainable
	if st.EMADecay > 0 {
		m.EMA = f32 * trainable
	}
	if st.Kind == KindDistill {
		m.Teacher = f32 * pl.Parameters.Base
	}
	m.ActivationsPerSample = f32 * activations
	m.Activations = int64(st.BatchSize) * m.ActivationsPerSample
	if st.LookbackTwins {
		// A step whose every sample is routed and drawn to lookback
		// twins them all.
		m.Activations *= 2
	}
	m.Total = m.Weights + m.Grads + m.Optimizer + m.EMA + m.Teacher + m.Activations
	return m
}

// activationFloats estimates the float32 values one sample keeps for the
// backward pass (see MemoryFormula): the fixed-patch model's, as its
// family counts them, or the DC model's, the scaffold per grid position
// and the backbone over the cells kept at ρ with captions of captionLen
// tokens (family.ActivationCounted, else family.GenericActivations).
func activationFloats(pl *Plan, m *planned, rho float64, captionLen int) int64 {
	if pl.DC == nil {
		if m.Activations > 0 {
			return m.Activations
		}
		g, ok := pl.costs.(family.GraftSpecer)
		if !ok {
			return 0
		}
		spec, err := g.GraftSpec(m.cfg, m.grid, m.grid, m.captionLen)
		if err != nil {
			return 0
		}
		return family.GenericActivations(spec, m.Tokens)
	}
	c := pl.DC
	M := keptTokens(c, rho)
	backbone := family.GenericActivations(pl.mainSpec, M)
	if a, ok := pl.mainSpec.(family.ActivationCounted); ok {
		backbone = a.ActivationFloats(M, captionLen)
	}
	return int64(c.Cells())*scaffoldFloats(c) + backbone
}

// scaffoldFloats is the float32 values the scaffold keeps per grid
// position for the backward pass (see MemoryFormula).
func scaffoldFloats(c *dc.Config) int64 {
	D, E, R := int64(c.ModelDim), int64(c.EncDecDim), int64(c.RouterDim)
	var perPos int64 = E // latent embedder
	for _, w := range c.ConvWidths() {
		in, out := int64(w[0]), int64(w[1])
		inner := min(in, out)
		perPos += 2*in + 4*inner + 2*out
	}
	perPos += 6*R + 1 // router
	perPos += 5 * D   // encoder norm, residual, plug-back, STE product, sum
	perPos += 3*E + int64(c.CellOut())
	if c.WideHead {
		perPos += 3*D + int64(c.CellOut())
	}
	return perPos
}

package dit

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/dcdit/dcdit/family"
	"github.com/dcdit/dcdit/loaders"
	"github.com/dcdit/dcdit/loaders/arch"
	"github.com/dcdit/dcdit/loaders/dtype"
	"github.com/dcdit/dcdit/posembed"
)

func init() { family.Register(Family{}) }

var _ family.BaseCosted = Family{}

// Family is DiT's model family (kind "dit"): a pretrained DiT used as a
// DC backbone under its own tensor names.
type Family struct{}

// Kind returns Kind.
func (Family) Kind() string { return Kind }

// Describe names the family for listings.
func (Family) Describe() string {
	return "DiT (Peebles & Xie): class-conditional, adaLN-Zero blocks, 2-D sin-cos positions, DDPM"
}

// ModelName is "DiT".
func (Family) ModelName() string { return "DiT" }

// DecodeSpec reads {"config": arch.DiTConfig} strictly.
func (Family) DecodeSpec(data []byte) (family.Spec, error) {
	return family.DecodeInto(data, func(s Spec) bool { return s.Config != nil })
}

// Spec is a DiT backbone's description in a DC checkpoint: its config.
// Its tensors are the model's own names but pos_embed (the fixed sin-cos
// table, recomputed) under arch.DCBackbonePrefix.
type Spec struct {
	Config *arch.DiTConfig `json:"config"`
}

// MarshalJSON writes {"config": ...}.
func (s Spec) MarshalJSON() ([]byte, error) {
	if s.Config == nil {
		return nil, errors.New("dit backbone without a config")
	}
	return json.Marshal(struct {
		Config *arch.DiTConfig `json:"config"`
	}{s.Config})
}

// Kind returns Kind.
func (Spec) Kind() string { return Kind }

// Settings returns the *arch.DiTConfig.
func (s Spec) Settings() any { return s.Config }

// Width is the hidden size.
func (s Spec) Width() int { return s.Config.HiddenSize }

// CondWidth is the hidden size (t_embed + y_embed).
func (s Spec) CondWidth() int { return s.Config.HiddenSize }

// Validate checks the config and bounds every size it states.
func (s Spec) Validate() error {
	c := s.Config
	if c == nil {
		return errors.New("dit backbone without a config")
	}
	if err := family.CheckBounds(
		family.Bound{Name: "backbone hidden_size", V: c.HiddenSize, Max: family.MaxWidth},
		family.Bound{Name: "backbone depth", V: c.Depth, Max: family.MaxBlocks},
		family.Bound{Name: "backbone num_heads", V: c.NumHeads, Max: family.MaxWidth},
		family.Bound{Name: "backbone frequency_embedding_size", V: c.FrequencySize, Max: family.MaxWidth},
		family.Bound{Name: "backbone num_classes", V: c.NumClasses, Max: family.MaxClasses},
		family.Bound{Name: "backbone patch_size", V: c.PatchSize, Max: family.MaxGridSide},
		family.Bound{Name: "backbone in_channels", V: c.InChannels, Max: family.MaxChannels},
		family.Bound{Name: "backbone input_size", V: c.InputSize, Max: family.MaxGridSide},
	); err != nil {
		return err
	}
	if !(c.MLPRatio > 0 && c.MLPRatio*float64(c.HiddenSize) <= family.MaxMLP) {
		return fmt.Errorf("backbone mlp_ratio = %v at hidden_size %d, want an MLP width of 1 … %d", c.MLPRatio, c.HiddenSize, family.MaxMLP)
	}
	if err := c.Validate(); err != nil {
		return fmt.Errorf("backbone config: %w", err)
	}
	if g := c.InputSize / c.PatchSize; g*g*c.HiddenSize > family.MaxActivations {
		return fmt.Errorf("backbone config: a %d×%d patch grid at hidden_size %d: a position table of %d values, want at most %d", g, g, c.HiddenSize, g*g*c.HiddenSize, family.MaxActivations)
	}
	return nil
}

// Conditioning is class labels.
func (s Spec) Conditioning() family.Conditioning {
	return family.Conditioning{Classes: s.Config.NumClasses}
}

// Process is DDPM.
func (Spec) Process() string { return family.ProcessDDPM }

// Blocks is the depth's numbered blocks.
func (s Spec) Blocks() []family.Blocks {
	return []family.Blocks{{What: "backbone depth", Prefix: arch.DCBackbonePrefix + "blocks.", Count: s.Config.Depth}}
}

// Shapes lists DiT's tensors in the original naming under
// arch.DCBackbonePrefix, without pos_embed.
func (s Spec) Shapes() map[string][]int {
	return family.PrefixedShapes(arch.ExpectedDiT(s.Config, arch.Original), arch.DCBackbonePrefix, "pos_embed")
}

// ParamGroups returns the groups of a tensor Shapes lists, by its stored
// name (ParamGroups of DiT's own name); nil for another name.
func (s Spec) ParamGroups(name string) []string {
	if _, ok := s.Shapes()[name]; !ok {
		return nil
	}
	return ParamGroups(strings.TrimPrefix(name, arch.DCBackbonePrefix))
}

// Build makes the DiT from its stored tensors, recomputing pos_embed.
func (s Spec) Build(ts map[string]loaders.Dense) (family.Backbone, error) {
	own := map[string]*loaders.Dense{}
	for name := range s.Shapes() {
		t, ok := ts[name]
		if !ok {
			return nil, fmt.Errorf("backbone tensor %q missing", name)
		}
		own[name[len(arch.DCBackbonePrefix):]] = &loaders.Dense{Shape: t.Shape, Data: t.Data}
	}
	c := s.Config
	g := c.InputSize / c.PatchSize
	pos := make([]float32, g*g*c.HiddenSize)
	posembed.SinCosGrid(pos, g, c.HiddenSize)
	own["pos_embed"] = &loaders.Dense{Shape: []int{1, g * g, c.HiddenSize}, Data: pos}
	model, err := New(&Weights{Config: c, Params: own})
	if err != nil {
		return nil, fmt.Errorf("backbone: %w", err)
	}
	model.PrefixNames(arch.DCBackbonePrefix)
	return model, nil
}

// FLOPs counts what Model.FLOPs counts, from the config.
func (s Spec) FLOPs(lengths []int) float64 { return (&Model{Config: s.Config}).FLOPs(lengths) }

// Opens reports whether detection found a DiT.
func (Family) Opens(c family.Candidate) bool { return c.Report.Architecture == arch.DiT }

// OpenTeacher loads a DiT checkpoint, frozen, validating its config (the
// head count may come from opts or the file's metadata rather than the
// weights).
func (Family) OpenTeacher(path string, opts family.OpenOptions) (family.Teacher, []string, error) {
	w, err := Load(path, LoadOptions{NumHeads: opts.NumHeads})
	if err != nil {
		return nil, nil, err
	}
	if err := w.Config.Validate(); err != nil {
		return nil, nil, fmt.Errorf("dit: %s: %w", path, err)
	}
	var warnings []string
	for _, msg := range w.Warnings {
		// The learned-sigma note describes the layout the sampler expects.
		if !strings.HasPrefix(msg, "learned sigma:") {
			warnings = append(warnings, msg)
		}
	}
	m, err := New(w)
	if err != nil {
		return nil, nil, err
	}
	m.Params.SetRequiresGrad(false)
	return Teacher{Model: m}, warnings, nil
}

const (
	// samplingSteps is DiT's reference sampler's DDPM steps.
	samplingSteps = 250
	// presetGrid is the latent side presets are priced at (256 px).
	presetGrid = 32
)

// Presets lists DiT's models.py sizes (arch.DiTPresets) on a 32×32
// latent, with heads replacing their head count when positive.
func (Family) Presets(heads int) []family.Preset {
	out := make([]family.Preset, 0, len(arch.DiTPresets))
	for _, p := range arch.DiTPresets {
		c, err := PresetConfig(p.Name, presetGrid)
		if err != nil {
			continue // every preset's patch divides presetGrid
		}
		if heads > 0 {
			c.NumHeads = heads
		}
		b := base(c)
		out = append(out, family.Preset{Name: p.Name, Base: &b})
	}
	return out
}

// Steps is the 250 DDPM steps of DiT's reference sampler.
func (Family) Steps() int { return samplingSteps }

// Base describes a DiT checkpoint detection read, at its own latent size.
func (Family) Base(rep *arch.Report) (family.Base, bool) {
	if rep.Architecture != arch.DiT {
		return family.Base{}, false
	}
	c, ok := rep.Config.(*arch.DiTConfig)
	if !ok {
		return family.Base{Architecture: arch.DiT, What: "fixed-patch DiT"}, true
	}
	b := base(c)
	for _, w := range rep.Warnings {
		// The learned-sigma and naming notes describe the layout, not a
		// problem.
		if !strings.HasPrefix(w, "learned sigma:") && !strings.HasPrefix(w, "diffusers naming") {
			b.Warnings = append(b.Warnings, w)
		}
	}
	return b, true
}

func base(c *arch.DiTConfig) family.Base {
	return family.Base{Config: c, Architecture: arch.DiT, What: "fixed-patch DiT", Preset: c.Preset,
		Patch: c.PatchSize, Grid: c.InputSize, Steps: samplingSteps}
}

// BaseFLOPs counts ForwardFLOPs of an *arch.DiTConfig on a rows×rows
// latent (DiT takes square latents only).
func (Family) BaseFLOPs(cfg any, rows, cols, _ int) (family.Cost, error) {
	c0, ok := cfg.(*arch.DiTConfig)
	if !ok {
		return family.Cost{}, fmt.Errorf("dit: a %T is not a DiT config", cfg)
	}
	if rows != cols || rows%c0.PatchSize != 0 {
		return family.Cost{}, fmt.Errorf("dit: a %d×%d latent, want a square one whose side is a multiple of the patch size %d", rows, cols, c0.PatchSize)
	}
	c := *c0
	c.InputSize = rows
	f := ForwardFLOPs(&c, c.NumTokens())
	return family.Cost{Config: &c, Tokens: c.NumTokens(), Forward: f.Total(),
		Parts:      []family.Part{{Name: "embed", FLOPs: f.Embed}, {Name: "blocks", FLOPs: f.Blocks}, {Name: "attention", FLOPs: f.Attention}, {Name: "final", FLOPs: f.Final}},
		Convention: "2 per multiply-add of matmuls and convolutions, plus attention H·L²·(4·d_h+3); per image"}, nil
}

var _ family.Initializer = Family{}

// InitModel initialises a DiT of config cfg (*arch.DiTConfig) with DiT's
// initialisation (InitWith).
func (Family) InitModel(cfg any, opts family.InitOptions) (family.Model, error) {
	c, ok := cfg.(*arch.DiTConfig)
	if !ok || c == nil {
		return nil, fmt.Errorf("dit: a DiT is initialised from an *arch.DiTConfig, got %T", cfg)
	}
	m, err := InitWith(c, opts.Seed, InitOptions{ClassStd: opts.ClassStd})
	if err != nil {
		return nil, err
	}
	return trainee{Teacher{Model: m}}, nil
}

// trainee is a DiT as a family.Model.
type trainee struct{ Teacher }

// ParamGroups returns the model's groups of a parameter.
func (t trainee) ParamGroups(name string) []string { return t.Model.ParamGroups(name) }

var _ family.Saver = trainee{}

// ModelFile is a safetensors file.
func (trainee) ModelFile() string { return "model.safetensors" }

// FileFormat describes the saved file for model cards.
func (trainee) FileFormat() string { return "DiT's original tensor names" }

// SaveModel writes the model in DiT's original naming as dt (SaveAs).
func (t trainee) SaveModel(path string, metadata map[string]string, dt dtype.DType) error {
	return SaveAs(path, t.Model, nil, metadata, dt)
}

var _ family.GraftSpecer = Family{}

// GraftSpec is the Spec Teacher.GraftBackbone makes from a DiT of config
// cfg (*arch.DiTConfig); DiT reads no captions, and any grid its patch
// size divides will do (0 × 0 included: the names and groups alone).
func (Family) GraftSpec(cfg any, rows, cols, _ int) (family.Spec, error) {
	c, ok := cfg.(*arch.DiTConfig)
	if !ok || c == nil {
		return nil, fmt.Errorf("dit: a %T is not a DiT config", cfg)
	}
	if rows%c.PatchSize != 0 || cols%c.PatchSize != 0 {
		return nil, fmt.Errorf("dit: graft: a %d×%d grid does not divide into %d×%d patches", rows, cols, c.PatchSize, c.PatchSize)
	}
	cc := *c
	return Spec{Config: &cc}, nil
}

var _ family.Configurer = Family{}

// ModelConfig sizes a DiT from a recipe's [model] table, with DiT's
// 256-wide timestep frequencies.
func (Family) ModelConfig(s family.ModelSettings) (any, error) {
	return &arch.DiTConfig{Depth: s.Depth, HiddenSize: s.Width, NumHeads: s.Heads, PatchSize: s.Patch,
		InChannels: s.InChannels, InputSize: s.InputSize, LearnSigma: s.LearnSigma, NumClasses: s.Classes,
		MLPRatio: s.MLPRatio, FrequencySize: 256}, nil
}

package zimage

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/dcdit/dcdit/family"
	"github.com/dcdit/dcdit/loaders"
	"github.com/dcdit/dcdit/loaders/arch"
	"github.com/dcdit/dcdit/loaders/dtype"
)

func init() { family.Register(Family{}) }

var _ family.BaseCosted = Family{}

// Family is Z-Image's model family (kind "zimage"): a Z-Image transformer
// used as a DC backbone under its own (ComfyUI) tensor names.
type Family struct{}

// Kind returns Kind.
func (Family) Kind() string { return Kind }

// Describe names the family for listings.
func (Family) Describe() string {
	return "Z-Image (Tongyi): caption-conditioned single-stream DiT, 3-axis RoPE, flow matching"
}

// ModelName is "Z-Image".
func (Family) ModelName() string { return "Z-Image" }

// DecodeSpec reads {"config", "caption_len", "image_multiple"} strictly.
func (Family) DecodeSpec(data []byte) (family.Spec, error) {
	return family.DecodeInto(data, func(s Spec) bool { return s.Config != nil })
}

// Spec is a Z-Image backbone's description in a DC checkpoint: its config
// and the two Backbone settings a config does not hold. Its tensors are
// the ComfyUI names (fused attention.qkv, no model prefix) under
// arch.DCBackbonePrefix.
type Spec struct {
	Config *arch.ZImageConfig `json:"config"`
	// CaptionLen is Backbone.CaptionLen: the caption length its FLOPs
	// count (0: TypicalCaptionLen).
	CaptionLen int `json:"caption_len,omitempty"`
	// ImageMultiple is Backbone.ImageMultiple (0: the config's
	// seq_multi_of; 1: no padding).
	ImageMultiple int `json:"image_multiple,omitempty"`
}

// MarshalJSON writes the spec, refusing one without a config.
func (s Spec) MarshalJSON() ([]byte, error) {
	if s.Config == nil {
		return nil, errors.New("zimage backbone without a config")
	}
	type plain Spec
	return json.Marshal(plain(s))
}

// Kind returns Kind.
func (Spec) Kind() string { return Kind }

// Settings returns the *arch.ZImageConfig.
func (s Spec) Settings() any { return s.Config }

// Width is dim.
func (s Spec) Width() int { return s.Config.Dim }

// CondWidth is adaln_dim.
func (s Spec) CondWidth() int { return s.Config.AdaLNDim }

// Validate checks the config and bounds every size it states.
func (s Spec) Validate() error {
	c := s.Config
	if c == nil {
		return errors.New("zimage backbone without a config")
	}
	if err := family.CheckBounds(
		family.Bound{Name: "backbone dim", V: c.Dim, Max: family.MaxWidth},
		family.Bound{Name: "backbone n_layers", V: c.NLayers, Max: family.MaxBlocks},
		family.Bound{Name: "backbone n_refiner_layers", V: c.NRefinerLayers, Max: family.MaxBlocks},
		family.Bound{Name: "backbone n_heads", V: c.NHeads, Max: family.MaxWidth},
		family.Bound{Name: "backbone n_kv_heads", V: c.NKVHeads, Max: family.MaxWidth},
		family.Bound{Name: "backbone in_channels", V: c.InChannels, Max: family.MaxChannels},
		family.Bound{Name: "backbone patch_size", V: c.PatchSize, Max: family.MaxGridSide},
		family.Bound{Name: "backbone f_patch_size", V: c.FPatchSize, Max: family.MaxGridSide},
		family.Bound{Name: "backbone cap_feat_dim", V: c.CapFeatDim, Max: family.MaxWidth},
		family.Bound{Name: "backbone ffn_hidden", V: c.FFNHidden, Max: family.MaxMLP},
		family.Bound{Name: "backbone adaln_dim", V: c.AdaLNDim, Max: family.MaxWidth},
		family.Bound{Name: "backbone t_embedder_mid_size", V: c.TMidDim, Max: family.MaxWidth},
		family.Bound{Name: "backbone frequency_embedding_size", V: c.FrequencySize, Max: family.MaxWidth},
	); err != nil {
		return err
	}
	if len(c.AxesDims) > 8 || len(c.AxesLens) > 8 {
		return fmt.Errorf("backbone axes_dims %d and axes_lens %d values, want at most 8 each", len(c.AxesDims), len(c.AxesLens))
	}
	for i, v := range append(slices.Clone(c.AxesDims), c.AxesLens...) {
		if v > family.MaxWidth*family.MaxWidth {
			return fmt.Errorf("backbone axes_dims/axes_lens value %d = %d, want at most %d", i, v, family.MaxWidth*family.MaxWidth)
		}
	}
	if err := family.CheckFinite(1e12, family.Real{Name: "backbone norm_eps", V: c.NormEps},
		family.Real{Name: "backbone rope_theta", V: c.RopeTheta}, family.Real{Name: "backbone t_scale", V: c.TScale}); err != nil {
		return err
	}
	if err := family.CheckPositive(
		family.Bound{Name: "backbone config: dim", V: c.Dim}, family.Bound{Name: "backbone config: n_layers", V: c.NLayers},
		family.Bound{Name: "backbone config: in_channels", V: c.InChannels}, family.Bound{Name: "backbone config: cap_feat_dim", V: c.CapFeatDim},
		family.Bound{Name: "backbone config: ffn_hidden", V: c.FFNHidden}, family.Bound{Name: "backbone config: adaln_dim", V: c.AdaLNDim},
		family.Bound{Name: "backbone config: t_embedder_mid_size", V: c.TMidDim},
		family.Bound{Name: "backbone config: frequency_embedding_size", V: c.FrequencySize},
	); err != nil {
		return err
	}
	if c.NRefinerLayers < 0 {
		return fmt.Errorf("backbone config: n_refiner_layers = %d, want ≥ 0", c.NRefinerLayers)
	}
	if c.FrequencySize%2 != 0 {
		return fmt.Errorf("backbone config: frequency_embedding_size = %d, want an even number", c.FrequencySize)
	}
	if !(c.RopeTheta > 0) || !(c.TScale > 0) {
		return fmt.Errorf("backbone config: rope_theta %v and t_scale %v, want both > 0", c.RopeTheta, c.TScale)
	}
	if err := CheckConfig(c); err != nil {
		return fmt.Errorf("backbone config: %w", err)
	}
	for _, f := range []struct {
		key string
		v   int
	}{{"caption_len", s.CaptionLen}, {"image_multiple", s.ImageMultiple}} {
		if f.v < 0 || f.v > family.MaxWidth {
			return fmt.Errorf("backbone %s %d, want 1..%d (0: the default)", f.key, f.v, family.MaxWidth)
		}
	}
	return nil
}

// Conditioning is caption features of cap_feat_dim.
func (s Spec) Conditioning() family.Conditioning {
	return family.Conditioning{CaptionWidth: s.Config.CapFeatDim}
}

// Process is flow matching.
func (Spec) Process() string { return family.ProcessFlowMatching }

// Blocks are the main layers and both refiners.
func (s Spec) Blocks() []family.Blocks {
	bb, c := arch.DCBackbonePrefix, s.Config
	return []family.Blocks{{What: "backbone n_layers", Prefix: bb + "layers.", Count: c.NLayers},
		{What: "backbone n_refiner_layers", Prefix: bb + "noise_refiner.", Count: c.NRefinerLayers},
		{What: "backbone n_refiner_layers", Prefix: bb + "context_refiner.", Count: c.NRefinerLayers}}
}

// Shapes lists the model's tensors in the ComfyUI naming under
// arch.DCBackbonePrefix.
func (s Spec) Shapes() map[string][]int {
	return family.PrefixedShapes(arch.ExpectedZImage(s.Config, arch.Comfy), arch.DCBackbonePrefix)
}

// ParamGroups returns the groups of a tensor Shapes lists, by its stored
// name (ParamGroups of its ComfyUI name); nil for another name.
func (s Spec) ParamGroups(name string) []string {
	if _, ok := s.Shapes()[name]; !ok {
		return nil
	}
	return ParamGroups(strings.TrimPrefix(name, arch.DCBackbonePrefix))
}

// Build makes the backbone from its stored tensors.
func (s Spec) Build(ts map[string]loaders.Dense) (family.Backbone, error) {
	own := map[string]*loaders.Dense{}
	for name := range s.Shapes() {
		t, ok := ts[name]
		if !ok {
			return nil, fmt.Errorf("backbone tensor %q missing", name)
		}
		own[name[len(arch.DCBackbonePrefix):]] = &loaders.Dense{Shape: t.Shape, Data: t.Data}
	}
	model, err := New(&Weights{Config: s.Config, Params: own})
	if err != nil {
		return nil, fmt.Errorf("backbone: %w", err)
	}
	model.PrefixNames(arch.DCBackbonePrefix)
	return &Backbone{Model: model, CaptionLen: s.CaptionLen, ImageMultiple: s.ImageMultiple}, nil
}

// FLOPs counts what Backbone.FLOPs counts, from the config.
func (s Spec) FLOPs(lengths []int) float64 {
	return (&Backbone{Model: &Model{Config: s.Config}, CaptionLen: s.CaptionLen, ImageMultiple: s.ImageMultiple}).FLOPs(lengths)
}

// WithCaptionLen returns a copy whose FLOPs count captions of n tokens.
func (s Spec) WithCaptionLen(n int) family.Spec {
	s.CaptionLen = n
	return s
}

// Opens reports whether detection found a Z-Image.
func (Family) Opens(c family.Candidate) bool { return c.Report.Architecture == arch.ZImage }

// OpenTeacher loads a Z-Image transformer (a file or a repository),
// frozen, keeping BF16 matrices in BF16 when opts asks, with opts.Config
// in place of the repository's config.json when given; its FLOPs count
// the student's caption length when the student is a Z-Image, else
// opts.CaptionLen. A model that patches several frames at a time is
// refused: a teacher predicts images, one frame each.
func (Family) OpenTeacher(path string, opts family.OpenOptions) (family.Teacher, []string, error) {
	m, warnings, err := LoadModel(path, LoadOptions{Config: opts.Config, KeepBF16: opts.KeepBF16})
	if err != nil {
		return nil, nil, err
	}
	if f := m.Config.FPatchSize; f != 1 {
		return nil, nil, fmt.Errorf("zimage: %s patches %d frames at a time; images are one frame", path, f)
	}
	m.Params.SetRequiresGrad(false)
	t := Teacher{Model: m, CaptionLen: opts.CaptionLen}
	if s, ok := opts.Student.(Spec); ok {
		t.CaptionLen = s.CaptionLen
	}
	return t, warnings, nil
}

// presetGrid is the latent side Z-Image is priced at unless told: a
// 1024 px image.
const presetGrid = 128

// Presets lists the released transformers, which share TurboConfig and
// differ in how they are sampled: Turbo in TurboSteps without guidance,
// the base model in the diffusers pipeline's default 50 steps with
// guidance. Their head count is fixed.
func (Family) Presets(int) []family.Preset {
	turbo, base := zimageBase(TurboConfig()), zimageBase(TurboConfig())
	turbo.Preset, base.Preset, base.Steps = "Z-Image-Turbo", "Z-Image", 50
	return []family.Preset{{Name: turbo.Preset, Base: &turbo}, {Name: base.Preset, Base: &base}}
}

// Steps is TurboSteps: a DC model around Z-Image samples as Turbo does.
func (Family) Steps() int { return TurboSteps }

// Base describes a Z-Image transformer detection read; Config is nil for
// one whose dim is unknown.
func (Family) Base(rep *arch.Report) (family.Base, bool) {
	if rep.Architecture != arch.ZImage {
		return family.Base{}, false
	}
	c, ok := rep.Config.(*arch.ZImageConfig)
	if !ok || c.Dim == 0 {
		return family.Base{Architecture: arch.ZImage, What: "Z-Image transformer"}, true
	}
	return zimageBase(c), true
}

func zimageBase(c *arch.ZImageConfig) family.Base {
	return family.Base{Config: c, Architecture: arch.ZImage, What: "Z-Image transformer", Patch: c.PatchSize,
		Grid: presetGrid, AnyGrid: true, Steps: TurboSteps, CaptionLen: TypicalCaptionLen}
}

// BaseFLOPs counts ForwardFLOPs of an *arch.ZImageConfig over a rows×cols
// latent with a caption of captionLen tokens.
func (Family) BaseFLOPs(cfg any, rows, cols, captionLen int) (family.Cost, error) {
	c, ok := cfg.(*arch.ZImageConfig)
	if !ok {
		return family.Cost{}, fmt.Errorf("zimage: a %T is not a Z-Image config", cfg)
	}
	if rows%c.PatchSize != 0 || cols%c.PatchSize != 0 {
		return family.Cost{}, fmt.Errorf("zimage: a %d×%d latent, want sides that are multiples of the patch size %d", rows, cols, c.PatchSize)
	}
	tokens := (rows / c.PatchSize) * (cols / c.PatchSize)
	f := ForwardFLOPs(c, tokens, captionLen)
	return family.Cost{Config: c, Tokens: tokens, Forward: f.Total(),
		Parts: []family.Part{{Name: "embed", FLOPs: f.Embed}, {Name: "refiners", FLOPs: f.Refiners}, {Name: "layers", FLOPs: f.Layers},
			{Name: "attention", FLOPs: f.Attention}, {Name: "final", FLOPs: f.Final}},
		Convention: "2 per multiply-add of matmuls, plus attention H·L²·(4·d_h+3) over each padded sequence (refiners and main layers); per image"}, nil
}

var _ family.Initializer = Family{}

// InitModel initialises a Z-Image of config cfg (*arch.ZImageConfig)
// (Init); it has no class labels, so opts.ClassStd is ignored.
func (Family) InitModel(cfg any, opts family.InitOptions) (family.Model, error) {
	c, ok := cfg.(*arch.ZImageConfig)
	if !ok || c == nil {
		return nil, fmt.Errorf("zimage: a Z-Image is initialised from an *arch.ZImageConfig, got %T", cfg)
	}
	m, err := Init(c, opts.Seed)
	if err != nil {
		return nil, err
	}
	return trainee{Teacher{Model: m}}, nil
}

// trainee is a Z-Image as a family.Model.
type trainee struct{ Teacher }

// ParamGroups returns the model's groups of a parameter (ParamGroups).
func (trainee) ParamGroups(name string) []string { return ParamGroups(name) }

var _ family.Saver = trainee{}

// ModelFile is a folder: weights and config.json (Save).
func (trainee) ModelFile() string { return "model" }

// FileFormat describes the saved folder for model cards.
func (trainee) FileFormat() string {
	return "a folder: ComfyUI-named weights and diffusers' config.json"
}

// SaveModel writes the model folder (Save), always in F32.
func (t trainee) SaveModel(path string, metadata map[string]string, _ dtype.DType) error {
	return Save(path, t.Model, nil, metadata)
}

var _ family.Configurer = Family{}

// ModelConfig sizes a Z-Image from a recipe's [model] table: Z-Image's
// own ratios where the table says nothing (the feed-forward width 8/3·D,
// the adaLN width min(D, 256), RoPE over (time, row, column) with the head
// width split 1/4, 3/8, 3/8 as Z-Image's 32/48/48 of 128, θ 256), and a
// timestep MLP as wide as the model instead of 1024 at this scale.
func (Family) ModelConfig(s family.ModelSettings) (any, error) {
	if s.Heads < 1 {
		return nil, fmt.Errorf("zimage: num_heads = %d, want ≥ 1", s.Heads)
	}
	hd := s.Width / s.Heads
	spatial := 3 * hd / 8 / 2 * 2
	return &arch.ZImageConfig{
		Dim: s.Width, NLayers: s.Depth, NRefinerLayers: s.RefinerDepth, NHeads: s.Heads, NKVHeads: s.Heads,
		InChannels: s.InChannels, PatchSize: s.Patch, FPatchSize: 1, CapFeatDim: s.CaptionWidth, QKNorm: true,
		NormEps: 1e-5, RopeTheta: 256, TScale: 1000, SeqMultiOf: s.SeqMultiple,
		AxesDims:  []int64{int64(hd - 2*spatial), int64(spatial), int64(spatial)},
		AxesLens:  []int64{1536, int64(s.InputSize), int64(s.InputSize)},
		FFNHidden: int(float64(s.Width) / 3 * 8), AdaLNDim: min(s.Width, 256), TMidDim: s.Width,
		FrequencySize: 256,
	}, nil
}

var (
	_ family.GraftSpecer = Family{}
	_ family.Streamable  = Family{}
)

// GraftSpec is the Spec Teacher.GraftBackbone makes for a base of config
// cfg (*arch.ZImageConfig) on a rows×cols grid.
func (Family) GraftSpec(cfg any, rows, cols, captionLen int) (family.Spec, error) {
	c, ok := cfg.(*arch.ZImageConfig)
	if !ok || c == nil {
		return nil, fmt.Errorf("zimage: a %T is not a Z-Image config", cfg)
	}
	if c.FPatchSize != 1 {
		return nil, fmt.Errorf("zimage: graft: frame patches of %d: the scaffold grafts onto single-frame images (f_patch_size 1)", c.FPatchSize)
	}
	cc := *c
	return Spec{Config: &cc, CaptionLen: captionLen, ImageMultiple: GraftImageMultiple(c, rows, cols)}, nil
}

// StreamGraft streams a Z-Image's graft in ComfyUI's naming (the one a
// DC checkpoint stores), its patch embedding x_embedder's features
// (dy, dx, c), c fastest (Patchify); FLOPs count TypicalCaptionLen.
func (f Family) StreamGraft(cfg any, rows, cols int) (family.StreamedGraft, error) {
	spec, err := f.GraftSpec(cfg, rows, cols, 0)
	if err != nil {
		return family.StreamedGraft{}, err
	}
	c := spec.(Spec).Config
	p, C := c.PatchSize, c.InChannels
	return family.StreamedGraft{Spec: spec, InChannels: C, OutChannels: C, Layout: arch.Comfy,
		PatchWeight: "x_embedder.weight", PatchBias: "x_embedder.bias",
		Embed: func(w, b []float32) family.PatchEmbedding {
			return family.PatchEmbedding{Patch: p, Weight: w, Bias: b, Index: func(ch, dy, dx int) int { return (dy*p+dx)*C + ch }}
		}}, nil
}

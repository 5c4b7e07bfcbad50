// Package checkpoint reads and writes DC checkpoints: a DC-DiT model (the
// dc scaffold around a backbone) in one safetensors file whose
// __metadata__ says everything needed to rebuild it, so that loading takes
// no flags.
//
// # Format (format_version 1)
//
// Tensors: every parameter in the official DC-DiT state_dict layout
// (AMD-AGI/DynamicChunkingDiT create_dit), stored F32 (or BF16/F16, see
// Info.DType; any float type loads) under the reference
// names — x_embedder.proj.*, t_embedder.mlp.*, y_embedder.embedding_table.*,
// hnet.encoder.*, hnet.routing_module.*, hnet.residual_proj.*,
// hnet.main_network.main_network.* (the backbone's blocks and RMSNorm),
// hnet.decoder.*, final_layer.*. pos_embed is omitted: it is the fixed 2-D
// sin-cos table, recomputed at each kept token's position. No other tensor
// may be present.
//
// __metadata__ (all values are strings, as safetensors requires):
//
//	"format":        "pt" (what Hugging Face tools expect)
//	"dcdit.config":  the model as JSON (Meta):
//	    format_version  1
//	    scaffold        dc.Config: in_channels, out_channels, grid_rows,
//	                    grid_cols, enc_dec_dim, model_dim, cond_dim,
//	                    router_dim, encoder_blocks, decoder_blocks,
//	                    norm_groups, router_groups, dechunk_sigma,
//	                    target_n, ratio_loss_weight, ratio_batch_size
//	    backbone        {"kind": "hnet", "config": hnet.Config: width,
//	                    depth, heads, mlp_hidden, frequency_size,
//	                    num_classes, patch_size}
//	    trained_rhos    the tail-drop fractions ρ it was trained for
//	    recipe          the TOML recipe that produced it ("" if none)
//	    base            the checkpoint it was upcycled from, or null:
//	                    path, architecture, layout, and sha256 or
//	                    size + mtime
//	    sampling        optional (Sampling): how the model samples as it
//	                    was evaluated — process ("ddpm" or
//	                    "flow_matching"), dense_below, cfg,
//	                    sampling_steps, and shift (flow_matching only);
//	                    every key required, values bounded
//	                    (MaxDiffusionSteps, MaxGuidance)
//	"dcdit.crc32c":  JSON {tensor name: CRC-32C of its bytes, 8 hex digits}
//
// `dcdit sample` and `dcdit eval` take each setting a flag does not give
// from "sampling"; a file without it (written before it existed, by
// another tool, or for a model nobody evaluated) loads as before, and the
// commands use their own defaults (DDPM: 250 steps, cfg 4, never dense;
// flow matching: Z-Image-Turbo's 8 steps, no guidance, shift 3; eval: 10
// steps, no guidance). The trained ρ set is trained_rhos.
//
// A DiT upcycled from DiT/p is an "hnet" backbone with patch_size p (its
// position embedding lives on the patch grid).
//
// Two more kinds hold a pretrained backbone that keeps its own names (the
// scaffold's tensors are as above):
//
//	"dit"     config arch.DiTConfig (depth, hidden_size, num_heads,
//	          patch_size, in_channels, input_size, learn_sigma,
//	          num_classes, mlp_ratio, frequency_embedding_size, preset);
//	          tensors: DiT's original names but pos_embed (recomputed)
//	"zimage"  config arch.ZImageConfig (dim, n_layers, n_refiner_layers,
//	          n_heads, n_kv_heads, in_channels, patch_size, f_patch_size,
//	          cap_feat_dim, qk_norm, norm_eps, rope_theta, t_scale,
//	          axes_dims, axes_lens, ffn_hidden, adaln_dim,
//	          t_embedder_mid_size, frequency_embedding_size, seq_multi_of
//	          when not 32); tensors: the ComfyUI names (fused
//	          attention.qkv, no model prefix); optionally "caption_len"
//	          beside kind and config: the caption length its FLOPs count,
//	          and "image_multiple": the multiple each sample's kept image
//	          tokens are padded to (absent: seq_multi_of; 1: none)
//
// each under dc.BackbonePrefix ("backbone.t_embedder.mlp.0.weight",
// "backbone.blocks.0.attn.qkv.weight", …), the unused patch embedding and
// final layer included (see dc.BackbonePrefix for why). The backbone's
// width must be the scaffold's model_dim and its conditioning width (DiT:
// hidden_size; Z-Image: adaln_dim) its cond_dim.
//
// Every kind is a registered model family's (package family): the
// backbone object holds "kind" and the fields of that family's Spec,
// which decodes, bounds, sizes, costs and rebuilds it; hnet, dit and
// zimage are the built-in ones (package families registers them), and a
// user's family adds its own kind without a change here.
//
// Readers reject an unknown format_version, an unknown backbone kind,
// unknown JSON fields, and any
// missing, mis-shaped or unexpected tensor, naming the file, the tensor, and
// what was expected and found; when "dcdit.crc32c" is present (Save always
// writes it) every tensor's bytes are checked against it, and a file
// without it loads with a warning (Meta.Warnings). A file is untrusted
// input: every size in dcdit.config is bounded (MaxGridSide, MaxWidth,
// MaxBlocks, …) before it sizes anything, the block counts must match the
// numbered blocks the file holds (Meta.CheckTensors), and errors that list
// tensors name a few and count the rest.
package checkpoint

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/dcdit/dcdit/dc"
	"github.com/dcdit/dcdit/family"
	"github.com/dcdit/dcdit/loaders/arch"
)

// Metadata keys and values of the format.
const (
	// FormatVersion is the version this package writes and reads.
	FormatVersion = 1
	// ConfigKey holds the Meta JSON.
	ConfigKey = arch.MetadataConfigKey
	// ChecksumKey holds the per-tensor CRC-32C JSON.
	ChecksumKey = "dcdit.crc32c"
	// KindHNet is the backbone kind of DC-DiT's own main network (dc/hnet),
	// also used for DiT blocks upcycled into it.
	KindHNet = "hnet"
	// KindDiT is a pretrained DiT as the backbone, its tensors under
	// dc.BackbonePrefix.
	KindDiT = "dit"
	// KindZImage is a Z-Image transformer as the backbone, its tensors
	// under dc.BackbonePrefix.
	KindZImage = "zimage"
)

// Meta is the model description stored under ConfigKey.
type Meta struct {
	FormatVersion int       `json:"format_version"`
	Scaffold      dc.Config `json:"scaffold"`
	Backbone      Backbone  `json:"backbone"`
	// TrainedRhos are the tail-drop fractions the model was trained for
	// (empty when unknown); inspect reports FLOPs at these.
	TrainedRhos []float64 `json:"trained_rhos"`
	// Recipe is the TOML text of the recipe that produced the checkpoint,
	// or "".
	Recipe string `json:"recipe"`
	// Base identifies the pretrained checkpoint the model was upcycled
	// from; nil for models trained from scratch or converted.
	Base *Base `json:"base"`
	// Sampling is how the model samples as it was evaluated; nil when not
	// recorded (the commands use their own defaults).
	Sampling *Sampling `json:"sampling,omitempty"`
	// Warnings are what ParseMeta found suspicious without refusing the
	// file (no checksums); not stored.
	Warnings []string `json:"-"`
}

// Bounds on the sizes a dcdit.config may state, checked before any of them
// sizes an allocation (the scaffold's conv widths, the expected tensor
// list, a sampling run's latents): a file is untrusted input, and a
// grid_rows of 100000 must be an error, not an out-of-memory crash. The
// grid is not stored in any tensor, so it gets an absolute bound: a
// MaxGridSide latent grid is an 8192-pixel image through an 8× VAE. The
// depth and block counts are also checked against the tensors present
// (CheckTensors). The backbone's family bounds its own config with the
// same values.
const (
	MaxGridSide    = family.MaxGridSide
	MaxWidth       = family.MaxWidth
	MaxMLP         = family.MaxMLP
	MaxChannels    = family.MaxChannels
	MaxBlocks      = family.MaxBlocks
	MaxClasses     = family.MaxClasses
	MaxActivations = family.MaxActivations
)

// Backbone names the backbone's kind and holds its family's description;
// JSON {"kind": ..., "config": {...}, ...}: the kind, then the fields of
// the family's Spec (family.Spec).
type Backbone struct {
	Kind string
	// Spec is the family's description of the backbone; nil only in a
	// zero Backbone.
	Spec family.Spec
}

// Config returns the backbone family's config (Spec.Settings), nil
// without a Spec.
func (b Backbone) Config() any {
	if b.Spec == nil {
		return nil
	}
	return b.Spec.Settings()
}

// MarshalJSON writes {"kind", then the Spec's fields}.
func (b Backbone) MarshalJSON() ([]byte, error) {
	if b.Spec == nil {
		return nil, fmt.Errorf("checkpoint: %s backbone without a config", b.Kind)
	}
	if b.Spec.Kind() != b.Kind {
		return nil, fmt.Errorf("checkpoint: backbone kind %q holds a %q description", b.Kind, b.Spec.Kind())
	}
	spec, err := json.Marshal(b.Spec)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	kind, _ := json.Marshal(b.Kind)
	rest := bytes.TrimPrefix(bytes.TrimSpace(spec), []byte("{"))
	if len(rest) == len(spec) || len(rest) == 0 {
		return nil, fmt.Errorf("checkpoint: backbone %q: its description is not a JSON object", b.Kind)
	}
	out := append([]byte(`{"kind":`), kind...)
	if rest[0] != '}' {
		out = append(out, ',')
	}
	return append(out, rest...), nil
}

// UnmarshalJSON reads {"kind", ...} strictly: an unknown kind, and fields
// the kind's family does not know, are errors.
func (b *Backbone) UnmarshalJSON(data []byte) error {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(data, &fields); err != nil {
		return fmt.Errorf("backbone: %w", err)
	}
	var kind string
	if raw, ok := fields["kind"]; ok {
		if err := json.Unmarshal(raw, &kind); err != nil {
			return fmt.Errorf("backbone: kind: %w", err)
		}
	}
	fam, err := family.Lookup(kind)
	if err != nil {
		return fmt.Errorf("backbone: %w", err)
	}
	delete(fields, "kind")
	rest, err := json.Marshal(fields)
	if err != nil {
		return fmt.Errorf("backbone: %w", err)
	}
	spec, err := fam.DecodeSpec(rest)
	if err != nil {
		return fmt.Errorf("backbone %s: %w", kind, err)
	}
	*b = Backbone{Kind: kind, Spec: spec}
	return nil
}

// Base identifies the pretrained checkpoint a model was upcycled from. A
// SHA-256 over its files is the exact identity; size and modification
// time are the cheap one for large bases.
type Base struct {
	Path         string `json:"path"`
	Architecture string `json:"architecture,omitempty"`
	Layout       string `json:"layout,omitempty"`
	SHA256       string `json:"sha256,omitempty"` // over its files' bytes, in path order
	Size         int64  `json:"size,omitempty"`   // bytes over all files
	ModTime      string `json:"mtime,omitempty"`  // newest file, RFC 3339
}

// capped is err's message cut to maxErrLen bytes: JSON errors quote the
// offending field names and values, which a file may make arbitrarily long.
func capped(err error) string {
	const maxErrLen = 300
	msg := err.Error()
	if len(msg) > maxErrLen {
		msg = strings.ToValidUTF8(msg[:maxErrLen], "") + "…"
	}
	return strings.ReplaceAll(msg, "\n", " ")
}

// ParseMeta reads and validates the Meta in a checkpoint's __metadata__
// (headers only). Errors say what is wrong without the file name.
func ParseMeta(md map[string]string) (*Meta, error) {
	raw, ok := md[ConfigKey]
	if !ok {
		return nil, fmt.Errorf("no __metadata__ %q: not a DC checkpoint", ConfigKey)
	}
	var version struct {
		FormatVersion *json.RawMessage `json:"format_version"`
	}
	if err := json.Unmarshal([]byte(raw), &version); err != nil {
		return nil, fmt.Errorf("__metadata__ %q is not a JSON object: %s", ConfigKey, capped(err))
	}
	if version.FormatVersion == nil {
		return nil, fmt.Errorf("__metadata__ %q: format_version missing (this build reads %d)", ConfigKey, FormatVersion)
	}
	if v := string(*version.FormatVersion); v != fmt.Sprint(FormatVersion) {
		return nil, fmt.Errorf("__metadata__ %q: unknown format_version %.40s (this build reads %d)", ConfigKey, v, FormatVersion)
	}
	m := &Meta{}
	if err := family.DecodeStrict([]byte(raw), m); err != nil {
		return nil, fmt.Errorf("__metadata__ %q: %s", ConfigKey, capped(err))
	}
	if err := m.Validate(); err != nil {
		return nil, fmt.Errorf("__metadata__ %q: %w", ConfigKey, err)
	}
	if _, ok := md[ChecksumKey]; !ok {
		m.Warnings = append(m.Warnings, fmt.Sprintf("no __metadata__ %q: the tensors' integrity cannot be checked (dcdit always writes checksums; this file was written by another tool or had them removed)", ChecksumKey))
	}
	return m, nil
}

// checkBounds refuses sizes outside the format's bounds (see MaxGridSide),
// before anything uses them.
func (m *Meta) checkBounds() error {
	s := &m.Scaffold
	type field struct {
		name   string
		v, max int
	}
	fields := []field{
		{"scaffold grid_rows", s.GridRows, MaxGridSide}, {"scaffold grid_cols", s.GridCols, MaxGridSide},
		{"scaffold in_channels", s.InChannels, MaxChannels}, {"scaffold out_channels", s.OutChannels, MaxChannels},
		{"scaffold enc_dec_dim", s.EncDecDim, MaxWidth}, {"scaffold model_dim", s.ModelDim, MaxWidth},
		{"scaffold cond_dim", s.CondDim, MaxWidth}, {"scaffold router_dim", s.RouterDim, MaxWidth},
		{"scaffold encoder_blocks", s.EncoderBlocks, MaxBlocks}, {"scaffold decoder_blocks", s.DecoderBlocks, MaxBlocks},
		{"scaffold norm_groups", s.NormGroups, MaxWidth}, {"scaffold router_groups", s.RouterGroups, MaxWidth},
	}
	for _, f := range fields {
		if f.v > f.max {
			return fmt.Errorf("%s = %d, want at most %d", f.name, f.v, f.max)
		}
	}
	// The grid is in no tensor, but the widths are (Load checks every
	// shape): one sample's activations at the widest layer must fit.
	if w := max(s.EncDecDim, s.ModelDim, s.RouterDim); s.GridRows*s.GridCols*w > MaxActivations {
		return fmt.Errorf("scaffold grid %d×%d at width %d: %d activations per sample and layer, want at most %d", s.GridRows, s.GridCols, w, s.GridRows*s.GridCols*w, MaxActivations)
	}
	if s.RatioBatchSize > 1<<20 {
		return fmt.Errorf("scaffold ratio_batch_size = %d, want at most %d", s.RatioBatchSize, 1<<20)
	}
	for _, f := range []struct {
		name string
		v    float64
	}{{"dechunk_sigma", s.Sigma}, {"target_n", s.TargetN}, {"ratio_loss_weight", s.RatioLossWeight}} {
		if math.IsNaN(f.v) || math.IsInf(f.v, 0) || math.Abs(f.v) > 1e6 {
			return fmt.Errorf("scaffold %s = %v, want a finite value of at most 1e6", f.name, f.v)
		}
	}
	if len(m.TrainedRhos) > 1024 {
		return fmt.Errorf("trained_rhos lists %d values, want at most 1024", len(m.TrainedRhos))
	}
	return nil
}

// CheckTensors ties the stated block counts to the tensors present (found:
// name → shape, the file's headers): the backbone's depth and the
// encoder's and decoder's block counts must equal the numbered blocks the
// file holds. It runs before the expected tensor list is built, so that a
// depth of 100000 is one line saying so rather than a list of a million
// missing tensors.
func (m *Meta) CheckTensors(found map[string][]int) error {
	type count struct {
		what   string
		prefix string
		stated int
	}
	counts := []count{
		{"scaffold encoder_blocks", "hnet.encoder.layers.", m.Scaffold.EncoderBlocks},
		{"scaffold decoder_blocks", "hnet.decoder.layers.", m.Scaffold.DecoderBlocks},
	}
	for _, b := range m.Backbone.Spec.Blocks() {
		counts = append(counts, count{b.What, b.Prefix, b.Count})
	}
	for _, c := range counts {
		if n := countBlocks(found, c.prefix); n != c.stated {
			return fmt.Errorf("%s = %d, but the file holds %d numbered blocks %s0 … (tensors %sN.*)", c.what, c.stated, n, c.prefix, c.prefix)
		}
	}
	return nil
}

// countBlocks counts the distinct block numbers prefix+"N." in names.
func countBlocks(found map[string][]int, prefix string) int {
	seen := map[string]bool{}
	for name := range found {
		rest, ok := strings.CutPrefix(name, prefix)
		if !ok {
			continue
		}
		if idx, _, ok := strings.Cut(rest, "."); ok && idx != "" && strings.Trim(idx, "0123456789") == "" {
			seen[idx] = true
		}
	}
	return len(seen)
}

// Validate checks the scaffold and backbone configs and their agreement.
func (m *Meta) Validate() error {
	if m.FormatVersion != FormatVersion {
		return fmt.Errorf("format_version %d, want %d", m.FormatVersion, FormatVersion)
	}
	if err := m.checkBounds(); err != nil {
		return err
	}
	if err := m.Scaffold.Validate(); err != nil {
		return err
	}
	b := m.Backbone
	if b.Spec == nil {
		return fmt.Errorf("%s backbone without a config", b.Kind)
	}
	if b.Spec.Kind() != b.Kind {
		return fmt.Errorf("backbone kind %q holds a %q description", b.Kind, b.Spec.Kind())
	}
	if err := b.Spec.Validate(); err != nil {
		return err
	}
	if w, cw := b.Spec.Width(), b.Spec.CondWidth(); w != m.Scaffold.ModelDim || cw != m.Scaffold.CondDim {
		return fmt.Errorf("backbone width %d and conditioning width %d differ from the scaffold's model_dim %d and cond_dim %d", w, cw, m.Scaffold.ModelDim, m.Scaffold.CondDim)
	}
	for _, r := range m.TrainedRhos {
		if !(r >= 0 && float32(r) < 1) {
			return fmt.Errorf("trained_rhos: %v, want 0 ≤ ρ < 1", r)
		}
	}
	if m.Sampling != nil {
		if err := m.Sampling.Validate(); err != nil {
			return fmt.Errorf("sampling: %w", err)
		}
	}
	return nil
}

// Shapes lists every tensor a checkpoint with this Meta holds, under its
// reference name. The Meta must be valid.
func (m *Meta) Shapes() map[string][]int {
	s := dc.ScaffoldShapes(&m.Scaffold)
	for k, v := range m.backboneShapes() {
		s[k] = v
	}
	return s
}

// backboneShapes lists the backbone's tensors under their stored names.
func (m *Meta) backboneShapes() map[string][]int { return m.Backbone.Spec.Shapes() }

// FLOPs counts one forward pass of a batch whose samples keep numKept
// tokens each (dc.Model.ForwardFLOPs without loading any weights).
func (m *Meta) FLOPs(numKept []int) dc.FLOPs {
	cfg := m.Scaffold
	return dc.ConfigFLOPs(&cfg, m.Backbone.Spec, numKept)
}

// DefaultRhos are the tail-drop fractions reported when a checkpoint does
// not list the ones it was trained for (the paper's evaluation points).
var DefaultRhos = []float64{0, 0.3, 0.6}

// RhoFLOPs is the cost of one forward pass per image at a tail-drop
// fraction, under dc.AssumedKept.
type RhoFLOPs struct {
	Rho        float64 `json:"rho"`
	KeptTokens int     `json:"kept_tokens"`
	GFLOPs     float64 `json:"gflops"` // per image per forward
	// TFLOPsPerImage is for a sampling run of Steps forwards without
	// guidance (with CFG each step costs twice as much).
	TFLOPsPerImage float64 `json:"tflops_per_image"`
}

// FLOPsPerRho reports, for each ρ (TrainedRhos, else DefaultRhos), the
// tokens a sample keeps when the router marks 1/target_n of the grid
// (dc.AssumedKept) and the forward FLOPs per image, with the total over
// steps sampling steps.
func (m *Meta) FLOPsPerRho(steps int) []RhoFLOPs {
	rhos := m.TrainedRhos
	if len(rhos) == 0 {
		rhos = DefaultRhos
	}
	rhos = append([]float64(nil), rhos...)
	sort.Float64s(rhos)
	out := make([]RhoFLOPs, 0, len(rhos))
	for _, r := range rhos {
		kept := dc.AssumedKept(m.Scaffold.Cells(), m.Scaffold.TargetN, r)
		f := m.FLOPs([]int{kept}).Total()
		out = append(out, RhoFLOPs{Rho: r, KeptTokens: kept, GFLOPs: f / 1e9, TFLOPsPerImage: f * float64(steps) / 1e12})
	}
	return out
}

// MetaOf describes a model for saving.
func MetaOf(model *dc.Model, info Info) (*Meta, error) {
	m := &Meta{FormatVersion: FormatVersion, Scaffold: *model.Config, TrainedRhos: append([]float64{}, info.TrainedRhos...),
		Recipe: info.Recipe, Base: info.Base}
	if info.Sampling != nil {
		s := *info.Sampling
		m.Sampling = &s
	}
	// The backbone describes itself; its description is read back exactly
	// as Load reads a file's, so what is saved is what loads (unknown kinds
	// and config fields fail here, not on load).
	spec := model.Backbone.Spec()
	if spec == nil {
		return nil, errors.New("checkpoint: the backbone has no description (Spec returned nil): it cannot be saved")
	}
	raw, err := json.Marshal(Backbone{Kind: spec.Kind(), Spec: spec})
	if err != nil {
		return nil, fmt.Errorf("checkpoint: backbone %q config: %w", spec.Kind(), err)
	}
	if err := m.Backbone.UnmarshalJSON(raw); err != nil {
		return nil, fmt.Errorf("checkpoint: cannot save the backbone: %w", err)
	}
	if err := m.Validate(); err != nil {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	return m, nil
}

// newBackbone builds the backbone the Meta describes from named tensors
// (the file's, checked against Shapes).
func (m *Meta) newBackbone(ts map[string]dc.Tensor) (dc.Backbone, error) {
	return m.Backbone.Spec.Build(ts)
}

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
	"io"
	"math"
	"slices"
	"sort"
	"strings"

	"github.com/dcdit/dcdit/dc"
	"github.com/dcdit/dcdit/dc/hnet"
	"github.com/dcdit/dcdit/dit"
	"github.com/dcdit/dcdit/loaders"
	"github.com/dcdit/dcdit/loaders/arch"
	"github.com/dcdit/dcdit/zimage"
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
	KindHNet = hnet.Kind
	// KindDiT is a pretrained DiT as the backbone, its tensors under
	// dc.BackbonePrefix.
	KindDiT = dit.Kind
	// KindZImage is a Z-Image transformer as the backbone, its tensors
	// under dc.BackbonePrefix.
	KindZImage = zimage.Kind
)

// Kinds lists the backbone kinds this build reads.
var Kinds = []string{KindHNet, KindDiT, KindZImage}

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
// (CheckTensors).
const (
	MaxGridSide = 1024
	MaxWidth    = 1 << 16 // widths: enc_dec_dim, model_dim, cond_dim, router_dim, backbone width
	MaxMLP      = 1 << 18 // mlp_hidden
	MaxChannels = 4096    // in_channels, out_channels
	MaxBlocks   = 1024    // backbone depth, encoder and decoder blocks
	MaxClasses  = 1 << 24 // num_classes
	// MaxActivations bounds grid_rows·grid_cols·(widest scaffold width):
	// one sample's activations at one layer, 4 GiB in float32.
	MaxActivations = 1 << 30
)

// Backbone names the backbone's kind and holds its config; JSON
// {"kind": ..., "config": {...}} (and "caption_len" and "image_multiple"
// for a Z-Image when set). Exactly the config of Kind is set.
type Backbone struct {
	Kind string
	// HNet is the config of a KindHNet backbone.
	HNet *hnet.Config
	// DiT is the config of a KindDiT backbone.
	DiT *arch.DiTConfig
	// ZImage is the config of a KindZImage backbone.
	ZImage *arch.ZImageConfig
	// CaptionLen is the caption length a Z-Image backbone's FLOPs are
	// counted for (zimage.Backbone.CaptionLen; 0: zimage's typical
	// prompt): a model upcycled on short captions records theirs.
	CaptionLen int
	// ImageMultiple is the multiple a Z-Image backbone pads each sample's
	// kept image tokens to (zimage.Backbone.ImageMultiple; 0: the config's
	// seq_multi_of, as the reference pads).
	ImageMultiple int
}

// Config returns the config of the backbone's kind (a *hnet.Config, an
// *arch.DiTConfig or an *arch.ZImageConfig), nil when it has none.
func (b Backbone) Config() any {
	switch {
	case b.HNet != nil:
		return b.HNet
	case b.DiT != nil:
		return b.DiT
	case b.ZImage != nil:
		return b.ZImage
	}
	return nil
}

// MarshalJSON writes {"kind", "config"}.
func (b Backbone) MarshalJSON() ([]byte, error) {
	var cfg any
	switch b.Kind {
	case KindHNet:
		if b.HNet == nil {
			return nil, errors.New("checkpoint: hnet backbone without a config")
		}
		c := *b.HNet
		if c.PatchSize == 0 {
			c.PatchSize = 1 // stored explicitly
		}
		cfg = c
	case KindDiT:
		if b.DiT == nil {
			return nil, errors.New("checkpoint: dit backbone without a config")
		}
		cfg = b.DiT
	case KindZImage:
		if b.ZImage == nil {
			return nil, errors.New("checkpoint: zimage backbone without a config")
		}
		cfg = b.ZImage
	default:
		return nil, fmt.Errorf("checkpoint: backbone kind %q is not one of %s", b.Kind, strings.Join(Kinds, ", "))
	}
	return json.Marshal(struct {
		Kind          string `json:"kind"`
		Config        any    `json:"config"`
		CaptionLen    int    `json:"caption_len,omitempty"`
		ImageMultiple int    `json:"image_multiple,omitempty"`
	}{b.Kind, cfg, b.CaptionLen, b.ImageMultiple})
}

// UnmarshalJSON reads {"kind", "config"}, strictly: unknown kinds and
// unknown config fields are errors.
func (b *Backbone) UnmarshalJSON(data []byte) error {
	var raw struct {
		Kind          string          `json:"kind"`
		Config        json.RawMessage `json:"config"`
		CaptionLen    int             `json:"caption_len"`
		ImageMultiple int             `json:"image_multiple"`
	}
	if err := strictUnmarshal(data, &raw); err != nil {
		return fmt.Errorf("backbone: %w", err)
	}
	for _, f := range []struct {
		key string
		v   int
	}{{"caption_len", raw.CaptionLen}, {"image_multiple", raw.ImageMultiple}} {
		if f.v != 0 && (raw.Kind != KindZImage || f.v < 0 || f.v > MaxWidth) {
			return fmt.Errorf("backbone: %s %d with kind %.40q, want 1..%d and a %s backbone", f.key, f.v, raw.Kind, MaxWidth, KindZImage)
		}
	}
	switch raw.Kind {
	case KindHNet, KindDiT, KindZImage:
		if len(raw.Config) == 0 || string(raw.Config) == "null" {
			return fmt.Errorf("backbone: kind %s has no config", raw.Kind)
		}
		var nb Backbone
		var cfg any
		switch raw.Kind {
		case KindHNet:
			nb.HNet = &hnet.Config{}
			cfg = nb.HNet
		case KindDiT:
			nb.DiT = &arch.DiTConfig{}
			cfg = nb.DiT
		case KindZImage:
			nb.ZImage = &arch.ZImageConfig{}
			cfg = nb.ZImage
		}
		if err := strictUnmarshal(raw.Config, cfg); err != nil {
			return fmt.Errorf("backbone config: %w", err)
		}
		nb.Kind, nb.CaptionLen, nb.ImageMultiple = raw.Kind, raw.CaptionLen, raw.ImageMultiple
		*b = nb
		return nil
	case "":
		return errors.New("backbone: kind missing")
	default:
		return fmt.Errorf("backbone: unknown kind %.40q (this build reads %s)", raw.Kind, strings.Join(Kinds, ", "))
	}
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

// strictUnmarshal decodes one JSON value, rejecting unknown fields and
// trailing data.
func strictUnmarshal(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("trailing data after the JSON value")
	}
	return nil
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
	if err := strictUnmarshal([]byte(raw), m); err != nil {
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
	if c := m.Backbone.HNet; c != nil {
		fields = append(fields, field{"backbone width", c.Width, MaxWidth}, field{"backbone depth", c.Depth, MaxBlocks},
			field{"backbone heads", c.Heads, MaxWidth}, field{"backbone mlp_hidden", c.MLPHidden, MaxMLP},
			field{"backbone frequency_size", c.FrequencySize, MaxWidth}, field{"backbone num_classes", c.NumClasses, MaxClasses},
			field{"backbone patch_size", c.PatchSize, MaxGridSide})
	}
	if c := m.Backbone.DiT; c != nil {
		fields = append(fields, field{"backbone hidden_size", c.HiddenSize, MaxWidth}, field{"backbone depth", c.Depth, MaxBlocks},
			field{"backbone num_heads", c.NumHeads, MaxWidth}, field{"backbone frequency_embedding_size", c.FrequencySize, MaxWidth},
			field{"backbone num_classes", c.NumClasses, MaxClasses}, field{"backbone patch_size", c.PatchSize, MaxGridSide},
			field{"backbone in_channels", c.InChannels, MaxChannels}, field{"backbone input_size", c.InputSize, MaxGridSide})
		if !(c.MLPRatio > 0 && c.MLPRatio*float64(c.HiddenSize) <= MaxMLP) {
			return fmt.Errorf("backbone mlp_ratio = %v at hidden_size %d, want an MLP width of 1 … %d", c.MLPRatio, c.HiddenSize, MaxMLP)
		}
	}
	if c := m.Backbone.ZImage; c != nil {
		fields = append(fields, field{"backbone dim", c.Dim, MaxWidth}, field{"backbone n_layers", c.NLayers, MaxBlocks},
			field{"backbone n_refiner_layers", c.NRefinerLayers, MaxBlocks}, field{"backbone n_heads", c.NHeads, MaxWidth},
			field{"backbone n_kv_heads", c.NKVHeads, MaxWidth}, field{"backbone in_channels", c.InChannels, MaxChannels},
			field{"backbone patch_size", c.PatchSize, MaxGridSide}, field{"backbone f_patch_size", c.FPatchSize, MaxGridSide},
			field{"backbone cap_feat_dim", c.CapFeatDim, MaxWidth}, field{"backbone ffn_hidden", c.FFNHidden, MaxMLP},
			field{"backbone adaln_dim", c.AdaLNDim, MaxWidth}, field{"backbone t_embedder_mid_size", c.TMidDim, MaxWidth},
			field{"backbone frequency_embedding_size", c.FrequencySize, MaxWidth})
		if len(c.AxesDims) > 8 || len(c.AxesLens) > 8 {
			return fmt.Errorf("backbone axes_dims %d and axes_lens %d values, want at most 8 each", len(c.AxesDims), len(c.AxesLens))
		}
		for i, v := range append(slices.Clone(c.AxesDims), c.AxesLens...) {
			if v > MaxWidth*MaxWidth {
				return fmt.Errorf("backbone axes_dims/axes_lens value %d = %d, want at most %d", i, v, MaxWidth*MaxWidth)
			}
		}
		for _, f := range []struct {
			name string
			v    float64
		}{{"norm_eps", c.NormEps}, {"rope_theta", c.RopeTheta}, {"t_scale", c.TScale}} {
			if math.IsNaN(f.v) || math.IsInf(f.v, 0) || math.Abs(f.v) > 1e12 {
				return fmt.Errorf("backbone %s = %v, want a finite value of at most 1e12", f.name, f.v)
			}
		}
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
	const bb = dc.BackbonePrefix
	switch b := m.Backbone; {
	case b.HNet != nil:
		counts = append(counts, count{"backbone depth", hnet.Prefix + "layers.", b.HNet.Depth})
	case b.DiT != nil:
		counts = append(counts, count{"backbone depth", bb + "blocks.", b.DiT.Depth})
	case b.ZImage != nil:
		counts = append(counts, count{"backbone n_layers", bb + "layers.", b.ZImage.NLayers},
			count{"backbone n_refiner_layers", bb + "noise_refiner.", b.ZImage.NRefinerLayers},
			count{"backbone n_refiner_layers", bb + "context_refiner.", b.ZImage.NRefinerLayers})
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
	switch m.Backbone.Kind {
	case KindHNet:
		c := m.Backbone.HNet
		if c == nil {
			return errors.New("hnet backbone without a config")
		}
		for _, f := range []struct {
			name string
			v    int
		}{{"width", c.Width}, {"depth", c.Depth}, {"heads", c.Heads}, {"mlp_hidden", c.MLPHidden},
			{"frequency_size", c.FrequencySize}, {"num_classes", c.NumClasses}} {
			if f.v < 1 {
				return fmt.Errorf("backbone config: %s = %d, want ≥ 1", f.name, f.v)
			}
		}
		if c.PatchSize < 0 {
			return fmt.Errorf("backbone config: patch_size = %d, want ≥ 1", c.PatchSize)
		}
		if c.Width%c.Heads != 0 || c.Width%4 != 0 {
			return fmt.Errorf("backbone config: width %d with %d heads: want heads dividing the width and a width divisible by 4", c.Width, c.Heads)
		}
		if c.FrequencySize%2 != 0 {
			return fmt.Errorf("backbone config: frequency_size = %d, want an even number", c.FrequencySize)
		}
		if c.Width != m.Scaffold.ModelDim || c.Width != m.Scaffold.CondDim {
			return fmt.Errorf("backbone width %d differs from the scaffold's model_dim %d or cond_dim %d", c.Width, m.Scaffold.ModelDim, m.Scaffold.CondDim)
		}
	case KindDiT:
		c := m.Backbone.DiT
		if c == nil {
			return errors.New("dit backbone without a config")
		}
		if err := c.Validate(); err != nil {
			return fmt.Errorf("backbone config: %w", err)
		}
		if g := c.InputSize / c.PatchSize; g*g*c.HiddenSize > MaxActivations {
			return fmt.Errorf("backbone config: a %d×%d patch grid at hidden_size %d: a position table of %d values, want at most %d", g, g, c.HiddenSize, g*g*c.HiddenSize, MaxActivations)
		}
		if c.HiddenSize != m.Scaffold.ModelDim || c.HiddenSize != m.Scaffold.CondDim {
			return fmt.Errorf("backbone hidden_size %d (its width and conditioning width) differs from the scaffold's model_dim %d or cond_dim %d", c.HiddenSize, m.Scaffold.ModelDim, m.Scaffold.CondDim)
		}
	case KindZImage:
		c := m.Backbone.ZImage
		if c == nil {
			return errors.New("zimage backbone without a config")
		}
		for _, f := range []struct {
			name string
			v    int
		}{{"dim", c.Dim}, {"n_layers", c.NLayers}, {"in_channels", c.InChannels}, {"cap_feat_dim", c.CapFeatDim},
			{"ffn_hidden", c.FFNHidden}, {"adaln_dim", c.AdaLNDim}, {"t_embedder_mid_size", c.TMidDim},
			{"frequency_embedding_size", c.FrequencySize}} {
			if f.v < 1 {
				return fmt.Errorf("backbone config: %s = %d, want ≥ 1", f.name, f.v)
			}
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
		if err := zimage.CheckConfig(c); err != nil {
			return fmt.Errorf("backbone config: %w", err)
		}
		if c.Dim != m.Scaffold.ModelDim || c.AdaLNDim != m.Scaffold.CondDim {
			return fmt.Errorf("backbone dim %d and adaln_dim %d (its width and conditioning width) differ from the scaffold's model_dim %d and cond_dim %d", c.Dim, c.AdaLNDim, m.Scaffold.ModelDim, m.Scaffold.CondDim)
		}
	default:
		return fmt.Errorf("unknown backbone kind %.40q (this build reads %s)", m.Backbone.Kind, strings.Join(Kinds, ", "))
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
func (m *Meta) backboneShapes() map[string][]int {
	var exp arch.Expected
	switch b := m.Backbone; {
	case b.HNet != nil:
		return hnet.Shapes(b.HNet)
	case b.DiT != nil:
		exp = arch.ExpectedDiT(b.DiT, arch.Original)
	case b.ZImage != nil:
		exp = arch.ExpectedZImage(b.ZImage, arch.Comfy)
	}
	s := make(map[string][]int, len(exp))
	for i, name := range exp.Names() {
		if name == "pos_embed" { // DiT's fixed sin-cos table, recomputed
			continue
		}
		shape := make([]int, len(exp.Shape(i)))
		for j, d := range exp.Shape(i) {
			shape[j] = int(d)
		}
		s[dc.BackbonePrefix+name] = shape
	}
	return s
}

// FLOPs counts one forward pass of a batch whose samples keep numKept
// tokens each (dc.Model.ForwardFLOPs without loading any weights).
func (m *Meta) FLOPs(numKept []int) dc.FLOPs {
	cfg := m.Scaffold
	var counter dc.BackboneFLOPs
	switch b := m.Backbone; {
	case b.HNet != nil:
		counter = &hnet.Network{Config: b.HNet}
	case b.DiT != nil:
		counter = &dit.Model{Config: b.DiT}
	case b.ZImage != nil:
		counter = &zimage.Backbone{Model: &zimage.Model{Config: b.ZImage}, CaptionLen: b.CaptionLen, ImageMultiple: b.ImageMultiple}
	}
	return dc.ConfigFLOPs(&cfg, counter, numKept)
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
	kind, cfg := model.Backbone.Spec()
	raw, err := json.Marshal(struct {
		Kind   string `json:"kind"`
		Config any    `json:"config"`
	}{kind, cfg})
	if err != nil {
		return nil, fmt.Errorf("checkpoint: backbone %q config: %w", kind, err)
	}
	if err := m.Backbone.UnmarshalJSON(raw); err != nil {
		return nil, fmt.Errorf("checkpoint: cannot save the backbone: %w", err)
	}
	// What Load sets on the Z-Image backbone it builds, Save reads from
	// the one it is given.
	if zb, ok := model.Backbone.(*zimage.Backbone); ok {
		for _, f := range []struct {
			what string
			v    int
		}{{"caption length", zb.CaptionLen}, {"image token multiple", zb.ImageMultiple}} {
			if f.v < 0 || f.v > MaxWidth {
				return nil, fmt.Errorf("checkpoint: Z-Image backbone's %s %d, want 1..%d (0: the default)", f.what, f.v, MaxWidth)
			}
		}
		m.Backbone.CaptionLen, m.Backbone.ImageMultiple = zb.CaptionLen, zb.ImageMultiple
	}
	if c := m.Backbone.HNet; c != nil && c.PatchSize == 0 {
		c.PatchSize = 1
	}
	if err := m.Validate(); err != nil {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	return m, nil
}

// newBackbone builds the backbone the Meta describes from named tensors
// (the file's, checked against Shapes): DC-DiT's main network, or a DiT
// or Z-Image built from its own names (the stored ones without
// dc.BackbonePrefix) and then renamed, as Save found it.
func (m *Meta) newBackbone(ts map[string]dc.Tensor) (dc.Backbone, error) {
	if m.Backbone.Kind == KindHNet {
		return hnet.New(m.Backbone.HNet, ts)
	}
	own := map[string]*loaders.Dense{}
	for name := range m.backboneShapes() {
		t, ok := ts[name]
		if !ok {
			return nil, fmt.Errorf("backbone tensor %q missing", name)
		}
		own[strings.TrimPrefix(name, dc.BackbonePrefix)] = &loaders.Dense{Shape: t.Shape, Data: t.Data}
	}
	switch m.Backbone.Kind {
	case KindDiT:
		c := m.Backbone.DiT
		g := c.InputSize / c.PatchSize
		pos := make([]float32, g*g*c.HiddenSize)
		dit.PosEmbedGrid(pos, g, c.HiddenSize)
		own["pos_embed"] = &loaders.Dense{Shape: []int{1, g * g, c.HiddenSize}, Data: pos}
		model, err := dit.New(&dit.Weights{Config: c, Params: own})
		if err != nil {
			return nil, fmt.Errorf("backbone: %w", err)
		}
		model.PrefixNames(dc.BackbonePrefix)
		return model, nil
	case KindZImage:
		model, err := zimage.New(&zimage.Weights{Config: m.Backbone.ZImage, Params: own})
		if err != nil {
			return nil, fmt.Errorf("backbone: %w", err)
		}
		model.PrefixNames(dc.BackbonePrefix)
		bb := zimage.NewBackbone(model)
		bb.CaptionLen, bb.ImageMultiple = m.Backbone.CaptionLen, m.Backbone.ImageMultiple
		return bb, nil
	}
	return nil, fmt.Errorf("unknown backbone kind %q", m.Backbone.Kind)
}

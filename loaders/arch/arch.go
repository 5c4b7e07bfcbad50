// Package arch recognises which model a checkpoint holds (DiT, Z-Image or a
// dcdit DC checkpoint) and in which naming, infers its configuration from
// tensor names and shapes (completed by config.json or training arguments
// where shapes are silent), and accounts for every key against the set the
// architecture expects.
package arch

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/dcdit/dcdit/loaders/dtype"
)

// Architecture is the model family of a checkpoint.
type Architecture string

// The recognised families.
const (
	DiT    Architecture = "dit"
	ZImage Architecture = "zimage"
	DCDiT  Architecture = "dcdit"
	// VAE is an AutoencoderKL, a component rather than a backbone: Detect
	// does not report it (package vae recognises its namings), but
	// inspect and convert name it.
	VAE     Architecture = "vae"
	Unknown Architecture = "unknown"
)

// Layout is the naming convention of a checkpoint's keys.
type Layout string

// The recognised namings.
const (
	Original  Layout = "original"  // the reference code's state_dict names
	Diffusers Layout = "diffusers" // Hugging Face diffusers names
	Comfy     Layout = "comfy"     // ComfyUI single-file names (fused qkv, optional prefix)
	DCLayout  Layout = "dcdit"     // dcdit's own DC checkpoint
	NoLayout  Layout = ""
)

// MetadataConfigKey is the __metadata__ key under which a DC checkpoint
// stores its full model config as JSON.
const MetadataConfigKey = "dcdit.config"

// TensorMeta is what detection needs to know about a tensor: no data.
type TensorMeta struct {
	Name  string
	DType dtype.DType
	Shape []int64
}

// Input is everything detection looks at.
type Input struct {
	Tensors  []TensorMeta
	Metadata map[string]string // safetensors __metadata__
	Config   map[string]any    // config.json next to the weights, if any
	Args     map[string]any    // training arguments of a .pt training checkpoint
	// NumHeads overrides the head count where the checkpoint cannot tell it
	// (DiT stores no head count); 0 means infer.
	NumHeads int
}

// Report buckets: how Report.Parameters (`dcdit inspect`'s
// parameters_by_group) splits a checkpoint file's tensors by name, in any
// layout and naming, from headers alone and before any model is built.
// They are a coarse report of a file, not the parameter groups a recipe
// selects by (params.Groups, which a model answers through its
// ParamGroups): this package sits below params and the model families,
// and reads names (diffusers', ComfyUI's) that no model holds; some names
// coincide with groups' but hold more (BucketDecoder the residual
// projection too, BucketFinalLayer the wide head and latent skip).
const (
	BucketEmbedders  = "embedders"
	BucketBlocks     = "blocks"
	BucketFinalLayer = "final_layer"
	BucketOther      = "other"
	// DC-DiT checkpoints (both layouts) split the scaffold further and
	// call the transformer the backbone.
	BucketEncoder  = "encoder"  // hnet.encoder.*
	BucketRouter   = "router"   // hnet.routing_module.*
	BucketDecoder  = "decoder"  // hnet.decoder.*, hnet.residual_proj.*
	BucketBackbone = "backbone" // hnet.main_network.*, a pretrained backbone's backbone.*
)

// Mismatch is a tensor whose shape differs from the expected one.
type Mismatch struct {
	Name     string  `json:"name"`
	Expected []int64 `json:"expected"`
	Found    []int64 `json:"found"`
}

// Report is the result of detection.
type Report struct {
	Architecture Architecture `json:"architecture"`
	Layout       Layout       `json:"layout"`
	// Prefix is stripped from every key before matching
	// (e.g. "model.diffusion_model." in ComfyUI full checkpoints).
	Prefix string `json:"prefix,omitempty"`
	// Config is a *DiTConfig, *ZImageConfig, or for a DC checkpoint the
	// decoded JSON object; nil when unknown.
	Config any `json:"config"`
	// Parameters counts elements per report bucket (Bucket*).
	Parameters map[string]int64 `json:"parameters_by_group"`
	Missing    []string         `json:"missing,omitempty"`
	Unexpected []string         `json:"unexpected,omitempty"`
	Mismatched []Mismatch       `json:"mismatched,omitempty"`
	Warnings   []string         `json:"warnings"`
}

func (r *Report) warnf(format string, args ...any) {
	r.Warnings = append(r.Warnings, fmt.Sprintf(format, args...))
}

// keySet indexes tensors by name (after prefix stripping).
type keySet map[string]TensorMeta

func (k keySet) shape(name string) ([]int64, bool) {
	t, ok := k[name]
	return t.Shape, ok
}

// dim returns shape[i] of the named tensor, or 0 when absent or too short.
func (k keySet) dim(name string, i int) int64 {
	s, ok := k.shape(name)
	if !ok || i >= len(s) {
		return 0
	}
	return s[i]
}

// count returns the number of consecutive numbered sub-modules
// prefix.0., prefix.1., … present.
func (k keySet) count(prefix string) int {
	seen := make(map[int]bool)
	for name := range k {
		rest, ok := strings.CutPrefix(name, prefix+".")
		if !ok {
			continue
		}
		idx, _, _ := strings.Cut(rest, ".")
		var n int
		if _, err := fmt.Sscanf(idx, "%d", &n); err == nil && fmt.Sprint(n) == idx {
			seen[n] = true
		}
	}
	n := 0
	for seen[n] {
		n++
	}
	return n
}

// spec is one expected tensor.
type spec struct {
	name  string
	shape []int64
}

// Expected lists an architecture's expected tensor names and shapes for a
// configuration, in a stable order.
type Expected []spec

// Names returns the expected names.
func (e Expected) Names() []string {
	out := make([]string, len(e))
	for i, s := range e {
		out[i] = s.name
	}
	return out
}

// Shape returns the expected shape of tensor i.
func (e Expected) Shape(i int) []int64 { return e[i].shape }

// NumParameters is the total element count of the expected tensors.
func (e Expected) NumParameters() int64 {
	var n int64
	for _, s := range e {
		p := int64(1)
		for _, d := range s.shape {
			p *= d
		}
		n += p
	}
	return n
}

// Detect identifies the architecture, layout and configuration of in.
func Detect(in Input) *Report {
	r := &Report{Architecture: Unknown, Parameters: map[string]int64{}, Warnings: []string{}}
	if raw, ok := in.Metadata[MetadataConfigKey]; ok {
		detectDC(r, in, raw)
		return r
	}
	prefix, keys, outside := stripPrefix(in.Tensors)
	r.Prefix = prefix
	if prefix == "" && (has(keys, dcRouterKey) || hasPrefix(keys, dcMainPrefix)) {
		detectDCReference(r, in)
		return r
	}
	var exp Expected
	var bucket func(string) string
	switch {
	case has(keys, "blocks.0.attn.qkv.weight") || has(keys, "x_embedder.proj.weight"):
		exp, bucket = detectDiT(r, keys, in, Original)
	case has(keys, "transformer_blocks.0.attn1.to_q.weight") || has(keys, "pos_embed.proj.weight"):
		exp, bucket = detectDiT(r, keys, in, Diffusers)
	case has(keys, "layers.0.attention.to_q.weight") || hasPrefix(keys, "all_x_embedder."):
		exp, bucket = detectZImage(r, keys, in, Diffusers)
	case has(keys, "layers.0.attention.qkv.weight") || has(keys, "x_embedder.weight"):
		exp, bucket = detectZImage(r, keys, in, Comfy)
	default:
		r.warnf("no known architecture matches these keys (DiT original/diffusers, Z-Image diffusers/ComfyUI, dcdit)")
		for _, t := range in.Tensors {
			r.Parameters[BucketOther] += numel(t.Shape)
		}
		return r
	}
	account(r, keys, exp)
	for name, t := range keys {
		r.Parameters[bucket(name)] += numel(t.Shape)
	}
	for _, t := range outside {
		r.Parameters[BucketOther] += numel(t.Shape)
	}
	if len(outside) > 0 {
		r.warnf("%d tensors outside the model prefix %q (other components of a full checkpoint: %s) are ignored", len(outside), prefix, summarizePrefixes(outside))
	}
	checkDTypes(r, in.Tensors)
	return r
}

// comfyPrefix is the prefix ComfyUI full checkpoints put before the denoiser.
const comfyPrefix = "model.diffusion_model."

// stripPrefix removes the ComfyUI denoiser prefix when present and returns
// the keys under it and the tensors outside it.
func stripPrefix(ts []TensorMeta) (string, keySet, []TensorMeta) {
	under := 0
	for _, t := range ts {
		if strings.HasPrefix(t.Name, comfyPrefix) {
			under++
		}
	}
	keys := make(keySet, len(ts))
	if under == 0 {
		for _, t := range ts {
			keys[t.Name] = t
		}
		return "", keys, nil
	}
	var outside []TensorMeta
	for _, t := range ts {
		if rest, ok := strings.CutPrefix(t.Name, comfyPrefix); ok {
			t.Name = rest
			keys[rest] = t
		} else {
			outside = append(outside, t)
		}
	}
	return comfyPrefix, keys, outside
}

func summarizePrefixes(ts []TensorMeta) string {
	counts := map[string]int{}
	for _, t := range ts {
		head, _, _ := strings.Cut(t.Name, ".")
		counts[head]++
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(counts)) {
		parts = append(parts, fmt.Sprintf("%s.* ×%d", k, counts[k]))
	}
	return strings.Join(parts, ", ")
}

func has(k keySet, name string) bool { _, ok := k[name]; return ok }

func hasPrefix(k keySet, prefix string) bool {
	for name := range k {
		if strings.HasPrefix(name, prefix) {
			return true
		}
	}
	return false
}

func numel(shape []int64) int64 {
	n := int64(1)
	for _, d := range shape {
		n *= d
	}
	return n
}

// account compares the present keys with the expected set.
func account(r *Report, keys keySet, exp Expected) {
	want := make(map[string][]int64, len(exp))
	for _, s := range exp {
		want[s.name] = s.shape
		t, ok := keys[s.name]
		if !ok {
			r.Missing = append(r.Missing, r.Prefix+s.name)
			continue
		}
		if !equalShape(t.Shape, s.shape) {
			r.Mismatched = append(r.Mismatched, Mismatch{Name: r.Prefix + s.name, Expected: s.shape, Found: t.Shape})
		}
	}
	for name := range keys {
		if _, ok := want[name]; !ok {
			r.Unexpected = append(r.Unexpected, r.Prefix+name)
		}
	}
	sort.Strings(r.Missing)
	sort.Strings(r.Unexpected)
	if n := len(r.Missing); n > 0 {
		r.warnf("%d expected tensors are missing: %s", n, abbreviate(r.Missing))
	}
	if n := len(r.Unexpected); n > 0 {
		r.warnf("%d unexpected tensors: %s", n, abbreviate(r.Unexpected))
	}
	for _, m := range r.Mismatched {
		r.warnf("tensor %s has shape %v, expected %v", m.Name, m.Found, m.Expected)
	}
}

func abbreviate(names []string) string { return JoinCapped(names, ", ", 8) }

// JoinCapped joins items with sep, listing at most show of them and
// counting the rest ("a, b, c … and 99,950 more"): error messages and
// warnings that list names from a file stay one bounded line however many
// names the file holds. Each item is also cut to 200 bytes.
func JoinCapped(items []string, sep string, show int) string {
	const maxItem = 200
	n := min(len(items), max(show, 0))
	parts := make([]string, n)
	for i, it := range items[:n] {
		if len(it) > maxItem {
			it = strings.ToValidUTF8(it[:maxItem], "") + "…"
		}
		parts[i] = it
	}
	out := strings.Join(parts, sep)
	if rest := len(items) - n; rest > 0 {
		out += fmt.Sprintf(" … and %s more", groupThousands(rest))
	}
	return out
}

// groupThousands writes n with comma thousands separators (99,950).
func groupThousands(n int) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0 && s[i-1] != '-'; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

func equalShape(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// checkDTypes warns about storage dtypes that lose information or overflow.
func checkDTypes(r *Report, ts []TensorMeta) {
	counts := map[dtype.DType]int{}
	for _, t := range ts {
		counts[t.DType]++
	}
	if n := counts[dtype.F16]; n > 0 {
		r.warnf("%d tensors are stored as F16: they decode exactly to float32, but F16 has a range of ±65504, so running or re-saving in F16 risks overflow (DiT and Z-Image activations exceed it); compute stays in float32 here", n)
	}
	for _, d := range []dtype.DType{dtype.F8_E4M3, dtype.F8_E5M2, dtype.F8_E4M3FNUZ, dtype.F8_E5M2FNUZ, dtype.F8_E8M0, dtype.F4, dtype.F6_E2M3, dtype.F6_E3M2} {
		if n := counts[d]; n > 0 {
			r.warnf("%d tensors are stored as %s, a lossy quantised format: values are upcast to float32 but the lost precision is not recovered", n, d)
		}
	}
}

func detectDC(r *Report, in Input, raw string) {
	r.Architecture, r.Layout = DCDiT, DCLayout
	var cfg map[string]any
	if err := json.Unmarshal([]byte(raw), &cfg); err != nil {
		r.warnf("__metadata__ %q is not a JSON object: %v", MetadataConfigKey, err)
	} else {
		r.Config = cfg
	}
	for _, t := range in.Tensors {
		r.Parameters[dcBucket(t.Name)] += numel(t.Shape)
	}
	checkDTypes(r, in.Tensors)
}

// Keys that only a DC-DiT state_dict holds.
const (
	dcRouterKey  = "hnet.routing_module.proj.weight"
	dcMainPrefix = "hnet.main_network."
)

// DCBackbonePrefix is the prefix of a pretrained backbone's tensors in a
// DC checkpoint whose backbone keeps its own names (kinds "dit" and
// "zimage"); dc.BackbonePrefix, which says why.
const DCBackbonePrefix = "backbone."

// detectDCReference recognises a DC-DiT state_dict in the official layout
// (AMD-AGI/DynamicChunkingDiT create_dit: x_embedder, t_embedder,
// y_embedder, pos_embed, hnet.*, final_layer) without dcdit's metadata.
// Its config and key accounting need the dc packages and are left to the
// caller; what the file cannot tell is said here.
func detectDCReference(r *Report, in Input) {
	r.Architecture, r.Layout = DCDiT, Original
	for _, t := range in.Tensors {
		r.Parameters[dcBucket(t.Name)] += numel(t.Shape)
	}
	r.warnf("a reference DC-DiT state_dict without dcdit metadata (__metadata__ %q): the head count, de-chunk σ, ratio-loss target N and trained ρ values are not stored here; they come from the YAML config beside it (model.pt, model.yaml) or the config a training checkpoint pickles, else --num-heads and the official defaults", MetadataConfigKey)
	checkDTypes(r, in.Tensors)
}

// dcBucket sorts a DC-DiT tensor (official state_dict names, which DC
// checkpoints keep) into the scaffold's parts and the backbone; dcdit's
// own output paths (wide head, latent skip) count with the final layer.
func dcBucket(name string) string {
	switch {
	case strings.HasPrefix(name, "x_embedder.") || strings.HasPrefix(name, "token_embedder.") || strings.HasPrefix(name, "t_embedder.") ||
		strings.HasPrefix(name, "y_embedder.") || name == "pos_embed":
		return BucketEmbedders
	case strings.HasPrefix(name, "hnet.encoder."), strings.HasPrefix(name, "dropped_context."):
		return BucketEncoder
	case strings.HasPrefix(name, "hnet.routing_module."):
		return BucketRouter
	case strings.HasPrefix(name, "hnet.decoder.") || strings.HasPrefix(name, "hnet.residual_proj."):
		return BucketDecoder
	case strings.HasPrefix(name, dcMainPrefix), strings.HasPrefix(name, DCBackbonePrefix):
		return BucketBackbone
	case strings.HasPrefix(name, "final_layer."), strings.HasPrefix(name, "wide_head."), strings.HasPrefix(name, "latent_skip."):
		return BucketFinalLayer
	}
	return BucketOther
}

// intFrom reads an integer config value (JSON numbers decode as float64).
func intFrom(m map[string]any, key string) (int64, bool) {
	switch v := m[key].(type) {
	case float64:
		if v == float64(int64(v)) {
			return int64(v), true
		}
	case int64:
		return v, true
	case int:
		return int64(v), true
	case json.Number:
		n, err := v.Int64()
		return n, err == nil
	}
	return 0, false
}

func floatFrom(m map[string]any, key string) (float64, bool) {
	switch v := m[key].(type) {
	case float64:
		return v, true
	case int64:
		return float64(v), true
	case int:
		return float64(v), true
	}
	return 0, false
}

func boolFrom(m map[string]any, key string) (bool, bool) {
	v, ok := m[key].(bool)
	return v, ok
}

func intsFrom(m map[string]any, key string) ([]int64, bool) {
	list, ok := m[key].([]any)
	if !ok {
		return nil, false
	}
	out := make([]int64, len(list))
	for i, v := range list {
		n, ok := intFrom(map[string]any{"v": v}, "v")
		if !ok {
			return nil, false
		}
		out[i] = n
	}
	return out, true
}

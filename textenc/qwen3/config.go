package qwen3

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// Config is what the encoder needs of transformers' Qwen3Config.
type Config struct {
	VocabSize         int
	HiddenSize        int
	IntermediateSize  int
	NumHiddenLayers   int
	NumAttentionHeads int
	NumKeyValueHeads  int
	// HeadDim is the width of one attention head and of RoPE. Qwen3 sets
	// it explicitly: in Qwen3-4B heads·HeadDim = 4096 ≠ HiddenSize 2560.
	HeadDim    int
	RopeTheta  float64
	RMSNormEps float64
}

// Qwen3-4B's values (ComfyUI's Qwen3_4BConfig), used when no config.json
// says otherwise: checkpoints do not store them.
const (
	defaultRopeTheta  = 1e6
	defaultRMSNormEps = 1e-6
)

// Check rejects configurations the forward pass cannot run, naming the
// field.
func (c *Config) Check() error {
	for _, f := range []struct {
		name string
		v    int
	}{
		{"vocab_size", c.VocabSize}, {"hidden_size", c.HiddenSize}, {"intermediate_size", c.IntermediateSize},
		{"num_hidden_layers", c.NumHiddenLayers}, {"num_attention_heads", c.NumAttentionHeads},
		{"num_key_value_heads", c.NumKeyValueHeads}, {"head_dim", c.HeadDim},
	} {
		if f.v < 1 {
			return fmt.Errorf("%s %d, want ≥ 1", f.name, f.v)
		}
	}
	if c.NumAttentionHeads%c.NumKeyValueHeads != 0 {
		return fmt.Errorf("num_attention_heads %d is not a multiple of num_key_value_heads %d", c.NumAttentionHeads, c.NumKeyValueHeads)
	}
	if c.HeadDim%2 != 0 {
		// rotate_half splits each head into two halves.
		return fmt.Errorf("head_dim %d, want an even width", c.HeadDim)
	}
	if !(c.RopeTheta > 0) {
		return fmt.Errorf("rope_theta %v, want > 0", c.RopeTheta)
	}
	if !(c.RMSNormEps >= 0) {
		return fmt.Errorf("rms_norm_eps %v, want ≥ 0", c.RMSNormEps)
	}
	return nil
}

// shapes is the configuration the tensors imply; zero where they cannot
// tell.
func shapes(names map[string][]int64) Config {
	var c Config
	if s := names["embed_tokens.weight"]; len(s) == 2 {
		c.VocabSize, c.HiddenSize = int(s[0]), int(s[1])
	}
	if s := names["layers.0.self_attn.q_norm.weight"]; len(s) == 1 {
		c.HeadDim = int(s[0])
	}
	if s := names["layers.0.mlp.gate_proj.weight"]; len(s) == 2 {
		c.IntermediateSize = int(s[0])
	}
	if c.HeadDim > 0 {
		if s := names["layers.0.self_attn.q_proj.weight"]; len(s) == 2 && int(s[0])%c.HeadDim == 0 {
			c.NumAttentionHeads = int(s[0]) / c.HeadDim
		}
		if s := names["layers.0.self_attn.k_proj.weight"]; len(s) == 2 && int(s[0])%c.HeadDim == 0 {
			c.NumKeyValueHeads = int(s[0]) / c.HeadDim
		}
	}
	// Layers are counted up to the first missing index, so that a hole
	// shows up as unexpected tensors beyond it rather than as a
	// missing layer of plausible size.
	for {
		if _, ok := names[fmt.Sprintf("layers.%d.input_layernorm.weight", c.NumHiddenLayers)]; !ok {
			break
		}
		c.NumHiddenLayers++
	}
	return c
}

// resolveConfig combines a config.json (nil when there is none) with the
// configuration the tensors imply: the file's values where it has them,
// the shapes' elsewhere, Qwen3-4B's rope_theta and rms_norm_eps when
// neither tells. It returns the warnings for what was assumed.
func resolveConfig(cfg map[string]any, fromShapes Config) (Config, []string, error) {
	c := fromShapes
	var warnings, assumed []string
	if cfg != nil {
		if err := checkSupported(cfg); err != nil {
			return c, nil, err
		}
		for _, f := range []struct {
			key string
			dst *int
		}{
			{"vocab_size", &c.VocabSize}, {"hidden_size", &c.HiddenSize}, {"intermediate_size", &c.IntermediateSize},
			{"num_hidden_layers", &c.NumHiddenLayers}, {"num_attention_heads", &c.NumAttentionHeads},
			{"num_key_value_heads", &c.NumKeyValueHeads}, {"head_dim", &c.HeadDim},
		} {
			v, ok, err := intKey(cfg, f.key)
			if err != nil {
				return c, nil, err
			}
			if ok {
				*f.dst = v
			}
		}
	}
	c.RopeTheta, c.RMSNormEps = defaultRopeTheta, defaultRMSNormEps
	theta, ok, err := ropeTheta(cfg)
	if err != nil {
		return c, nil, err
	}
	if ok {
		c.RopeTheta = theta
	} else {
		assumed = append(assumed, "rope_theta "+strconv.FormatFloat(defaultRopeTheta, 'g', -1, 64))
	}
	eps, ok, err := floatKey(cfg, "rms_norm_eps")
	if err != nil {
		return c, nil, err
	}
	if ok {
		c.RMSNormEps = eps
	} else {
		assumed = append(assumed, "rms_norm_eps "+strconv.FormatFloat(defaultRMSNormEps, 'g', -1, 64))
	}
	if len(assumed) > 0 {
		where := "no config.json"
		if cfg != nil {
			where = "the config does not set them"
		}
		warnings = append(warnings, fmt.Sprintf("%s: assuming Qwen3-4B's %s", where, strings.Join(assumed, " and ")))
	}
	return c, warnings, nil
}

// checkSupported refuses configurations whose forward pass differs from
// the one implemented: the keys are transformers' Qwen3Config's.
func checkSupported(cfg map[string]any) error {
	if v, ok := cfg["model_type"]; ok && v != "qwen3" {
		return fmt.Errorf("model_type %v, want \"qwen3\"", v)
	}
	if v, ok := cfg["hidden_act"]; ok && v != "silu" {
		return fmt.Errorf("hidden_act %v, want \"silu\" (the only activation implemented)", v)
	}
	for _, key := range []string{"attention_bias", "use_sliding_window"} {
		if v, ok := cfg[key]; ok && v != false {
			return fmt.Errorf("%s %v is not supported (want false)", key, v)
		}
	}
	if types, ok := cfg["layer_types"].([]any); ok {
		for i, t := range types {
			if t != "full_attention" {
				return fmt.Errorf("layer_types[%d] %v is not supported (want \"full_attention\")", i, t)
			}
		}
	}
	for _, key := range []string{"rope_scaling", "rope_parameters"} {
		v, ok := cfg[key]
		if !ok || v == nil {
			continue
		}
		m, isMap := v.(map[string]any)
		if !isMap {
			return fmt.Errorf("%s %v, want an object or null", key, v)
		}
		for _, tk := range []string{"rope_type", "type"} {
			if t, ok := m[tk]; ok && t != "default" {
				return fmt.Errorf("%s.%s %v is not supported (only the default RoPE is implemented)", key, tk, t)
			}
		}
	}
	return nil
}

// ropeTheta reads rope_theta, or rope_parameters.rope_theta where newer
// transformers versions write it.
func ropeTheta(cfg map[string]any) (float64, bool, error) {
	if v, ok, err := floatKey(cfg, "rope_theta"); ok || err != nil {
		return v, ok, err
	}
	if rp, ok := cfg["rope_parameters"].(map[string]any); ok {
		v, ok, err := floatKey(rp, "rope_theta")
		if err != nil {
			return 0, false, fmt.Errorf("rope_parameters: %w", err)
		}
		return v, ok, nil
	}
	return 0, false, nil
}

func floatKey(cfg map[string]any, key string) (float64, bool, error) {
	v, ok := cfg[key]
	if !ok || v == nil {
		return 0, false, nil
	}
	f, isNum := v.(float64)
	if !isNum {
		return 0, false, fmt.Errorf("%s %v, want a number", key, v)
	}
	return f, true, nil
}

func intKey(cfg map[string]any, key string) (int, bool, error) {
	f, ok, err := floatKey(cfg, key)
	if !ok || err != nil {
		return 0, ok, err
	}
	if f != float64(int(f)) {
		return 0, false, fmt.Errorf("%s %v, want an integer", key, f)
	}
	return int(f), true, nil
}

// expected lists every tensor of a Qwen3Model with configuration c, by
// name without prefix, with its shape.
func expected(c Config) map[string][]int64 {
	D, I := int64(c.HiddenSize), int64(c.IntermediateSize)
	hd := int64(c.HeadDim)
	qw, kvw := int64(c.NumAttentionHeads)*hd, int64(c.NumKeyValueHeads)*hd
	out := map[string][]int64{
		"embed_tokens.weight": {int64(c.VocabSize), D},
		"norm.weight":         {D},
	}
	for i := range c.NumHiddenLayers {
		p := fmt.Sprintf("layers.%d.", i)
		out[p+"input_layernorm.weight"] = []int64{D}
		out[p+"post_attention_layernorm.weight"] = []int64{D}
		out[p+"self_attn.q_proj.weight"] = []int64{qw, D}
		out[p+"self_attn.k_proj.weight"] = []int64{kvw, D}
		out[p+"self_attn.v_proj.weight"] = []int64{kvw, D}
		out[p+"self_attn.o_proj.weight"] = []int64{D, qw}
		out[p+"self_attn.q_norm.weight"] = []int64{hd}
		out[p+"self_attn.k_norm.weight"] = []int64{hd}
		out[p+"mlp.gate_proj.weight"] = []int64{I, D}
		out[p+"mlp.up_proj.weight"] = []int64{I, D}
		out[p+"mlp.down_proj.weight"] = []int64{D, I}
	}
	return out
}

// sortedKeys returns m's keys in order, for stable error messages.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

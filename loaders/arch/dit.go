package arch

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
)

// DiTConfig is the configuration of a DiT (facebookresearch/DiT models.py).
type DiTConfig struct {
	Depth      int     `json:"depth"`
	HiddenSize int     `json:"hidden_size"`
	NumHeads   int     `json:"num_heads"`
	PatchSize  int     `json:"patch_size"`
	InChannels int     `json:"in_channels"`
	InputSize  int     `json:"input_size"` // latent side length (image side / 8)
	LearnSigma bool    `json:"learn_sigma"`
	NumClasses int     `json:"num_classes"`
	MLPRatio   float64 `json:"mlp_ratio"`
	// FrequencySize is the width of the sinusoidal timestep input (256).
	FrequencySize int `json:"frequency_embedding_size"`
	// Preset names the matching standard model ("DiT-XL/2"), if any.
	Preset string `json:"preset,omitempty"`
}

// OutChannels is 2·InChannels with learned sigma, else InChannels.
func (c *DiTConfig) OutChannels() int {
	if c.LearnSigma {
		return 2 * c.InChannels
	}
	return c.InChannels
}

// MLPHidden is the width of the MLP's hidden layer.
func (c *DiTConfig) MLPHidden() int { return int(float64(c.HiddenSize) * c.MLPRatio) }

// NumTokens is the token count at the native resolution.
func (c *DiTConfig) NumTokens() int {
	g := c.InputSize / c.PatchSize
	return g * g
}

// DiTPreset is one of DiT's standard sizes.
type DiTPreset struct {
	Name                    string
	Depth, Hidden, NumHeads int
	Patch                   int
}

// DiTPresets are the model sizes of DiT's models.py.
var DiTPresets = []DiTPreset{
	{"DiT-XL/2", 28, 1152, 16, 2}, {"DiT-XL/4", 28, 1152, 16, 4}, {"DiT-XL/8", 28, 1152, 16, 8},
	{"DiT-L/2", 24, 1024, 16, 2}, {"DiT-L/4", 24, 1024, 16, 4}, {"DiT-L/8", 24, 1024, 16, 8},
	{"DiT-B/2", 12, 768, 12, 2}, {"DiT-B/4", 12, 768, 12, 4}, {"DiT-B/8", 12, 768, 12, 8},
	{"DiT-S/2", 12, 384, 6, 2}, {"DiT-S/4", 12, 384, 6, 4}, {"DiT-S/8", 12, 384, 6, 8},
}

// LookupDiTPreset finds a preset by name ("DiT-XL/2").
func LookupDiTPreset(name string) (DiTPreset, bool) {
	for _, p := range DiTPresets {
		if p.Name == name {
			return p, true
		}
	}
	return DiTPreset{}, false
}

// ditDefaultInputSize is DiT's default latent size (256 px images).
const ditDefaultInputSize = 32

// Bounds on what a DiT file may claim, checked before any of it sizes an
// allocation: the latent side (MaxInputSize latents are 8192-pixel images
// through DiT's 8× VAE), the hidden width, the head count and the depth.
// Detection ignores (with a warning) a config.json or training-argument
// latent size outside them; Validate refuses the rest.
const (
	MaxInputSize  = 1024
	MaxHiddenSize = 1 << 16
	MaxDiTDepth   = 1024
)

// Validate checks that a DiT of this configuration can be built and run:
// every size positive and bounded, the heads dividing the hidden size (an
// attention head count comes from a flag or from metadata, not from the
// weights), a hidden size divisible by 4 (the 2-D sin-cos table) and a
// latent size divisible by the patch size. Errors are one line.
func (c *DiTConfig) Validate() error {
	for _, f := range []struct {
		name   string
		v, max int
	}{
		{"depth", c.Depth, MaxDiTDepth}, {"hidden_size", c.HiddenSize, MaxHiddenSize},
		{"num_heads", c.NumHeads, MaxHiddenSize}, {"patch_size", c.PatchSize, MaxInputSize},
		{"in_channels", c.InChannels, MaxHiddenSize}, {"input_size", c.InputSize, MaxInputSize},
		{"num_classes", c.NumClasses, 1 << 24}, {"frequency_embedding_size", c.FrequencySize, MaxHiddenSize},
	} {
		if f.v < 1 || f.v > f.max {
			return fmt.Errorf("DiT config: %s = %d, want 1 … %d", f.name, f.v, f.max)
		}
	}
	switch {
	case !(c.MLPRatio > 0) || c.MLPHidden() < 1 || c.MLPHidden() > 16*MaxHiddenSize:
		return fmt.Errorf("DiT config: mlp_ratio = %v gives an MLP width of %d, want 1 … %d", c.MLPRatio, c.MLPHidden(), 16*MaxHiddenSize)
	case c.HiddenSize%c.NumHeads != 0:
		return fmt.Errorf("DiT config: %d heads do not divide the hidden size %d (want one of %s)", c.NumHeads, c.HiddenSize, divisors(c.HiddenSize, 8))
	case c.HiddenSize%4 != 0:
		return fmt.Errorf("DiT config: hidden size %d: the 2-D sin-cos position table needs a multiple of 4", c.HiddenSize)
	case c.InputSize%c.PatchSize != 0:
		return fmt.Errorf("DiT config: input_size %d is not a multiple of patch_size %d", c.InputSize, c.PatchSize)
	}
	return nil
}

// divisors lists up to max divisors of n ("1, 2, 4, …").
func divisors(n, max int) string {
	var d []string
	for k := 1; k <= n; k++ {
		if n%k != 0 {
			continue
		}
		if len(d) == max {
			return strings.Join(d, ", ") + ", …"
		}
		d = append(d, fmt.Sprint(k))
	}
	return strings.Join(d, ", ")
}

func detectDiT(r *Report, k keySet, in Input, layout Layout) (Expected, func(string) string) {
	r.Architecture, r.Layout = DiT, layout
	c := &DiTConfig{MLPRatio: 4, FrequencySize: 256}
	var embed, tLin1, yTable, fc1, final string
	if layout == Original {
		embed, tLin1, yTable = "x_embedder.proj.weight", "t_embedder.mlp.0.weight", "y_embedder.embedding_table.weight"
		fc1, final = "blocks.0.mlp.fc1.weight", "final_layer.linear.weight"
		c.Depth = k.count("blocks")
	} else {
		embed = "pos_embed.proj.weight"
		tLin1 = "transformer_blocks.0.norm1.emb.timestep_embedder.linear_1.weight"
		yTable = "transformer_blocks.0.norm1.emb.class_embedder.embedding_table.weight"
		fc1, final = "transformer_blocks.0.ff.net.0.proj.weight", "proj_out_2.weight"
		c.Depth = k.count("transformer_blocks")
	}
	c.HiddenSize = int(k.dim(embed, 0))
	c.InChannels = int(k.dim(embed, 1))
	c.PatchSize = int(k.dim(embed, 2))
	if f := k.dim(tLin1, 1); f > 0 {
		c.FrequencySize = int(f)
	}
	if rows := k.dim(yTable, 0); rows > 0 {
		// The table has a row for the CFG null class after the real classes.
		c.NumClasses = int(rows) - 1
	}
	if h := k.dim(fc1, 0); h > 0 && c.HiddenSize > 0 {
		c.MLPRatio = float64(h) / float64(c.HiddenSize)
	}
	if out := k.dim(final, 0); out > 0 && c.PatchSize > 0 && c.InChannels > 0 {
		perPatch := int(out) / (c.PatchSize * c.PatchSize)
		switch perPatch {
		case 2 * c.InChannels:
			c.LearnSigma = true
		case c.InChannels:
		default:
			r.warnf("final layer emits %d values per patch, neither C=%d nor 2C (learned sigma)", out, c.InChannels)
		}
	}
	ditInputSize(r, c, k, in, layout)
	ditHeads(r, c, in)
	if layout == Diffusers {
		r.warnf("diffusers naming: the math of the original DiT is used, which differs from diffusers' DiTTransformer2DModel in three places: diffusers' timestep sinusoid divides by 127 instead of 128, its MLP LayerNorm uses eps 1e-5 instead of 1e-6, and its pipeline guides all 4 eps channels instead of 3")
		if c.Depth > 1 {
			D, F := int64(c.HiddenSize), int64(c.FrequencySize)
			per := D*F + D + D*D + D + int64(c.NumClasses+1)*D // t-MLP and class table of one block
			r.warnf("diffusers naming stores the timestep and class embedders once per block: %d copies, %d redundant parameters; block 0's copy is used", c.Depth, int64(c.Depth-1)*per)
		}
	}
	if c.LearnSigma {
		r.warnf("learned sigma: the output has %d channels per pixel; channels 0..%d are eps and %d..%d interpolate the variance (DDPM learned range)", c.OutChannels(), c.InChannels-1, c.InChannels, c.OutChannels()-1)
	}
	r.Config = c
	if c.HiddenSize == 0 || c.PatchSize == 0 {
		r.warnf("cannot infer the configuration: the patch embedding %q is missing", embed)
		return nil, ditBucket
	}
	return ExpectedDiT(c, layout), ditBucket
}

// ditInputSize takes the latent size from the position table (original
// naming), from config.json or training arguments, or assumes the default.
func ditInputSize(r *Report, c *DiTConfig, k keySet, in Input, layout Layout) {
	if layout == Original {
		if t := k.dim("pos_embed", 1); t > 0 && c.PatchSize > 0 {
			g := int(math.Round(math.Sqrt(float64(t))))
			if g*g != int(t) {
				r.warnf("pos_embed has %d positions, not a square grid", t)
			}
			c.InputSize = g * c.PatchSize
			return
		}
	}
	// A stated size sizes the position table that loading computes, so
	// one outside [1, MaxInputSize] is reported and not used.
	var stored DiTConfig
	if text, ok := in.Metadata[DiTConfigKey]; ok && json.Unmarshal([]byte(text), &stored) == nil && stored.InputSize != 0 {
		// dcdit records the config of the DiTs it writes (a diffusers
		// file converted from an original one has no pos_embed left).
		if stored.InputSize >= 1 && stored.InputSize <= MaxInputSize {
			c.InputSize = stored.InputSize
			return
		}
		r.warnf("metadata %s input_size = %d is outside 1 … %d: ignored", DiTConfigKey, stored.InputSize, MaxInputSize)
	}
	if n, ok := intFrom(in.Config, "sample_size"); ok {
		if n >= 1 && n <= MaxInputSize {
			c.InputSize = int(n)
			return
		}
		r.warnf("config.json sample_size = %d is outside 1 … %d: ignored", n, MaxInputSize)
	}
	if n, ok := intFrom(in.Args, "image_size"); ok {
		if n >= 8 && n <= 8*MaxInputSize {
			c.InputSize = int(n) / 8
			return
		}
		r.warnf("training args image_size = %d is outside 8 … %d: ignored", n, 8*MaxInputSize)
	}
	c.InputSize = ditDefaultInputSize
	r.warnf("input_size is not stored in this checkpoint; assuming DiT's default %d (256×256 images)", ditDefaultInputSize)
}

// DiTConfigKey is the safetensors metadata key under which dcdit records a
// DiT's config (heads included) when it writes one.
const DiTConfigKey = "dcdit.dit_config"

// ditHeads resolves the head count, which DiT checkpoints do not store
// (except those dcdit wrote, under DiTConfigKey).
func ditHeads(r *Report, c *DiTConfig, in Input) {
	var stored DiTConfig
	if text, ok := in.Metadata[DiTConfigKey]; ok {
		if err := json.Unmarshal([]byte(text), &stored); err != nil {
			r.warnf("metadata %s is not a DiT config: %v", DiTConfigKey, err)
		}
	}
	for _, p := range DiTPresets {
		if p.Depth == c.Depth && p.Hidden == c.HiddenSize && p.Patch == c.PatchSize {
			c.Preset = p.Name
		}
	}
	switch {
	case in.NumHeads > 0:
		c.NumHeads = in.NumHeads
	case stored.NumHeads > 0:
		c.NumHeads = stored.NumHeads
	case in.Config != nil && in.Config["num_attention_heads"] != nil:
		n, _ := intFrom(in.Config, "num_attention_heads")
		c.NumHeads = int(n)
		if hd, ok := intFrom(in.Config, "attention_head_dim"); ok && int(n*hd) != c.HiddenSize {
			r.warnf("config.json says %d heads × %d = %d, but the weights have hidden size %d", n, hd, n*hd, c.HiddenSize)
		}
	case in.Args["model"] != nil:
		name, _ := in.Args["model"].(string)
		if p, ok := LookupDiTPreset(name); ok {
			c.NumHeads = p.NumHeads
			if p.Hidden != c.HiddenSize || p.Depth != c.Depth {
				r.warnf("training args name model %s, but the weights have depth %d and hidden size %d", name, c.Depth, c.HiddenSize)
			}
		} else {
			r.warnf("training args name model %q, which is not a DiT preset", name)
		}
	}
	if c.NumHeads == 0 && c.Preset != "" {
		p, _ := LookupDiTPreset(c.Preset)
		c.NumHeads = p.NumHeads
	}
	if c.NumHeads == 0 && c.HiddenSize > 0 {
		// All DiT presets but XL use 64-wide heads.
		c.NumHeads = max(1, c.HiddenSize/64)
		r.warnf("num_heads is not stored in DiT checkpoints and depth %d / hidden %d match no preset; assuming head width 64, so %s — pass --num-heads to override", c.Depth, c.HiddenSize, plural(c.NumHeads, "head"))
	}
	if c.NumHeads > 0 && c.HiddenSize%c.NumHeads != 0 {
		r.warnf("hidden size %d is not divisible by %d heads", c.HiddenSize, c.NumHeads)
	}
}

// ExpectedDiT lists the tensors of a DiT state dict in the given naming.
func ExpectedDiT(c *DiTConfig, layout Layout) Expected {
	D, C, p := int64(c.HiddenSize), int64(c.InChannels), int64(c.PatchSize)
	H, F := int64(c.MLPHidden()), int64(c.FrequencySize)
	out := p * p * int64(c.OutChannels())
	rows := int64(c.NumClasses + 1)
	var e Expected
	add := func(name string, shape ...int64) { e = append(e, spec{name, shape}) }
	linear := func(name string, o, i int64) {
		add(name+".weight", o, i)
		add(name+".bias", o)
	}
	if layout == Original {
		add("x_embedder.proj.weight", D, C, p, p)
		add("x_embedder.proj.bias", D)
		add("pos_embed", 1, int64(c.NumTokens()), D)
		linear("t_embedder.mlp.0", D, F)
		linear("t_embedder.mlp.2", D, D)
		add("y_embedder.embedding_table.weight", rows, D)
		for i := 0; i < c.Depth; i++ {
			b := fmt.Sprintf("blocks.%d.", i)
			linear(b+"attn.qkv", 3*D, D)
			linear(b+"attn.proj", D, D)
			linear(b+"mlp.fc1", H, D)
			linear(b+"mlp.fc2", D, H)
			linear(b+"adaLN_modulation.1", 6*D, D)
		}
		linear("final_layer.linear", out, D)
		linear("final_layer.adaLN_modulation.1", 2*D, D)
		return e
	}
	add("pos_embed.proj.weight", D, C, p, p)
	add("pos_embed.proj.bias", D)
	for i := 0; i < c.Depth; i++ {
		b := fmt.Sprintf("transformer_blocks.%d.", i)
		linear(b+"norm1.emb.timestep_embedder.linear_1", D, F)
		linear(b+"norm1.emb.timestep_embedder.linear_2", D, D)
		add(b+"norm1.emb.class_embedder.embedding_table.weight", rows, D)
		linear(b+"norm1.linear", 6*D, D)
		linear(b+"attn1.to_q", D, D)
		linear(b+"attn1.to_k", D, D)
		linear(b+"attn1.to_v", D, D)
		linear(b+"attn1.to_out.0", D, D)
		linear(b+"ff.net.0.proj", H, D)
		linear(b+"ff.net.2", D, H)
	}
	linear("proj_out_1", 2*D, D)
	linear("proj_out_2", out, D)
	return e
}

// ditBucket assigns a DiT key (either naming) to a report bucket.
func ditBucket(name string) string {
	switch {
	case strings.Contains(name, ".norm1.emb."),
		strings.HasPrefix(name, "x_embedder."), name == "pos_embed", strings.HasPrefix(name, "pos_embed."),
		strings.HasPrefix(name, "t_embedder."), strings.HasPrefix(name, "y_embedder."):
		return BucketEmbedders
	case strings.HasPrefix(name, "blocks."), strings.HasPrefix(name, "transformer_blocks."):
		return BucketBlocks
	case strings.HasPrefix(name, "final_layer."), strings.HasPrefix(name, "proj_out_"):
		return BucketFinalLayer
	}
	return BucketOther
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

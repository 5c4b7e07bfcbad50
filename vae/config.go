package vae

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"strings"
)

// Config is an AutoencoderKL configuration, with the keys of diffusers'
// vae/config.json. Only the SiLU activation and the DownEncoderBlock2D /
// UpDecoderBlock2D block types exist in the VAEs this package runs, so
// they are checked on reading and not stored.
type Config struct {
	InChannels       int   // image channels the encoder reads (3)
	OutChannels      int   // image channels the decoder writes (3)
	BlockOutChannels []int // widths of the down blocks; the up blocks use them reversed
	LayersPerBlock   int   // resnets per down block; up blocks hold one more
	LatentChannels   int
	NormNumGroups    int // groups of every GroupNorm
	// MidBlockAddAttention says whether the mid blocks hold their
	// self-attention between the two resnets.
	MidBlockAddAttention bool
	UseQuantConv         bool // 1×1 conv on the encoder's moments
	UsePostQuantConv     bool // 1×1 conv on the decoder's input
	// ScalingFactor and ShiftFactor relate the VAE's latents to the
	// diffusion model's: scaled = (z − shift)·scaling. A null shift_factor
	// reads as 0.
	ScalingFactor float64
	ShiftFactor   float64
}

// The VAE families whose scaling a single file without config.json implies
// (see InferConfig): Stable Diffusion 1.x/2.x and DiT's VAE, and FLUX.1's.
const (
	SDScalingFactor   = 0.18215
	FluxScalingFactor = 0.3611
	FluxShiftFactor   = 0.1159
)

// DefaultNormGroups is the GroupNorm group count assumed for a checkpoint
// without config.json: every released AutoencoderKL of these families
// uses 32.
const DefaultNormGroups = 32

// GroupNormEps is the epsilon of every GroupNorm of the VAE (diffusers
// passes 1e-6, not PyTorch's default 1e-5).
const GroupNormEps = 1e-6

// Logvar clamp of the posterior, as diffusers' DiagonalGaussianDistribution.
const (
	LogVarMin = -30
	LogVarMax = 20
)

// rawConfig holds config.json's keys as diffusers spells them; a missing
// key takes AutoencoderKL's constructor default.
type rawConfig struct {
	ClassName            *string   `json:"_class_name"`
	InChannels           *int      `json:"in_channels"`
	OutChannels          *int      `json:"out_channels"`
	DownBlockTypes       *[]string `json:"down_block_types"`
	UpBlockTypes         *[]string `json:"up_block_types"`
	BlockOutChannels     *[]int    `json:"block_out_channels"`
	LayersPerBlock       *int      `json:"layers_per_block"`
	ActFn                *string   `json:"act_fn"`
	LatentChannels       *int      `json:"latent_channels"`
	NormNumGroups        *int      `json:"norm_num_groups"`
	ScalingFactor        *float64  `json:"scaling_factor"`
	ShiftFactor          *float64  `json:"shift_factor"`
	LatentsMean          any       `json:"latents_mean"`
	LatentsStd           any       `json:"latents_std"`
	UseQuantConv         *bool     `json:"use_quant_conv"`
	UsePostQuantConv     *bool     `json:"use_post_quant_conv"`
	MidBlockAddAttention *bool     `json:"mid_block_add_attention"`
}

// ReadConfig reads a diffusers AutoencoderKL config.json.
func ReadConfig(path string) (*Config, error) {
	text, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("vae: %w", err)
	}
	c, err := ParseConfig(text)
	if err != nil {
		return nil, fmt.Errorf("vae: %s: %w", path, err)
	}
	return c, nil
}

// ParseConfig parses the text of a diffusers AutoencoderKL config.json.
// Keys it does not use (sample_size, force_upcast, a fixture's own keys)
// are ignored; a missing key takes diffusers' constructor default. A
// value this package cannot run (act_fn other than "silu", another block
// type, per-channel latents_mean/latents_std, another _class_name) is an
// error naming the key.
func ParseConfig(text []byte) (*Config, error) {
	var r rawConfig
	if err := json.Unmarshal(text, &r); err != nil {
		return nil, err
	}
	if r.ClassName != nil && *r.ClassName != "AutoencoderKL" {
		return nil, fmt.Errorf("_class_name %q, want \"AutoencoderKL\"", *r.ClassName)
	}
	if r.ActFn != nil && *r.ActFn != "silu" {
		return nil, fmt.Errorf("act_fn %q is not supported (only \"silu\")", *r.ActFn)
	}
	for _, k := range []struct {
		key   string
		v     *[]string
		block string
	}{{"down_block_types", r.DownBlockTypes, "DownEncoderBlock2D"}, {"up_block_types", r.UpBlockTypes, "UpDecoderBlock2D"}} {
		if k.v == nil {
			continue
		}
		for i, t := range *k.v {
			if t != k.block {
				return nil, fmt.Errorf("%s[%d] is %q; only %q is supported", k.key, i, t, k.block)
			}
		}
	}
	for _, k := range []struct {
		key string
		v   any
	}{{"latents_mean", r.LatentsMean}, {"latents_std", r.LatentsStd}} {
		if k.v != nil {
			return nil, fmt.Errorf("%s is set; per-channel latent statistics are not supported", k.key)
		}
	}
	c := &Config{InChannels: 3, OutChannels: 3, BlockOutChannels: []int{64}, LayersPerBlock: 1, LatentChannels: 4,
		NormNumGroups: 32, MidBlockAddAttention: true, UseQuantConv: true, UsePostQuantConv: true, ScalingFactor: SDScalingFactor}
	setInt := func(dst *int, v *int) {
		if v != nil {
			*dst = *v
		}
	}
	setInt(&c.InChannels, r.InChannels)
	setInt(&c.OutChannels, r.OutChannels)
	setInt(&c.LayersPerBlock, r.LayersPerBlock)
	setInt(&c.LatentChannels, r.LatentChannels)
	setInt(&c.NormNumGroups, r.NormNumGroups)
	if r.BlockOutChannels != nil {
		c.BlockOutChannels = append([]int(nil), (*r.BlockOutChannels)...)
	}
	for _, b := range []struct {
		dst *bool
		v   *bool
	}{{&c.MidBlockAddAttention, r.MidBlockAddAttention}, {&c.UseQuantConv, r.UseQuantConv}, {&c.UsePostQuantConv, r.UsePostQuantConv}} {
		if b.v != nil {
			*b.dst = *b.v
		}
	}
	if r.ScalingFactor != nil {
		c.ScalingFactor = *r.ScalingFactor
	}
	if r.ShiftFactor != nil {
		c.ShiftFactor = *r.ShiftFactor
	}
	n := len(c.BlockOutChannels)
	for _, k := range []struct {
		key string
		v   *[]string
	}{{"down_block_types", r.DownBlockTypes}, {"up_block_types", r.UpBlockTypes}} {
		got := 1 // diffusers' default is a single block
		if k.v != nil {
			got = len(*k.v)
		}
		if got != n {
			return nil, fmt.Errorf("%s has %d entries, block_out_channels %d", k.key, got, n)
		}
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return c, nil
}

// Validate checks that the configuration describes a VAE this package can
// build, naming the offending key.
func (c *Config) Validate() error {
	pos := func(key string, v int) error {
		if v < 1 || v > 1<<16 {
			return fmt.Errorf("%s %d, want 1 to 65536", key, v)
		}
		return nil
	}
	for _, k := range []struct {
		key string
		v   int
	}{{"in_channels", c.InChannels}, {"out_channels", c.OutChannels}, {"layers_per_block", c.LayersPerBlock},
		{"latent_channels", c.LatentChannels}, {"norm_num_groups", c.NormNumGroups}} {
		if err := pos(k.key, k.v); err != nil {
			return err
		}
	}
	if len(c.BlockOutChannels) == 0 || len(c.BlockOutChannels) > maxBlocks {
		return fmt.Errorf("block_out_channels has %d entries, want 1 to %d", len(c.BlockOutChannels), maxBlocks)
	}
	for i, ch := range c.BlockOutChannels {
		if err := pos(fmt.Sprintf("block_out_channels[%d]", i), ch); err != nil {
			return err
		}
		if ch%c.NormNumGroups != 0 {
			return fmt.Errorf("block_out_channels[%d] = %d does not split into norm_num_groups %d", i, ch, c.NormNumGroups)
		}
	}
	if !(c.ScalingFactor > 0) || math.IsInf(c.ScalingFactor, 0) {
		return fmt.Errorf("scaling_factor %g, want a positive number", c.ScalingFactor)
	}
	if math.IsNaN(c.ShiftFactor) || math.IsInf(c.ShiftFactor, 0) {
		return fmt.Errorf("shift_factor %g, want a finite number", c.ShiftFactor)
	}
	return nil
}

// NumBlocks is the number of down (and up) blocks.
func (c *Config) NumBlocks() int { return len(c.BlockOutChannels) }

// ScaleFactor is the ratio of image to latent side, 2^(NumBlocks−1) for
// sides that are multiples of it.
func (c *Config) ScaleFactor() int { return 1 << (c.NumBlocks() - 1) }

// Scale maps raw latents to the diffusion model's convention in place:
// z ← (z − shift)·scaling, in float32 as the pipelines compute it.
func (c *Config) Scale(z []float32) {
	s, sh := float32(c.ScalingFactor), float32(c.ShiftFactor)
	for i, v := range z {
		z[i] = (v - sh) * s
	}
}

// Unscale is Scale's inverse, in place: z ← z/scaling + shift, the
// decoding side of the pipelines.
func (c *Config) Unscale(z []float32) {
	s, sh := float32(c.ScalingFactor), float32(c.ShiftFactor)
	for i, v := range z {
		z[i] = v/s + sh
	}
}

// JSON returns the configuration as a diffusers vae/config.json (for
// writing a diffusers VAE folder); a zero shift is written as null, as
// diffusers writes the VAEs without one.
func (c *Config) JSON() ([]byte, error) {
	n := c.NumBlocks()
	down, up := make([]string, n), make([]string, n)
	for i := range n {
		down[i], up[i] = "DownEncoderBlock2D", "UpDecoderBlock2D"
	}
	var shift *float64
	if c.ShiftFactor != 0 {
		shift = &c.ShiftFactor
	}
	m := map[string]any{
		"_class_name": "AutoencoderKL", "act_fn": "silu", "in_channels": c.InChannels, "out_channels": c.OutChannels,
		"block_out_channels": c.BlockOutChannels, "layers_per_block": c.LayersPerBlock, "latent_channels": c.LatentChannels,
		"norm_num_groups": c.NormNumGroups, "down_block_types": down, "up_block_types": up,
		"mid_block_add_attention": c.MidBlockAddAttention, "use_quant_conv": c.UseQuantConv,
		"use_post_quant_conv": c.UsePostQuantConv, "scaling_factor": c.ScalingFactor, "shift_factor": shift,
		"latents_mean": nil, "latents_std": nil, "force_upcast": true,
	}
	return json.MarshalIndent(m, "", "  ")
}

// InferConfig reads a configuration from the shapes of a VAE's tensors in
// the diffusers naming (Source.Tensors' targets), for a checkpoint without
// config.json: widths, block and layer counts, latent and image channels,
// quant convs and mid attention. What shapes cannot tell is assumed:
// DefaultNormGroups, and the scaling of the one family the layout
// identifies — 4 latent channels with quant convs: SD (SDScalingFactor, no
// shift); 16 without: FLUX.1 (FluxScalingFactor, FluxShiftFactor).
// Anything else is an error asking for a config.json. The SDXL VAE
// (scaling 0.13025) and SD3's (1.5305, shift 0.0609) share those layouts
// and need their config.json.
func InferConfig(shapes map[string][]int64) (*Config, error) {
	dim := func(name string, axis int) (int, error) {
		s, ok := shapes[name]
		if !ok {
			return 0, fmt.Errorf("tensor %q missing; cannot infer the VAE's configuration", name)
		}
		if axis >= len(s) {
			return 0, fmt.Errorf("tensor %q: shape %v has no axis %d", name, s, axis)
		}
		return int(s[axis]), nil
	}
	c := &Config{NormNumGroups: DefaultNormGroups}
	var err error
	if c.InChannels, err = dim("encoder.conv_in.weight", 1); err != nil {
		return nil, err
	}
	if c.OutChannels, err = dim("decoder.conv_out.weight", 0); err != nil {
		return nil, err
	}
	if c.LatentChannels, err = dim("decoder.conv_in.weight", 1); err != nil {
		return nil, err
	}
	for i := 0; ; i++ {
		ch, err := dim(fmt.Sprintf("encoder.down_blocks.%d.resnets.0.conv1.weight", i), 0)
		if err != nil {
			if i == 0 {
				return nil, err
			}
			break
		}
		c.BlockOutChannels = append(c.BlockOutChannels, ch)
	}
	for {
		if _, ok := shapes[fmt.Sprintf("encoder.down_blocks.0.resnets.%d.conv1.weight", c.LayersPerBlock)]; !ok {
			break
		}
		c.LayersPerBlock++
	}
	_, c.UseQuantConv = shapes["quant_conv.weight"]
	_, c.UsePostQuantConv = shapes["post_quant_conv.weight"]
	_, enc := shapes["encoder.mid_block.attentions.0.to_q.weight"]
	_, dec := shapes["decoder.mid_block.attentions.0.to_q.weight"]
	c.MidBlockAddAttention = enc || dec
	switch {
	case c.LatentChannels == 4 && c.UseQuantConv && c.UsePostQuantConv:
		c.ScalingFactor = SDScalingFactor
	case c.LatentChannels == 16 && !c.UseQuantConv && !c.UsePostQuantConv:
		c.ScalingFactor, c.ShiftFactor = FluxScalingFactor, FluxShiftFactor
	default:
		return nil, fmt.Errorf("cannot tell the latent scaling of a VAE with %d latent channels and %s; give it a config.json", c.LatentChannels, quantWords(c))
	}
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("inferred configuration: %w (norm_num_groups %d is assumed without a config.json; give it one)", err, DefaultNormGroups)
	}
	return c, nil
}

func quantWords(c *Config) string {
	var w []string
	for _, q := range []struct {
		name string
		on   bool
	}{{"quant_conv", c.UseQuantConv}, {"post_quant_conv", c.UsePostQuantConv}} {
		if q.on {
			w = append(w, "with "+q.name)
		} else {
			w = append(w, "without "+q.name)
		}
	}
	return strings.Join(w, ", ")
}

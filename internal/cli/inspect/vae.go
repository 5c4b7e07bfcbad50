package inspect

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/dcdit/dcdit/loaders"
	"github.com/dcdit/dcdit/loaders/arch"
	"github.com/dcdit/dcdit/vae"
)

// VAEConfig is a VAE's configuration as inspect reports it.
type VAEConfig struct {
	BlockOutChannels     []int   `json:"block_out_channels"`
	LayersPerBlock       int     `json:"layers_per_block"`
	LatentChannels       int     `json:"latent_channels"`
	NormNumGroups        int     `json:"norm_num_groups"`
	MidBlockAddAttention bool    `json:"mid_block_add_attention"`
	UseQuantConv         bool    `json:"use_quant_conv"`
	UsePostQuantConv     bool    `json:"use_post_quant_conv"`
	ScalingFactor        float64 `json:"scaling_factor"`
	ShiftFactor          float64 `json:"shift_factor"`
	// ScaleFactor is the ratio of picture to latent side.
	ScaleFactor int `json:"vae_scale_factor"`
	// Inferred says that the config came from the tensor shapes and the
	// family's conventions, not from a config.json.
	Inferred bool `json:"inferred,omitempty"`
}

// describeVAE fills res for a checkpoint whose tensors are an
// AutoencoderKL's, in either naming; it reports false for anything else.
func describeVAE(res *Result, ck *loaders.Checkpoint) bool {
	specs := make([]vae.TensorSpec, len(ck.Tensors))
	for i, t := range ck.Tensors {
		specs[i] = vae.TensorSpec{Name: t.Name, Shape: t.Shape}
	}
	src, err := vae.DetectNaming(specs)
	if err != nil {
		return false
	}
	layout := arch.Diffusers
	if src.Naming == vae.LDM {
		layout = arch.Original
	}
	res.Architecture, res.Layout, res.Prefix = arch.VAE, layout, src.Prefix
	res.Missing, res.Unexpected, res.Mismatched = nil, nil, nil
	res.Warnings = append([]string{}, ck.Warnings...)
	res.ParametersByGroup = map[string]int64{}
	shapes := map[string][]int64{}
	var params int64
	for _, t := range src.Tensors {
		shapes[t.To] = t.ToShape
		n := int64(1)
		for _, d := range t.FromShape {
			n *= d
		}
		params += n
		group := "decoder"
		if strings.HasPrefix(t.To, "encoder.") || strings.HasPrefix(t.To, "quant_conv.") {
			group = "encoder"
		}
		res.ParametersByGroup[group] += n
	}
	if src.Prefix != "" {
		res.Warnings = append(res.Warnings, fmt.Sprintf("a full checkpoint: only its %d tensors under %s are the VAE's", len(src.Tensors), src.Prefix))
		res.Parameters = params
	}
	var cfg *vae.Config
	inferred := ck.ConfigPath == ""
	if inferred {
		cfg, err = vae.InferConfig(shapes)
	} else {
		cfg, err = vae.ReadConfig(ck.ConfigPath)
	}
	if err != nil {
		res.Warnings = append(res.Warnings, fmt.Sprintf("VAE configuration: %v", err))
		return true
	}
	want, err := vae.ExpectedTensors(cfg)
	if err == nil {
		have := maps.Clone(shapes)
		for _, w := range want {
			s, ok := have[w.Name]
			switch {
			case !ok:
				res.Missing = append(res.Missing, w.Name)
			case !slices.Equal(s, w.Shape):
				res.Mismatched = append(res.Mismatched, arch.Mismatch{Name: w.Name, Expected: w.Shape, Found: s})
			}
			delete(have, w.Name)
		}
		for name := range have {
			res.Unexpected = append(res.Unexpected, name)
		}
		sort.Strings(res.Unexpected)
	}
	res.Config = VAEConfig{BlockOutChannels: cfg.BlockOutChannels, LayersPerBlock: cfg.LayersPerBlock, LatentChannels: cfg.LatentChannels,
		NormNumGroups: cfg.NormNumGroups, MidBlockAddAttention: cfg.MidBlockAddAttention, UseQuantConv: cfg.UseQuantConv,
		UsePostQuantConv: cfg.UsePostQuantConv, ScalingFactor: cfg.ScalingFactor, ShiftFactor: cfg.ShiftFactor,
		ScaleFactor: cfg.ScaleFactor(), Inferred: inferred}
	return true
}

package dc

import (
	"fmt"
	"math"
	"strings"
)

// Preset is one of the DC-DiT paper's model scales (appendix table
// "Basic architecture shapes for the DC-DiT scale configurations"). The
// main network has the depth, width and heads of the same-size DiT; the
// encoder and the decoder have two conv blocks each at width D/4 (the
// reference's enc_dec_dim_factor 4); the router's bottleneck is D/4; the
// target downsampling factor is N = 4, so about a quarter of the latent
// grid's tokens reach the main network.
type Preset struct {
	Name  string
	Depth int // transformer blocks of the main network
	Width int // D, the main network's (and the conditioning's) width
	Heads int // attention heads of the main network
}

// Presets are the paper's DC-DiT scales, smallest first.
var Presets = []Preset{
	{Name: "DC-DiT-S", Depth: 12, Width: 384, Heads: 6},
	{Name: "DC-DiT-B", Depth: 12, Width: 768, Heads: 12},
	{Name: "DC-DiT-L", Depth: 24, Width: 1024, Heads: 16},
	{Name: "DC-DiT-XL", Depth: 28, Width: 1152, Heads: 16},
}

// Settings shared by every preset (the paper's hyperparameter table and
// the reference's B-N4.yaml): SD-VAE latents of 4 channels with a learned
// variance (8 output channels), enc/dec width D/4, 2 + 2 conv blocks,
// GroupNorm with 32 groups (8 in the router), de-chunk σ = 1 (256 px; the
// reference suggests 2 at 512 px), N = 4, ratio-loss weight 0.03 over
// groups of 16 samples.
const (
	presetLatentChannels = 4
	presetEncDecFactor   = 4
	presetConvBlocks     = 2
	presetTargetN        = 4
	presetRatioWeight    = 0.03
	presetRatioBatch     = 16
)

// LookupPreset finds a preset by name ("DC-DiT-XL").
func LookupPreset(name string) (Preset, bool) {
	for _, p := range Presets {
		if p.Name == name {
			return p, true
		}
	}
	return Preset{}, false
}

// PresetNames lists the presets' names, for messages.
func PresetNames() string {
	names := make([]string, len(Presets))
	for i, p := range Presets {
		names[i] = p.Name
	}
	return strings.Join(names, ", ")
}

// Config returns the preset's scaffold on a side×side latent grid (32 at
// 256 px: the scaffold runs at patch size 1).
func (p Preset) Config(side int) *Config {
	E := p.Width / presetEncDecFactor
	return &Config{
		InChannels: presetLatentChannels, OutChannels: 2 * presetLatentChannels,
		GridRows: side, GridCols: side,
		EncDecDim: E, ModelDim: p.Width, CondDim: p.Width, RouterDim: p.Width / 4,
		EncoderBlocks: presetConvBlocks, DecoderBlocks: presetConvBlocks,
		NormGroups: 32, RouterGroups: 8,
		Sigma: 1, TargetN: presetTargetN, RatioLossWeight: presetRatioWeight, RatioBatchSize: presetRatioBatch,
	}
}

// AssumedBoundaries is the number of natural boundaries a router that
// marks the fraction ratio of tokens gives: floor(ratio·tokens), at least
// one and at most tokens. With ratio = 1/N it is the planning assumption
// of AssumedKept.
func AssumedBoundaries(ratio float64, tokens int) (int, error) {
	if !(ratio > 0 && ratio <= 1) {
		return 0, fmt.Errorf("dc: kept ratio %v, want 0 < ratio ≤ 1", ratio)
	}
	if tokens < 1 {
		return 0, fmt.Errorf("dc: %d tokens, want at least 1", tokens)
	}
	// The tolerance keeps products such as 0.3·10 = 2.9999999999999996 at 3.
	n := int(math.Floor(ratio*float64(tokens) + 1e-9))
	return min(tokens, max(n, 1)), nil
}

// KeptAfterDrop is the number of tokens tail dropping leaves of natural
// boundaries at fraction rho: natural − floor(natural·ρ), the product taken
// in float32 and truncated exactly as TailDrop (and the reference's
// .long()) does. It fails where ρ is outside [0, 1) or would drop every
// boundary.
func KeptAfterDrop(natural int, rho float32) (int, error) {
	if !(rho >= 0 && rho < 1) {
		return 0, fmt.Errorf("dc: drop fraction %v, want 0 ≤ ρ < 1", rho)
	}
	drop := dropCount(natural, rho)
	if natural > 0 && drop >= natural {
		return 0, fmt.Errorf("dc: drop fraction %v drops all %d boundaries", rho, natural)
	}
	return natural - drop, nil
}

// dropCount is floor(n·ρ) in float32, the reference's
// (num_boundaries.float() * frac).long().
func dropCount(n int, rho float32) int { return int(float32(n) * rho) }

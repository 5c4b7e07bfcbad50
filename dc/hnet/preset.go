package hnet

import "github.com/dcdit/dcdit/dc"

// Main-network settings shared by the DC-DiT presets (DiT's): MLP ratio 4,
// a 256-wide timestep sinusoid, the 1000 ImageNet classes.
const (
	presetMLPRatio      = 4
	presetFrequencySize = 256
	presetNumClasses    = 1000
)

// PresetConfig returns the main network of a DC-DiT preset (dc.Presets).
func PresetConfig(p dc.Preset) *Config {
	return &Config{Width: p.Width, Depth: p.Depth, Heads: p.Heads, MLPHidden: presetMLPRatio * p.Width,
		FrequencySize: presetFrequencySize, NumClasses: presetNumClasses}
}

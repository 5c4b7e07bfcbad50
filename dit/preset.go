package dit

import (
	"fmt"
	"strings"

	"github.com/dcdit/dcdit/loaders/arch"
)

// Class-conditional ImageNet settings shared by DiT's presets (models.py
// and train.py): SD-VAE latents of 4 channels, learned sigma, 1000
// classes, MLP ratio 4, a 256-wide timestep sinusoid.
const (
	presetInChannels    = 4
	presetNumClasses    = 1000
	presetMLPRatio      = 4
	presetFrequencySize = 256
)

// PresetConfig returns the configuration of a standard DiT ("DiT-XL/2";
// the sizes are arch.DiTPresets, the table checkpoint detection matches
// against) on an inputSize×inputSize latent grid (32 at 256 px). The grid
// must divide into patches.
func PresetConfig(name string, inputSize int) (*arch.DiTConfig, error) {
	p, ok := arch.LookupDiTPreset(name)
	if !ok {
		return nil, fmt.Errorf("dit: no preset %q; the presets are %s", name, PresetNames())
	}
	if inputSize < p.Patch || inputSize%p.Patch != 0 {
		return nil, fmt.Errorf("dit: %s: latent size %d is not a multiple of the patch size %d", name, inputSize, p.Patch)
	}
	return &arch.DiTConfig{Depth: p.Depth, HiddenSize: p.Hidden, NumHeads: p.NumHeads, PatchSize: p.Patch,
		InChannels: presetInChannels, InputSize: inputSize, LearnSigma: true, NumClasses: presetNumClasses,
		MLPRatio: presetMLPRatio, FrequencySize: presetFrequencySize, Preset: p.Name}, nil
}

// PresetNames lists the presets' names, for messages.
func PresetNames() string {
	names := make([]string, len(arch.DiTPresets))
	for i, p := range arch.DiTPresets {
		names[i] = p.Name
	}
	return strings.Join(names, ", ")
}

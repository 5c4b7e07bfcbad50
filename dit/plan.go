package dit

import (
	"fmt"

	"github.com/dcdit/dcdit/family"
	"github.com/dcdit/dcdit/loaders/arch"
)

var _ family.Planned = Family{}

// PlanModel describes a DiT of config cfg (*arch.DiTConfig) for a
// recipe's plan, on its own latent grid (rows, cols and captionLen are
// not read): its tensors in the original naming, pos_embed a fixed table,
// and the preset it matches named. A head count that does not divide the
// width is an OptionError on num_heads (DiT checkpoints do not store it).
func (Family) PlanModel(cfg any, _, _, _ int) (family.ModelPlan, error) {
	c0, ok := cfg.(*arch.DiTConfig)
	if !ok || c0 == nil {
		return family.ModelPlan{}, fmt.Errorf("dit: a %T is not a DiT config", cfg)
	}
	c := *c0
	if c.Depth < 1 || c.HiddenSize < 1 || c.PatchSize < 1 || c.InputSize < c.PatchSize || c.InChannels < 1 || c.NumClasses < 1 {
		return family.ModelPlan{}, fmt.Errorf("cannot infer a DiT configuration (%+v)", cfg)
	}
	if c.NumHeads < 1 || c.HiddenSize%c.NumHeads != 0 {
		return family.ModelPlan{}, &family.OptionError{Option: "num_heads",
			Err: fmt.Errorf("found %d heads for hidden size %d, expected a divisor of it", c.NumHeads, c.HiddenSize)}
	}
	for _, pr := range arch.DiTPresets {
		if pr.Depth == c.Depth && pr.Hidden == c.HiddenSize && pr.Patch == c.PatchSize {
			c.Preset = pr.Name
		}
	}
	name := c.Preset
	if name == "" {
		name = fmt.Sprintf("DiT/%d", c.PatchSize)
	}
	sigma := ""
	if c.LearnSigma {
		sigma = ", learned σ"
	}
	spec := Spec{Config: &c}
	exp := arch.ExpectedDiT(&c, arch.Original)
	tensors := make([]family.PlanTensor, 0, len(exp))
	for i, n := range exp.Names() {
		shape := make([]int, len(exp.Shape(i)))
		for j, d := range exp.Shape(i) {
			shape[j] = int(d)
		}
		tensors = append(tensors, family.PlanTensor{Name: n, Shape: shape,
			Groups: spec.ParamGroups(arch.DCBackbonePrefix + n), Fixed: n == "pos_embed"})
	}
	T := int64(c.NumTokens())
	return family.ModelPlan{Config: &c, Name: name,
		Sizes: fmt.Sprintf("depth %d, hidden %d, %d heads, %d×%d latents", c.Depth, c.HiddenSize, c.NumHeads, c.InputSize, c.InputSize),
		Details: fmt.Sprintf("depth %d, hidden %d, %d heads, patch %d, %d channels, %d×%d latents%s, %d classes, MLP %d",
			c.Depth, c.HiddenSize, c.NumHeads, c.PatchSize, c.InChannels, c.InputSize, c.InputSize, sigma, c.NumClasses, c.MLPHidden()),
		InChannels: c.InChannels, OutChannels: c.OutChannels(), Tokens: c.NumTokens(), Classes: c.NumClasses, Process: family.ProcessDDPM,
		Tensors:     tensors,
		Activations: blockActivations(c.Depth, c.HiddenSize, c.NumHeads, c.MLPHidden(), T) + T*int64(2*c.HiddenSize+c.PatchSize*c.PatchSize*c.OutChannels()),
	}, nil
}

// blockActivations is the float32 values one sample keeps for the
// backward pass of depth DiT blocks of width D over tokens tokens: per
// token 12·D (the adaLN-modulated norms, q, k, v, attention output and
// residuals) and two MLP hidden layers, and each head's attention scores.
func blockActivations(depth, D, heads, mlp int, tokens int64) int64 {
	return int64(depth) * (tokens*(12*int64(D)+2*int64(mlp)) + int64(heads)*tokens*tokens)
}

package zimage

import (
	"fmt"

	"github.com/dcdit/dcdit/family"
	"github.com/dcdit/dcdit/loaders/arch"
)

var (
	_ family.Planned           = Family{}
	_ family.ActivationCounted = Spec{}
)

// PlanModel describes a Z-Image of config cfg (*arch.ZImageConfig) on a
// rows×cols latent with captions of captionLen tokens for a recipe's
// plan: its tensors in ComfyUI's naming, printed under the plan's
// "zimage_config" key, and its activations over image and caption
// sequences padded to the config's multiple.
func (Family) PlanModel(cfg any, rows, cols, captionLen int) (family.ModelPlan, error) {
	c, ok := cfg.(*arch.ZImageConfig)
	if !ok || c == nil {
		return family.ModelPlan{}, fmt.Errorf("zimage: a %T is not a Z-Image config", cfg)
	}
	if c.PatchSize < 1 || rows%c.PatchSize != 0 || cols%c.PatchSize != 0 {
		return family.ModelPlan{}, fmt.Errorf("zimage: a %d×%d latent, want sides that are multiples of the patch size %d", rows, cols, c.PatchSize)
	}
	exp := arch.ExpectedZImage(c, arch.Comfy)
	tensors := make([]family.PlanTensor, 0, len(exp))
	for i, n := range exp.Names() {
		shape := make([]int, len(exp.Shape(i)))
		for j, d := range exp.Shape(i) {
			shape[j] = int(d)
		}
		tensors = append(tensors, family.PlanTensor{Name: n, Shape: shape, Groups: ParamGroups(n)})
	}
	patches := (rows / c.PatchSize) * (cols / c.PatchSize)
	pad := c.SeqMultiple()
	img, capt := int64(pad*((patches+pad-1)/pad)), int64(pad*((captionLen+pad-1)/pad))
	s := Spec{Config: c}
	acts := int64(c.NRefinerLayers)*(s.block(img)+s.block(capt)) + int64(c.NLayers)*s.block(img+capt)
	return family.ModelPlan{Config: c, ConfigKey: "zimage_config", Name: "Z-Image",
		Sizes: fmt.Sprintf("dim %d, %d layers, %d heads, patch %d", c.Dim, c.NLayers, c.NHeads, c.PatchSize),
		Details: fmt.Sprintf("dim %d, %d layers + %d refiner layers each side, %d heads, patch %d, %d channels, caption features %d, FFN %d, adaLN %d",
			c.Dim, c.NLayers, c.NRefinerLayers, c.NHeads, c.PatchSize, c.InChannels, c.CapFeatDim, c.FFNHidden, c.AdaLNDim),
		InChannels: c.InChannels, OutChannels: c.InChannels, Tokens: patches, Tensors: tensors, Activations: acts,
		CaptionPad: pad, Process: family.ProcessFlowMatching}, nil
}

// ActivationFloats estimates the float32 values one sample keeps for the
// backward pass of the backbone over tokens image tokens and a caption of
// captionLen tokens: the noise refiner over the image tokens, the main
// layers over them and the caption.
func (s Spec) ActivationFloats(tokens, captionLen int) int64 {
	m := int64(tokens)
	return int64(s.Config.NRefinerLayers)*s.block(m) + int64(s.Config.NLayers)*s.block(m+int64(captionLen))
}

// block is one block's activations over tokens tokens: 12·D per token
// (norms, q, k, v, attention output, residuals), SwiGLU's three
// hidden-width tensors, and each head's attention scores.
func (s Spec) block(tokens int64) int64 {
	D, H, ffn := int64(s.Config.Dim), int64(s.Config.NHeads), int64(s.Config.FFNHidden)
	return tokens*(12*D+3*ffn) + H*tokens*tokens
}

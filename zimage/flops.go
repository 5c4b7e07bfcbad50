package zimage

import "github.com/dcdit/dcdit/loaders/arch"

// TypicalCaptionLen is the caption length FLOPs figures assume when none
// is given: 128 tokens, about 100 words of prompt inside the chat template
// the pipelines wrap it in (they keep the valid tokens, at most 512). It is
// a multiple of SeqMultiOf, so no caption pad tokens are counted.
const TypicalCaptionLen = 128

// TurboSteps is Z-Image-Turbo's number of sampling steps (8 forwards, no
// guidance), what per-image figures assume for Z-Image.
const TurboSteps = 8

// TurboConfig is the published Z-Image(-Turbo) transformer config
// (Tongyi's config/model.py; Hugging Face's transformer/config.json): the
// family's preset, for costing and for header-only repositories.
func TurboConfig() *arch.ZImageConfig {
	return &arch.ZImageConfig{Dim: 3840, NLayers: 30, NRefinerLayers: 2, NHeads: 30, NKVHeads: 30, InChannels: 16,
		PatchSize: 2, FPatchSize: 1, CapFeatDim: 2560, QKNorm: true, NormEps: 1e-5, RopeTheta: 256, TScale: 1000,
		AxesDims: []int64{32, 48, 48}, AxesLens: []int64{1536, 512, 512}, FFNHidden: 10240, AdaLNDim: 256, TMidDim: 1024, FrequencySize: 256}
}

// FLOPs is the cost of one forward pass for one item, in floating-point
// operations, split by part, counted as dit.FLOPs counts DiT: 2 FLOPs per
// multiply-add of every matrix product, plus H·L²·(4·d_h + 3) for softmax
// attention over a sequence of L tokens; norms (the sandwich RMSNorms and
// the q/k norms), RoPE, gates and other elementwise work are not counted.
//
// The count is of the computation this package runs, which is the
// reference's on every row it uses: the embedders see the real image and
// caption tokens (pad rows take a learned vector), every block sees the
// sequences padded to multiples of the config's SeqMultiple (pad tokens attend and are
// attended), and the final layer sees the real image tokens. Items are
// packed, so there is no batch padding to count.
type FLOPs struct {
	Embed     float64 `json:"embed"`     // patch and caption embedders, timestep MLP
	Refiners  float64 `json:"refiners"`  // noise and context refiner linears (with adaLN)
	Layers    float64 `json:"layers"`    // main layers' linears (with adaLN)
	Attention float64 `json:"attention"` // scores, softmax and weighted sums, refiners and layers
	Final     float64 `json:"final"`     // final adaLN and output projection
}

// Total is the sum of the parts.
func (f FLOPs) Total() float64 { return f.Embed + f.Refiners + f.Layers + f.Attention + f.Final }

// ForwardFLOPs counts one item's forward pass: imageTokens patches (the
// token grid's Ft·Ht·Wt; (H/p)·(W/p) for an image) and a caption of
// captionLen valid tokens.
func ForwardFLOPs(c *arch.ZImageConfig, imageTokens, captionLen int) FLOPs {
	return forwardFLOPs(c, imageTokens, captionLen, c.SeqMultiple())
}

// forwardFLOPs is ForwardFLOPs with the image tokens padded to a multiple
// of imageMultiple (Backbone.ImageMultiple).
func forwardFLOPs(c *arch.ZImageConfig, imageTokens, captionLen, imageMultiple int) FLOPs {
	mac := func(m, k, n float64) float64 { return 2 * m * k * n }
	D := float64(c.Dim)
	F := float64(c.FFNHidden)
	A := float64(c.AdaLNDim)
	H := float64(c.NHeads)
	dh := D / H
	patch := float64(c.FPatchSize * c.PatchSize * c.PatchSize * c.InChannels)
	n, lc := float64(imageTokens), float64(captionLen)
	lx, lcp := float64(padTo(imageTokens, imageMultiple)), float64(padTo(captionLen, c.SeqMultiple()))
	u := lx + lcp
	// The block's linears per row: fused qkv, output projection, and the
	// SwiGLU's w1, w3 (D→F) and w2 (F→D).
	perRow := mac(1, D, 3*D) + mac(1, D, D) + 2*mac(1, D, F) + mac(1, F, D)
	modulation := mac(1, A, 4*D) // once per item: the batch row of adaln_input
	refiners, layers := float64(c.NRefinerLayers), float64(c.NLayers)
	attn := func(L float64) float64 { return H * L * L * (4*dh + 3) }

	var f FLOPs
	f.Embed = patchEmbedFLOPs(c, imageTokens) + mac(lc, float64(c.CapFeatDim), D) +
		mac(1, float64(c.FrequencySize), float64(c.TMidDim)) + mac(1, float64(c.TMidDim), A)
	f.Refiners = refiners*(modulation+lx*perRow) + refiners*lcp*perRow
	f.Layers = layers * (modulation + u*perRow)
	f.Attention = refiners*(attn(lx)+attn(lcp)) + layers*attn(u)
	f.Final = mac(1, A, D) + mac(n, D, patch)
	return f
}

// patchEmbedFLOPs counts the patch embedding (x_embedder) of n image
// tokens, which a DC model replaces by its own latent embedder.
func patchEmbedFLOPs(c *arch.ZImageConfig, n int) float64 {
	patch := c.FPatchSize * c.PatchSize * c.PatchSize * c.InChannels
	return 2 * float64(n) * float64(patch) * float64(c.Dim)
}

package dit

import "github.com/dcdit/dcdit/loaders/arch"

// FLOPs is the cost of one forward pass for one sample, in floating-point
// operations, split by part. The convention is the DC-DiT reference's
// counter: 2 FLOPs per multiply-add of every matrix product and
// convolution (linear layers, the patch-embedding convolution, the
// timestep MLP and the adaLN projections), plus H·L²·(4·d_h + 3) for
// softmax attention over L tokens (QKᵀ and PV at 2·d_h each, softmax 3 per
// score). Norms, activations and other elementwise work are not counted.
type FLOPs struct {
	Embed     float64 `json:"embed"`     // patch embedding and timestep MLP
	Blocks    float64 `json:"blocks"`    // block linears (qkv, proj, MLP, adaLN)
	Attention float64 `json:"attention"` // scores, softmax and weighted sums
	Final     float64 `json:"final"`     // final adaLN and output projection
}

// Total is the sum of the parts.
func (f FLOPs) Total() float64 { return f.Embed + f.Blocks + f.Attention + f.Final }

// ForwardFLOPs counts one sample's forward pass over tokens tokens (the
// native count is Config.NumTokens(); fewer for a DC model's kept tokens).
func ForwardFLOPs(c *arch.DiTConfig, tokens int) FLOPs {
	L := float64(tokens)
	D := float64(c.HiddenSize)
	p := float64(c.PatchSize)
	patchIn := float64(c.InChannels) * p * p
	out := p * p * float64(c.OutChannels())
	H := float64(c.NumHeads)
	dh := D / H
	mlp := float64(c.MLPHidden())
	mac := func(m, k, n float64) float64 { return 2 * m * k * n }
	var f FLOPs
	f.Embed = mac(L, patchIn, D) + mac(1, float64(c.FrequencySize), D) + mac(1, D, D)
	perBlock := mac(1, D, 6*D) + mac(L, D, 3*D) + mac(L, D, D) + mac(L, D, mlp) + mac(L, mlp, D)
	f.Blocks = float64(c.Depth) * perBlock
	f.Attention = float64(c.Depth) * H * L * L * (4*dh + 3)
	f.Final = mac(1, D, 2*D) + mac(L, D, out)
	return f
}

// SamplingFLOPs is the cost of generating one image with steps model
// evaluations; with classifier-free guidance every step also evaluates the
// unconditional branch.
func SamplingFLOPs(forward float64, steps int, cfg bool) float64 {
	n := float64(steps)
	if cfg {
		n *= 2
	}
	return forward * n
}

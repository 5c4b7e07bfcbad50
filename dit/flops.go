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

// BlockSizes are the sizes a stack of DiT blocks with DiT's embedders
// costs by: DC-DiT's main network and a DiT used as a DC backbone are both
// such a stack.
type BlockSizes struct {
	Width, Depth, Heads, MLPHidden, FrequencySize int
}

// PackedFLOPs counts the conditioning (timestep MLP) and the blocks over
// packed sequences of the given lengths, one per sample, in the DC
// convention (dc.FLOPs): 2 per multiply-add, H·Σ L_b²·(4·d_h + 3) for
// attention.
func PackedFLOPs(s BlockSizes, lengths []int) float64 {
	D, hid := float64(s.Width), float64(s.MLPHidden)
	B := float64(len(lengths))
	var tokens, pairs float64
	for _, l := range lengths {
		tokens += float64(l)
		pairs += float64(l) * float64(l)
	}
	mac := func(m, k, n float64) float64 { return 2 * m * k * n }
	cond := mac(B, float64(s.FrequencySize), D) + mac(B, D, D)
	block := mac(B, D, 6*D) + mac(tokens, D, 3*D) + mac(tokens, D, D) + mac(tokens, D, hid) + mac(tokens, hid, D)
	attn := float64(s.Heads) * pairs * (4*D/float64(s.Heads) + 3)
	return cond + float64(s.Depth)*(block+attn)
}

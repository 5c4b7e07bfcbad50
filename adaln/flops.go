package adaln

// Sizes are what a stack of blocks (ApplyBlock) with the embedders costs
// by: DC-DiT's main network and a DiT used as a DC backbone are both such
// a stack.
type Sizes struct {
	Width, Depth, Heads, MLPHidden, FrequencySize int
}

// PackedFLOPs counts the conditioning (timestep MLP) and the blocks over
// packed sequences of the given lengths, one per sample, in the DC
// convention (dc.FLOPs): 2 per multiply-add, H·Σ L_b²·(4·d_h + 3) for
// attention.
func PackedFLOPs(s Sizes, lengths []int) float64 {
	D, hid := float64(s.Width), float64(s.MLPHidden)
	B := float64(len(lengths))
	var tokens, pairs float64
	for _, l := range lengths {
		tokens += float64(l)
		pairs += float64(l) * float64(l)
	}
	cond := mac(B, float64(s.FrequencySize), D) + mac(B, D, D)
	block := mac(B, D, 6*D) + mac(tokens, D, 3*D) + mac(tokens, D, D) + mac(tokens, D, hid) + mac(tokens, hid, D)
	attn := float64(s.Heads) * pairs * (4*D/float64(s.Heads) + 3)
	return cond + float64(s.Depth)*(block+attn)
}

// mac is the cost of an [m, k] × [k, n] product: 2 FLOPs per
// multiply-add.
func mac(m, k, n float64) float64 { return 2 * m * k * n }

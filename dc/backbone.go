package dc

import "github.com/nlpodyssey/spago/mat"

// Backbone is the transformer the scaffold wraps: DC-DiT's own main
// network, a pretrained DiT, later Z-Image. The scaffold never looks
// inside it; a backbone provides exactly this:
//
//   - Width: D, the token width it reads and writes (the encoder projects
//     to it, the router and de-chunker work at it).
//   - CondWidth: the width of its conditioning vector, which the scaffold's
//     conv blocks and final layer also read (through their own weights).
//   - Condition(t, y): the per-sample conditioning vector c [B, CondWidth]
//     for diffusion timesteps t (float, training scale) and labels y.
//   - Forward(x, c, offsets, pos): the transformer over a packed set of
//     tokens x [N, D], all samples' kept tokens concatenated (sample s owns
//     rows offsets[s] ≤ r < offsets[s+1]; no token may attend across
//     samples), conditioned per sample on c, returning [N, D]. pos[2r] and
//     pos[2r+1] are the original grid row and column of token r on the
//     latent grid (integers for DC-DiT's patch-1 grid; a backbone trained
//     at another grid may rescale them, so treat them as real numbers).
//     Whatever position encoding the backbone uses is its own business,
//     applied at these positions. Gradients must flow to x and c.
//
// Shape mismatches inside the ops panic (caller bugs); Condition and
// Forward return errors for invalid arguments they can detect.
type Backbone interface {
	Width() int
	CondWidth() int
	Condition(t []float32, y []int) (mat.Tensor, error)
	Forward(x, c mat.Tensor, offsets []int, pos []float64) (mat.Tensor, error)
}

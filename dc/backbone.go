package dc

import (
	"github.com/nlpodyssey/spago/mat"

	"github.com/dcdit/dcdit/params"
)

// Backbone is the transformer the scaffold wraps: DC-DiT's own main
// network, a pretrained DiT, later Z-Image. The scaffold, the trainer, the
// checkpoint format and the CLI never look inside it: everything they
// need is a method here, so no caller type-asserts to a concrete backbone.
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
//   - Parameters: the arena of its trainable tensors (nil for a backbone
//     that has none, such as one only counted for FLOPs), under the names
//     its checkpoint kind stores them by; the trainer joins it with the
//     scaffold's, inference switches its gradients off, Save writes it.
//   - ParamGroups(name): the groups (params.Group*) one of its parameters
//     belongs to, for freezing and learning-rate groups.
//   - Spec: its kind, naming the implementation (the key a checkpoint
//     reader dispatches on), and its JSON-encodable config (a copy the
//     caller may keep): the DC checkpoint's metadata records both, and
//     with the tensors they rebuild it.
//   - FLOPs(lengths): the conditioning plus the transformer over packed
//     sequences of the given lengths (BackboneFLOPs).
//
// The methods use only types from below the scaffold (spago's mat,
// params, builtins), so that a backbone package implements Backbone
// without importing dc: imports flow from the scaffold down to the
// backbones.
//
// Shape mismatches inside the ops panic (caller bugs); Condition and
// Forward return errors for invalid arguments they can detect.
type Backbone interface {
	Width() int
	CondWidth() int
	Condition(t []float32, y []int) (mat.Tensor, error)
	Forward(x, c mat.Tensor, offsets []int, pos []float64) (mat.Tensor, error)
	Parameters() *params.Set
	ParamGroups(name string) []string
	Spec() (kind string, config any)
	BackboneFLOPs
}

package dc

import (
	"github.com/nlpodyssey/spago/mat"

	"github.com/dcdit/dcdit/cond"
	"github.com/dcdit/dcdit/loaders/arch"
	"github.com/dcdit/dcdit/params"
)

// Backbone is the transformer the scaffold wraps: DC-DiT's own main
// network, a pretrained DiT, Z-Image. The scaffold, the trainer, the
// checkpoint format and the CLI never look inside it: everything they
// need is a method here, so no caller type-asserts to a concrete backbone.
//
//   - Width: D, the token width it reads and writes (the encoder projects
//     to it, the router and de-chunker work at it).
//   - CondWidth: the width of its conditioning vector, which the scaffold's
//     conv blocks and final layer also read (through their own weights).
//   - Condition(in): the batch's conditioning for timesteps in.T and either
//     labels in.Labels or captions in.Captions (cond.Input; a backbone
//     rejects the kind it does not take). The scaffold reads only its
//     Vector(), [B, CondWidth]; the rest (Z-Image: each sample's refined
//     caption tokens) is for the backbone's own Forward.
//   - Forward(x, c, offsets, pos): the transformer over a packed set of
//     image tokens x [N, D], all samples' kept tokens concatenated (sample
//     s owns rows offsets[s] ≤ r < offsets[s+1]; no token may attend
//     across samples), conditioned per sample on c (a Value this
//     backbone's Condition made), returning the image tokens' hidden
//     states [N, D] in the same order; tokens the backbone adds for
//     itself (caption tokens, padding) stay inside. pos[2r] and pos[2r+1]
//     are the original row and column of token r on the latent grid
//     (integers for DC-DiT's patch-1 grid; treat them as real numbers).
//     Whatever position encoding the backbone uses is its own business,
//     applied at these positions (DiT: 2-D sin-cos on its patch grid;
//     Z-Image: 3-axis RoPE, the first axis its own). Gradients must flow
//     to x and to c.Vector().
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
// params, cond, builtins), so that a backbone package implements Backbone
// without importing dc: imports flow from the scaffold down to the
// backbones.
//
// Shape mismatches inside the ops panic (caller bugs); Condition and
// Forward return errors for invalid arguments they can detect.
type Backbone interface {
	Width() int
	CondWidth() int
	Condition(in cond.Input) (cond.Value, error)
	Forward(x mat.Tensor, c cond.Value, offsets []int, pos []float64) (mat.Tensor, error)
	Parameters() *params.Set
	ParamGroups(name string) []string
	Spec() (kind string, config any)
	BackboneFLOPs
}

// BackbonePrefix is the prefix under which a DC model holds and stores
// the tensors of a pretrained backbone that keeps its own names (a DiT, a
// Z-Image: their Parameters after PrefixNames(BackbonePrefix)). Such a
// backbone's patch embedding and final layer are unused inside a DC model
// — the scaffold has its own x_embedder and final_layer, under the same
// names — so without the prefix the two arenas cannot be joined or
// saved. The prefix is kept, rather than those two tensors dropped, so
// that the backbone's tensors in a DC checkpoint are exactly its own
// checkpoint's (strip the prefix and it loads as a DiT or Z-Image), and
// rebuilding it needs no value the file lacks; the cost is two small
// tensors that take no gradient (0.4 % of DiT-XL/2's parameters). DC-DiT's
// own main network (kind "hnet") stores the official DC-DiT names and
// does not use it.
const BackbonePrefix = arch.DCBackbonePrefix

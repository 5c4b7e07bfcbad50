package dc

import (
	"github.com/dcdit/dcdit/family"
	"github.com/dcdit/dcdit/loaders/arch"
)

// Backbone is the transformer the scaffold wraps (family.Backbone, where
// its contract is written): the scaffold, the trainer and the checkpoint
// format know a backbone only through it.
type Backbone = family.Backbone

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

package dit

import (
	"fmt"
	"strings"

	"github.com/nlpodyssey/spago/mat"

	"github.com/dcdit/dcdit/adaln"
	"github.com/dcdit/dcdit/cond"
	"github.com/dcdit/dcdit/family"
	"github.com/dcdit/dcdit/ops"
	"github.com/dcdit/dcdit/params"
	"github.com/dcdit/dcdit/posembed"
)

// Kind is the backbone kind of a DiT used as a DC backbone (Model.Spec),
// which a DC checkpoint of kind "dit" stores (see dc/checkpoint; its
// tensors are the model's own names under dc.BackbonePrefix: PrefixNames).
// A DiT grafted by upcycle.Graft becomes DC-DiT's main network instead,
// whose kind is "hnet".
const Kind = "dit"

// The methods below make *Model a dc.Backbone (the DC scaffold's seam)
// without this package importing the scaffold: the transformer over packed
// tokens at real-valued latent-grid positions, with DiT's own embedders as
// the conditioning. The patch embedding and the final layer stay the
// fixed-patch model's (ForwardLatents); inside a DC model the scaffold has
// its own.

// Width returns D, the width of the tokens Forward reads and writes.
func (m *Model) Width() int { return m.Config.HiddenSize }

// CondWidth returns D: the conditioning is t_embed + y_embed at width D.
func (m *Model) CondWidth() int { return m.Config.HiddenSize }

// Condition returns c = t_embedder(in.T) + y_embedder(in.Labels), [B, D]:
// the vector every adaLN reads (cond.Plain). in.T are the (float)
// diffusion timesteps, in.Labels the labels (NumClasses is the null
// class); DiT takes no captions.
func (m *Model) Condition(in cond.Input) (cond.Value, error) {
	if err := in.CheckLabels(m.Config.NumClasses); err != nil {
		return nil, fmt.Errorf("dit: %w", err)
	}
	return cond.Plain{V: m.condition(in.T, in.Labels)}, nil
}

// Forward runs the blocks over packed tokens x [N, D] (sample s owning
// rows offsets[s]..offsets[s+1]) under the per-sample conditioning vector
// c.Vector() [S, D], after adding the 2-D sin-cos embedding of each token's position:
// pos[2r], pos[2r+1] are token r's row and column on the latent grid, real
// numbers, mapped to the patch grid the table was trained on (GridPos).
// It returns the last block's output [N, D]; DiT has no norm there.
func (m *Model) Forward(x mat.Tensor, c cond.Value, offsets []int, pos []float64) (mat.Tensor, error) {
	h, v, err := m.positioned(x, c, offsets, pos)
	if err != nil {
		return nil, err
	}
	return m.Blocks(h, v, offsets), nil
}

// positioned checks a packed batch and adds each token's position
// embedding to x: the blocks' input, and the conditioning vector [S, D]
// they read.
func (m *Model) positioned(x mat.Tensor, c cond.Value, offsets []int, pos []float64) (h, v mat.Tensor, err error) {
	v = c.Vector()
	if err := family.CheckPacked(x.Shape()[0], v.Shape()[0], offsets, pos); err != nil {
		return nil, nil, fmt.Errorf("dit: %w", err)
	}
	D := m.Config.HiddenSize
	pe := posembed.Packed(pos, D, m.Config.PatchSize)
	return ops.Add(x, constant(len(pe)/D, D, pe)), v, nil
}

// Parameters returns the arena of every trainable tensor under DiT's
// names (after PrefixNames, under the prefixed ones), the patch embedding
// and final layer included (Forward leaves them without gradient).
func (m *Model) Parameters() *params.Set { return m.Params }

// ParamGroups returns the groups of one of the model's parameters (by its
// name in Parameters; ParamGroups of its own name); nil for a name that is
// not one of its parameters.
func (m *Model) ParamGroups(name string) []string {
	if _, ok := m.Params.Lookup(name); !ok {
		return nil
	}
	return ParamGroups(strings.TrimPrefix(name, m.names))
}

// ParamGroups returns the groups of a DiT tensor by its name in the
// original naming, as a recipe's stage lists name them: the embedders
// (the patch embedding also the latent embedder), the blocks (their
// adaLN, attention and MLP parts) and the final layer; nil for another
// name (pos_embed, the fixed sin-cos table, among them).
func ParamGroups(name string) []string {
	if g := adaln.BlockParamGroups(name, "blocks."); g != nil {
		return g
	}
	if g := adaln.EmbedderParamGroups(name); g != nil {
		return g
	}
	switch {
	case strings.HasPrefix(name, "x_embedder."):
		return []string{params.GroupEmbedders, params.GroupLatentEmbedder}
	case strings.HasPrefix(name, "final_layer."):
		return []string{params.GroupFinalLayer}
	}
	return nil
}

// Spec returns the model's description (a copy of its config).
func (m *Model) Spec() family.Spec {
	c := *m.Config
	return Spec{Config: &c}
}

// FLOPs counts the conditioning and the blocks over packed sequences of
// the given lengths (the dc.FLOPs convention); the patch embedding and the
// final layer, which a DC model replaces, are not counted.
func (m *Model) FLOPs(lengths []int) float64 {
	c := m.Config
	return adaln.PackedFLOPs(adaln.Sizes{Width: c.HiddenSize, Depth: c.Depth, Heads: c.NumHeads, MLPHidden: c.MLPHidden(), FrequencySize: c.FrequencySize}, lengths)
}

package tinydit

import (
	"fmt"

	"github.com/dcdit/dcdit/dc"
	"github.com/dcdit/dcdit/family"
)

var _ family.Graftable = (*Teacher)(nil)

// GraftBackbone returns a copy of the teacher's backbone named under
// dc.BackbonePrefix (family.Graftable): what upcycle.GraftTeacher wraps
// the scaffold around. The grid must be the one the position encoding
// was trained on.
func (t *Teacher) GraftBackbone(rows, cols int) (family.Backbone, error) {
	c := t.Config
	if G := c.Backbone.GridSize; rows != G || cols != G {
		return nil, fmt.Errorf("tinydit: graft: a %d×%d grid; the teacher's positions are trained on %d×%d", rows, cols, G, G)
	}
	return New(&c.Backbone, t.Backbone.Tensors(dc.BackbonePrefix), dc.BackbonePrefix)
}

// PatchEmbedding is the teacher's patch embedding, a convolution:
// weights [D, C, p, p].
func (t *Teacher) PatchEmbedding() (family.PatchEmbedding, bool) {
	p := t.Config.PatchSize
	return family.PatchEmbedding{Patch: p, Weight: t.params.Get("x_embedder.proj.weight").Values(),
		Bias: t.params.Get("x_embedder.proj.bias").Values(), Index: func(c, dy, dx int) int { return (c*p+dy)*p + dx }}, true
}

// FinalLayer is false: TinyDiT's output layer normalises with an RMSNorm,
// the scaffold's wide head with DiT's LayerNorm, so the head cannot start
// as it.
func (t *Teacher) FinalLayer() (family.FinalLayer, bool) { return family.FinalLayer{}, false }

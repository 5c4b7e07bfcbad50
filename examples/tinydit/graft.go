package tinydit

import (
	"errors"
	"fmt"

	"github.com/dcdit/dcdit/dc"
	"github.com/dcdit/dcdit/upcycle"
)

// PatchEmbedding is the teacher's patch embedding as upcycle.EncoderPrior
// reads it.
func (t *Teacher) PatchEmbedding() upcycle.PatchEmbedding {
	p := t.Config.PatchSize
	return upcycle.PatchEmbedding{Patch: p, Weight: t.params.Get("x_embedder.proj.weight").Values(),
		Bias: t.params.Get("x_embedder.proj.bias").Values(), Index: func(c, dy, dx int) int { return (c*p+dy)*p + dx }}
}

// Graft builds a DC model around a copy of the teacher's backbone, named
// under dc.BackbonePrefix: the scaffold's config follows from the
// teacher's latents and widths (s.Config, learned-σ outputs), its tensors
// are initialised as the official DC-DiT initialises them
// (upcycle.InitScaffold), then s.RouterInit "predictability" applies
// upcycle.PredictabilityPrior and s.EncoderInit "patch" starts the
// encoder as the teacher's patch embedding (upcycle.EncoderPrior). The
// wide head starts from DiT's final layer only; s.WideHead is refused.
// The teacher is not modified.
func Graft(t *Teacher, s upcycle.Scaffold, seed uint64) (*dc.Model, error) {
	c := t.Config
	if s.WideHead {
		return nil, errors.New("tinydit: graft: the wide head starts from a DiT final layer; a tinydit teacher grafts without it")
	}
	bb, err := New(&c.Backbone, t.Backbone.Tensors(dc.BackbonePrefix), dc.BackbonePrefix)
	if err != nil {
		return nil, err
	}
	G := c.Backbone.GridSize
	cfg, err := s.Config(c.InChannels, c.OutChannels(), G, G, bb.Width(), bb.CondWidth())
	if err != nil {
		return nil, err
	}
	ts := upcycle.InitScaffold(cfg, seed)
	switch s.RouterInit {
	case "", "official":
	case "predictability":
		upcycle.PredictabilityPrior(cfg, ts)
	default:
		return nil, fmt.Errorf("tinydit: graft: router init %q, want official or predictability", s.RouterInit)
	}
	switch s.EncoderInit {
	case "", "official":
	case "patch":
		if err := upcycle.EncoderPrior(cfg, ts, t.PatchEmbedding()); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("tinydit: graft: encoder init %q, want official or patch", s.EncoderInit)
	}
	return dc.New(cfg, ts, bb)
}

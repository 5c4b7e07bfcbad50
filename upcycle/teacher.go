package upcycle

import (
	"fmt"

	"github.com/dcdit/dcdit/dc"
	"github.com/dcdit/dcdit/family"
)

// Graft builds the DC model a recipe upcycles from a teacher on a
// rows×cols latent grid: when a registered family adopts the teacher
// (family.Adopter: DC-DiT's main network takes a DiT's blocks and
// embedders, its final RMSNorm starting at 1), around that family's
// backbone built from a copy of the teacher's tensors; otherwise around a
// copy of the teacher's own network, as GraftTeacher grafts. Either way
// the scaffold is initialised as the official DC-DiT initialises it (see
// InitScaffold) with the priors s asks for, read from the teacher's
// patch embedding and final layer (family.Graftable), and the teacher is
// left as it was.
func Graft(t family.Teacher, s Scaffold, rows, cols int, seed uint64) (*dc.Model, error) {
	c, ok := t.(family.Configured)
	if !ok {
		return GraftTeacher(t, s, rows, cols, seed)
	}
	a, _, ok := family.AdopterOf(c.Config())
	if !ok {
		return GraftTeacher(t, s, rows, cols, seed)
	}
	bb, err := a.Adopt(t)
	if err != nil {
		return nil, fmt.Errorf("upcycle: %w", err)
	}
	g, _ := t.(family.Graftable) // nil: no priors to read
	return graftAround(t, g, bb, s, rows, cols, seed)
}

// GraftTeacher builds a DC model around a copy of a teacher's network
// (family.Graftable) on a rows×cols latent grid: the network becomes the
// backbone as it is, its tensors under dc.BackbonePrefix, and the teacher
// stays as it was (the frozen teacher). For a Z-Image (paper §4.4) that
// is the scaffold on the image tokens, captions kept whole: its
// refiners, embedders and main layers run on the kept tokens, each at its
// fractional position in the rotary embedding. The network's own patch
// embedding and final layer stay in the checkpoint unused: the scaffold
// replaces them.
//
// The scaffold is initialised as InitScaffold initialises it; EncoderInit
// "patch" starts the encoder as the teacher's patch embedding, and the
// wide head starts as its final layer (a modulation without shift leaves
// the head's shift rows at zero). The scaffold predicts what the teacher
// predicts (its OutChannels). A latent skip starts as InitScaffold
// starts it; LatentSkipPrior fits it to the process.
func GraftTeacher(t family.Teacher, s Scaffold, rows, cols int, seed uint64) (*dc.Model, error) {
	g, ok := t.(family.Graftable)
	if !ok {
		return nil, fmt.Errorf("upcycle: the teacher (%s) cannot be grafted: its family gives no family.Graftable", t.Describe())
	}
	bb, err := g.GraftBackbone(rows, cols)
	if err != nil {
		return nil, fmt.Errorf("upcycle: %w", err)
	}
	return graftAround(t, g, bb, s, rows, cols, seed)
}

// graftAround builds the scaffold around the backbone bb made from the
// teacher t, its priors read from g (nil when t is no Graftable).
func graftAround(t family.Teacher, g family.Graftable, bb dc.Backbone, s Scaffold, rows, cols int, seed uint64) (*dc.Model, error) {
	var pe *PatchEmbedding
	if s.startsFromPatchEmbedding() {
		var e PatchEmbedding
		ok := g != nil
		if ok {
			e, ok = g.PatchEmbedding()
		}
		if !ok {
			return nil, fmt.Errorf("upcycle: encoder init \"patch\" or a token embedder: the teacher has no patch embedding to start from")
		}
		pe = &e
	}
	cfg, ts, err := graftScaffold(t.InChannels(), t.OutChannels(), bb.Width(), bb.CondWidth(), pe, s, rows, cols, seed)
	if err != nil {
		return nil, err
	}
	if cfg.WideHead {
		var f family.FinalLayer
		ok := g != nil
		if ok {
			f, ok = g.FinalLayer()
		}
		if !ok {
			return nil, fmt.Errorf("upcycle: wide head: the teacher has no final layer to start from")
		}
		if err := wideHeadPrior(cfg, ts, f); err != nil {
			return nil, err
		}
	}
	return dc.New(cfg, ts, bb)
}

// graftScaffold is the config and initial tensors of the scaffold around
// a backbone of the given widths that reads inC and predicts outC latent
// channels: the official init, then the router's, the encoder's and the
// token embedder's priors the scaffold asks for (pe is the teacher's
// patch embedding, nil unless the encoder or the token embedder starts
// from it).
func graftScaffold(inC, outC, width, condWidth int, pe *PatchEmbedding, s Scaffold, rows, cols int, seed uint64) (*dc.Config, map[string]dc.Tensor, error) {
	cfg, err := s.Config(inC, outC, rows, cols, width, condWidth)
	if err != nil {
		return nil, nil, err
	}
	ts := InitScaffold(cfg, seed)
	switch s.RouterInit {
	case "", "official":
	case "predictability":
		PredictabilityPrior(cfg, ts)
	default:
		return nil, nil, fmt.Errorf("upcycle: router init %q, want official or predictability", s.RouterInit)
	}
	switch s.EncoderInit {
	case "", "official":
	case "patch":
		if pe == nil {
			return nil, nil, fmt.Errorf("upcycle: encoder init \"patch\" without the model's patch embedding")
		}
		if err := EncoderPrior(cfg, ts, *pe); err != nil {
			return nil, nil, err
		}
	default:
		return nil, nil, fmt.Errorf("upcycle: encoder init %q, want official or patch", s.EncoderInit)
	}
	if cfg.TokenEmbedder {
		if pe == nil {
			return nil, nil, fmt.Errorf("upcycle: a token embedder without the model's patch embedding")
		}
		if err := tokenEmbedderPrior(cfg, ts, *pe); err != nil {
			return nil, nil, err
		}
	}
	return cfg, ts, nil
}

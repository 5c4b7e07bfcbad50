package upcycle

import (
	"fmt"

	"github.com/dcdit/dcdit/dc"
	"github.com/dcdit/dcdit/loaders/arch"
	"github.com/dcdit/dcdit/zimage"
)

// GraftZImage builds a DC model around a Z-Image transformer (b.Model,
// b.CaptionLen the caption length its FLOPs assume) on a rows×cols latent
// grid (paper §4.4: the scaffold on the image tokens,
// captions kept whole). The model becomes the backbone as it is: its
// refiners, embedders and main layers run on the kept tokens, each at its
// fractional position in the rotary embedding (zimage.Backbone), and its
// tensors are renamed under dc.BackbonePrefix — so m must not also serve
// as the frozen teacher (load a second copy for that). Its own patch
// embedding and final layer stay in the checkpoint unused: the scaffold
// replaces them.
//
// The scaffold is initialised as Graft initialises it; EncoderInit
// "patch" starts the encoder as Z-Image's patch embedding (its features
// ordered (dy, dx, c), c fastest), and the wide head starts as Z-Image's
// final layer (its modulation has no shift: the head's shift rows start
// at zero). Z-Image predicts a velocity with no learned variance, so the
// scaffold's output has the latent channels. A latent skip starts as
// InitScaffold starts it; LatentSkipPrior fits it to flow matching.
//
// Unless b sets it, the backbone's ImageMultiple is ImageMultiple's.
func GraftZImage(b *zimage.Backbone, s Scaffold, rows, cols int, seed uint64) (*dc.Model, error) {
	m := b.Model
	if b.ImageMultiple == 0 {
		b.ImageMultiple = ImageMultiple(m.Config, rows, cols)
	}
	var pe *PatchEmbedding
	if s.EncoderInit == "patch" {
		w, okW := m.Params.Lookup("x_embedder.weight")
		b, okB := m.Params.Lookup("x_embedder.bias")
		if !okW || !okB {
			return nil, fmt.Errorf("upcycle: encoder init \"patch\": the Z-Image model lacks x_embedder.weight or x_embedder.bias")
		}
		e := zimagePatchEmbedding(m.Config, w.Values(), b.Values())
		pe = &e
	}
	cfg, ts, err := zimageScaffold(m.Config, pe, s, rows, cols, seed)
	if err != nil {
		return nil, err
	}
	if cfg.WideHead {
		zc := m.Config
		err := wideHeadPrior(cfg, ts, finalLayer{patch: zc.PatchSize, out: zc.InChannels, width: zc.Dim, noShift: true, lookup: func(name string) ([]float32, bool) {
			p, ok := m.Params.Lookup("final_layer." + name)
			if !ok {
				return nil, false
			}
			return p.Values(), true
		}})
		if err != nil {
			return nil, err
		}
	}
	m.PrefixNames(dc.BackbonePrefix)
	return dc.New(cfg, ts, b)
}

// ImageMultiple is the multiple a DC-Z-Image on a rows×cols latent grid
// pads its kept image tokens to: none (1) when the grid's patches fill
// the config's multiple, so that the teacher never runs its pad tokens
// there, else the config's. A DC model keeps any number of tokens, and
// Z-Image's pad tokens attend: padding them where the teacher never did
// adds tokens it never trained (FD at ρ 0.6 22.8 unpadded against 34.0
// padded to 8 on the toy, docs/results.md), while a teacher that pads its
// whole grid computes with its pad tokens and its graft must too.
func ImageMultiple(c *arch.ZImageConfig, rows, cols int) int {
	m := c.SeqMultiple()
	if (rows/c.PatchSize)*(cols/c.PatchSize)%m == 0 {
		return 1
	}
	return m
}

// zimagePatchEmbedding is Z-Image's patch embedding as EncoderPrior reads
// it: features (dy, dx, c), c fastest (zimage.Patchify).
func zimagePatchEmbedding(zc *arch.ZImageConfig, w, b []float32) PatchEmbedding {
	p, C := zc.PatchSize, zc.InChannels
	return PatchEmbedding{Patch: p, Weight: w, Bias: b, Index: func(c, dy, dx int) int { return (dy*p+dx)*C + c }}
}

// zimageScaffold is the config and initial tensors of the scaffold that
// GraftZImage puts around a Z-Image of config zc, whose backbone widths
// are its dim and adaLN width (zimage.Backbone's Width and CondWidth); pe
// is its patch embedding, nil unless the encoder starts from it.
func zimageScaffold(zc *arch.ZImageConfig, pe *PatchEmbedding, s Scaffold, rows, cols int, seed uint64) (*dc.Config, map[string]dc.Tensor, error) {
	switch {
	case zc.FPatchSize != 1:
		return nil, nil, fmt.Errorf("upcycle: Z-Image with frame patches of %d: the scaffold grafts onto single-frame images (f_patch_size 1)", zc.FPatchSize)
	}
	cfg, err := s.Config(zc.InChannels, zc.InChannels, rows, cols, zc.Dim, zc.AdaLNDim)
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
	return cfg, ts, nil
}

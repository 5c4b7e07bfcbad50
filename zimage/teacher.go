package zimage

import (
	"fmt"

	"github.com/dcdit/dcdit/cond"
	"github.com/dcdit/dcdit/family"
	"github.com/dcdit/dcdit/loaders/arch"
	"github.com/dcdit/dcdit/ops"
	"github.com/dcdit/dcdit/params"
)

// Teacher is a caption-conditioned Z-Image as a family.Teacher: model
// times are flow matching's 1 − σ, captions condition (the empty caption
// is the unconditional branch), and guidance is Z-Image's
// c + s·(c − u) on every channel.
type Teacher struct {
	Model *Model
	// CaptionLen is the caption length its FLOPs are counted for (0:
	// TypicalCaptionLen), as the DC model's backbone counts it.
	CaptionLen int
}

var _ family.Teacher = Teacher{}

// Predict runs the model on NCHW latents under the inputs' times and
// captions.
func (t Teacher) Predict(xt []float32, in cond.Input, h, w int) ([]float32, error) {
	out, err := t.Model.Predict(xt, in, h, w)
	if err != nil {
		return nil, fmt.Errorf("zimage: teacher: %w", err)
	}
	return out, nil
}

// InChannels is the config's.
func (t Teacher) InChannels() int { return t.Model.Config.InChannels }

// OutChannels is a velocity per latent channel.
func (t Teacher) OutChannels() int { return t.Model.Config.InChannels }

// Grid is 0, 0: any grid the patch size divides.
func (t Teacher) Grid() (int, int) { return 0, 0 }

// Conditioning is caption features of cap_feat_dim.
func (t Teacher) Conditioning() family.Conditioning {
	return family.Conditioning{CaptionWidth: t.Model.Config.CapFeatDim}
}

// Process is flow matching.
func (t Teacher) Process() string { return family.ProcessFlowMatching }

// Guidance guides every channel: c + s·(c − u) = u + (1 + s)·(c − u).
func (t Teacher) Guidance(s float64) (int, float64) { return t.Model.Config.InChannels, 1 + s }

// Guide writes c + s·(c − u) into both.
func (t Teacher) Guide(c, u []float32, _ int, s float32) {
	for i := range c {
		v := c[i] + s*(c[i]-u[i])
		c[i], u[i] = v, v
	}
}

// Tokens is the patch grid's size.
func (t Teacher) Tokens(rows, cols int) int {
	p := t.Model.Config.PatchSize
	return (rows / p) * (cols / p)
}

// ForwardFLOPs counts one forward with a caption of CaptionLen tokens.
func (t Teacher) ForwardFLOPs(rows, cols int) float64 {
	n := t.CaptionLen
	if n == 0 {
		n = TypicalCaptionLen
	}
	return t.CaptionFLOPs(rows, cols, n)
}

var _ family.CaptionCosted = Teacher{}

// CaptionFLOPs counts one forward with a caption of captionLen tokens
// (ForwardFLOPs' Total).
func (t Teacher) CaptionFLOPs(rows, cols, captionLen int) float64 {
	return ForwardFLOPs(t.Model.Config, t.Tokens(rows, cols), captionLen).Total()
}

// Parameters are the model's.
func (t Teacher) Parameters() *params.Set { return t.Model.Params }

// Describe names the config.
func (t Teacher) Describe() string { return fmt.Sprintf("zimage %+v", *t.Model.Config) }

var _ family.Trainee = Teacher{}

// TrainStep runs the model with a graph over each sample's latent and
// caption in one packed batch and back-propagates loss's gradient
// (family.Trainee): Z-Image trained on its own objective.
func (t Teacher) TrainStep(xt []float32, in cond.Input, h, w int, loss func(out, grad []float32) error) error {
	c := t.Model.Config
	if err := in.CheckCaptions(c.CapFeatDim); err != nil {
		return fmt.Errorf("zimage: %w", err)
	}
	B, per := len(in.T), c.InChannels*h*w
	if len(xt) != B*per {
		return fmt.Errorf("zimage: %d latent values for %d samples of [%d %d %d]", len(xt), B, c.InChannels, h, w)
	}
	lats := make([]Latent, B)
	caps := make([][]float32, B)
	for i := range lats {
		lats[i] = Latent{Data: xt[i*per : (i+1)*per], F: 1, H: h, W: w}
		caps[i] = in.Captions[i].Features[:in.Captions[i].Len*c.CapFeatDim]
	}
	zb, err := t.Model.Prepare(lats, in.T, caps)
	if err != nil {
		return err
	}
	out := t.Model.Run(zb)
	img := make([]float32, 0, B*per)
	for _, x := range t.Model.Images(out, zb) {
		img = append(img, x...)
	}
	grad := make([]float32, len(img))
	err = loss(img, grad)
	if err == nil {
		// Run's rows are each item's patches in order: patchify the
		// gradient the same way.
		rows := make([]float32, 0, len(grad))
		for i := range B {
			rows = Patchify(rows, grad[i*per:(i+1)*per], c.InChannels, 1, h, w, c.FPatchSize, c.PatchSize)
		}
		err = ops.BackwardFrom(out, rows)
	}
	ops.Release(out)
	return err
}

var _ family.Graftable = Teacher{}

// GraftBackbone returns a copy of the model as a DC backbone (kind
// "zimage") under arch.DCBackbonePrefix, for single-frame images on a
// rows×cols latent grid: its captions kept whole, its FLOPs counted for
// CaptionLen, its kept image tokens padded to GraftImageMultiple. A model
// whose matrices are kept in BF16 (LoadOptions.KeepBF16) predicts only:
// it cannot be grafted.
func (t Teacher) GraftBackbone(rows, cols int) (family.Backbone, error) {
	if len(t.Model.bf16) > 0 {
		return nil, fmt.Errorf("zimage: graft: the model keeps its matrices in BF16 for inference; load it without KeepBF16 to graft it")
	}
	spec, err := Family{}.GraftSpec(t.Model.Config, rows, cols, t.CaptionLen)
	if err != nil {
		return nil, err
	}
	ts, err := family.CopyTensors(spec.Shapes(), t.Model.Params, t.Model.names)
	if err != nil {
		return nil, fmt.Errorf("zimage: graft: %w", err)
	}
	return spec.Build(ts)
}

// GraftImageMultiple is the multiple a DC-Z-Image on a rows×cols latent
// grid pads its kept image tokens to: none (1) when the grid's patches
// fill the config's multiple, so that the teacher never runs its pad
// tokens there, else the config's. A DC model keeps any number of tokens,
// and Z-Image's pad tokens attend: padding them where the teacher never
// did adds tokens it never trained (FD at ρ 0.6 22.8 unpadded against
// 34.0 padded to 8 on the toy, docs/results.md), while a teacher that
// pads its whole grid computes with its pad tokens and its graft must
// too.
func GraftImageMultiple(c *arch.ZImageConfig, rows, cols int) int {
	m := c.SeqMultiple()
	if (rows/c.PatchSize)*(cols/c.PatchSize)%m == 0 {
		return 1
	}
	return m
}

// PatchEmbedding is x_embedder, a Linear over features (dy, dx, c), c
// fastest (Patchify).
func (t Teacher) PatchEmbedding() (family.PatchEmbedding, bool) {
	c := t.Model.Config
	w, okW := t.Model.Params.Lookup(t.Model.names + "x_embedder.weight")
	b, okB := t.Model.Params.Lookup(t.Model.names + "x_embedder.bias")
	if !okW || !okB {
		return family.PatchEmbedding{}, false
	}
	p, C := c.PatchSize, c.InChannels
	return family.PatchEmbedding{Patch: p, Weight: w.Values(), Bias: b.Values(),
		Index: func(c, dy, dx int) int { return (dy*p+dx)*C + c }}, true
}

// FinalLayer is Z-Image's final layer: scale-only modulation, a Linear to
// p·p·C values.
func (t Teacher) FinalLayer() (family.FinalLayer, bool) {
	c := t.Model.Config
	return family.FinalLayer{Patch: c.PatchSize, Out: c.InChannels, Width: c.Dim, NoShift: true, Tensor: func(name string) ([]float32, bool) {
		p, ok := t.Model.Params.Lookup(t.Model.names + "final_layer." + name)
		if !ok {
			return nil, false
		}
		return p.Values(), true
	}}, true
}

var _ family.Configured = Teacher{}

// Config is the *arch.ZImageConfig.
func (t Teacher) Config() any { return t.Model.Config }

// Summary names the config (Z-Image takes any latent grid, which the
// caller names).
func (t Teacher) Summary() string {
	c := t.Model.Config
	return fmt.Sprintf("Z-Image (%d layers, %d refiner layers each, D %d, %d heads, patch %d, captions of %d-wide features, sequences padded to multiples of %d)",
		c.NLayers, c.NRefinerLayers, c.Dim, c.NHeads, c.PatchSize, c.CapFeatDim, c.SeqMultiple())
}

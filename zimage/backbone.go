package zimage

import (
	"fmt"
	"slices"
	"strings"

	"github.com/nlpodyssey/spago/mat"

	"github.com/dcdit/dcdit/cond"
	"github.com/dcdit/dcdit/family"
	"github.com/dcdit/dcdit/ops"
	"github.com/dcdit/dcdit/params"
	"github.com/dcdit/dcdit/posembed"
)

// Kind is the backbone kind of a Z-Image transformer used as a DC
// backbone (Backbone.Spec), which a DC checkpoint of kind "zimage" stores
// (see dc/checkpoint; its tensors are the model's internal names under
// dc.BackbonePrefix: Model.PrefixNames).
const Kind = "zimage"

// Backbone is a Z-Image transformer as the DC scaffold's backbone (a
// dc.Backbone, without this package importing the scaffold): the
// conditioning is the timestep embedding (the adaLN input the scaffold
// also reads) plus each sample's caption, embedded and refined by the
// context refiner; Forward runs the noise refiner on the kept image
// tokens, joins each sample's refined caption tokens and runs the main
// layers. The patch embedding and the final layer stay the model's own
// (Run); inside a DC model the scaffold has its own.
type Backbone struct {
	Model *Model
	// CaptionLen is the caption length FLOPs assumes for every sample
	// (FLOPs is given image token counts only); 0 means
	// TypicalCaptionLen.
	CaptionLen int
	// ImageMultiple is the multiple each sample's kept image tokens are
	// padded to with x_pad_token; 0 means the config's SeqMultiple, as the
	// reference pads, and 1 pads nothing. A DC model keeps any number of
	// tokens, and a teacher whose images always fill the multiple never
	// trained x_pad_token, yet the pad tokens attend and are attended.
	ImageMultiple int
}

// imageMultiple returns the multiple image tokens are padded to.
func (b *Backbone) imageMultiple() int {
	if b.ImageMultiple > 0 {
		return b.ImageMultiple
	}
	return b.Model.Config.SeqMultiple()
}

// NewBackbone wraps a model as a backbone.
func NewBackbone(m *Model) *Backbone { return &Backbone{Model: m} }

// Conditioning is the Value the backbone's Condition makes: the adaLN
// input [B, adaLN width] (the vector the scaffold reads) and the caption
// stream after the context refiner, which Forward joins to the image
// tokens.
type Conditioning struct {
	adaln mat.Tensor
	// captions are the refined caption streams, packed: sample s owns
	// its padded caption's rows (captionLen[s] valid, the rest pad
	// tokens).
	captions   mat.Tensor
	captionLen []int
	// model is the model that made it: another's caption stream has
	// another width or other weights.
	model *Model
}

// Vector returns the adaLN input [B, adaLN width].
func (c *Conditioning) Vector() mat.Tensor { return c.adaln }

// Width returns the model's dim, the width of the image tokens.
func (b *Backbone) Width() int { return b.Model.Config.Dim }

// CondWidth returns the adaLN width (min(dim, 256) in the reference): the
// timestep embedding every modulation reads.
func (b *Backbone) CondWidth() int { return b.Model.Config.AdaLNDim }

// Condition embeds the timesteps in.T (model times in [0, 1], 0 at pure
// noise, as Forward takes them) and each sample's caption in.Captions
// (rows of cap_feat_dim; its first Len rows are used): the adaLN input,
// and per sample the caption embedded, padded to a multiple of the config's
// SeqMultiple
// with cap_pad_token and run through the context refiner. Z-Image takes
// no labels.
func (b *Backbone) Condition(in cond.Input) (cond.Value, error) {
	m := b.Model
	if err := b.inferenceOnly(nil); err != nil {
		return nil, err
	}
	dim := m.Config.CapFeatDim
	if err := in.CheckCaptions(dim); err != nil {
		return nil, fmt.Errorf("zimage: %w", err)
	}
	lens := make([]int, len(in.Captions))
	var feats []float32
	for s, c := range in.Captions {
		lens[s] = c.Len
		feats = append(feats, c.Features[:c.Len*dim]...)
	}
	// A caption-only layout: the caption stream does not depend on the
	// image tokens, which Forward lays out with the same caption lengths.
	l, err := newLayout(make([]int, len(lens)), lens, 1, m.Config.SeqMultiple(), nil)
	if err != nil {
		return nil, err
	}
	txt := m.ContextRefiner(m.EmbedCaption(feats, l), m.NewStream(l.CaptionOffsets, l.CaptionPos))
	return &Conditioning{adaln: m.Timestep(in.T), captions: txt, captionLen: lens, model: m}, nil
}

// Forward runs the transformer over packed image tokens x [N, dim] (sample
// s owns rows offsets[s]..offsets[s+1], at least one) under c, which this
// backbone's Condition made. pos[2r], pos[2r+1] are token r's row and
// column on the latent grid, real numbers, mapped to the patch grid as
// DiT's are (posembed.GridPos: a cell at its centre); the first RoPE axis is
// the reference's: the image's single frame sits after the sample's
// padded caption. Each sample's tokens are padded to a multiple of
// ImageMultiple with x_pad_token, refined by the noise refiner, joined with
// the sample's refined caption tokens ([image ; caption], as Unify does)
// and run through the main layers. It returns the hidden states of x's
// tokens [N, dim], in x's order; the final layer is the caller's.
func (b *Backbone) Forward(x mat.Tensor, c cond.Value, offsets []int, pos []float64) (mat.Tensor, error) {
	u, zc, l, err := b.unified(x, c, offsets, pos)
	if err != nil {
		return nil, err
	}
	u = b.Model.Layers(u, zc.adaln, b.Model.NewStream(l.UnifiedOffsets, l.UnifiedPos()))
	return ops.GatherRows(u, l.OutputRows), nil
}

// unified is Forward up to the main layers: the unified stream of the
// refined image tokens and captions, the conditioning and the layout.
func (b *Backbone) unified(x mat.Tensor, c cond.Value, offsets []int, pos []float64) (mat.Tensor, *Conditioning, *Layout, error) {
	m := b.Model
	zc, ok := c.(*Conditioning)
	if !ok || zc.model != m {
		return nil, nil, nil, fmt.Errorf("zimage: conditioning of type %T was not made by this backbone's Condition", c)
	}
	if err := b.inferenceOnly(x); err != nil {
		return nil, nil, nil, err
	}
	xs := x.Shape()
	if xs[1] != m.Config.Dim {
		return nil, nil, nil, fmt.Errorf("zimage: tokens are [%d %d], want width %d", xs[0], xs[1], m.Config.Dim)
	}
	if err := family.CheckPacked(xs[0], len(zc.captionLen), offsets, pos); err != nil {
		return nil, nil, nil, fmt.Errorf("zimage: %w", err)
	}
	kept := make([]int, len(offsets)-1)
	for s := range kept {
		if kept[s] = offsets[s+1] - offsets[s]; kept[s] == 0 {
			return nil, nil, nil, fmt.Errorf("zimage: sample %d has no image tokens (offsets %v)", s, offsets)
		}
	}
	p := m.Config.PatchSize
	l, err := newLayout(kept, zc.captionLen, b.imageMultiple(), m.Config.SeqMultiple(), func(s, i, lc int) [3]float64 {
		r := offsets[s] + i
		return [3]float64{float64(lc + 1), posembed.GridPos(pos[2*r], p), posembed.GridPos(pos[2*r+1], p)}
	})
	if err != nil {
		return nil, nil, nil, err
	}
	img := ops.GatherRows(ops.ConcatRows(x, m.p("x_pad_token")), l.ImageRows)
	img = m.NoiseRefiner(img, zc.adaln, m.NewStream(l.ImageOffsets, l.ImagePos))
	return m.Unify(img, zc.captions, l), zc, l, nil
}

// inferenceOnly refuses a model whose Linear weights stay bfloat16
// (LoadOptions.KeepBF16) when its parameters or the tokens x (nil: none)
// track gradients: those weights have no backward pass, so a training
// step must not reach them.
func (b *Backbone) inferenceOnly(x mat.Tensor) error {
	m := b.Model
	if len(m.bf16) == 0 || !m.Params.RequiresGrad() && (x == nil || !x.RequiresGrad()) {
		return nil
	}
	return fmt.Errorf("zimage: the backbone keeps %d matrices as bfloat16 (LoadOptions.KeepBF16), which have no backward pass, yet gradients are tracked; load the checkpoint without KeepBF16 to train", len(m.bf16))
}

// Parameters returns the model's arena under its internal (ComfyUI)
// names (after Model.PrefixNames, under the prefixed ones), the patch
// embedding and final layer included (Forward leaves them without
// gradient).
func (b *Backbone) Parameters() *params.Set { return b.Model.Params }

// ParamGroups returns the groups of one of the model's parameters (by its
// name in Parameters; ParamGroups of its own name); nil for a name that is
// not one of its parameters.
func (b *Backbone) ParamGroups(name string) []string {
	name, ok := strings.CutPrefix(name, b.Model.names)
	if _, known := b.Model.tensors[name]; !ok || !known {
		return nil
	}
	return ParamGroups(name)
}

// ParamGroups returns the groups of a Z-Image tensor by its ComfyUI name:
// the timestep and caption embedders are embedders, the refiners' and
// main layers' blocks the backbone (their adaLN, attention and
// feed-forward parts by name), the patch embedding and the final layer
// the latent embedder and final layer a DC model replaces. The pad
// tokens, which take part in Forward, are in no group but
// params.GroupAll: they train whenever the blocks do, and a stage that
// freezes the embedders (the paper's fine-tuning) leaves them trainable.
// Nil for another name.
func ParamGroups(name string) []string {
	switch {
	case strings.HasPrefix(name, "t_embedder."):
		return []string{params.GroupEmbedders, params.GroupTimestepEmbedder}
	case strings.HasPrefix(name, "cap_embedder."):
		return []string{params.GroupEmbedders}
	case strings.HasPrefix(name, "x_embedder."):
		return []string{params.GroupEmbedders, params.GroupLatentEmbedder}
	case strings.HasPrefix(name, "final_layer."):
		return []string{params.GroupFinalLayer}
	}
	for _, prefix := range []string{"noise_refiner.", "context_refiner.", "layers."} {
		if g := params.BlockGroups(name, prefix, "attention.", "feed_forward."); g != nil {
			return g
		}
	}
	return nil
}

// Spec returns the backbone's description: a copy of the model's config,
// the caption length and the image token multiple.
func (b *Backbone) Spec() family.Spec {
	c := *b.Model.Config
	c.AxesDims, c.AxesLens = slices.Clone(c.AxesDims), slices.Clone(c.AxesLens)
	return Spec{Config: &c, CaptionLen: b.CaptionLen, ImageMultiple: b.ImageMultiple}
}

// FLOPs counts, per sample of the given image token counts, what
// Condition and Forward run, as ForwardFLOPs counts it: the timestep and
// caption embedders, the refiners and the main layers over image tokens
// padded to multiples of ImageMultiple and a caption of CaptionLen tokens
// padded to the config's SeqMultiple;
// not the patch embedding and the final layer, which a DC model replaces.
func (b *Backbone) FLOPs(lengths []int) float64 {
	c := b.Model.Config
	lc := b.CaptionLen
	if lc == 0 {
		lc = TypicalCaptionLen
	}
	var total float64
	for _, n := range lengths {
		f := forwardFLOPs(c, n, lc, b.imageMultiple())
		total += f.Total() - f.Final - patchEmbedFLOPs(c, n)
	}
	return total
}

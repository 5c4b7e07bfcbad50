package distill

import (
	"fmt"
	"math/rand/v2"
	"strconv"

	"github.com/dcdit/dcdit/cond"
	"github.com/dcdit/dcdit/datasets/shapes"
	"github.com/dcdit/dcdit/diffusion"
	"github.com/dcdit/dcdit/family"
)

// Diffusion trains a fixed-patch model (a family.Trainee: a teacher from
// scratch or onwards) on its own diffusion objective. Only the forward
// and backward passes are the family's; the noise, the input, the
// conditioning time and the loss are the process's (DDPM's hybrid loss,
// flow matching's velocity loss), so another process or family changes
// no line here.
//
// A label-conditioned model reads the batch's labels. A caption-conditioned
// one reads its captions through Table, one caption feature row (the
// model's caption width) per vocabulary word, the toy domain's stand-in
// for a text encoder; a caption dropped for classifier-free guidance
// (empty) is one all-zero feature row, the "empty prompt" a sampler's
// unconditional branch uses too.
type Diffusion struct {
	Model   family.Trainee
	Process diffusion.Process
	Table   []float32
}

// Step implements Objective.
func (o *Diffusion) Step(_ int, b *Batch, rng *rand.Rand) (Metrics, error) {
	on := o.Model.Conditioning()
	B := len(b.Labels)
	if b.C != o.Model.InChannels() {
		return Metrics{}, fmt.Errorf("distill: the data has %d latent channels, the model takes %d", b.C, o.Model.InChannels())
	}
	if oc := o.Process.OutChannels(b.C); oc != o.Model.OutChannels() {
		return Metrics{}, fmt.Errorf("distill: the diffusion process needs %d output channels, the model predicts %d", oc, o.Model.OutChannels())
	}
	sh := diffusion.Shape{B: B, C: b.C, HW: b.H * b.W}
	nz, xt, ts, err := noisyBatch(o.Process, rng, b.X0, sh)
	if err != nil {
		return Metrics{}, err
	}
	in := cond.Input{T: ts, Labels: b.Labels}
	if on.CaptionWidth > 0 {
		if b.Captions == nil {
			return Metrics{}, fmt.Errorf("distill: a caption-conditioned model trains on captions, and the data set has none")
		}
		feats, err := shapes.CaptionFeatures(b.Captions, o.Table, on.CaptionWidth)
		if err != nil {
			return Metrics{}, err
		}
		in = cond.Input{T: ts, Captions: make([]cond.Caption, B)}
		for i, f := range feats {
			in.Captions[i] = cond.Caption{Features: f, Len: len(f) / on.CaptionWidth}
		}
	}
	var l *diffusion.Losses
	err = o.Model.TrainStep(xt, in, b.H, b.W, func(out, grad []float32) error {
		var err error
		l, err = o.Process.Loss(grad, out, b.X0, nz, sh)
		return err
	})
	if err != nil {
		return Metrics{}, err
	}
	return lossMetrics(l), nil
}

// Settings implements Describer, under the names run folders have always
// recorded: "dit_hybrid" with the DDPM schedule's length (and P2's
// weighting when on) for a label-conditioned model, "zimage" with the
// process and the caption table's digest for a caption-conditioned one.
func (o *Diffusion) Settings() map[string]string {
	if o.Model.Conditioning().CaptionWidth > 0 {
		return map[string]string{"kind": "zimage", "process": processName(o.Process), "caption_table": tableDigest(o.Table)}
	}
	s := map[string]string{"kind": "dit_hybrid"}
	if p, ok := o.Process.(*diffusion.DDPM); ok {
		s["diffusion_steps"] = strconv.Itoa(p.Schedule.Steps())
		P2{K: p.P2.K, Gamma: p.P2.Gamma}.settings(s)
	} else {
		s["process"] = processName(o.Process)
	}
	return s
}

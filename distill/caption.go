package distill

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/dcdit/dcdit/datasets/shapes"
	"github.com/dcdit/dcdit/diffusion"
	"github.com/dcdit/dcdit/ops"
	"github.com/dcdit/dcdit/zimage"
)

// ZImageDiffusion trains a Z-Image (from scratch or onwards) with a
// diffusion process, flow matching as Z-Image was trained: captions
// become caption features through a fixed embedding table (the toy
// domain's stand-in for the text encoder), each sample's noisy latent and
// caption go through the model in one packed batch, and the process's
// loss on the output is back-propagated. A caption dropped for
// classifier-free guidance (empty) is one all-zero feature row, the
// "empty prompt" a sampler's unconditional branch uses too.
type ZImageDiffusion struct {
	Model   *zimage.Model
	Process diffusion.Process
	// Table holds one caption feature row (Model.Config.CapFeatDim wide)
	// per vocabulary word.
	Table []float32
}

// Step implements Objective.
func (o *ZImageDiffusion) Step(_ int, b *Batch, rng *rand.Rand) (Metrics, error) {
	c := o.Model.Config
	B := len(b.Labels)
	if b.Captions == nil {
		return Metrics{}, fmt.Errorf("distill: a Z-Image trains on captions, and the data set has none")
	}
	if b.C != c.InChannels {
		return Metrics{}, fmt.Errorf("distill: the data has %d latent channels, the Z-Image takes %d", b.C, c.InChannels)
	}
	if oc := o.Process.OutChannels(c.InChannels); oc != c.InChannels {
		return Metrics{}, fmt.Errorf("distill: the diffusion process needs %d output channels, a Z-Image predicts %d", oc, c.InChannels)
	}
	sh := diffusion.Shape{B: B, C: b.C, HW: b.H * b.W}
	nz, xt, ts, err := noisyBatch(o.Process, rng, b.X0, sh)
	if err != nil {
		return Metrics{}, err
	}
	caps, err := shapes.CaptionFeatures(b.Captions, o.Table, c.CapFeatDim)
	if err != nil {
		return Metrics{}, err
	}
	per := b.C * b.H * b.W
	lats := make([]zimage.Latent, B)
	for i := range lats {
		lats[i] = zimage.Latent{Data: xt[i*per : (i+1)*per], F: 1, H: b.H, W: b.W}
	}
	zb, err := o.Model.Prepare(lats, ts, caps)
	if err != nil {
		return Metrics{}, err
	}
	out := o.Model.Run(zb)
	img := make([]float32, 0, B*per)
	for _, x := range o.Model.Images(out, zb) {
		img = append(img, x...)
	}
	grad := make([]float32, len(img))
	l, err := o.Process.Loss(grad, img, b.X0, nz, sh)
	if err == nil {
		// Run's rows are each item's patches in order: patchify the
		// gradient the same way.
		rows := make([]float32, 0, len(grad))
		for i := range B {
			rows = zimage.Patchify(rows, grad[i*per:(i+1)*per], b.C, 1, b.H, b.W, c.FPatchSize, c.PatchSize)
		}
		err = ops.BackwardFrom(out, rows)
	}
	ops.Release(out)
	if err != nil {
		return Metrics{}, err
	}
	return lossMetrics(l), nil
}

// Settings implements Describer: the process and the caption table (by
// digest: it decides the model's inputs).
func (o *ZImageDiffusion) Settings() map[string]string {
	return map[string]string{"kind": "zimage", "process": processName(o.Process), "caption_table": tableDigest(o.Table)}
}

// tableDigest names a caption table by a digest of its values.
func tableDigest(table []float32) string {
	h := sha256.New()
	buf := make([]byte, 0, 4*len(table))
	for _, v := range table {
		buf = binary.LittleEndian.AppendUint32(buf, math.Float32bits(v))
	}
	h.Write(buf)
	return "sha256 " + short(h.Sum(nil))
}

// processName names a diffusion process and what shapes its noise levels
// (flow matching's training table, by a digest of its σ) in the
// fingerprint.
func processName(p diffusion.Process) string {
	switch p := p.(type) {
	case *diffusion.FlowMatch:
		if p.Table == nil {
			return "flow_matching"
		}
		h := sha256.New()
		for _, v := range p.Table.Sigmas {
			h.Write(binary.LittleEndian.AppendUint32(nil, math.Float32bits(v)))
		}
		return fmt.Sprintf("flow_matching over %d timesteps, σ sha256 %s", len(p.Table.Sigmas), short(h.Sum(nil)))
	case *diffusion.DDPM:
		return fmt.Sprintf("ddpm over %d timesteps", p.Schedule.Steps())
	}
	return fmt.Sprintf("%T", p)
}

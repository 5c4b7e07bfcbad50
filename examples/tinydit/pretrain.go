package tinydit

import (
	"fmt"
	"math/rand/v2"

	"github.com/nlpodyssey/spago/mat"

	"github.com/dcdit/dcdit/cond"
	"github.com/dcdit/dcdit/dc"
	"github.com/dcdit/dcdit/diffusion"
	"github.com/dcdit/dcdit/distill"
	"github.com/dcdit/dcdit/ops"
)

// Pretraining trains a Teacher from its initialisation with its diffusion
// process's own loss (DDPM's hybrid loss, ε and the learned σ): a
// distill.Objective, so that distill.Trainer runs it with its optimiser,
// schedule, run folder and resume.
type Pretraining struct {
	Teacher *Teacher
	// Process is DDPM over the training schedule
	// (&diffusion.DDPM{Schedule: ddpm.Linear(1000)}).
	Process diffusion.Process
}

var _ distill.Objective = (*Pretraining)(nil)

// Step implements distill.Objective.
func (o *Pretraining) Step(_ int, b *distill.Batch, rng *rand.Rand) (distill.Metrics, error) {
	c := o.Teacher.Config
	C, G, p := c.InChannels, c.Backbone.GridSize, c.PatchSize
	B := len(b.Labels)
	if b.C != C || b.H != G || b.W != G {
		return distill.Metrics{}, fmt.Errorf("tinydit: pretraining: the batch holds [%d %d %d] latents, the teacher takes [%d %d %d]", b.C, b.H, b.W, C, G, G)
	}
	if oc := o.Process.OutChannels(C); oc != c.OutChannels() {
		return distill.Metrics{}, fmt.Errorf("tinydit: pretraining: the process wants %d output channels, the teacher predicts %d", oc, c.OutChannels())
	}
	sh := diffusion.Shape{B: B, C: C, HW: G * G}
	nz, err := o.Process.Draw(rng, sh)
	if err != nil {
		return distill.Metrics{}, err
	}
	xt := make([]float32, len(b.X0))
	if err := o.Process.Noisy(xt, b.X0, nz, sh); err != nil {
		return distill.Metrics{}, err
	}
	ts, err := o.Process.ModelTimes(nz)
	if err != nil {
		return distill.Metrics{}, err
	}
	out, err := o.Teacher.Forward(xt, cond.Input{T: ts, Labels: b.Labels})
	if err != nil {
		return distill.Metrics{}, err
	}
	O := c.OutChannels()
	img := dc.FromTokens(mat.Data[float32](out.Value()), B, O, G, G, p)
	grad := make([]float32, len(img))
	l, err := o.Process.Loss(grad, img, b.X0, nz, sh)
	if err != nil {
		return distill.Metrics{}, err
	}
	// One scalar to differentiate: Σ out·∂loss/∂out.
	total := ops.Sum(ops.Mul(out, constant(B*(G/p)*(G/p), O*p*p, dc.ToTokens(grad, B, O, G, G, p))))
	err = ops.Backward(total)
	ops.Release(total)
	if err != nil {
		return distill.Metrics{}, err
	}
	return distill.Metrics{Loss: mean(l.Loss), MSE: mean(l.MSE), VB: mean(l.VB)}, nil
}

// Settings implements distill.Describer: the teacher's config joins the
// run's fingerprint.
func (o *Pretraining) Settings() map[string]string {
	return map[string]string{"kind": "tinydit pretraining", "teacher": o.Teacher.Describe()}
}

// mean is the mean of v, 0 for none.
func mean(v []float32) float64 {
	if len(v) == 0 {
		return 0
	}
	var s float64
	for _, x := range v {
		s += float64(x)
	}
	return s / float64(len(v))
}

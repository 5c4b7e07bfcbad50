package distill

import (
	"fmt"

	"github.com/dcdit/dcdit/cond"
	"github.com/dcdit/dcdit/dit"
	"github.com/dcdit/dcdit/zimage"
)

// Teacher is the frozen model a DC model is distilled onto: its raw
// prediction for a batch of noisy latents, in the diffusion process's own
// terms (DDPM: ε and the variance value; flow matching: the velocity as
// the network emits it). The two implementations are DiT's and Z-Image's;
// DCObjective never looks behind this interface.
type Teacher interface {
	// Predict returns the raw output [B, OutChannels, H, W] for latents
	// xt [B, C, H, W] under in (one model time and one label or caption
	// per sample), without a graph.
	Predict(xt []float32, in cond.Input, h, w int) ([]float32, error)
	// OutChannels is the number of channels Predict returns.
	OutChannels() int
	// Describe names the teacher's configuration in a run's fingerprint.
	Describe() string
	// Guidance says how sampling guides at scale s: the number of leading
	// output channels it guides and the factor g of its guided prediction
	// u + g·(c − u).
	Guidance(s float64) (channels int, g float64)
}

// DiTTeacher is a class-conditional DiT as a distillation teacher; model
// times are DDPM's timesteps.
type DiTTeacher struct{ Model *dit.Model }

// Predict implements Teacher.
func (t DiTTeacher) Predict(xt []float32, in cond.Input, h, w int) ([]float32, error) {
	c := t.Model.Config
	if err := in.CheckLabels(c.NumClasses); err != nil {
		return nil, fmt.Errorf("distill: teacher: %w", err)
	}
	if h != c.InputSize || w != c.InputSize {
		return nil, fmt.Errorf("distill: the teacher takes %d×%d latents, the DC model %d×%d", c.InputSize, c.InputSize, h, w)
	}
	ti := make([]int, len(in.T))
	for i, v := range in.T {
		ti[i] = int(v)
	}
	return t.Model.Denoiser()(xt, ti, in.Labels)
}

// OutChannels implements Teacher.
func (t DiTTeacher) OutChannels() int { return t.Model.Config.OutChannels() }

// Describe implements Teacher: the config as run folders have always
// recorded it.
func (t DiTTeacher) Describe() string { return fmt.Sprintf("%+v", *t.Model.Config) }

// Guidance implements Teacher: DiT's forward_with_cfg guides the first
// three channels, u + s·(c − u).
func (t DiTTeacher) Guidance(s float64) (int, float64) {
	return min(3, t.Model.Config.OutChannels()), s
}

// ZImageTeacher is a caption-conditioned Z-Image as a distillation
// teacher; model times are flow matching's 1 − σ.
type ZImageTeacher struct{ Model *zimage.Model }

// Predict implements Teacher.
func (t ZImageTeacher) Predict(xt []float32, in cond.Input, h, w int) ([]float32, error) {
	out, err := t.Model.Predict(xt, in, h, w)
	if err != nil {
		return nil, fmt.Errorf("distill: teacher: %w", err)
	}
	return out, nil
}

// OutChannels implements Teacher: a velocity per latent channel.
func (t ZImageTeacher) OutChannels() int { return t.Model.Config.InChannels }

// Describe implements Teacher.
func (t ZImageTeacher) Describe() string { return fmt.Sprintf("zimage %+v", *t.Model.Config) }

// Guidance implements Teacher: Z-Image guides every channel,
// c + s·(c − u) = u + (1 + s)·(c − u).
func (t ZImageTeacher) Guidance(s float64) (int, float64) { return t.Model.Config.InChannels, 1 + s }

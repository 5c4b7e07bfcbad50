package vae

import (
	"fmt"
	"math"
)

// Posterior is the encoder's diagonal Gaussian over the latents (diffusers'
// DiagonalGaussianDistribution), every field NHWC [Batch, H, W, Channels].
type Posterior struct {
	Batch, H, W, Channels int
	// Mean is also the distribution's mode, the latents of a deterministic
	// encode.
	Mean []float32
	// LogVar is clamped to [LogVarMin, LogVarMax].
	LogVar []float32
	// Std is exp(LogVar/2).
	Std []float32
}

// NewPosterior splits moments [batch, h, w, 2·channels] (NHWC: the first
// channels of a position are the means, the others the log-variances) into
// a Posterior, clamping the log-variances.
func NewPosterior(moments []float32, batch, h, w, channels int) (*Posterior, error) {
	n := batch * h * w
	if batch < 0 || h < 0 || w < 0 || channels < 1 || len(moments) != 2*n*channels {
		return nil, fmt.Errorf("vae: posterior: %d moments for %d×%d×%d×2·%d", len(moments), batch, h, w, channels)
	}
	p := &Posterior{Batch: batch, H: h, W: w, Channels: channels,
		Mean: make([]float32, n*channels), LogVar: make([]float32, n*channels), Std: make([]float32, n*channels)}
	for i := range n {
		copy(p.Mean[i*channels:(i+1)*channels], moments[2*i*channels:])
		lv := p.LogVar[i*channels : (i+1)*channels]
		copy(lv, moments[(2*i+1)*channels:])
		for c, v := range lv {
			// NaN stays NaN, as in torch.clamp.
			if v < LogVarMin {
				v = LogVarMin
			} else if v > LogVarMax {
				v = LogVarMax
			}
			lv[c] = v
			p.Std[i*channels+c] = float32(math.Exp(float64(float32(0.5) * v)))
		}
	}
	return p, nil
}

// Var is exp(LogVar), in a new slice.
func (p *Posterior) Var() []float32 {
	v := make([]float32, len(p.LogVar))
	for i, lv := range p.LogVar {
		v[i] = float32(math.Exp(float64(lv)))
	}
	return v
}

// Sample returns Mean + Std·noise for noise of the latents' shape (standard
// normal values, drawn by the caller).
func (p *Posterior) Sample(noise []float32) ([]float32, error) {
	if len(noise) != len(p.Mean) {
		return nil, fmt.Errorf("vae: posterior sample: %d noise values, want %d (%d×%d×%d×%d)", len(noise), len(p.Mean), p.Batch, p.H, p.W, p.Channels)
	}
	out := make([]float32, len(noise))
	for i, z := range noise {
		// Explicit float32 rounding keeps the product out of a fused
		// multiply-add, as the reference computes it.
		out[i] = p.Mean[i] + float32(p.Std[i]*z)
	}
	return out, nil
}

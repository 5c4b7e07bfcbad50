package diffusion

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"

	"github.com/dcdit/dcdit/diffusion/ddpm"
)

// P2 weighs DDPM's ε term by 1/(K + SNR_t)^Gamma
// (ddpm.Schedule.P2Weights); Gamma = 0 is DiT's uniform weighting.
type P2 struct {
	K, Gamma float64
}

// DDPM is DiT's Gaussian diffusion with a learned σ: the model predicts ε
// and the variance value v ([B, 2C, HW]), trains on the hybrid loss and
// samples ancestrally.
type DDPM struct {
	// Schedule is the diffusion the process runs: the full training
	// schedule for training, a respaced one for sampling.
	Schedule *ddpm.Schedule
	// P2 weighs the hybrid loss's ε term per timestep (zero value:
	// uniform).
	P2 P2
	// GuidedChannels is how many leading output channels guidance mixes
	// (ddpm.Guidance.Channels; 0 is DiT's 3).
	GuidedChannels int
}

var _ Process = (*DDPM)(nil)

var errNoSchedule = errors.New("diffusion: DDPM has no schedule")

// OutChannels implements Process: ε and v per latent channel.
func (d *DDPM) OutChannels(c int) int { return 2 * c }

// Draw implements Process: t ~ U{0 … T−1} for every sample, then
// ε ~ N(0, I), in that order from rng (the order DiT's training has always
// drawn them in, which resumed runs depend on).
func (d *DDPM) Draw(rng *rand.Rand, sh Shape) (*Noise, error) {
	if d.Schedule == nil {
		return nil, errNoSchedule
	}
	if err := sh.check(); err != nil {
		return nil, err
	}
	nz := &Noise{Levels: make([]int, sh.B), Noise: make([]float32, sh.size())}
	for i := range nz.Levels {
		nz.Levels[i] = rng.IntN(d.Schedule.Steps())
	}
	gaussian(rng, nz.Noise)
	return nz, nil
}

// Noisy implements Process: x_t = √ᾱ_t·x0 + √(1−ᾱ_t)·ε.
func (d *DDPM) Noisy(dst, x0 []float32, nz *Noise, sh Shape) error {
	if d.Schedule == nil {
		return errNoSchedule
	}
	if err := checkNoise("noisy input", nz, sh); err != nil {
		return err
	}
	return d.Schedule.QSample(dst, x0, nz.Noise, nz.Levels, ddpm.Shape(sh))
}

// ModelTimes implements Process: the original training timestep of each
// level (the schedule's timestep map; the level itself when not
// respaced).
func (d *DDPM) ModelTimes(nz *Noise) ([]float32, error) {
	if d.Schedule == nil {
		return nil, errNoSchedule
	}
	if nz == nil {
		return nil, errors.New("diffusion: model times: no noise drawn")
	}
	ts := make([]float32, len(nz.Levels))
	for i, t := range nz.Levels {
		if t < 0 || t >= d.Schedule.Steps() {
			return nil, fmt.Errorf("diffusion: model times: timestep %d of sample %d outside [0, %d)", t, i, d.Schedule.Steps())
		}
		ts[i] = float32(d.Schedule.TimestepMap[t])
	}
	return ts, nil
}

// Clean implements Process: x̂0 = (x − √(1−ᾱ_t)·ε̂)/√ᾱ_t from the output's
// ε̂ channels, ᾱ_t at the original timestep t (found in the schedule's
// timestep map).
func (d *DDPM) Clean(dst, x, out, t []float32, sh Shape) error {
	if d.Schedule == nil {
		return errNoSchedule
	}
	if err := checkClean(dst, x, out, t, sh, d.OutChannels(sh.C)); err != nil {
		return err
	}
	n, stride := sh.C*sh.HW, d.OutChannels(sh.C)*sh.HW
	for b, tm := range t {
		i := slices.Index(d.Schedule.TimestepMap, int(tm))
		if i < 0 || float32(int(tm)) != tm {
			return fmt.Errorf("diffusion: clean estimate: sample %d: model time %v is none of the schedule's timesteps", b, tm)
		}
		sa, s1 := d.Schedule.SqrtAlphasCumprod[i], d.Schedule.SqrtOneMinusAlphasCumprod[i]
		eps := out[b*stride : b*stride+n] // ε̂, before the variance channels
		for j, v := range x[b*n : (b+1)*n] {
			dst[b*n+j] = float32((float64(v) - s1*float64(eps[j])) / sa)
		}
	}
	return nil
}

// Loss implements Process: DiT's hybrid loss, w_t·mse + vb with the P2
// weight w_t, and its gradient for the batch mean.
func (d *DDPM) Loss(grad, out, x0 []float32, nz *Noise, sh Shape) (*Losses, error) {
	if d.Schedule == nil {
		return nil, errNoSchedule
	}
	if err := checkNoise("loss", nz, sh); err != nil {
		return nil, err
	}
	var w []float32
	if d.P2.Gamma != 0 {
		var err error
		if w, err = d.Schedule.P2Weights(nz.Levels, d.P2.K, d.P2.Gamma); err != nil {
			return nil, err
		}
	}
	l, err := d.Schedule.WeightedTrainingLosses(grad, out, x0, nz.Noise, nz.Levels, ddpm.Shape(sh), 1/float32(sh.B), w)
	if err != nil {
		return nil, err
	}
	return &Losses{Loss: l.Loss, MSE: l.MSE, VB: l.VB}, nil
}

// Sample implements Process: ancestral sampling over every step of the
// schedule (ddpm.Schedule.Sample), guided when opts.Guidance > 1.
func (d *DDPM) Sample(model Model, sh Shape, opts SampleOptions) ([]float32, error) {
	if d.Schedule == nil {
		return nil, errNoSchedule
	}
	if err := sh.check(); err != nil {
		return nil, err
	}
	g := ddpm.Guidance{Scale: float32(opts.Guidance), Channels: d.GuidedChannels}
	guided := g.Enabled()
	// Labels are the model's business: ddpm's label plumbing carries
	// placeholders, and the guided flag tells the model which half is
	// unconditional.
	denoise := func(x []float32, t []int, _ []int) ([]float32, error) {
		ts := make([]float32, len(t))
		for i, v := range t {
			ts[i] = float32(v)
		}
		return model(x, ts, guided)
	}
	return d.Schedule.Sample(denoise, ddpm.Shape(sh), ddpm.SampleOptions{
		Classes: make([]int, sh.B), Guidance: g, Seed: opts.Seed, Progress: opts.Progress})
}

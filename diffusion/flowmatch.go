package diffusion

import (
	"errors"
	"fmt"
	"math/rand/v2"

	"github.com/dcdit/dcdit/diffusion/flowmatch"
)

// FlowMatch is Z-Image's rectified flow: x_σ = (1 − σ)·x0 + σ·noise, the
// model conditioned on 1 − σ and predicting the data-ward velocity, which
// the process negates (Z-Image's sign) both in the loss and in the Euler
// sampler.
type FlowMatch struct {
	// Table is the training table noise levels are drawn from (nil when
	// the process only samples).
	Table *flowmatch.Table
	// Schedule is the sampling schedule (nil when the process only
	// trains).
	Schedule *flowmatch.Schedule
	// Truncate, Truncation and Normalization are Z-Image's guidance
	// options (flowmatch.Guidance): guidance stops above model time
	// Truncation when Truncate is set, and Normalization > 0 clamps a
	// guided output's norm to Normalization times the positive one's.
	Truncate      bool
	Truncation    float64
	Normalization float64
}

var _ Process = (*FlowMatch)(nil)

var (
	errNoTable         = errors.New("diffusion: flow matching has no training table")
	errNoFlowMatchPlan = errors.New("diffusion: flow matching has no sampling schedule")
)

// OutChannels implements Process: one velocity per latent channel.
func (f *FlowMatch) OutChannels(c int) int { return c }

// Draw implements Process: a uniform density sample u ∈ [0, 1) per sample
// mapped to a table index as the training script maps it
// (weighting scheme "none"), then noise ~ N(0, I).
func (f *FlowMatch) Draw(rng *rand.Rand, sh Shape) (*Noise, error) {
	if f.Table == nil {
		return nil, errNoTable
	}
	if err := sh.check(); err != nil {
		return nil, err
	}
	nz := &Noise{Levels: make([]int, sh.B), Noise: make([]float32, sh.size())}
	for i := range nz.Levels {
		k, err := f.Table.Index(rng.Float32())
		if err != nil {
			return nil, err
		}
		nz.Levels[i] = k
	}
	gaussian(rng, nz.Noise)
	return nz, nil
}

// Noisy implements Process: x_σ = (1 − σ)·x0 + σ·noise at each sample's
// table σ.
func (f *FlowMatch) Noisy(dst, x0 []float32, nz *Noise, sh Shape) error {
	if f.Table == nil {
		return errNoTable
	}
	if err := checkNoise("noisy input", nz, sh); err != nil {
		return err
	}
	sigmas, _, err := f.Table.Lookup(nz.Levels)
	if err != nil {
		return err
	}
	return flowmatch.QSample(dst, x0, nz.Noise, sigmas)
}

// ModelTimes implements Process: (1000 − timestep)/1000 of each level.
func (f *FlowMatch) ModelTimes(nz *Noise) ([]float32, error) {
	if f.Table == nil {
		return nil, errNoTable
	}
	if nz == nil {
		return nil, errors.New("diffusion: model times: no noise drawn")
	}
	_, timesteps, err := f.Table.Lookup(nz.Levels)
	if err != nil {
		return nil, err
	}
	for i, t := range timesteps {
		timesteps[i] = flowmatch.ModelTime(t)
	}
	return timesteps, nil
}

// Clean implements Process: x̂0 = x + σ·v̂, σ = 1 − t (the model
// predicts the data-ward velocity x0 − noise).
func (f *FlowMatch) Clean(dst, x, out, t []float32, sh Shape) error {
	if err := checkClean(dst, x, out, t, sh, f.OutChannels(sh.C)); err != nil {
		return err
	}
	n := sh.C * sh.HW
	for b, tm := range t {
		s := 1 - tm
		for j := b * n; j < (b+1)*n; j++ {
			dst[j] = x[j] + s*out[j]
		}
	}
	return nil
}

// Loss implements Process: the mean over C·HW of (−out − (noise − x0))²
// per sample (flowmatch.TrainingLoss); MSE is the same value, VB nil.
func (f *FlowMatch) Loss(grad, out, x0 []float32, nz *Noise, sh Shape) (*Losses, error) {
	if err := checkNoise("loss", nz, sh); err != nil {
		return nil, err
	}
	if len(out) != sh.size() {
		return nil, fmt.Errorf("diffusion: loss: model output has %d values, want %d for shape %+v", len(out), sh.size(), sh)
	}
	target := make([]float32, sh.size())
	if err := flowmatch.Target(target, x0, nz.Noise); err != nil {
		return nil, err
	}
	l, err := flowmatch.TrainingLoss(grad, out, target, sh.B)
	if err != nil {
		return nil, err
	}
	return &Losses{Loss: l.PerSample, MSE: append([]float32(nil), l.PerSample...)}, nil
}

// Sample implements Process: Euler integration of the schedule
// (flowmatch.Schedule.Sample) from N(0, I) latents drawn from opts.Seed.
func (f *FlowMatch) Sample(model Model, sh Shape, opts SampleOptions) ([]float32, error) {
	if f.Schedule == nil {
		return nil, errNoFlowMatchPlan
	}
	if err := sh.check(); err != nil {
		return nil, err
	}
	x := make([]float32, sh.size())
	gaussian(newRNG(opts.Seed), x)
	return f.Schedule.Sample(flowmatch.Model(model), x, sh.B, flowmatch.SampleOptions{
		Guidance: flowmatch.Guidance{Scale: opts.Guidance, Truncate: f.Truncate, Truncation: f.Truncation, Normalization: f.Normalization},
		Progress: opts.Progress,
	})
}

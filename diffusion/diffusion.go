// Package diffusion is the seam between a backbone's training and sampling
// code and the diffusion process it was trained with. DiT's DDPM (ε and a
// learned σ, the hybrid loss, ancestral sampling; package diffusion/ddpm) and
// Z-Image's flow matching (velocity, shifted σ table, Euler sampling;
// package diffusion/flowmatch) both implement Process, so an objective or a
// sampler written against it runs on either without knowing which.
//
// The arithmetic stays in the two process packages; this package only
// adapts their entry points to one vocabulary, so that routing a caller
// through it changes no number.
//
// Arrays are float32 in NCHW order, as the backbones produce them. A
// model's raw output is what the network emits, before any process-specific
// interpretation (DDPM: ε then the variance value v; flow matching: the
// data-ward velocity, which the process negates).
package diffusion

import (
	"fmt"
	"math/rand/v2"
)

// Shape describes a batch of latents: B samples of C channels over HW
// pixels, stored NCHW.
type Shape struct{ B, C, HW int }

// size is the number of latent values of the batch.
func (s Shape) size() int { return s.B * s.C * s.HW }

func (s Shape) check() error {
	if s.B < 1 || s.C < 1 || s.HW < 1 {
		return fmt.Errorf("diffusion: batch shape %+v needs positive sizes", s)
	}
	return nil
}

// Noise is what a training step draws for its batch.
type Noise struct {
	// Levels holds one noise level per sample, as an index into the
	// process's discrete training table (DDPM: the timestep t, 0 the least
	// noisy; flow matching: the table index, 0 pure noise). Both processes
	// train on a table, so an integer identifies a level exactly.
	Levels []int
	// Noise is the Gaussian noise of the batch, [B, C, HW].
	Noise []float32
}

// Losses are the per-sample terms of a training loss.
type Losses struct {
	// Loss is the value the gradient is taken of, per sample.
	Loss []float32
	// MSE is the unweighted regression error per sample (DDPM: ε;
	// flow matching: velocity).
	MSE []float32
	// VB is DDPM's variational-bound term per sample; nil for a process
	// without a learned variance.
	VB []float32
}

// Model evaluates a network on a batch during sampling: x holds the
// latents ([B, C, HW]) and t one model time per sample (Process.ModelTimes'
// convention). When guided is set the batch is doubled ([x; x], [t; t])
// and the model must condition its first half as asked and its second half
// unconditionally (DiT: the null class; Z-Image: the negative prompts), in
// one call. It returns the raw output, [len(t), OutChannels(C), HW], and
// must neither modify nor keep x and t.
type Model func(x, t []float32, guided bool) ([]float32, error)

// SampleOptions configure a sampling run.
type SampleOptions struct {
	// Guidance is the classifier-free guidance scale in the process's own
	// convention (DDPM: uncond + s·(cond − uncond), on for s > 1; flow
	// matching: pos + s·(pos − neg), on as its pipeline decides).
	Guidance float64
	// Seed draws the initial noise (and DDPM's per-step noise) from one
	// PCG stream, so a run is reproducible.
	Seed uint64
	// Progress, if set, is called after each step with the number of
	// steps done and the total.
	Progress func(done, total int)
}

// Process is a diffusion process as training and sampling use it.
type Process interface {
	// OutChannels is how many channels the model predicts for c latent
	// channels (DDPM with learned σ: 2c; flow matching: c).
	OutChannels(c int) int
	// Draw draws a training batch's noise levels and noise from rng.
	Draw(rng *rand.Rand, sh Shape) (*Noise, error)
	// Noisy writes the model's input for clean latents x0 at the batch's
	// noise levels into dst.
	Noisy(dst, x0 []float32, nz *Noise, sh Shape) error
	// ModelTimes returns the time each sample's model is conditioned on.
	ModelTimes(nz *Noise) ([]float32, error)
	// Loss evaluates the training loss of the raw model output out
	// ([B, OutChannels(C), HW]) at the input Noisy formed. If grad is not
	// nil it receives the gradient of the batch mean of Losses.Loss with
	// respect to out.
	Loss(grad, out, x0 []float32, nz *Noise, sh Shape) (*Losses, error)
	// Sample runs the process's sampler from pure noise drawn from
	// opts.Seed and returns the final latents, [B, C, HW].
	Sample(model Model, sh Shape, opts SampleOptions) ([]float32, error)
	// Clean writes into dst [B, C, HW] the clean estimate x̂0 that the raw
	// model output out ([B, OutChannels(C), HW]) at latents x [B, C, HW]
	// and model times t (ModelTimes' convention, one per sample) implies.
	Clean(dst, x, out, t []float32, sh Shape) error
}

// checkClean checks Clean's buffers against sh for a process whose model
// predicts outC channels in all.
func checkClean(dst, x, out, t []float32, sh Shape, outC int) error {
	if err := sh.check(); err != nil {
		return err
	}
	if len(dst) != sh.size() || len(x) != sh.size() || len(out) != sh.B*outC*sh.HW || len(t) != sh.B {
		return fmt.Errorf("diffusion: clean estimate: %d, %d, %d and %d values for the estimate, latents, output and times, want %d, %d, %d and %d for shape %+v",
			len(dst), len(x), len(out), len(t), sh.size(), sh.size(), sh.B*outC*sh.HW, sh.B, sh)
	}
	return nil
}

// newRNG is the sampler's generator: the stream ddpm's sampler and the
// CLI's Z-Image path draw from.
func newRNG(seed uint64) *rand.Rand {
	return rand.New(rand.NewPCG(seed, seed^0x5851f42d4c957f2d))
}

func gaussian(rng *rand.Rand, dst []float32) {
	for i := range dst {
		dst[i] = float32(rng.NormFloat64())
	}
}

// checkNoise checks a draw against the batch.
func checkNoise(op string, nz *Noise, sh Shape) error {
	if err := sh.check(); err != nil {
		return err
	}
	if nz == nil {
		return fmt.Errorf("diffusion: %s: no noise drawn", op)
	}
	if len(nz.Levels) != sh.B || len(nz.Noise) != sh.size() {
		return fmt.Errorf("diffusion: %s: %d levels and %d noise values for shape %+v, want %d and %d", op, len(nz.Levels), len(nz.Noise), sh, sh.B, sh.size())
	}
	return nil
}

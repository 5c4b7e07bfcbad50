package ddpm

import (
	"fmt"
	"math/rand/v2"
)

// Denoiser evaluates a learned-sigma model on a batch: x is [B, C, HW] at
// the model's own timesteps t (original training scale, after the
// schedule's timestep map) with class labels y; it returns [B, 2C, HW].
type Denoiser func(x []float32, t []int, y []int) ([]float32, error)

// Guidance configures classifier-free guidance.
type Guidance struct {
	// Scale is the guidance scale s; values ≤ 1 disable guidance.
	Scale float32
	// NullClass is the label of the unconditional ("null") class.
	NullClass int
	// Channels is how many leading output channels are guided: DiT's
	// forward_with_cfg guides 3 (kept "for exact reproducibility"),
	// diffusers' pipeline all C. 0 means DiT's 3.
	Channels int
}

// Enabled reports whether guidance changes anything.
func (g Guidance) Enabled() bool { return g.Scale > 1 }

// Guided wraps model so that each call evaluates the conditional and the
// unconditional batch together ([x; x] with labels [y; null]) and returns,
// for the conditional half, uncond + s·(cond − uncond) on the guided
// channels and the conditional output elsewhere — DiT's forward_with_cfg.
func (g Guidance) Guided(model Denoiser, sh Shape) Denoiser {
	if !g.Enabled() {
		return model
	}
	channels := g.Channels
	if channels == 0 {
		channels = 3
	}
	channels = min(channels, sh.C)
	n := sh.C * sh.HW
	return func(x []float32, t []int, y []int) ([]float32, error) {
		B := len(t)
		x2 := append(append(make([]float32, 0, 2*len(x)), x...), x...)
		t2 := append(append(make([]int, 0, 2*B), t...), t...)
		y2 := append(make([]int, 0, 2*B), y...)
		for range B {
			y2 = append(y2, g.NullClass)
		}
		out, err := model(x2, t2, y2)
		if err != nil {
			return nil, err
		}
		if len(out) != 2*B*2*n {
			return nil, fmt.Errorf("ddpm: guided model returned %d values, want %d", len(out), 4*B*n)
		}
		res := out[:2*B*n]
		for b := range B {
			cond, uncond := out[b*2*n:], out[(B+b)*2*n:]
			for i := range channels * sh.HW {
				res[b*2*n+i] = uncond[i] + g.Scale*(cond[i]-uncond[i])
			}
		}
		return res, nil
	}
}

// SampleOptions configure an ancestral sampling run.
type SampleOptions struct {
	Classes  []int // one label per sample
	Guidance Guidance
	// Seed makes the run reproducible: it draws the initial noise and every
	// step's noise from one PCG stream.
	Seed uint64
	// Progress, if set, is called after each step with the number of steps
	// done and the total.
	Progress func(done, total int)
}

// Sample runs DDPM ancestral sampling from pure noise over every step of s
// (typically a respaced schedule) and returns x_0 as [B, C, HW].
func (s *Schedule) Sample(model Denoiser, sh Shape, opts SampleOptions) ([]float32, error) {
	if len(opts.Classes) != sh.B {
		return nil, fmt.Errorf("ddpm: sample: %d class labels for a batch of %d", len(opts.Classes), sh.B)
	}
	rng := rand.New(rand.NewPCG(opts.Seed, opts.Seed^0x5851f42d4c957f2d))
	x := make([]float32, sh.B*sh.C*sh.HW)
	gaussian(rng, x)
	noise := make([]float32, len(x))
	next := make([]float32, len(x))
	model = opts.Guidance.Guided(model, sh)
	t, mt := make([]int, sh.B), make([]int, sh.B)
	for step := s.Steps() - 1; step >= 0; step-- {
		for b := range t {
			t[b], mt[b] = step, s.TimestepMap[step]
		}
		out, err := model(x, mt, opts.Classes)
		if err != nil {
			return nil, fmt.Errorf("ddpm: step %d (t=%d): %w", s.Steps()-step, mt[0], err)
		}
		gaussian(rng, noise)
		if _, err := s.PSample(next, out, x, noise, t, sh); err != nil {
			return nil, err
		}
		x, next = next, x
		if opts.Progress != nil {
			opts.Progress(s.Steps()-step, s.Steps())
		}
	}
	return x, nil
}

func gaussian(rng *rand.Rand, dst []float32) {
	for i := range dst {
		dst[i] = float32(rng.NormFloat64())
	}
}

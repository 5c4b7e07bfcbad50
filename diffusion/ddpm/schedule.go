// Package ddpm is the Gaussian diffusion process DiT was trained with
// (facebookresearch/DiT diffusion/, after improved-diffusion): the linear
// beta schedule in float64 tables, timestep respacing, the learned-range
// variance, q_sample, one ancestral sampling step and the hybrid training
// loss (MSE on ε plus the variational bound with the mean detached),
// together with the loss's gradient with respect to the model output.
//
// Arrays are float32 in NCHW order ([batch, channels, height, width]) as
// the model produces them. Every per-timestep coefficient is looked up in a
// float64 table and rounded to float32 before use, as the reference's
// _extract_into_tensor does, so the arithmetic matches its float32 path.
package ddpm

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Schedule holds the per-timestep tables of one (possibly respaced)
// diffusion, all float64 as NumPy computes them.
type Schedule struct {
	Betas                       []float64
	AlphasCumprod               []float64
	AlphasCumprodPrev           []float64
	SqrtAlphasCumprod           []float64
	SqrtOneMinusAlphasCumprod   []float64
	SqrtRecipAlphasCumprod      []float64
	SqrtRecipm1AlphasCumprod    []float64
	PosteriorVariance           []float64
	PosteriorLogVarianceClipped []float64
	PosteriorMeanCoef1          []float64
	PosteriorMeanCoef2          []float64
	// LogBetas is log(β), the upper end of the learned-range variance.
	LogBetas []float64
	// TimestepMap maps a step index of this schedule to the original
	// training timestep the model is conditioned on (identity when not
	// respaced).
	TimestepMap []int
}

// Steps is the number of diffusion steps.
func (s *Schedule) Steps() int { return len(s.Betas) }

// LinearBetas is DiT's "linear" schedule: T betas from 1e-4 to 0.02 scaled
// by 1000/T, spaced like np.linspace (start + i·step, last = stop).
func LinearBetas(T int) []float64 {
	scale := 1000 / float64(T)
	start, stop := scale*0.0001, scale*0.02
	betas := make([]float64, T)
	if T == 1 {
		betas[0] = start
		return betas
	}
	step := (stop - start) / float64(T-1)
	for i := range betas {
		betas[i] = float64(i)*step + start
	}
	betas[T-1] = stop
	return betas
}

// NewSchedule computes the tables for the given betas, with an identity
// timestep map.
func NewSchedule(betas []float64) *Schedule {
	T := len(betas)
	s := &Schedule{Betas: append([]float64(nil), betas...)}
	mk := func() []float64 { return make([]float64, T) }
	s.AlphasCumprod, s.AlphasCumprodPrev = mk(), mk()
	s.SqrtAlphasCumprod, s.SqrtOneMinusAlphasCumprod = mk(), mk()
	s.SqrtRecipAlphasCumprod, s.SqrtRecipm1AlphasCumprod = mk(), mk()
	s.PosteriorVariance, s.PosteriorLogVarianceClipped = mk(), mk()
	s.PosteriorMeanCoef1, s.PosteriorMeanCoef2, s.LogBetas = mk(), mk(), mk()
	s.TimestepMap = make([]int, T)
	prod := 1.0
	for i, b := range betas {
		s.AlphasCumprodPrev[i] = prod
		prod *= 1 - b // sequential, as np.cumprod
		s.AlphasCumprod[i] = prod
		s.TimestepMap[i] = i
	}
	for i, b := range betas {
		ac, acPrev := s.AlphasCumprod[i], s.AlphasCumprodPrev[i]
		s.SqrtAlphasCumprod[i] = math.Sqrt(ac)
		s.SqrtOneMinusAlphasCumprod[i] = math.Sqrt(1 - ac)
		s.SqrtRecipAlphasCumprod[i] = math.Sqrt(1 / ac)
		s.SqrtRecipm1AlphasCumprod[i] = math.Sqrt(1/ac - 1)
		s.PosteriorVariance[i] = b * (1 - acPrev) / (1 - ac)
		s.PosteriorMeanCoef1[i] = b * math.Sqrt(acPrev) / (1 - ac)
		s.PosteriorMeanCoef2[i] = (1 - acPrev) * math.Sqrt(1-b) / (1 - ac)
		s.LogBetas[i] = math.Log(b)
	}
	// The posterior variance is 0 at t = 0; its log is clipped by
	// repeating the value at t = 1.
	for i := range betas {
		v := s.PosteriorVariance[i]
		if i == 0 && T > 1 {
			v = s.PosteriorVariance[1]
		}
		s.PosteriorLogVarianceClipped[i] = math.Log(v)
	}
	return s
}

// Linear returns DiT's training diffusion: the linear schedule of T steps.
func Linear(T int) *Schedule { return NewSchedule(LinearBetas(T)) }

// Respace keeps only the given timesteps of s (sorted, distinct, in range):
// the new betas are 1 − ᾱ[k]/ᾱ[previous kept], and the timestep map points
// back to the original steps.
func (s *Schedule) Respace(use []int) (*Schedule, error) {
	last, prev := 1.0, -1
	betas := make([]float64, 0, len(use))
	for _, t := range use {
		if t <= prev || t >= s.Steps() {
			return nil, fmt.Errorf("ddpm: respacing timesteps must be increasing within [0, %d), got %d after %d", s.Steps(), t, prev)
		}
		betas = append(betas, 1-s.AlphasCumprod[t]/last)
		last, prev = s.AlphasCumprod[t], t
	}
	r := NewSchedule(betas)
	for i, t := range use {
		r.TimestepMap[i] = s.TimestepMap[t]
	}
	return r, nil
}

// SpaceTimesteps chooses which of numTimesteps original steps a respaced
// schedule keeps. spec is a step count ("250"), comma-separated counts for
// equal sections ("10,15,20"), or "ddimN" (strided, DDIM style). Within a
// section, steps are spread with a float64 stride and rounded half to
// even, like Python's round.
func SpaceTimesteps(numTimesteps int, spec string) ([]int, error) {
	if n, ok := strings.CutPrefix(spec, "ddim"); ok {
		want, err := strconv.Atoi(n)
		if err != nil || want < 1 {
			return nil, fmt.Errorf("ddpm: respacing %q: want ddimN with N ≥ 1", spec)
		}
		for stride := 1; stride < numTimesteps; stride++ {
			var steps []int
			for t := 0; t < numTimesteps; t += stride {
				steps = append(steps, t)
			}
			if len(steps) == want {
				return steps, nil
			}
		}
		return nil, fmt.Errorf("ddpm: respacing %q: no integer stride gives exactly %d of %d steps", spec, want, numTimesteps)
	}
	var counts []int
	for _, f := range strings.Split(spec, ",") {
		c, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || c < 1 {
			return nil, fmt.Errorf("ddpm: respacing %q: want a positive step count or comma-separated counts", spec)
		}
		counts = append(counts, c)
	}
	sizePer, extra := numTimesteps/len(counts), numTimesteps%len(counts)
	start := 0
	var steps []int
	for i, count := range counts {
		size := sizePer
		if i < extra {
			size++
		}
		if size < count {
			return nil, fmt.Errorf("ddpm: respacing %q: cannot take %d steps from a section of %d", spec, count, size)
		}
		stride := 1.0
		if count > 1 {
			stride = float64(size-1) / float64(count-1)
		}
		cur := 0.0
		for range count {
			steps = append(steps, start+int(math.RoundToEven(cur)))
			cur += stride
		}
		start += size
	}
	return steps, nil
}

// Respaced returns DiT's sampling diffusion: the linear 1000-step schedule
// respaced by spec ("250" in DiT's sample.py; "" keeps all steps).
func Respaced(T int, spec string) (*Schedule, error) {
	base := Linear(T)
	if spec == "" {
		return base, nil
	}
	use, err := SpaceTimesteps(T, spec)
	if err != nil {
		return nil, err
	}
	return base.Respace(use)
}

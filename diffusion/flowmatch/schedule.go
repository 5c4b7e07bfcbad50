// Package flowmatch is the rectified-flow process Z-Image is trained and
// sampled with: FlowMatchEulerDiscreteScheduler with a static shift, as
// Tongyi-MAI's Z-Image pipeline and diffusers' ZImagePipeline drive it.
//
// A noise level σ ∈ [0, 1] mixes clean latents and Gaussian noise as
// x_σ = (1 − σ)·x0 + σ·noise. The transformer is conditioned on the model
// time t_model = (1000 − timestep)/1000 = 1 − σ (0 at pure noise, 1 at
// clean data) and its raw output r points from noise towards data, so both
// the sampler and the training loss use its negation −r as the velocity
// noise − x0. Sampling is Euler over a shifted σ schedule,
// x ← x + (σ_{i+1} − σ_i)·(−r), with Z-Image's classifier-free guidance
// (scale, truncation and norm clamping).
//
// The two pipelines build their schedules on different rounding paths
// (Tongyi in float64 then rounded, diffusers in float32 throughout), which
// can disagree by one float32 ulp; each path is reproduced bit for bit, so
// a schedule here is the one the corresponding pipeline runs. Latents are
// float32 in NCHW order, as the model produces them; sample-wise results
// take the batch size and split the arrays evenly.
package flowmatch

import (
	"fmt"
	"math"
)

// ModelTimeScale is the constant Z-Image's pipelines divide timesteps by
// to get the model time: it is written into both pipelines as 1000, not
// read from the scheduler's num_train_timesteps.
const ModelTimeScale = 1000

// Config is the scheduler configuration Z-Image ships with (dynamic
// shifting off, so only the static shift applies).
type Config struct {
	// NumTrainTimesteps is the length of the training table and the
	// factor between σ and timestep.
	NumTrainTimesteps int
	// Shift is the static shift s of σ' = s·σ/(1 + (s−1)·σ); s > 1 spends
	// more steps at high noise, where a high-resolution image's layout is
	// decided.
	Shift float64
}

// DefaultConfig is Z-Image-Turbo's scheduler_config.json: 1000 training
// timesteps and shift 3.
func DefaultConfig() Config { return Config{NumTrainTimesteps: 1000, Shift: 3} }

func (c Config) check() error {
	if c.NumTrainTimesteps < 1 {
		return fmt.Errorf("flowmatch: num_train_timesteps %d, want ≥ 1", c.NumTrainTimesteps)
	}
	if !(c.Shift > 0) || math.IsInf(c.Shift, 0) {
		return fmt.Errorf("flowmatch: shift %v, want a finite value > 0", c.Shift)
	}
	return nil
}

// Shift applies the static shift in float64, the arithmetic Tongyi's
// scheduler uses for inference schedules.
func Shift(sigma, shift float64) float64 {
	return shift * sigma / (1 + (shift-1)*sigma)
}

// Shift32 applies the static shift in float32 arithmetic, rounding after
// every operation as NumPy and PyTorch do on float32 arrays (the shift and
// shift − 1 are Python floats rounded to float32 first). diffusers' schedules
// and both training tables take this path.
func Shift32(sigma float32, shift float64) float32 {
	s, s1 := float32(shift), float32(shift-1)
	num := float32(s * sigma)
	den := float32(1 + float32(s1*sigma))
	return num / den
}

// Pipeline names which of the two reference pipelines a schedule follows;
// besides the schedule's rounding, it decides when guidance switches on
// and whether a final step at timestep 0 runs.
type Pipeline int

const (
	// Tongyi is Tongyi-MAI/Z-Image's src/zimage pipeline: guidance runs
	// for a scale above 1, and a last step at timestep 0 is skipped.
	Tongyi Pipeline = iota
	// Diffusers is diffusers' ZImagePipeline: guidance runs for a scale
	// above 0, and every step runs.
	Diffusers
)

// String names the pipeline as errors and test names print it.
func (p Pipeline) String() string {
	switch p {
	case Tongyi:
		return "tongyi"
	case Diffusers:
		return "diffusers"
	}
	return fmt.Sprintf("Pipeline(%d)", int(p))
}

// Schedule is one sampling run's noise levels.
type Schedule struct {
	// Sigmas holds the N+1 noise levels of N steps, descending, the last
	// one 0 (where the run ends).
	Sigmas []float32
	// Timesteps holds σ·num_train_timesteps for the N steps, in float32.
	Timesteps []float32
	// Pipeline is the pipeline whose sampling rules apply.
	Pipeline Pipeline
}

// Steps is the number of Euler steps N.
func (s *Schedule) Steps() int { return len(s.Timesteps) }

// ModelTime is what the transformer is conditioned on at a timestep:
// (1000 − timestep)/1000 in float32, so 0 at pure noise and 1 at clean
// data, the direction Z-Image was trained in.
func ModelTime(timestep float32) float32 {
	return float32(ModelTimeScale-timestep) / ModelTimeScale
}

// ModelTimes returns the model time of every step.
func (s *Schedule) ModelTimes() []float32 {
	out := make([]float32, len(s.Timesteps))
	for i, t := range s.Timesteps {
		out[i] = ModelTime(t)
	}
	return out
}

func (s *Schedule) check() error {
	if len(s.Sigmas) != len(s.Timesteps)+1 {
		return fmt.Errorf("flowmatch: schedule has %d sigmas for %d timesteps, want one more sigma than timesteps", len(s.Sigmas), len(s.Timesteps))
	}
	return nil
}

// finish appends the closing σ = 0 and derives the timesteps in float32,
// as both schedulers do after shifting.
func finish(sigmas []float32, T int, p Pipeline) *Schedule {
	s := &Schedule{Sigmas: append(sigmas, 0), Timesteps: make([]float32, len(sigmas)), Pipeline: p}
	for i, v := range sigmas {
		s.Timesteps[i] = v * float32(T)
	}
	return s
}

// Tongyi returns the schedule of Tongyi's scheduler for steps steps
// (sigma_min = 0, as its pipeline sets): σ = linspace(σ_max·T, 0, N+1)[:-1]/T
// in float64, shifted in float64, rounded to float32; σ_max is the first
// entry of the float32 training table (1 for any usable shift).
func (c Config) Tongyi(steps int) (*Schedule, error) {
	if err := c.check(); err != nil {
		return nil, err
	}
	if steps < 1 {
		return nil, fmt.Errorf("flowmatch: tongyi schedule of %d steps, want ≥ 1", steps)
	}
	T := float64(c.NumTrainTimesteps)
	sigmaMax := float64(Shift32(float32(c.NumTrainTimesteps)/float32(c.NumTrainTimesteps), c.Shift))
	ts := linspace64(sigmaMax*T, 0, steps+1)[:steps]
	sigmas := make([]float32, steps, steps+1)
	for i, t := range ts {
		sigmas[i] = float32(Shift(t/T, c.Shift))
	}
	return finish(sigmas, c.NumTrainTimesteps, Tongyi), nil
}

// DefaultSigmas is diffusers' get_default_z_image_sigmas: the unshifted
// levels torch.linspace(1, 1/N, N) in float32, which the pipeline passes
// to set_timesteps in place of a step count.
func DefaultSigmas(steps int) []float32 {
	return linspaceTorch32(1, float32(1/float64(steps)), steps)
}

// Diffusers returns the schedule diffusers' scheduler builds from
// unshifted levels (set_timesteps(sigmas=…)): shifted in float32, with a
// closing 0. ZImagePipeline passes DefaultSigmas(N).
func (c Config) Diffusers(sigmasIn []float32) (*Schedule, error) {
	if err := c.check(); err != nil {
		return nil, err
	}
	if len(sigmasIn) == 0 {
		return nil, fmt.Errorf("flowmatch: diffusers schedule from no sigmas")
	}
	sigmas := make([]float32, len(sigmasIn), len(sigmasIn)+1)
	for i, v := range sigmasIn {
		if !(v >= 0 && v <= 1) {
			return nil, fmt.Errorf("flowmatch: diffusers schedule: sigma %d is %v, want [0, 1]", i, v)
		}
		sigmas[i] = Shift32(v, c.Shift)
	}
	return finish(sigmas, c.NumTrainTimesteps, Diffusers), nil
}

// Schedule returns pipeline p's schedule for steps steps.
func (c Config) Schedule(p Pipeline, steps int) (*Schedule, error) {
	switch p {
	case Tongyi:
		return c.Tongyi(steps)
	case Diffusers:
		if steps < 1 {
			return nil, fmt.Errorf("flowmatch: diffusers schedule of %d steps, want ≥ 1", steps)
		}
		return c.Diffusers(DefaultSigmas(steps))
	}
	return nil, fmt.Errorf("flowmatch: unknown pipeline %v (want %v or %v)", p, Tongyi, Diffusers)
}

// CalculateShift is the pipelines' calculate_shift: mu, linear in the
// image's token count between (baseSeqLen, baseShift) and (maxSeqLen,
// maxShift). Z-Image computes it (with 256, 4096, 0.5, 1.15) but its
// scheduler ignores it because dynamic shifting is off; it is here so
// that a configuration that turns dynamic shifting on can be told apart.
func CalculateShift(imageSeqLen, baseSeqLen, maxSeqLen int, baseShift, maxShift float64) float64 {
	m := (maxShift - baseShift) / float64(maxSeqLen-baseSeqLen)
	b := baseShift - m*float64(baseSeqLen)
	return float64(imageSeqLen)*m + b
}

// ImageSeqLen is the token count the pipelines pass to CalculateShift for
// latents of height h and width w: 2×2 patches.
func ImageSeqLen(h, w int) int { return (h / 2) * (w / 2) }

// linspace64 is NumPy's float64 linspace with the endpoint: i·step + start,
// the last value set to stop.
func linspace64(start, stop float64, num int) []float64 {
	out := make([]float64, num)
	if num == 1 {
		out[0] = start
		return out
	}
	step := (stop - start) / float64(num-1)
	for i := range out {
		out[i] = float64(i)*step + start
	}
	out[num-1] = stop
	return out
}

// torchVec is the float32 lane count of the PyTorch CPU kernels the
// references ran (AVX2): linspace rounds differently inside and outside
// its vector blocks, so the width is part of its result.
const torchVec = 8

// linspaceTorch32 is PyTorch's CPU float32 linspace as its AVX2 kernel
// computes it. Element i is start + step·i in the first half and
// end − step·(steps−1−i) in the second (so both ends are exact), but the
// vectorised loop covers whole blocks of 2·8 elements, evaluating that
// formula (contracted to a fused multiply-add) only at the start of each
// block of 8 and counting up by step from there; the tail runs the scalar
// formula. For N = 50 the blocks move 15 of the 50 values by up to 3 ulps
// from the per-element formula.
func linspaceTorch32(start, end float32, steps int) []float32 {
	if steps <= 0 {
		return nil
	}
	out := make([]float32, steps)
	if steps == 1 {
		out[0] = start
		return out
	}
	step := (end - start) / float32(steps-1)
	half := steps / 2
	at := func(i int) float32 {
		if i < half {
			return fma32(step, float32(i), start)
		}
		return fma32(-step, float32(steps-1-i), end)
	}
	vec := steps / (2 * torchVec) * (2 * torchVec)
	i := 0
	for ; i < vec; i += torchVec {
		base := at(i)
		for l := range torchVec {
			out[i+l] = base + float32(float32(l)*step)
		}
	}
	for ; i < steps; i++ {
		out[i] = at(i)
	}
	return out
}

// fma32 is a·b + c rounded once to float32. The product of two float32
// values is exact in float64; the sum is rounded to odd there so that the
// second rounding, to float32, is correct.
func fma32(a, b, c float32) float32 {
	p, q := float64(a)*float64(b), float64(c)
	s := p + q
	v := s - p
	e := (p - (s - v)) + (q - v) // s + e = p + q exactly
	if e != 0 && math.Float64bits(s)&1 == 0 {
		s = math.Nextafter(s, math.Copysign(math.Inf(1), e))
	}
	return float32(s)
}

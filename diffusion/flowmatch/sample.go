package flowmatch

import (
	"fmt"
	"math"
)

// Step writes one Euler step of the schedule from step i:
// dst = x + (σ_{i+1} − σ_i)·(−raw), in float32 with the product rounded
// before the sum, as the scheduler computes it. raw is the transformer's
// output (after guidance); the negation turns it into the noise-ward
// velocity the scheduler integrates. dst may alias x.
func (s *Schedule) Step(dst, x, raw []float32, i int) error {
	if err := s.check(); err != nil {
		return err
	}
	if i < 0 || i >= s.Steps() {
		return fmt.Errorf("flowmatch: step %d outside [0, %d)", i, s.Steps())
	}
	if err := sameLen("step", len(x), map[string]int{"dst": len(dst), "raw model output": len(raw)}); err != nil {
		return err
	}
	eulerStep(dst, x, raw, s.Sigmas[i+1]-s.Sigmas[i])
	return nil
}

func eulerStep(dst, x, raw []float32, dt float32) {
	for j := range dst {
		dst[j] = x[j] + float32(dt*-raw[j])
	}
}

// Model evaluates the transformer: x holds the latents of the batch
// ([B, C, H, W]) and t one model time per sample (see ModelTime); it
// returns the raw output, shaped like x. When guided is set the batch is
// doubled ([x; x] and [t; t]) and the model must condition its first half
// on the positive prompts and its second half on the negative ones, in
// one call, as both pipelines batch it. The model must neither modify nor
// keep x and t: they are the sampler's working arrays.
type Model func(x, t []float32, guided bool) ([]float32, error)

// Guidance is Z-Image's classifier-free guidance:
// pred = pos + Scale·(pos − neg), so a scale g weighs the prompt like
// standard guidance with 1 + g.
type Guidance struct {
	// Scale is the guidance scale g. Tongyi's pipeline guides only when
	// g > 1 and diffusers' when g > 0, so a scale in (0, 1] means
	// "unguided" in one and "guided" in the other; the schedule's
	// Pipeline decides.
	Scale float64
	// Truncate turns on cfg_truncation: guidance stops at the steps whose
	// model time exceeds Truncation (the late, low-noise steps, where it
	// only oversaturates). The pipelines ignore a Truncation above 1.
	Truncate   bool
	Truncation float64
	// Normalization is cfg_normalization k: when positive, each sample's
	// guided output is scaled down so that its norm does not exceed
	// k·‖pos‖, bounding the overshoot of large scales. 0 leaves it alone.
	Normalization float64
}

// enabled is the pipelines' do_classifier_free_guidance.
func (g Guidance) enabled(p Pipeline) bool {
	if p == Diffusers {
		return g.Scale > 0
	}
	return g.Scale > 1
}

// scaleAt is the guidance scale of a step with model time tNorm, 0 when
// the step runs unguided: truncation compares the float32 model time,
// widened, with the setting, as the pipelines compare t_norm.
func (g Guidance) scaleAt(p Pipeline, tNorm float32) float64 {
	if !g.enabled(p) {
		return 0
	}
	scale := g.Scale
	if g.Truncate && g.Truncation <= 1 && float64(tNorm) > g.Truncation {
		scale = 0
	}
	return scale
}

// combine writes, for each of the batch's samples, pos + scale·(pos − neg)
// in float32, clamped to Normalization·‖pos‖ when that is set; out holds
// the positive half of the batch followed by the negative half.
func (g Guidance) combine(dst, out []float32, batch int, scale float64) {
	n := len(dst) / batch
	s := float32(scale)
	for b := range batch {
		pos, neg := out[b*n:(b+1)*n], out[(batch+b)*n:(batch+b+1)*n]
		pred := dst[b*n : (b+1)*n]
		for i := range pred {
			pred[i] = pos[i] + float32(s*(pos[i]-neg[i]))
		}
		if !(g.Normalization > 0) {
			continue
		}
		posNorm, predNorm := norm(pos), norm(pred)
		maxNorm := posNorm * float32(g.Normalization)
		if predNorm > maxNorm {
			f := maxNorm / predNorm
			for i := range pred {
				pred[i] *= f
			}
		}
	}
}

// norm is the Euclidean norm in float32, accumulated in float64.
func norm(v []float32) float32 {
	var sum float64
	for _, x := range v {
		sum += float64(x) * float64(x)
	}
	return float32(math.Sqrt(sum))
}

// SampleOptions configure a sampling run.
type SampleOptions struct {
	Guidance Guidance
	// Progress, if set, is called after each step with the number of
	// steps done and the total.
	Progress func(done, total int)
}

// Sample integrates the schedule from the latents x (a batch of batch
// samples, usually pure noise at σ_0 = 1) with Euler steps, calling model
// once per step, and returns the final latents; x is not modified. Each
// step conditions the model on the step's model time and negates its raw
// output (after guidance) before stepping. Under the Tongyi pipeline a
// last step at timestep 0 is skipped, as its loop does.
func (s *Schedule) Sample(model Model, x []float32, batch int, opts SampleOptions) ([]float32, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	n, err := perSample("sample", "x", len(x), batch)
	if err != nil {
		return nil, err
	}
	cur := append([]float32(nil), x...)
	pred := make([]float32, len(x))
	var x2 []float32
	t := make([]float32, batch)
	for i, ts := range s.Timesteps {
		if s.Pipeline == Tongyi && ts == 0 && i == s.Steps()-1 {
			break
		}
		tm := ModelTime(ts)
		scale := opts.Guidance.scaleAt(s.Pipeline, tm)
		guided := scale > 0
		in, tin := cur, t
		for b := range t {
			t[b] = tm
		}
		if guided {
			x2 = append(append(x2[:0], cur...), cur...)
			in, tin = x2, append(append(make([]float32, 0, 2*batch), t...), t...)
		}
		out, err := model(in, tin, guided)
		if err != nil {
			return nil, fmt.Errorf("flowmatch: step %d of %d (timestep %v): %w", i+1, s.Steps(), ts, err)
		}
		if len(out) != len(in) {
			return nil, fmt.Errorf("flowmatch: step %d of %d: the model returned %d values for %d samples of %d, want %d", i+1, s.Steps(), len(out), len(in)/n, n, len(in))
		}
		if j, ok := isFinite(out); !ok {
			return nil, fmt.Errorf("flowmatch: step %d of %d: model output element %d is %v", i+1, s.Steps(), j, out[j])
		}
		raw := out
		if guided {
			opts.Guidance.combine(pred, out, batch, scale)
			raw = pred
		}
		eulerStep(cur, cur, raw, s.Sigmas[i+1]-s.Sigmas[i])
		if opts.Progress != nil {
			opts.Progress(i+1, s.Steps())
		}
	}
	return cur, nil
}

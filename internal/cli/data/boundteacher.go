package data

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/dcdit/dcdit/datasets"
	"github.com/dcdit/dcdit/datasets/shapes"
	"github.com/dcdit/dcdit/diffusion/ddpm"
	"github.com/dcdit/dcdit/family"
	"github.com/dcdit/dcdit/internal/cli/cmdutil"
	"github.com/dcdit/dcdit/sample"
)

// boundBatch is how many samples one teacher call noises and predicts.
const boundBatch = 16

// teacherBound measures the bound on a teacher's clean estimates of the
// data's first opts.Samples samples at each of opts' noise levels.
func teacherBound(opts *BoundOptions, set *datasets.Set) ([]BoundRow, error) {
	t, _, err := family.OpenTeacher(opts.Teacher, family.OpenOptions{KeepBF16: true})
	if err != nil {
		return nil, err
	}
	if r, c := t.Grid(); t.InChannels() != set.C || r != 0 && (r != set.H || c != set.W) {
		return nil, fmt.Errorf("data bound: %s takes [%d %d %d] latents, the data are [%d %d %d]", opts.Teacher, t.InChannels(), r, c, set.C, set.H, set.W)
	}
	var levels []float64
	switch p := t.Process(); {
	case p == family.ProcessFlowMatching && len(opts.Timesteps) == 0:
		levels = opts.Sigmas
	case p == family.ProcessDDPM && len(opts.Sigmas) == 0:
		for _, v := range opts.Timesteps {
			if v < 0 || v >= ddpmSteps {
				return nil, fmt.Errorf("data bound: timestep %d: want 0..%d", v, ddpmSteps-1)
			}
			levels = append(levels, float64(v))
		}
	default:
		return nil, fmt.Errorf("data bound: %s is a %s teacher: --sigma gives a flow-matching teacher's noise levels, --timestep a DDPM teacher's", opts.Teacher, p)
	}
	var table []float32
	on := t.Conditioning()
	if on.Classes == 0 {
		if set.Captions == nil {
			return nil, fmt.Errorf("data bound: %s is conditioned on captions, the data have none", opts.Teacher)
		}
		_, tab, found, err := cmdutil.ReadCaptionTable(opts.Teacher, on.CaptionWidth)
		if err != nil {
			return nil, err
		}
		if !found {
			return nil, fmt.Errorf("data bound: %s records no shapes caption table (%s)", opts.Teacher, shapes.CaptionTableKey)
		}
		table = tab
	}
	n := min(opts.Samples, set.N)
	var rows []BoundRow
	for _, level := range levels {
		est, vel, err := cleanEstimates(t, table, set, n, level, opts.Seed, opts.CFG)
		if err != nil {
			return nil, err
		}
		got, err := Bound(est, n, set.C, set.H, set.W, vel, opts.Patches, opts.Keep)
		if err != nil {
			return nil, err
		}
		for i := range got {
			got[i].Level = &level
		}
		rows = append(rows, got...)
	}
	return rows, nil
}

// ddpmSteps is the DDPM teachers' training schedule (DiT's linear 1000).
const ddpmSteps = 1000

// cleanEstimates noises data samples 0..n−1 to level and returns the
// teacher's clean estimates of them, guided at scale cfg (> 1: against the
// null class or the empty prompt, by the teacher's rule), with the squared
// norm of its predicted velocity (flow matching; 0 for DDPM, which
// predicts noise).
func cleanEstimates(t family.Teacher, table []float32, set *datasets.Set, n int, level float64, seed uint64, cfg float64) ([]float32, float64, error) {
	per := set.C * set.H * set.W
	out := make([]float32, n*per)
	rng := rand.New(rand.NewPCG(seed, seed^uint64(math.Float64bits(level))))
	flow := t.Process() == family.ProcessFlowMatching
	var a, s float64 // x = a·x0 + s·ε
	if flow {
		a, s = 1-level, level
	} else {
		ab := ddpm.Linear(ddpmSteps).AlphasCumprod[int(level)]
		a, s = math.Sqrt(ab), math.Sqrt(1-ab)
	}
	var vel float64
	for b0 := 0; b0 < n; b0 += boundBatch {
		m := min(boundBatch, n-b0)
		x := make([]float32, m*per)
		for i := range x {
			x[i] = float32(a*float64(set.Latents[b0*per+i]) + s*rng.NormFloat64())
		}
		tm := make([]float32, m)
		for i := range tm {
			tm[i] = float32(level) // DDPM: the timestep
			if flow {
				tm[i] = float32(1 - level) // flow matching: the model time 1 − σ
			}
		}
		c := sample.Conditions{Labels: set.Labels[b0 : b0+m], Null: t.Conditioning().Classes}
		if table != nil {
			caps, err := shapes.CaptionInputs(set.Captions[b0:b0+m], table, t.Conditioning().CaptionWidth)
			if err != nil {
				return nil, 0, fmt.Errorf("data bound: %w", err)
			}
			// No words: the empty prompt.
			neg, err := shapes.CaptionInputs(make([][]int, m), table, t.Conditioning().CaptionWidth)
			if err != nil {
				return nil, 0, fmt.Errorf("data bound: %w", err)
			}
			c = sample.Conditions{Captions: caps, Negative: neg}
		}
		model := sample.Teacher(t, c, set.H, set.W)
		if cfg > 1 {
			model = sample.SelfGuided(model, t.Guide, float32(cfg), set.H*set.W)
		}
		raw, err := model(x, tm, false)
		if err != nil {
			return nil, 0, fmt.Errorf("data bound: level %v: %w", level, err)
		}
		oc := t.OutChannels() * set.H * set.W
		for i := range m {
			r := raw[i*oc : i*oc+per] // the velocity or ε channels
			for j, v := range r {
				xi := float64(x[i*per+j])
				if flow {
					// The raw output points from noise to data: x0 = x + σ·r.
					out[(b0+i)*per+j] = float32(xi + s*float64(v))
					vel += float64(v) * float64(v)
				} else {
					out[(b0+i)*per+j] = float32((xi - s*float64(v)) / a)
				}
			}
		}
	}
	return out, vel, nil
}

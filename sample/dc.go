package sample

import (
	"errors"
	"fmt"

	"github.com/dcdit/dcdit/cond"
	"github.com/dcdit/dcdit/dc"
	"github.com/dcdit/dcdit/diffusion"
)

// DC is a DC model under elastic inference: each sample's conditional
// branch at tail-drop fraction Rho and, in a guided batch, its
// unconditional branch at RhoUncond in the same forward — the reference's
// Lite-CFG (the official hnet.LiteCFG) when the two differ, plain batched guidance
// when they do not — samples whose timestep lies below DenseBelow on
// every cell and those at or above CoarseFrom at CoarseRho or more
// (dc.Schedule).
type DC struct {
	Model          *dc.Model
	Rho, RhoUncond float32
	// DenseBelow is the timestep below which a sample runs dense (0:
	// never).
	DenseBelow float32
	// CoarseFrom is the timestep at and above which a sample drops at
	// least CoarseRho of its boundaries, whatever its branch's ρ
	// (dc.Schedule; 0: never).
	CoarseFrom, CoarseRho float32
	// Timestep maps a model time to the timestep DenseBelow is compared
	// with; nil takes the model time itself (DDPM's timesteps).
	Timestep func(modelTime float32) float32
	// Rule, when set, makes the model guide itself at Scale by this rule
	// (family.Teacher.Guide): an unguided call runs both branches in one
	// batch and combines them, and the process samples it unguided. This
	// is how an evaluation runs a DC model under its teacher's guidance.
	Rule  func(c, u []float32, hw int, s float32)
	Scale float32
	// DenseTeacher runs a step whose every sample keeps every cell
	// (DenseBelow) through dc.Model.PredictDense: the backbone and the wide
	// head alone, the teacher's own pass when the encoder, the blocks and
	// the wide head are the teacher's. It does not combine with Cache.
	DenseTeacher bool
	// Stats, when set, records every forward.
	Stats *Stats
	// Choose, when set, picks the kept cells at every forward in place of
	// the router, as many per sample as it kept (dc.RandomKeep: the
	// random-router baseline).
	Choose dc.Chooser
	// Cache, when set, caches the backbone's steps (TeaCache): each call
	// is one step of its run. It does not combine with Choose.
	Cache *TeaCache
	// Lookback, when set, makes every call after the first keep, as many
	// as the router, the cells chosen on the previous call's clean
	// estimate, in every sample with a budget (ρ > 0; at ρ 0 the router's
	// own, as dc.Schedule leaves them): each call is one step of its run.
	// It does not combine with Choose or Cache.
	Lookback *Lookback
}

// Lookback chooses the kept cells of a sampling run's steps from the step
// before: dc.LookbackKeep on the clean estimate the previous step's output
// implies, as many cells per sample as the router keeps (so the cost is
// the router's). The first step has no estimate and keeps the router's
// cells. Why: at mid noise the router sees only its own step's noisy
// latents and cannot tell an edge from noise, while the step before has
// already drawn the shape (docs/results.md, "the encoder frozen"). One
// Lookback serves one run.
type Lookback struct {
	// Clean writes the clean estimate of a step's output
	// (diffusion.Process.Clean of the sampling process).
	Clean func(dst, x, out, t []float32, sh diffusion.Shape) error
	// Spacing, when > 0, keeps the cells dc.CoverKeep covers the estimate
	// with at that spacing; 0 keeps dc.ChangeKeep's.
	Spacing float64
	prev    []float32 // the last step's estimate of the conditional samples
}

// FlowMatchingTimestep is flow matching's timestep of a model time 1 − σ
// on a diffusion of steps levels: σ·steps.
func FlowMatchingTimestep(steps int) func(float32) float32 {
	return func(t float32) float32 { return (1 - t) * float32(steps) }
}

// Stats are what the router of a DC model did at each forward, in order:
// a sampling run's steps.
type Stats struct {
	// Kept and KeptUncond are the mean kept tokens per sample of each
	// forward's conditional and unconditional branch (KeptUncond empty
	// without guidance).
	Kept, KeptUncond []float64
	// FLOPs are each forward's FLOPs over its whole batch
	// (dc.Model.ForwardFLOPs of what it kept).
	FLOPs []float64
	// RecordMasks asks for Masks: each forward's kept cells of its
	// conditional samples on the latent grid (dc.Config.LatentMask),
	// [n, H, W].
	RecordMasks bool
	Masks       [][]bool
}

// TotalFLOPs is the FLOPs of every forward.
func (s *Stats) TotalFLOPs() float64 {
	var f float64
	for _, v := range s.FLOPs {
		f += v
	}
	return f
}

// Forward runs the model on latents x [B, C, H, W] at model times t for
// the conditions c, and returns the raw output [B, OutChannels, H, W]
// and the forward's result. Unguided, B = c.Len(); guided, B is the
// doubled batch a guided sampler passes (Conditions.Input), its second
// half at RhoUncond. With a Rule an unguided call is guided inside: it
// returns 2·c.Len() outputs, the guided ones first.
func (d *DC) Forward(x, t []float32, c Conditions, guided bool) ([]float32, *dc.Result, error) {
	self := d.Rule != nil && !guided
	if self {
		x = append(append(make([]float32, 0, 2*len(x)), x...), x...)
		t = append(append(make([]float32, 0, 2*len(t)), t...), t...)
		guided = true
	}
	in, err := c.Input(t, guided)
	if err != nil {
		return nil, nil, err
	}
	n := c.Len()
	frac := make([]float32, len(t))
	for i, tm := range t {
		rho := d.Rho
		if i >= n {
			rho = d.RhoUncond
		}
		if d.Timestep != nil {
			tm = d.Timestep(tm)
		}
		frac[i] = dc.Schedule{DenseBelow: d.DenseBelow, CoarseFrom: d.CoarseFrom, CoarseRho: d.CoarseRho}.Frac(rho, tm)
	}
	var out []float32
	var res *dc.Result
	adjust := 0.0
	choose := d.Choose
	if d.Lookback != nil {
		if d.Choose != nil || d.Cache != nil {
			return nil, nil, errors.New("sample: lookback does not combine with a chooser of the kept cells or a step cache")
		}
		if choose, err = d.Lookback.chooser(d.Model.Config, n); err != nil {
			return nil, nil, err
		}
		choose = dc.BudgetsOnly(choose, frac)
	}
	if d.Cache != nil && d.Model.Config.DroppedContext {
		return nil, nil, errors.New("sample: a step cache does not run a model with dropped_context yet: its probe would run the context convolution a second time, outside the FLOPs counted")
	}
	switch {
	case d.DenseTeacher && d.Cache != nil:
		return nil, nil, errors.New("sample: the teacher at dense steps does not combine with a step cache yet")
	case d.DenseTeacher && allDense(frac):
		out, res, err = d.Model.PredictDense(x, in)
	case d.Cache == nil:
		out, res, err = d.Model.PredictChoosing(x, in, frac, choose)
	default:
		out, res, adjust, err = d.cached(x, in, frac, guided)
	}
	if err != nil {
		return nil, nil, err
	}
	if self {
		guide(out, n, d.Model.Config.Tokens(), d.Rule, d.Scale)
	}
	if d.Lookback != nil {
		if err := d.Lookback.record(d.Model.Config, x, out, t, n); err != nil {
			return nil, nil, err
		}
	}
	if s := d.Stats; s != nil {
		if err := s.record(d.Model, res, n); err != nil {
			return nil, nil, err
		}
		s.FLOPs[len(s.FLOPs)-1] += adjust
	}
	return out, res, nil
}

// allDense reports whether every sample's drop fraction frac is dc.Dense.
func allDense(frac []float32) bool {
	for _, f := range frac {
		if f != dc.Dense {
			return false
		}
	}
	return len(frac) > 0
}

// cached is the forward under the cache: the prediction, the result and
// what its FLOPs differ by from those of the cells it kept.
func (d *DC) cached(x []float32, in cond.Input, frac []float32, guided bool) ([]float32, *dc.Result, float64, error) {
	if d.Choose != nil {
		return nil, nil, 0, errors.New("sample: a step cache does not combine with a chooser of the kept cells")
	}
	m, err := d.Cache.forDC(d.Model)
	if err != nil {
		return nil, nil, 0, err
	}
	nb := 1
	if guided {
		nb = 2
	}
	out, res, err := m.PredictPlanning(x, in, frac, d.Cache.plan(nb))
	if err != nil {
		return nil, nil, 0, err
	}
	d.Cache.observe(out, nb)
	return out, res, d.Cache.afterDC(res, nb), nil
}

// record appends a forward of n conditional samples, its FLOPs as it ran.
func (s *Stats) record(m *dc.Model, res *dc.Result, n int) error {
	f, err := m.ResultFLOPs(res)
	if err != nil {
		return err
	}
	kept := res.Chunks.NumKept
	s.Kept = append(s.Kept, mean(kept[:n]))
	if n < len(kept) {
		s.KeptUncond = append(s.KeptUncond, mean(kept[n:]))
	}
	s.FLOPs = append(s.FLOPs, f.Total())
	if s.RecordMasks {
		cfg := m.Config
		// LatentMask may hand back its input, which the result owns.
		s.Masks = append(s.Masks, append([]bool(nil), cfg.LatentMask(res.Chunks.Kept[:n*cfg.Cells()])...))
	}
	return nil
}

// Denoiser is d as a sampler calls it for the conditions c: a guided
// call's halves are the process's to combine; with a Rule, the guided
// outputs alone.
func (d *DC) Denoiser(c Conditions) diffusion.Model {
	return func(x, t []float32, guided bool) ([]float32, error) {
		out, _, err := d.Forward(x, t, c, guided)
		if err != nil || d.Rule == nil || guided {
			return out, err
		}
		return out[:len(out)/2], nil
	}
}

// mean is the average of v.
func mean(v []int) float64 {
	s := 0
	for _, x := range v {
		s += x
	}
	return float64(s) / float64(len(v))
}

// chooser is the Chooser of a step of n samples: nil before the run's
// first estimate.
func (l *Lookback) chooser(cfg *dc.Config, n int) (dc.Chooser, error) {
	if l.prev == nil {
		return nil, nil
	}
	if len(l.prev) != n*cfg.InChannels*cfg.Tokens() {
		return nil, fmt.Errorf("sample: lookback: the last step had %d latent values, this one %d samples of %d", len(l.prev), n, cfg.InChannels*cfg.Tokens())
	}
	return dc.LookbackKeep(l.prev, n, cfg.InChannels, cfg.CellRows(), cfg.CellCols(), cfg.Patch(), l.Spacing)
}

// record keeps the clean estimate of a step's first n samples (the
// conditional or guided ones) from its latents x and output out.
func (l *Lookback) record(cfg *dc.Config, x, out, t []float32, n int) error {
	hw := cfg.Tokens()
	sh := diffusion.Shape{B: n, C: cfg.InChannels, HW: hw}
	if l.prev == nil {
		l.prev = make([]float32, n*cfg.InChannels*hw)
	}
	if err := l.Clean(l.prev, x[:n*cfg.InChannels*hw], out[:n*cfg.OutChannels*hw], t[:n], sh); err != nil {
		return fmt.Errorf("sample: lookback: %w", err)
	}
	return nil
}

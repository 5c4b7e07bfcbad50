package distill

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"math/rand/v2"
	"os"
	"time"

	"github.com/dcdit/dcdit/gpu/accel"
	"github.com/dcdit/dcdit/gpu/device"
	"github.com/dcdit/dcdit/loaders/atomicfile"
	"github.com/dcdit/dcdit/optim"
	"github.com/dcdit/dcdit/params"
)

// Config is one training stage's settings.
type Config struct {
	Stage        string  // "distill", "finetune" or "train": names the stage in the run folder
	Steps        int     // optimiser steps
	BatchSize    int     // samples per step
	LR           float64 // AdamW peak learning rate, reached after warm-up
	Warmup       int     // linear learning-rate warm-up steps (0: none)
	Schedule     string  // after warm-up: "constant" (default), "cosine" or "linear" decay to MinLR
	MinLR        float64 // where the decaying schedules end
	Beta1, Beta2 float64 // AdamW betas (0: 0.9 and 0.999)
	Eps          float64 // AdamW epsilon (0: 1e-8)
	WeightDecay  float64 // AdamW decoupled weight decay
	ClipNorm     float64 // global gradient-norm clip (0: none)
	EMADecay     float64 // EMA of the weights (0: none)
	Seed         uint64  // everything random in the stage derives from it
	LabelDropout float64 // probability of replacing a label by NullClass
	NullClass    int     // the classifier-free-guidance label
	SaveEvery    int     // checkpoint cadence in steps (0: only at the end)
	Keep         int     // checkpoints kept in the run folder (≥ 1)
	LogEvery     int     // metrics-log cadence in steps (0: every step)
	// Frozen says which parameters do not train (nil: all train).
	Frozen func(name string) bool
	// Groups give some parameters a multiple of the learning rate (the
	// first group that matches a parameter wins).
	Groups []LRGroup
}

// LRGroup scales the learning rate of the parameters Match selects, as a
// PyTorch param group with its own lr would.
type LRGroup struct {
	Name  string
	Match func(name string) bool
	Scale float64
}

func (c *Config) validate() error {
	switch {
	case c.Stage == "":
		return errors.New("distill: the stage has no name")
	case c.Steps <= 0 || c.BatchSize <= 0:
		return fmt.Errorf("distill: stage %s: steps %d and batch size %d must be positive", c.Stage, c.Steps, c.BatchSize)
	case !(c.LR > 0) || c.Warmup < 0 || c.WeightDecay < 0 || c.ClipNorm < 0:
		return fmt.Errorf("distill: stage %s: learning rate %g must be positive, warm-up %d, weight decay %g and clip %g not negative", c.Stage, c.LR, c.Warmup, c.WeightDecay, c.ClipNorm)
	case c.EMADecay < 0 || c.EMADecay >= 1 || c.LabelDropout < 0 || c.LabelDropout >= 1:
		return fmt.Errorf("distill: stage %s: EMA decay %g and label dropout %g must be in [0, 1)", c.Stage, c.EMADecay, c.LabelDropout)
	case c.SaveEvery < 0 || c.LogEvery < 0:
		return fmt.Errorf("distill: stage %s: save and log cadences must not be negative", c.Stage)
	case c.Schedule != "" && c.Schedule != "constant" && c.Schedule != "cosine" && c.Schedule != "linear":
		return fmt.Errorf("distill: stage %s: learning-rate schedule %q, want constant, cosine or linear", c.Stage, c.Schedule)
	}
	if c.Beta1 == 0 {
		c.Beta1 = 0.9
	}
	if c.Beta2 == 0 {
		c.Beta2 = 0.999
	}
	if c.Eps == 0 {
		c.Eps = 1e-8
	}
	if c.Keep < 1 {
		c.Keep = 1
	}
	return nil
}

// lr is the learning rate of step (from 0): a linear warm-up to LR, then
// constant or decaying to MinLR at the last step.
func (c *Config) lr(step int) float64 {
	if c.Warmup > 0 && step < c.Warmup {
		return c.LR * float64(step+1) / float64(c.Warmup)
	}
	span := c.Steps - c.Warmup
	if span <= 1 {
		return c.LR
	}
	f := float64(step-c.Warmup) / float64(span-1) // 0 … 1 after warm-up
	switch c.Schedule {
	case "cosine":
		return c.MinLR + (c.LR-c.MinLR)*0.5*(1+math.Cos(math.Pi*f))
	case "linear":
		return c.LR + (c.MinLR-c.LR)*f
	}
	return c.LR
}

// Progress reports a finished step.
type Progress struct {
	Stage       string
	Step, Steps int // Step steps done out of Steps
	Metrics     Metrics
	LR          float64
	GradNorm    float64
	StepsPerSec float64
}

// Trainer runs one stage over a model's joint parameter arena.
type Trainer struct {
	Config    Config
	Params    *params.Set
	Objective Objective
	Data      *Dataset
	// Dir is the stage's run folder: checkpoints, the metrics log and the
	// manifest. Running again with the same folder resumes.
	Dir string
	// OnStep, if set, is called after every step (progress display).
	OnStep func(Progress)
	// Identity names what else decides the stage's trajectory beyond its
	// Config, its objective's settings, the data and the parameter layout
	// (the recipe's settings, the teacher's identity, …): key → value. It
	// is part of the fingerprint run.json records, so that resuming with
	// any of it changed is refused, naming what changed.
	Identity map[string]string
	// Context, if set, stops the run between two steps once it is done;
	// the folder keeps its last checkpoint, from which a later Run
	// resumes.
	Context context.Context
	// Accelerator, if set, runs the stage on a GPU: Params, the gradients,
	// the AdamW moments and the EMA live there (device.Optimizer), and a
	// step reads back only the loss and the gradient norm. The host copies
	// are brought up to date for each checkpoint and at the end, so the run
	// folder is that of a CPU run and may resume on either.
	Accelerator *accel.Accelerator

	ema   *optim.EMA
	dev   *device.Optimizer // the optimiser on the Accelerator while Run runs
	bound *accel.Binding    // Params on the Accelerator while Run runs
}

// Result summarises a finished stage.
type Result struct {
	Stage    string  `json:"stage"`
	Resumed  int     `json:"resumed"`  // the step the run resumed from (0: fresh)
	Steps    int     `json:"steps"`    // steps of the stage
	Last     Metrics `json:"last"`     // the last step's metrics (zero if nothing ran)
	Seconds  float64 `json:"seconds"`  // wall time of the steps run now
	Complete bool    `json:"complete"` // the stage had already finished: nothing ran
}

// EMAWeights returns the averaged weights after Run (nil without an EMA).
func (t *Trainer) EMAWeights() []float32 {
	if t.ema == nil {
		return nil
	}
	return t.ema.Weights()
}

// Pull brings Params' host values and the EMA's weights up to date from
// the Accelerator while Run runs (an OnStep hook that reads them); Push
// uploads Params' host values again after such a hook changed them and
// changed them back. Both do nothing on the CPU or between runs.
func (t *Trainer) Pull() error {
	if t.dev == nil {
		return nil
	}
	if err := t.dev.Pull(); err != nil {
		return fmt.Errorf("distill: stage %s: %w", t.Config.Stage, err)
	}
	return nil
}

// Push: see Pull.
func (t *Trainer) Push() error {
	if t.dev == nil {
		return nil
	}
	if err := t.dev.Push(); err != nil {
		return fmt.Errorf("distill: stage %s: %w", t.Config.Stage, err)
	}
	return nil
}

// Run trains the stage to its last step, resuming from the run folder's
// manifest when there is one. A non-finite loss or gradient stops the run
// with an error; the last checkpoint stays as it was.
func (t *Trainer) Run() (_ *Result, err error) {
	cfg := &t.Config
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if t.Data.Len() == 0 {
		return nil, fmt.Errorf("distill: stage %s: empty data set", cfg.Stage)
	}
	_, statErr := os.Stat(t.Dir)
	created := errors.Is(statErr, fs.ErrNotExist)
	if err := os.MkdirAll(t.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("distill: run folder: %w", err)
	}
	// A stage that fails before writing anything leaves no folder; this
	// runs after the lock is released (defers run last first), and
	// os.Remove keeps a folder that holds anything.
	defer func() {
		if err != nil && created {
			os.Remove(t.Dir)
		}
	}()
	lock, err := atomicfile.Lock(t.Dir)
	if err != nil {
		return nil, fmt.Errorf("distill: stage %s: %w", cfg.Stage, err)
	}
	defer lock.Unlock()
	// Held by us, the folder's temporary files are an interrupted run's.
	if _, err := atomicfile.RemoveTemps(t.Dir, isRunFile); err != nil {
		return nil, fmt.Errorf("distill: stage %s: %w", cfg.Stage, err)
	}
	mask, err := t.mask()
	if err != nil {
		return nil, err
	}
	base := optim.Hyper{LR: cfg.LR, Beta1: cfg.Beta1, Beta2: cfg.Beta2, Eps: cfg.Eps, WeightDecay: cfg.WeightDecay}
	opt, err := optim.NewAdamW(mask, base, t.groups(base, mask)...)
	if err != nil {
		return nil, fmt.Errorf("distill: stage %s: %w", cfg.Stage, err)
	}
	// One clipper measures the gradient norm every step and clips only
	// when a clip is set.
	maxNorm := cfg.ClipNorm
	if maxNorm == 0 {
		maxNorm = math.Inf(1)
	}
	clip := optim.NewGradClipper(mask, maxNorm)
	if cfg.EMADecay > 0 {
		if t.ema, err = optim.NewEMA(mask, t.Params.Data, cfg.EMADecay); err != nil {
			return nil, fmt.Errorf("distill: stage %s: %w", cfg.Stage, err)
		}
	}
	run := &runFolder{dir: t.Dir, stage: cfg.Stage, settings: t.settings(), legacy: t.legacyFingerprint()}
	res := &Result{Stage: cfg.Stage, Steps: cfg.Steps}
	start, err := run.resume(t.Params.Data, t.EMAWeights(), opt)
	if err != nil {
		return nil, err
	}
	res.Resumed = start
	if start >= cfg.Steps {
		res.Complete = true
		return res, nil
	}
	log, err := run.openLog(start)
	if err != nil {
		return nil, err
	}
	defer log.Close()

	if err := t.attach(opt, maxNorm); err != nil {
		return nil, fmt.Errorf("distill: stage %s: %w", cfg.Stage, err)
	}
	defer func() {
		if derr := t.detach(err == nil); derr != nil && err == nil {
			err = fmt.Errorf("distill: stage %s: %w", cfg.Stage, derr)
		}
	}()

	per := t.Data.C * t.Data.H * t.Data.W
	batch := &Batch{X0: make([]float32, cfg.BatchSize*per), C: t.Data.C, H: t.Data.H, W: t.Data.W, Labels: make([]int, cfg.BatchSize)}
	if t.Data.Captions != nil {
		batch.Captions = make([][]int, cfg.BatchSize)
	}
	began := time.Now()
	for step := start; step < cfg.Steps; step++ {
		if t.Context != nil && t.Context.Err() != nil {
			return nil, fmt.Errorf("distill: stage %s stopped before step %d: %w; %s", cfg.Stage, step+1, context.Cause(t.Context), run.lastGood())
		}
		rng := rand.New(rand.NewPCG(cfg.Seed, uint64(step)))
		t.Data.Batch(batch, cfg.Seed^0x5eedda7a, step)
		for i := range batch.Labels {
			// A dropped sample loses all its conditioning: the label and
			// the caption.
			if rng.Float64() < cfg.LabelDropout {
				batch.Labels[i] = cfg.NullClass
				if batch.Captions != nil {
					batch.Captions[i] = append(batch.Captions[i][:0], t.Data.EmptyCaption...)
				}
			}
		}
		t.Params.ZeroGrad()
		m, err := t.Objective.Step(step, batch, rng)
		if err != nil {
			return nil, fmt.Errorf("distill: stage %s step %d: %w", cfg.Stage, step+1, err)
		}
		var norm float64
		switch {
		case t.dev != nil:
			norm, err = t.dev.ClipNorm()
		case cfg.ClipNorm > 0:
			norm, err = clip.Clip(t.Params.Grad)
		default:
			norm = clip.Norm(t.Params.Grad)
		}
		if err != nil || !finite(m.Loss) || !finite(norm) {
			return nil, fmt.Errorf("distill: stage %s step %d: loss %v, gradient norm %v: training diverged and stopped; %s",
				cfg.Stage, step+1, m.Loss, norm, run.lastGood())
		}
		lr := cfg.lr(step)
		if err := opt.SetLR(0, lr); err != nil {
			return nil, err
		}
		for i, g := range cfg.Groups {
			if err := opt.SetLR(i+1, lr*g.Scale); err != nil {
				return nil, err
			}
		}
		if t.dev != nil {
			if err := t.dev.Step(); err != nil {
				return nil, fmt.Errorf("distill: stage %s step %d: %w", cfg.Stage, step+1, err)
			}
		} else {
			opt.Step(t.Params.Data, t.Params.Grad)
			if t.ema != nil {
				t.ema.Update(t.Params.Data)
			}
		}
		done := step + 1
		sps := float64(done-start) / time.Since(began).Seconds()
		p := Progress{Stage: cfg.Stage, Step: done, Steps: cfg.Steps, Metrics: m, LR: lr, GradNorm: norm, StepsPerSec: sps}
		res.Last = m
		if cfg.LogEvery == 0 || done%cfg.LogEvery == 0 || done == cfg.Steps {
			if err := log.write(p); err != nil {
				return nil, err
			}
		}
		if t.OnStep != nil {
			t.OnStep(p)
		}
		if (cfg.SaveEvery > 0 && done%cfg.SaveEvery == 0) || done == cfg.Steps {
			if err := log.sync(); err != nil {
				return nil, err
			}
			if err := t.Pull(); err != nil {
				return nil, err
			}
			if err := run.save(done, cfg.Keep, t.Params.Data, t.EMAWeights(), opt); err != nil {
				return nil, err
			}
		}
	}
	res.Seconds = time.Since(began).Seconds()
	return res, nil
}

// attach binds Params to the Accelerator with the stage's optimiser
// beside them (nothing on the CPU). It comes after resuming, so that the
// device starts from the restored weights, moments and EMA.
func (t *Trainer) attach(opt *optim.AdamW, maxNorm float64) error {
	bound, err := t.Accelerator.Attach(t.Params)
	if err != nil || bound == nil {
		return err
	}
	dev, err := bound.NewOptimizer(opt, maxNorm, t.ema)
	if err != nil {
		return errors.Join(err, bound.Close())
	}
	t.dev, t.bound = dev, bound
	return nil
}

// detach frees the device copies; after a run that finished, the host
// copies are brought up to date first (a failed run keeps its last
// checkpoint's, which the host holds already or the folder does).
func (t *Trainer) detach(finished bool) error {
	if t.dev == nil {
		return nil
	}
	var err error
	if finished {
		err = t.dev.Pull()
	}
	err = errors.Join(err, t.dev.Close(), t.bound.Close())
	t.dev, t.bound = nil, nil
	return err
}

// mask freezes the parameters Config.Frozen names and stops their
// gradients from being computed at all; every other parameter computes
// its gradient again (a parameter set shared by the stages of a run keeps
// what the previous stage froze otherwise).
func (t *Trainer) mask() (*optim.Mask, error) {
	if t.Config.Frozen == nil {
		t.Params.SetRequiresGrad(true)
		return optim.AllTrainable(t.Params.Len()), nil
	}
	var frozen []optim.Range
	for _, p := range t.Params.List() {
		if !t.Config.Frozen(p.Name) {
			p.Dense.SetRequiresGrad(true)
			continue
		}
		lo, hi, _ := t.Params.Range(p.Name)
		frozen = append(frozen, optim.Range{Lo: lo, Hi: hi})
		p.Dense.SetRequiresGrad(false)
	}
	m, err := optim.FreezeMask(t.Params.Len(), frozen...)
	if err != nil {
		return nil, fmt.Errorf("distill: stage %s: %w", t.Config.Stage, err)
	}
	if m.NumTrainable() == 0 {
		return nil, fmt.Errorf("distill: stage %s: every parameter is frozen", t.Config.Stage)
	}
	return m, nil
}

// groups turns Config.Groups into optimiser groups over the trainable
// ranges they select. A group that selects nothing trainable keeps an empty
// range list, so that group numbers stay those of Config.Groups.
func (t *Trainer) groups(base optim.Hyper, mask *optim.Mask) []optim.Group {
	out := make([]optim.Group, len(t.Config.Groups))
	for i, g := range t.Config.Groups {
		h := base
		h.LR *= g.Scale
		out[i] = optim.Group{Name: g.Name, Hyper: h}
	}
	for _, p := range t.Params.List() {
		lo, hi, _ := t.Params.Range(p.Name)
		if mask.IsFrozen(lo) {
			continue
		}
		for i, g := range t.Config.Groups {
			if g.Match(p.Name) {
				out[i].Ranges = append(out[i].Ranges, optim.Range{Lo: lo, Hi: hi})
				break
			}
		}
	}
	return out
}

// legacyFingerprint is the fingerprint run.json held before it recorded
// the settings themselves; folders written then still resume when it
// matches.
func (t *Trainer) legacyFingerprint() string {
	c := t.Config
	s := fmt.Sprintf("stage=%s steps=%d batch=%d lr=%g warmup=%d sched=%s/%g betas=%g,%g eps=%g wd=%g clip=%g ema=%g seed=%d drop=%g null=%d data=%d",
		c.Stage, c.Steps, c.BatchSize, c.LR, c.Warmup, c.Schedule, c.MinLR, c.Beta1, c.Beta2, c.Eps, c.WeightDecay, c.ClipNorm, c.EMADecay, c.Seed, c.LabelDropout, c.NullClass, t.Data.Len())
	for _, p := range t.Params.List() {
		sh := p.Dense.Shape()
		frozen := t.Config.Frozen != nil && t.Config.Frozen(p.Name)
		s += fmt.Sprintf(";%s[%d %d]%v", p.Name, sh[0], sh[1], frozen)
		for _, g := range t.Config.Groups {
			if g.Match(p.Name) {
				s += fmt.Sprintf("×%g", g.Scale)
				break
			}
		}
	}
	return s
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

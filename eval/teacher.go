package eval

import (
	"fmt"
	"math"
	"strconv"

	"github.com/dcdit/dcdit/cond"
	"github.com/dcdit/dcdit/datasets"
	"github.com/dcdit/dcdit/datasets/shapes"
	"github.com/dcdit/dcdit/dc"
	"github.com/dcdit/dcdit/diffusion"
	"github.com/dcdit/dcdit/diffusion/ddpm"
	"github.com/dcdit/dcdit/diffusion/flowmatch"
	"github.com/dcdit/dcdit/family"
	"github.com/dcdit/dcdit/sample"
)

// The diffusion processes a report names (Report.Process).
const (
	ProcessDDPM         = family.ProcessDDPM
	ProcessFlowMatching = family.ProcessFlowMatching
)

// Teacher is the fixed-patch model a DC model is measured against (a
// family.Teacher, TeacherOf) with the conditions the evaluation draws for
// it from the data. It decides how samples are conditioned, noised,
// sampled and guided; the evaluation's measures are the same for every
// family.
//
// The conditions of a batch are keys: class labels for a label-conditioned
// teacher, data sample indices (whose captions condition) for a
// caption-conditioned one.
type Teacher interface {
	// check makes sure the teacher, the DC model and the data describe
	// the same latents and conditions.
	check(cfg *dc.Config, data *datasets.Set) error
	// processes returns the training process the held-out inputs are
	// noised with, the sampler, and the sampler's timesteps (first to
	// last, on the 0 … DiffusionSteps−1 scale of Options' timesteps).
	processes(o Options) (train, sampler diffusion.Process, timesteps []int, err error)
	// level maps an Options timestep (larger: noisier) to a noise level
	// of the training process.
	level(t int) int
	// timestep maps a model time to its Options timestep (nil: the model
	// time is one).
	timestep() func(modelTime float32) float32
	// conditions are the conditions of keys, with the unconditional one
	// (the null class, the empty prompt).
	conditions(keys []int) (sample.Conditions, error)
	// sampleKeys are the conditions every row's n samples are drawn for.
	sampleKeys(n int) []int
	// keys are the conditions of data samples idx (with their labels y).
	keys(idx, y []int) []int
	// classes are the classes of keys (a DiT's labels, a Z-Image's
	// captioned samples' classes).
	classes(keys []int) []int
	// model is the teacher as its sampler calls it under c: the raw
	// output [B, OutChannels, H, W], of the doubled batch when guided.
	model(c sample.Conditions) diffusion.Model
	// cached is model under the step cache tc, with the split of one
	// forward's cost.
	cached(c sample.Conditions, tc *sample.TeaCache) (diffusion.Model, family.StepFLOPs, error)
	// rule is the teacher's guidance rule (family.Teacher.Guide).
	rule(c, u []float32, hw int, s float32)
	// guided says whether a scale guides.
	guided(scale float64) bool
	// outChannels is the output channels per latent channel count.
	outChannels() int
	// forwardGFLOPs is one unguided forward of one image, and tokens its
	// tokens.
	forwardGFLOPs() float64
	tokens() int
	// probes says whether the per-timestep ε probes apply (DDPM).
	probes() bool
	// process names the diffusion process (Report.Process).
	process() string
	// captions are the data's captions for prompt following (nil: none).
	captions() [][]int
}

// TeacherOf makes the evaluation's Teacher of a family's teacher. A
// label-conditioned teacher is conditioned on class labels, the null
// class being the unconditional branch; its rows draw the labels 0, 1, 2,
// … in turn. A caption-conditioned one is conditioned on the data's
// captions: with a table, the shapes captions' words read through it (one
// row of the teacher's caption width per vocabulary word, the text
// encoder's stand-in), the empty prompt (one zero row) unconditional; with
// a nil table, the data's encoded prompts (datasets.Set.CaptionFeats, as
// a text encoder wrote them), the empty prompt's features
// (Set.EmptyCaptionFeats) unconditional. A caption row's samples are
// drawn for the captions of the data's first samples, so shapes data must
// be class-balanced in order (shapes.Generator.BalancedSet) for the
// Fréchet distance's reference to match them; encoded prompts have no
// prompt following to score.
//
// The process is the teacher's: DDPM samples over a respaced schedule and
// noises held-out inputs with the linear one; flow matching samples Euler
// over Tongyi's schedule with shift (ignored by DDPM).
func TeacherOf(t family.Teacher, table []float32, shift float64) Teacher {
	return &teacher{m: t, table: table, shift: shift}
}

type teacher struct {
	m     family.Teacher
	table []float32 // shapes captions' words → features; nil: encoded prompts
	shift float64   // flow matching's
	// Set by check:
	data       *datasets.Set
	h, w       int
	numClasses int // the data's, for label keys
	trainTab   *flowmatch.Table
}

func (z *teacher) labels() bool { return z.m.Conditioning().Classes > 0 }

func (z *teacher) check(cfg *dc.Config, data *datasets.Set) error {
	on := z.m.Conditioning()
	if r, c := z.m.Grid(); r != 0 && (r != cfg.GridRows || c != cfg.GridCols) || z.m.InChannels() != cfg.InChannels {
		return fmt.Errorf("eval: the teacher takes [%d %d %d] latents, the DC model [%d %d %d]",
			z.m.InChannels(), r, c, cfg.InChannels, cfg.GridRows, cfg.GridCols)
	}
	switch z.m.Process() {
	case ProcessDDPM:
		if z.m.OutChannels() != 2*cfg.InChannels || cfg.OutChannels != 2*cfg.InChannels {
			return fmt.Errorf("eval: the DDPM sampler needs learned-sigma outputs (2C = %d channels); the teacher has %d, the DC model %d",
				2*cfg.InChannels, z.m.OutChannels(), cfg.OutChannels)
		}
	case ProcessFlowMatching:
		if z.m.OutChannels() != cfg.OutChannels {
			return fmt.Errorf("eval: the teacher takes and predicts %d latent channels, the DC model takes %d and predicts %d", z.m.InChannels(), cfg.InChannels, cfg.OutChannels)
		}
		if !(z.shift > 0) || math.IsInf(z.shift, 0) {
			return fmt.Errorf("eval: flow matching shift %v, want a finite value > 0", z.shift)
		}
	default:
		return fmt.Errorf("eval: the teacher's diffusion process %q is not one this build evaluates (%s, %s)", z.m.Process(), ProcessDDPM, ProcessFlowMatching)
	}
	z.data, z.h, z.w = data, cfg.GridRows, cfg.GridCols
	dim := on.CaptionWidth
	switch {
	case z.labels():
		if data.NumClasses > on.Classes {
			return fmt.Errorf("eval: the data set has %d classes, the teacher %d", data.NumClasses, on.Classes)
		}
		z.numClasses = data.NumClasses
	case dim == 0:
		return fmt.Errorf("eval: the teacher is conditioned on neither labels nor captions")
	case z.table == nil:
		switch {
		case data.CaptionFeats == nil:
			return fmt.Errorf("eval: a teacher conditioned on encoded prompts needs data with encoded captions")
		case data.CaptionDim != dim:
			return fmt.Errorf("eval: the data's caption features are %d wide, the teacher reads cap_feat_dim %d", data.CaptionDim, dim)
		case data.EmptyCaptionFeats == nil:
			return fmt.Errorf("eval: the data's encoded captions come without the empty prompt's, the unconditional branch")
		}
	default:
		switch {
		case data.Captions == nil:
			return fmt.Errorf("eval: a caption-conditioned teacher needs data with captions")
		case len(z.table) == 0 || len(z.table)%dim != 0:
			return fmt.Errorf("eval: a caption table of %d values, want rows of %d", len(z.table), dim)
		case len(z.table)/dim < len(data.Vocabulary):
			return fmt.Errorf("eval: the caption table has %d words, the data's vocabulary %d", len(z.table)/dim, len(data.Vocabulary))
		}
	}
	return nil
}

func (z *teacher) processes(o Options) (diffusion.Process, diffusion.Process, []int, error) {
	if !z.labels() && o.NumSamples > z.data.N {
		return nil, nil, nil, fmt.Errorf("eval: %d samples per row are drawn for the captions of as many data samples; the data has %d", o.NumSamples, z.data.N)
	}
	if z.m.Process() == ProcessDDPM {
		// The training schedule noises the held-out inputs and gives
		// their model times; the respaced one samples, guiding the
		// channels the teacher's rule guides.
		sched, err := ddpm.Respaced(o.DiffusionSteps, strconv.Itoa(o.Steps))
		if err != nil {
			return nil, nil, nil, fmt.Errorf("eval: %w", err)
		}
		var ts []int
		for s := sched.Steps() - 1; s >= 0; s-- {
			ts = append(ts, sched.TimestepMap[s])
		}
		guided, _ := z.m.Guidance(1) // the channel count does not depend on the scale
		return &diffusion.DDPM{Schedule: ddpm.Linear(o.DiffusionSteps)}, &diffusion.DDPM{Schedule: sched, GuidedChannels: guided}, ts, nil
	}
	fm := flowmatch.Config{NumTrainTimesteps: o.DiffusionSteps, Shift: z.shift}
	tab, err := fm.TrainingTable()
	if err != nil {
		return nil, nil, nil, fmt.Errorf("eval: %w", err)
	}
	sched, err := fm.Schedule(flowmatch.Tongyi, o.Steps)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("eval: %w", err)
	}
	z.trainTab = tab
	ts := make([]int, len(sched.Timesteps))
	for i, v := range sched.Timesteps {
		ts[i] = min(int(math.Round(float64(v))), o.DiffusionSteps-1)
	}
	return &diffusion.FlowMatch{Table: tab}, &diffusion.FlowMatch{Schedule: sched}, ts, nil
}

// level maps an Options timestep to a level of the training process:
// DDPM's timesteps are its levels; flow matching's is the training
// table's level whose timestep (σ·T) is nearest t.
func (z *teacher) level(t int) int {
	if z.trainTab == nil {
		return t
	}
	best, bd := 0, math.Inf(1)
	for k, v := range z.trainTab.Timesteps {
		if d := math.Abs(float64(v) - float64(t)); d < bd {
			best, bd = k, d
		}
	}
	return best
}

// timestep: DDPM's model times are its timesteps; flow matching's model
// time 1 − σ is at σ·T.
func (z *teacher) timestep() func(float32) float32 {
	if z.trainTab == nil {
		return nil
	}
	return sample.FlowMatchingTimestep(len(z.trainTab.Timesteps))
}

func (z *teacher) conditions(keys []int) (sample.Conditions, error) {
	on := z.m.Conditioning()
	if z.labels() {
		return sample.Conditions{Labels: keys, Null: on.Classes}, nil
	}
	dim := on.CaptionWidth
	if z.table == nil {
		c := sample.Conditions{Captions: make([]cond.Caption, len(keys)), Negative: make([]cond.Caption, len(keys))}
		empty := cond.Caption{Features: z.data.EmptyCaptionFeats, Len: len(z.data.EmptyCaptionFeats) / dim}
		for i, k := range keys {
			if k < 0 || k >= len(z.data.CaptionFeats) {
				return sample.Conditions{}, fmt.Errorf("eval: caption of data sample %d, the data has %d", k, len(z.data.CaptionFeats))
			}
			f := z.data.CaptionFeats[k]
			c.Captions[i], c.Negative[i] = cond.Caption{Features: f, Len: len(f) / dim}, empty
		}
		return c, nil
	}
	words := make([][]int, len(keys))
	for i, k := range keys {
		if k < 0 || k >= len(z.data.Captions) {
			return sample.Conditions{}, fmt.Errorf("eval: caption of data sample %d, the data has %d", k, len(z.data.Captions))
		}
		words[i] = z.data.Captions[k]
	}
	pos, err := shapes.CaptionInputs(words, z.table, dim)
	if err != nil {
		return sample.Conditions{}, fmt.Errorf("eval: %w", err)
	}
	// No words: the empty prompt.
	neg, err := shapes.CaptionInputs(make([][]int, len(keys)), z.table, dim)
	if err != nil {
		return sample.Conditions{}, fmt.Errorf("eval: %w", err)
	}
	return sample.Conditions{Captions: pos, Negative: neg}, nil
}

// sampleKeys are the labels 0, 1, 2, … in turn, so each class gets the
// same share; or the data's first n samples, for their captions.
func (z *teacher) sampleKeys(n int) []int {
	keys := make([]int, n)
	for i := range keys {
		keys[i] = i
		if z.labels() {
			keys[i] = i % z.numClasses
		}
	}
	return keys
}

func (z *teacher) keys(idx, y []int) []int {
	if z.labels() {
		return y
	}
	return idx
}

func (z *teacher) classes(keys []int) []int {
	if z.labels() {
		return keys
	}
	c := make([]int, len(keys))
	for i, k := range keys {
		c[i] = z.data.Labels[k]
	}
	return c
}

func (z *teacher) model(c sample.Conditions) diffusion.Model {
	return sample.Teacher(z.m, c, z.h, z.w)
}

func (z *teacher) cached(c sample.Conditions, tc *sample.TeaCache) (diffusion.Model, family.StepFLOPs, error) {
	st, err := sample.Staged(z.m, "teacher")
	if err != nil {
		return nil, family.StepFLOPs{}, err
	}
	z.m.Parameters().SetRequiresGrad(false)
	return tc.Teacher(st, c, z.h, z.w), st.StepFLOPs(z.h, z.w), nil
}

func (z *teacher) rule(c, u []float32, hw int, s float32) { z.m.Guide(c, u, hw, s) }

func (z *teacher) guided(scale float64) bool { return scale > 1 }

func (z *teacher) outChannels() int { return z.m.OutChannels() }

func (z *teacher) forwardGFLOPs() float64 { return z.m.ForwardFLOPs(z.h, z.w) / 1e9 }

func (z *teacher) tokens() int { return z.m.Tokens(z.h, z.w) }

// probes says whether the per-timestep ε probes apply: DDPM's.
func (z *teacher) probes() bool { return z.m.Process() == ProcessDDPM }

func (z *teacher) process() string { return z.m.Process() }

// captions are the shapes captions for prompt following; nil for labels
// and for encoded prompts.
func (z *teacher) captions() [][]int {
	if z.labels() || z.table == nil {
		return nil
	}
	return z.data.Captions
}

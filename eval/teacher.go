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
	"github.com/dcdit/dcdit/dit"
	"github.com/dcdit/dcdit/diffusion/ddpm"
	"github.com/dcdit/dcdit/zimage"
	"github.com/dcdit/dcdit/diffusion/flowmatch"
)

// The diffusion processes a report names (Report.Process).
const (
	ProcessDDPM         = "ddpm"
	ProcessFlowMatching = "flow_matching"
)

// Teacher is the fixed-patch model a DC model is measured against, with
// what it was trained on: DiT's class labels and DDPM (DiTTeacher), or
// Z-Image's captions and flow matching (ZImageTeacher). It decides how
// samples are conditioned, noised, sampled and guided; the evaluation's
// measures are the same for both.
//
// The conditions of a batch are keys: class labels for a DiT, data sample
// indices (whose captions condition) for a Z-Image.
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
	// timestep is the Options timestep of a model time.
	timestep(modelTime float32) float32
	// input is the conditioning of keys at model times t; null gives the
	// unconditional one (the null class, the empty prompt).
	input(t []float32, keys []int, null bool) (cond.Input, error)
	// sampleKeys are the conditions every row's n samples are drawn for.
	sampleKeys(n int) []int
	// keys are the conditions of data samples idx (with their labels y).
	keys(idx, y []int) []int
	// classes are the classes of keys (a DiT's labels, a Z-Image's
	// captioned samples' classes).
	classes(keys []int) []int
	// predict is the teacher's unguided raw output [B, OutChannels, H, W].
	predict(x, t []float32, in cond.Input) ([]float32, error)
	// guide combines a guided batch's outputs [cond; uncond] (n samples
	// each, per values a sample, hw positions a channel) into the first
	// half, in the process's convention.
	guide(out []float32, n, per, hw int, scale float32)
	// guided says whether a scale guides.
	guided(scale float64) bool
	// samplingModel is the teacher as its sampler calls it, for keys.
	samplingModel(keys []int) diffusion.Model
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

// DiTTeacher is a class-conditional DiT trained with DDPM: labels
// condition, the null class is the unconditional branch, guidance is
// DiT's forward_with_cfg (uncond + s·(cond − uncond) on the first 3
// channels, on for s > 1).
func DiTTeacher(m *dit.Model) Teacher { return &ditTeacher{m: m} }

type ditTeacher struct {
	m          *dit.Model
	numClasses int // the data's
}

func (d *ditTeacher) check(cfg *dc.Config, data *datasets.Set) error {
	tc := d.m.Config
	switch {
	case tc.InputSize != cfg.GridRows || tc.InputSize != cfg.GridCols || tc.InChannels != cfg.InChannels:
		return fmt.Errorf("eval: the teacher takes [%d %d %d] latents, the DC model [%d %d %d]",
			tc.InChannels, tc.InputSize, tc.InputSize, cfg.InChannels, cfg.GridRows, cfg.GridCols)
	case !tc.LearnSigma || cfg.OutChannels != 2*cfg.InChannels:
		return fmt.Errorf("eval: the DDPM sampler needs learned-sigma outputs (2C = %d channels); the teacher has %d, the DC model %d",
			2*cfg.InChannels, tc.OutChannels(), cfg.OutChannels)
	case data.NumClasses > tc.NumClasses:
		return fmt.Errorf("eval: the data set has %d classes, the teacher %d", data.NumClasses, tc.NumClasses)
	}
	d.numClasses = data.NumClasses
	return nil
}

func (d *ditTeacher) processes(o Options) (diffusion.Process, diffusion.Process, []int, error) {
	// DiT's process: the training schedule noises the held-out inputs and
	// gives their model times; the respaced one samples, guiding DiT's 3
	// channels.
	sched, err := ddpm.Respaced(o.DiffusionSteps, strconv.Itoa(o.Steps))
	if err != nil {
		return nil, nil, nil, fmt.Errorf("eval: %w", err)
	}
	var ts []int
	for s := sched.Steps() - 1; s >= 0; s-- {
		ts = append(ts, sched.TimestepMap[s])
	}
	return &diffusion.DDPM{Schedule: ddpm.Linear(o.DiffusionSteps)}, &diffusion.DDPM{Schedule: sched, GuidedChannels: 3}, ts, nil
}

func (d *ditTeacher) level(t int) int { return t }

func (d *ditTeacher) timestep(modelTime float32) float32 { return modelTime }

func (d *ditTeacher) input(t []float32, keys []int, null bool) (cond.Input, error) {
	if !null {
		return cond.Input{T: t, Labels: keys}, nil
	}
	y := make([]int, len(keys))
	for i := range y {
		y[i] = d.m.Config.NumClasses
	}
	return cond.Input{T: t, Labels: y}, nil
}

// sampleKeys are the labels 0, 1, 2, … in turn, so each class gets the
// same share.
func (d *ditTeacher) sampleKeys(n int) []int {
	labels := make([]int, n)
	for i := range labels {
		labels[i] = i % d.numClasses
	}
	return labels
}

func (d *ditTeacher) keys(_, y []int) []int { return y }

func (d *ditTeacher) classes(keys []int) []int { return keys }

func (d *ditTeacher) predict(x, t []float32, in cond.Input) ([]float32, error) {
	return d.m.Predict(x, t, in.Labels)
}

func (d *ditTeacher) guide(out []float32, n, per, hw int, scale float32) {
	guided := min(3, d.outChannels()) * hw
	for b := range n {
		c, u := out[b*per:b*per+guided], out[(n+b)*per:(n+b)*per+guided]
		for i := range guided {
			v := u[i] + scale*(c[i]-u[i])
			c[i], u[i] = v, v
		}
	}
}

func (d *ditTeacher) guided(scale float64) bool { return scale > 1 }

func (d *ditTeacher) samplingModel(keys []int) diffusion.Model {
	return diffusion.WithLabels(d.m.Predict, keys, d.m.Config.NumClasses)
}

func (d *ditTeacher) outChannels() int { return d.m.Config.OutChannels() }

func (d *ditTeacher) forwardGFLOPs() float64 {
	return dit.ForwardFLOPs(d.m.Config, d.m.Config.NumTokens()).Total() / 1e9
}

func (d *ditTeacher) tokens() int { return d.m.Config.NumTokens() }

func (d *ditTeacher) probes() bool { return true }

func (d *ditTeacher) process() string { return ProcessDDPM }

func (d *ditTeacher) captions() [][]int { return nil }

// ZImageTeacher is a caption-conditioned Z-Image trained with flow
// matching: the data's captions condition, read through table (one row
// of the model's caption width per vocabulary word, the text encoder's
// stand-in); the empty prompt (one zero row) is the unconditional branch;
// sampling is Euler over Tongyi's schedule with shift, and guidance is
// Z-Image's (cond + s·(cond − uncond) on every channel, on for s > 1
// here). Each row's samples are drawn for the captions of the data's
// first samples, so the data must be class-balanced in order (sample i of
// class i mod classes, shapes.Generator.BalancedSet) for the Fréchet
// distance's reference to match them.
//
// Its cost per image is counted for captions of captionLen tokens, as the
// DC model's backbone counts it (zimage.Backbone.CaptionLen; 0: the
// typical prompt, zimage.TypicalCaptionLen).
func ZImageTeacher(m *zimage.Model, table []float32, shift float64, captionLen int) Teacher {
	return &zimageTeacher{m: m, table: table, shift: shift, captionLen: captionLen}
}

// ZImagePromptTeacher is ZImageTeacher for data whose captions are
// encoded prompts (datasets.Set.CaptionFeats, as a text encoder wrote
// them) rather than words of a table: each sample's features condition,
// and the empty prompt's (Set.EmptyCaptionFeats) are the unconditional
// branch, as training drops captions to them. The data's samples need not
// be class-balanced: without shapes captions there is no prompt following
// to score.
func ZImagePromptTeacher(m *zimage.Model, shift float64, captionLen int) Teacher {
	return &zimageTeacher{m: m, shift: shift, captionLen: captionLen, encoded: true}
}

type zimageTeacher struct {
	m          *zimage.Model
	table      []float32
	encoded    bool // captions are the data's encoded prompts, not table words
	shift      float64
	captionLen int
	data       *datasets.Set
	h, w       int
	trainTab   *flowmatch.Table
}

func (z *zimageTeacher) check(cfg *dc.Config, data *datasets.Set) error {
	c := z.m.Config
	dim := c.CapFeatDim
	if c.InChannels != cfg.InChannels || cfg.OutChannels != c.InChannels {
		return fmt.Errorf("eval: the teacher takes and predicts %d latent channels, the DC model takes %d and predicts %d", c.InChannels, cfg.InChannels, cfg.OutChannels)
	}
	if !(z.shift > 0) || math.IsInf(z.shift, 0) {
		return fmt.Errorf("eval: flow matching shift %v, want a finite value > 0", z.shift)
	}
	if z.encoded {
		switch {
		case data.CaptionFeats == nil:
			return fmt.Errorf("eval: a teacher conditioned on encoded prompts needs data with encoded captions")
		case data.CaptionDim != dim:
			return fmt.Errorf("eval: the data's caption features are %d wide, the teacher reads cap_feat_dim %d", data.CaptionDim, dim)
		case data.EmptyCaptionFeats == nil:
			return fmt.Errorf("eval: the data's encoded captions come without the empty prompt's, the unconditional branch")
		}
		z.data, z.h, z.w = data, cfg.GridRows, cfg.GridCols
		return nil
	}
	switch {
	case data.Captions == nil:
		return fmt.Errorf("eval: a caption-conditioned teacher needs data with captions")
	case len(z.table) == 0 || len(z.table)%dim != 0:
		return fmt.Errorf("eval: a caption table of %d values, want rows of %d", len(z.table), dim)
	case len(z.table)/dim < len(data.Vocabulary):
		return fmt.Errorf("eval: the caption table has %d words, the data's vocabulary %d", len(z.table)/dim, len(data.Vocabulary))
	}
	z.data, z.h, z.w = data, cfg.GridRows, cfg.GridCols
	return nil
}

func (z *zimageTeacher) config(steps int) flowmatch.Config {
	return flowmatch.Config{NumTrainTimesteps: steps, Shift: z.shift}
}

func (z *zimageTeacher) processes(o Options) (diffusion.Process, diffusion.Process, []int, error) {
	if o.NumSamples > z.data.N {
		return nil, nil, nil, fmt.Errorf("eval: %d samples per row are drawn for the captions of as many data samples; the data has %d", o.NumSamples, z.data.N)
	}
	tab, err := z.config(o.DiffusionSteps).TrainingTable()
	if err != nil {
		return nil, nil, nil, fmt.Errorf("eval: %w", err)
	}
	sched, err := z.config(o.DiffusionSteps).Schedule(flowmatch.Tongyi, o.Steps)
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

// timestep is σ·T of model time 1 − σ.
func (z *zimageTeacher) timestep(modelTime float32) float32 {
	return (1 - modelTime) * float32(len(z.trainTab.Timesteps))
}

// level is the training table's level whose timestep (σ·T) is nearest t.
func (z *zimageTeacher) level(t int) int {
	best, bd := 0, math.Inf(1)
	for k, v := range z.trainTab.Timesteps {
		if d := math.Abs(float64(v) - float64(t)); d < bd {
			best, bd = k, d
		}
	}
	return best
}

func (z *zimageTeacher) input(t []float32, keys []int, null bool) (cond.Input, error) {
	dim := z.m.Config.CapFeatDim
	if z.encoded {
		caps := make([]cond.Caption, len(keys))
		for i, k := range keys {
			if k < 0 || k >= len(z.data.CaptionFeats) {
				return cond.Input{}, fmt.Errorf("eval: caption of data sample %d, the data has %d", k, len(z.data.CaptionFeats))
			}
			f := z.data.CaptionFeats[k]
			if null {
				f = z.data.EmptyCaptionFeats
			}
			caps[i] = cond.Caption{Features: f, Len: len(f) / dim}
		}
		return cond.Input{T: t, Captions: caps}, nil
	}
	words := make([][]int, len(keys)) // empty: the empty prompt
	for i, k := range keys {
		if k < 0 || k >= len(z.data.Captions) {
			return cond.Input{}, fmt.Errorf("eval: caption of data sample %d, the data has %d", k, len(z.data.Captions))
		}
		if !null {
			words[i] = z.data.Captions[k]
		}
	}
	caps, err := shapes.CaptionInputs(words, z.table, dim)
	if err != nil {
		return cond.Input{}, fmt.Errorf("eval: %w", err)
	}
	return cond.Input{T: t, Captions: caps}, nil
}

// sampleKeys are the data's first n samples: their captions.
func (z *zimageTeacher) sampleKeys(n int) []int {
	keys := make([]int, n)
	for i := range keys {
		keys[i] = i
	}
	return keys
}

func (z *zimageTeacher) keys(idx, _ []int) []int { return idx }

func (z *zimageTeacher) classes(keys []int) []int {
	c := make([]int, len(keys))
	for i, k := range keys {
		c[i] = z.data.Labels[k]
	}
	return c
}

func (z *zimageTeacher) predict(x, _ []float32, in cond.Input) ([]float32, error) {
	return z.m.Predict(x, in, z.h, z.w)
}

func (z *zimageTeacher) guide(out []float32, n, per, _ int, scale float32) {
	for b := range n {
		c, u := out[b*per:(b+1)*per], out[(n+b)*per:(n+b+1)*per]
		for i := range c {
			v := c[i] + scale*(c[i]-u[i])
			c[i], u[i] = v, v
		}
	}
}

func (z *zimageTeacher) guided(scale float64) bool { return scale > 1 }

func (z *zimageTeacher) samplingModel(keys []int) diffusion.Model {
	return func(x, t []float32, guided bool) ([]float32, error) {
		in, err := z.input(t[:len(keys)], keys, false)
		if err != nil {
			return nil, err
		}
		if guided {
			null, err := z.input(t[len(keys):], keys, true)
			if err != nil {
				return nil, err
			}
			in = joinInputs(in, null)
		}
		return z.m.Predict(x, in, z.h, z.w)
	}
}

func (z *zimageTeacher) outChannels() int { return z.m.Config.InChannels }

func (z *zimageTeacher) forwardGFLOPs() float64 {
	n := z.captionLen
	if n == 0 {
		n = zimage.TypicalCaptionLen
	}
	return zimage.ForwardFLOPs(z.m.Config, z.tokens(), n).Total() / 1e9
}

func (z *zimageTeacher) tokens() int {
	p := z.m.Config.PatchSize
	return (z.h / p) * (z.w / p)
}

func (z *zimageTeacher) probes() bool { return false }

func (z *zimageTeacher) process() string { return ProcessFlowMatching }

// captions are nil for encoded prompts: prompt following reads shapes
// captions' words.
func (z *zimageTeacher) captions() [][]int {
	if z.encoded {
		return nil
	}
	return z.data.Captions
}

// joinInputs stacks two conditionings of the same kind.
func joinInputs(a, b cond.Input) cond.Input {
	out := cond.Input{T: append(append([]float32(nil), a.T...), b.T...)}
	if a.Labels != nil {
		out.Labels = append(append([]int(nil), a.Labels...), b.Labels...)
	}
	if a.Captions != nil {
		out.Captions = append(append([]cond.Caption(nil), a.Captions...), b.Captions...)
	}
	return out
}

package sample

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/dcdit/dcdit/cond"
	"github.com/dcdit/dcdit/datasets/shapes"
	"github.com/dcdit/dcdit/diffusion"
	"github.com/dcdit/dcdit/diffusion/flowmatch"
	"github.com/dcdit/dcdit/family"
	"github.com/dcdit/dcdit/internal/cli/cmdutil"
	"github.com/dcdit/dcdit/internal/cli/progress"
	"github.com/dcdit/dcdit/loaders/arch"
	"github.com/dcdit/dcdit/loaders/dtype"
	"github.com/dcdit/dcdit/loaders/safetensors"
	"github.com/dcdit/dcdit/sample"
)

// Z-Image defaults: Z-Image-Turbo's pipeline (no guidance, 1024² images,
// whose latents are 128×128); the steps are the family's
// (family.Costed.Steps: Turbo's 8).
const (
	defaultZImageSize = cmdutil.DefaultZImageGrid
	turboCFG          = 0
)

// sampleHeadroom is the memory a Z-Image sampling run may use above its
// loaded weights before the collector works to keep it there: the
// activations of a 1024² batch are a few hundred MB.
const sampleHeadroom = 1 << 30

// Tensor names of a captions file.
const (
	capFeatsName = "cap_feats"
	capLensName  = "cap_lens"
)

// validateZImage rejects Z-Image flag values that are wrong whatever the
// checkpoint.
func validateZImage(cmd *cobra.Command, o *Options) error {
	if _, err := parsePipeline(o.Schedule); err != nil {
		return cmdutil.Usagef(cmd, "--schedule %q: want %s or %s", o.Schedule, flowmatch.Tongyi, flowmatch.Diffusers)
	}
	if o.Size != "" {
		if _, _, err := cmdutil.ParseGrid(o.Size); err != nil {
			return cmdutil.Usagef(cmd, "--size %q: %v", o.Size, err)
		}
	}
	switch {
	case math.IsNaN(o.Shift) || math.IsInf(o.Shift, 0) || o.Shift < 0:
		return cmdutil.Usagef(cmd, "--shift %v: want a finite shift > 0", o.Shift)
	case math.IsNaN(o.CFGTruncation) || math.IsInf(o.CFGTruncation, 0):
		return cmdutil.Usagef(cmd, "--cfg-truncation %v: want a finite model time (guidance stops above it)", o.CFGTruncation)
	case math.IsNaN(o.CFGNormalization) || math.IsInf(o.CFGNormalization, 0) || o.CFGNormalization < 0:
		return cmdutil.Usagef(cmd, "--cfg-normalization %v: want a finite factor ≥ 0 (0 is off)", o.CFGNormalization)
	case o.Captions != "" && len(o.Prompts) > 0:
		return cmdutil.Usagef(cmd, "--captions and --prompt both give the captions: pass one of them")
	case len(o.Prompts) > 0 && o.Negative != "":
		return cmdutil.Usagef(cmd, "--negative takes caption features; with --prompt give --negative-prompt")
	case o.Captions != "" && o.Negative != "" && o.Captions == o.Negative:
		// Guidance against the prompts themselves is no guidance; it is
		// almost certainly a typo.
		return cmdutil.Usagef(cmd, "--captions and --negative both name %s", o.Captions)
	}
	return nil
}

// parsePipeline maps --schedule to a pipeline; empty is Tongyi's.
func parsePipeline(s string) (flowmatch.Pipeline, error) {
	switch strings.ToLower(s) {
	case "", flowmatch.Tongyi.String():
		return flowmatch.Tongyi, nil
	case flowmatch.Diffusers.String():
		return flowmatch.Diffusers, nil
	}
	return 0, fmt.Errorf("unknown schedule %q", s)
}

// zimageFlag names the first Z-Image flag set in o, or "".
func zimageFlag(o *Options) string {
	for _, f := range []struct {
		name string
		set  bool
	}{
		{"--captions", o.Captions != ""}, {"--negative", o.Negative != ""}, {"--prompt", len(o.Prompts) > 0}, {"--size", o.Size != ""},
		{"--negative-prompt", o.NegativePrompt != ""}, {"--text-encoder", o.TextEncoder != ""}, {"--tokenizer", o.Tokenizer != ""},
		{"--config", o.Config != ""}, {"--schedule", o.Schedule != ""}, {"--shift", o.Shift != 0},
		{"--cfg-truncation", o.CFGTruncationGiven}, {"--cfg-normalization", o.CFGNormalization != 0},
	} {
		if f.set {
			return f.name
		}
	}
	return ""
}

// classFlag names the first class-conditional flag set in o, or "".
func classFlag(o *Options) string {
	for _, f := range []struct {
		name string
		set  bool
	}{
		{"--class", !slices.Equal(o.Classes, []int{0}) && len(o.Classes) > 0}, {"--num", o.Num != 1},
		{"--num-heads", o.NumHeads != 0}, {"--cfg-all-channels", o.CFGAll},
		{"--rho", o.RhoGiven}, {"--rho-uncond", o.RhoUncondGiven}, {"--dense-below", o.DenseBelow != 0},
		{"--coarse-from", o.CoarseFrom != 0}, {"--coarse-rho", o.CoarseRho != 0},
		{"--drop", o.Drop != ""},
	} {
		if f.set {
			return f.name
		}
	}
	return ""
}

// captions are the features of one captions file.
type captions struct {
	// Feats holds each caption's valid rows, [lens[i], cap_feat_dim].
	feats [][]float32
	lens  []int
	// padded is the file's L, the rows per caption.
	padded int
	// dim is the features' width when a text encoder made them (0 for a
	// file, whose width readCaptions checks).
	dim int
}

// inputs are the captions as a model reads them.
func (c *captions) inputs() []cond.Caption {
	in := make([]cond.Caption, len(c.feats))
	for i, f := range c.feats {
		in[i] = cond.Caption{Features: f, Len: c.lens[i]}
	}
	return in
}

// readCaptions reads and checks a captions file (flag names it in errors)
// for a model taking capDim features per token.
func readCaptions(flag, path string, capDim int) (*captions, error) {
	f, err := safetensors.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", flag, path, err)
	}
	defer f.Close()
	fail := func(format string, args ...any) error {
		return fmt.Errorf("%s %s: %s", flag, path, fmt.Sprintf(format, args...))
	}
	names := func() string {
		var ns []string
		for _, t := range f.Tensors() {
			ns = append(ns, t.Name)
		}
		if len(ns) == 0 {
			return "no tensors"
		}
		return "tensors " + arch.JoinCapped(ns, ", ", 8)
	}
	feats, ok := f.Tensor(capFeatsName)
	if !ok {
		return nil, fail("no tensor %q (want F32 [N, L, cap_feat_dim], the text encoder's hidden states; the file has %s)", capFeatsName, names())
	}
	if !feats.DType.IsFloat() {
		return nil, fail("tensor %q is %s, want F32 (text-encoder hidden states)", capFeatsName, feats.DType)
	}
	if len(feats.Shape) != 3 {
		return nil, fail("tensor %q has shape %v (rank %d), want [N, L, cap_feat_dim] (rank 3)", capFeatsName, feats.Shape, len(feats.Shape))
	}
	N, L, D := int(feats.Shape[0]), int(feats.Shape[1]), int(feats.Shape[2])
	if D != capDim {
		return nil, fail("tensor %q has shape %v: %d features per token, but the model's cap_feat_dim is %d", capFeatsName, feats.Shape, D, capDim)
	}
	if N < 1 || L < 1 {
		return nil, fail("tensor %q has shape %v, want at least one caption of at least one token", capFeatsName, feats.Shape)
	}
	lensT, ok := f.Tensor(capLensName)
	if !ok {
		return nil, fail("no tensor %q (want I64 [%d], each caption's valid length; the file has %s)", capLensName, N, names())
	}
	if !lensT.DType.IsInt() {
		return nil, fail("tensor %q is %s, want I64 (valid lengths)", capLensName, lensT.DType)
	}
	if len(lensT.Shape) != 1 || int(lensT.Shape[0]) != N {
		return nil, fail("tensor %q has shape %v, want [%d] (one length per caption of %q %v)", capLensName, lensT.Shape, N, capFeatsName, feats.Shape)
	}
	lens, err := lensT.Int64()
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", flag, path, err)
	}
	values, err := feats.Float32()
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", flag, path, err)
	}
	c := &captions{padded: L}
	for i, n := range lens {
		if n < 1 || n > int64(L) {
			return nil, fail("%s[%d] = %d, want 1..%d (%q holds %d rows per caption)", capLensName, i, n, L, capFeatsName, L)
		}
		rows := values[i*L*D : (i*L+int(n))*D]
		for j, v := range rows {
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				return nil, fail("%s[%d] row %d feature %d is %v, want finite features", capFeatsName, i, j/D, j%D, v)
			}
		}
		// Copy: the values may alias the file's read-only map.
		c.feats = append(c.feats, slices.Clone(rows))
		c.lens = append(c.lens, int(n))
	}
	return c, nil
}

// promptCaptions turns --prompt texts into caption features through the
// caption table the checkpoint records (shapes.CaptionTableKey), with the
// empty prompt, one per sample, as the unguided branch the model was
// trained with.
func promptCaptions(path string, prompts []string, capDim int) (pos, neg *captions, err error) {
	ct, table, found, err := cmdutil.ReadCaptionTable(path, capDim)
	switch {
	case err != nil:
		return nil, nil, fmt.Errorf("--prompt: %w", err)
	case !found:
		return nil, nil, fmt.Errorf("--prompt: %s records no caption table (metadata %q): it was not trained by dcdit on the shapes captions; give its text encoder with --text-encoder, or its features with --captions", path, shapes.CaptionTableKey)
	}
	empty, _ := shapes.Prompt("", table, capDim)
	pos, neg = &captions{}, &captions{}
	for i, p := range prompts {
		f, err := shapes.Prompt(p, table, capDim)
		if err != nil {
			return nil, nil, fmt.Errorf("--prompt %q (prompt %d): %w; the vocabulary: %s", p, i+1, err, strings.Join(ct.Vocabulary, " "))
		}
		pos.feats, pos.lens = append(pos.feats, f), append(pos.lens, len(f)/capDim)
		neg.feats, neg.lens = append(neg.feats, empty), append(neg.lens, 1)
	}
	return pos, neg, nil
}

// readConfig reads a config.json object.
func readConfig(path string) (map[string]any, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--config: %w", err)
	}
	var cfg map[string]any
	if err := json.Unmarshal(raw, &cfg); err != nil {
		return nil, fmt.Errorf("--config %s: not a JSON object: %v", path, err)
	}
	return cfg, nil
}

// zimageRun counts what the sampler's model calls did.
type zimageRun struct {
	flops  float64 // all forwards' FLOPs
	guided bool    // whether any step ran with guidance
}

// teacherModel is a caption-conditioned teacher as flowmatch's sampler
// calls it on latents of an h×w grid for the job's captions, counting
// each sample's FLOPs at its caption's length when the teacher can
// (family.CaptionCosted).
func (j *zimageJob) teacherModel(t family.Teacher, h, w int, run *zimageRun, tc *sample.TeaCache) (diffusion.Model, error) {
	flops := func(int) float64 { return t.ForwardFLOPs(h, w) }
	if c, ok := t.(family.CaptionCosted); ok {
		flops = func(captionLen int) float64 { return c.CaptionFLOPs(h, w, captionLen) }
	}
	model := sample.Teacher(t, j.conditions(), h, w)
	// What a step cache changes of a branch's sample's cost.
	var step func(captionLen int) family.StepFLOPs
	if tc != nil {
		st, err := sample.Staged(t, string(arch.ZImage))
		if err != nil {
			return nil, err
		}
		model = tc.Teacher(st, j.conditions(), h, w)
		step = func(int) family.StepFLOPs { return st.StepFLOPs(h, w) }
		if c, ok := t.(family.CaptionStepCosted); ok {
			step = func(captionLen int) family.StepFLOPs { return c.CaptionStepFLOPs(h, w, captionLen) }
		}
	}
	return j.model(model, run, func(guided bool) {
		lens := j.pos.lens
		if guided {
			lens = slices.Concat(j.pos.lens, j.neg.lens)
		}
		for i, l := range lens {
			run.flops += flops(l)
			if tc != nil {
				f := step(l)
				run.flops += f.Modulation
				if tc.Skips[len(tc.Skips)-1][i/len(j.pos.lens)] {
					run.flops -= f.Blocks
				}
			}
		}
	}), nil
}

// runZImage samples from a Z-Image checkpoint, which its family opens as
// a teacher (family.OpenTeacher); rep is detection's report on it.
func runZImage(opts *Options, rep *arch.Report) error {
	if opts.Captions == "" && len(opts.Prompts) == 0 {
		return fmt.Errorf("sample: %s is a Z-Image checkpoint, not a DiT: it samples from caption features, not class labels; pass --captions CAPS.safetensors, or --prompt for one trained by dcdit on the shapes captions (see 'dcdit sample --help')", opts.Checkpoint)
	}
	if flag := classFlag(opts); flag != "" {
		return &cmdutil.UsageError{Err: fmt.Errorf("%s applies to DiT and DC checkpoints; %s is a Z-Image checkpoint, conditioned on --captions (see 'dcdit sample --help')", flag, opts.Checkpoint)}
	}
	size := opts.Size
	if size == "" {
		size = defaultZImageSize
	}
	h, w, err := cmdutil.ParseGrid(size)
	if err != nil {
		return &cmdutil.UsageError{Err: fmt.Errorf("--size %q: %w", size, err)}
	}
	pipeline, err := parsePipeline(opts.Schedule)
	if err != nil {
		return &cmdutil.UsageError{Err: fmt.Errorf("--schedule: %w", err)}
	}
	var cfgJSON map[string]any
	if opts.Config != "" {
		if cfgJSON, err = readConfig(opts.Config); err != nil {
			return err
		}
		// The config may state what the shapes do not: the patch size.
		if rep, err = detect(opts.Checkpoint, cfgJSON); err != nil {
			return err
		}
	}
	pos, neg, err := encodePrompts(opts)
	if err != nil {
		return err
	}
	start := time.Now()
	// Sampling trains nothing: a BF16 checkpoint's matrices stay bfloat16, at
	// half the memory (a 6 B Z-Image in 12.3 GB, not 24.6). The teacher
	// comes frozen: no parameter tracks gradients, so the ops keep no graph.
	t, warnings, err := family.OpenTeacher(opts.Checkpoint, family.OpenOptions{Config: cfgJSON, KeepBF16: true})
	if err != nil {
		if opts.Config == "" && strings.Contains(err.Error(), "axes_dims") {
			return fmt.Errorf("%w; pass the model's config.json with --config", err)
		}
		return err
	}
	capDim := t.Conditioning().CaptionWidth
	if capDim == 0 || t.Process() != family.ProcessFlowMatching {
		return fmt.Errorf("sample: %s is a %s model conditioned on %+v; this path samples caption-conditioned flow-matching models", opts.Checkpoint, t.Process(), t.Conditioning())
	}
	b, coster, ok := family.BaseOf(rep)
	if !ok || b.Patch < 1 {
		return fmt.Errorf("sample: %s: no registered family states the patch size of this %s checkpoint", opts.Checkpoint, rep.Architecture)
	}
	if h%b.Patch != 0 || w%b.Patch != 0 {
		return fmt.Errorf("--size %dx%d: %s takes %d×%d patches, so both sides must be multiples of %d", h, w, opts.Checkpoint, b.Patch, b.Patch, b.Patch)
	}
	job, err := newZImageJob(opts, pipeline, capDim, coster.Steps(), pos, neg)
	if err != nil {
		return err
	}
	if !opts.Quiet {
		for _, warn := range warnings {
			fmt.Fprintf(opts.IO.Err, "warning: %s\n", warn)
		}
	}
	cmdutil.LimitHeap(sampleHeadroom)
	cmdutil.Phase(quietLog(opts), "loaded the transformer "+opts.Checkpoint, time.Since(start))
	tc, err := teaCache(opts, job.sched.Steps())
	if err != nil {
		return err
	}
	run := &zimageRun{}
	model, err := job.teacherModel(t, h, w, run, tc)
	if err != nil {
		return err
	}
	err = job.sample(opts, model, t.InChannels(), h, w, run, func() map[string]string {
		md := map[string]string{"dcdit.architecture": string(arch.ZImage)}
		teaCacheMeta(md, tc)
		return md
	})
	if err == nil {
		teaCacheNote(opts, tc)
	}
	return err
}

// zimageJob is what sampling a caption-conditioned checkpoint (a Z-Image,
// or a DC model around one) sets up from the flags: the captions, the
// flow-matching schedule and Z-Image's guidance.
type zimageJob struct {
	steps    int
	pos, neg *captions
	shift    float64
	sched    *flowmatch.Schedule
	guide    flowmatch.Guidance
	pipeline flowmatch.Pipeline
}

// newZImageJob reads the captions (--prompt, or --captions and
// --negative) for a model of capDim caption features and builds the
// schedule (--steps defaults to steps, the family's, and --cfg to
// Z-Image-Turbo's).
//
// encPos and encNeg, when not nil, are --prompt and --negative-prompt as
// the text encoder encoded them (encodePrompts).
func newZImageJob(opts *Options, pipeline flowmatch.Pipeline, capDim, steps int, encPos, encNeg *captions) (*zimageJob, error) {
	j := &zimageJob{steps: opts.Steps, pipeline: pipeline}
	scale := opts.CFG
	if opts.unset.steps {
		j.steps = steps
	}
	if opts.unset.cfg {
		scale = turboCFG
	}
	var err error
	if encPos != nil {
		if encPos.dim != capDim {
			return nil, fmt.Errorf("--prompt: the text encoder's features are %d wide, but %s reads captions of cap_feat_dim %d", encPos.dim, opts.Checkpoint, capDim)
		}
		j.pos, j.neg = encPos, encNeg
	} else if len(opts.Prompts) > 0 {
		if j.pos, j.neg, err = promptCaptions(opts.Checkpoint, opts.Prompts, capDim); err != nil {
			return nil, err
		}
	} else if j.pos, err = readCaptions("--captions", opts.Captions, capDim); err != nil {
		return nil, err
	}
	N := len(j.pos.feats)
	if opts.Negative != "" {
		if j.neg, err = readCaptions("--negative", opts.Negative, capDim); err != nil {
			return nil, err
		}
		switch len(j.neg.feats) {
		case N:
		case 1:
			// One negative prompt for every sample, as the pipelines
			// repeat a single negative_prompt.
			for range N - 1 {
				j.neg.feats, j.neg.lens = append(j.neg.feats, j.neg.feats[0]), append(j.neg.lens, j.neg.lens[0])
			}
		default:
			want := fmt.Sprintf("%d (one per caption) or 1 (for all)", N)
			if N == 1 {
				want = "1"
			}
			return nil, fmt.Errorf("--negative %s: %d captions in %q, but --captions %s has %d; want %s", opts.Negative, len(j.neg.feats), capFeatsName, opts.Captions, N, want)
		}
	}
	sc := flowmatch.DefaultConfig()
	if opts.Shift != 0 {
		sc.Shift = opts.Shift
	}
	j.shift = sc.Shift
	if j.sched, err = sc.Schedule(pipeline, j.steps); err != nil {
		return nil, fmt.Errorf("sample: %w", err)
	}
	j.guide = flowmatch.Guidance{Scale: scale, Truncate: opts.CFGTruncationGiven, Truncation: opts.CFGTruncation, Normalization: opts.CFGNormalization}
	return j, nil
}

// conditions are the job's captions, with the negative ones for guidance.
func (j *zimageJob) conditions() sample.Conditions {
	c := sample.Conditions{Captions: j.pos.inputs()}
	if j.neg != nil {
		c.Negative = j.neg.inputs()
	}
	return c
}

// model wraps the sampler's model m of the job's conditions: a guided
// call without negative prompts fails, and every call is noted in run,
// count adding its FLOPs.
func (j *zimageJob) model(m diffusion.Model, run *zimageRun, count func(guided bool)) diffusion.Model {
	return func(x, t []float32, guided bool) ([]float32, error) {
		if guided {
			if j.neg == nil {
				return nil, fmt.Errorf("guidance needs the negative prompts' features: pass --negative (the pipelines encode an empty prompt when there is none), or turn guidance off with --cfg 0")
			}
			run.guided = true
		}
		out, err := m(x, t, guided)
		if err != nil {
			return nil, err
		}
		count(guided)
		return out, nil
	}
}

// sample runs flow matching's sampler on model for the job's captions
// over an h×w grid of C channels and writes the latents (with what md
// returns after sampling added to their metadata) and the preview.
func (j *zimageJob) sample(opts *Options, model diffusion.Model, C, h, w int, run *zimageRun, md func() map[string]string) error {
	pic, err := newPictureOut(opts, C)
	if err != nil {
		return err
	}
	N := len(j.pos.feats)
	// Z-Image's process: the initial latents are drawn from the seed.
	proc := &diffusion.FlowMatch{Schedule: j.sched, Truncate: j.guide.Truncate, Truncation: j.guide.Truncation, Normalization: j.guide.Normalization}
	var bar *progress.Bar
	if !opts.Quiet {
		bar = progress.New(opts.IO.Err, "sampling", j.sched.Steps())
	}
	start := time.Now()
	x, err := proc.Sample(model, diffusion.Shape{B: N, C: C, HW: h * w}, diffusion.SampleOptions{
		Guidance: j.guide.Scale,
		Seed:     opts.Seed,
		Progress: func(done, total int) { bar.Set(done) },
	})
	bar.Finish()
	cmdutil.LiftHeapLimit()
	if err != nil {
		return fmt.Errorf("sample: %s: %w", opts.Checkpoint, err)
	}
	elapsed := time.Since(start)

	meta := zimageMeta(opts, j.pos, j.sched, j.shift, j.steps, j.guide, run, h, w)
	maps.Copy(meta, md())
	shape := []int64{int64(N), int64(C), int64(h), int64(w)}
	if err := safetensors.Write(opts.Out, []safetensors.WriteTensor{{Name: "latents", DType: dtype.F32, Shape: shape, Data: dtype.F32Bytes(x)}}, meta); err != nil {
		return err
	}
	if err := pic.write(opts.PNG, x, N, N, h, w); err != nil {
		return err
	}
	if opts.Quiet {
		return nil
	}
	if j.neg != nil && !run.guided && opts.Negative != "" {
		fmt.Fprintf(opts.IO.Err, "warning: --negative was not used: guidance was off at every step (--cfg %g under the %s schedule)\n", j.guide.Scale, j.pipeline)
	}
	cfgNote := "no guidance"
	if run.guided {
		cfgNote = fmt.Sprintf("cfg %g", j.guide.Scale)
	}
	fmt.Fprintf(opts.IO.Out, "wrote %s: latents [%d %d %d %d], %d steps (%s schedule, shift %g), %s, seed %d, %s (%.3g TFLOP)\n",
		opts.Out, N, C, h, w, j.sched.Steps(), j.pipeline, j.shift, cfgNote, opts.Seed, progress.Duration(elapsed), run.flops/1e12)
	if pic != nil {
		fmt.Fprintf(opts.IO.Out, "wrote %s: %s\n", opts.PNG, pic.describe())
	}
	return nil
}

// zimageMeta is a Z-Image latents file's metadata.
func zimageMeta(opts *Options, pos *captions, sched *flowmatch.Schedule, shift float64, steps int, g flowmatch.Guidance, run *zimageRun, h, w int) map[string]string {
	f := func(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
	md := map[string]string{
		"format":                  "pt",
		"dcdit.sampler":           "flowmatch-euler",
		"dcdit.checkpoint":        opts.Checkpoint,
		"dcdit.captions":          opts.Captions,
		"dcdit.cap_lens":          joinInts(pos.lens),
		"dcdit.size":              fmt.Sprintf("%dx%d", h, w),
		"dcdit.schedule":          sched.Pipeline.String(),
		"dcdit.shift":             f(shift),
		"dcdit.steps":             strconv.Itoa(steps),
		"dcdit.cfg":               f(g.Scale),
		"dcdit.cfg_normalization": f(g.Normalization),
		"dcdit.guided":            strconv.FormatBool(run.guided),
		"dcdit.seed":              strconv.FormatUint(opts.Seed, 10),
		"dcdit.flops_per_image":   strconv.FormatFloat(run.flops/float64(len(pos.lens)), 'g', 8, 64),
	}
	if opts.Negative != "" {
		md["dcdit.negative"] = opts.Negative
	}
	if g.Truncate {
		md["dcdit.cfg_truncation"] = f(g.Truncation)
	}
	return md
}

package sample

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/dcdit/dcdit/dc"
	"github.com/dcdit/dcdit/dc/checkpoint"
	"github.com/dcdit/dcdit/dc/dcfile"
	"github.com/dcdit/dcdit/diffusion"
	"github.com/dcdit/dcdit/diffusion/ddpm"
	"github.com/dcdit/dcdit/diffusion/flowmatch"
	"github.com/dcdit/dcdit/family"
	"github.com/dcdit/dcdit/gpu/accel"
	"github.com/dcdit/dcdit/internal/cli/cmdutil"
	"github.com/dcdit/dcdit/internal/cli/progress"
	"github.com/dcdit/dcdit/loaders"
	"github.com/dcdit/dcdit/loaders/arch"
	"github.com/dcdit/dcdit/sample"
)

// detect reads a checkpoint's headers and says what it holds; config,
// when not nil, stands in for the model folder's config.json.
func detect(path string, config map[string]any) (*arch.Report, error) {
	ck, err := loaders.Open(path)
	if err != nil {
		return nil, err
	}
	defer ck.Close()
	in := ck.ArchInput(0)
	if config != nil {
		in.Config = config
	}
	return arch.Detect(in), nil
}

// runDC samples from a DC model file (a DC checkpoint, or an official
// DC-DiT state dict) at --rho (and --rho-uncond).
func runDC(opts *Options) error {
	m, h, err := dcfile.Open(opts.Checkpoint, dcfile.Options{Heads: opts.NumHeads})
	if err != nil {
		return err
	}
	if err := cmdutil.SetDrop(m.Config, opts.Drop); err != nil {
		return err
	}
	meta := h.Meta
	for _, msg := range meta.Warnings {
		if !opts.Quiet {
			fmt.Fprintf(opts.IO.Err, "warning: %s: %s\n", opts.Checkpoint, msg)
		}
	}
	cfg := m.Config
	on := meta.Backbone.Spec.Conditioning()
	classes := on.Classes
	switch {
	case on.CaptionWidth > 0:
		return runDCZImage(opts, m, meta, on.CaptionWidth)
	case classes == 0:
		return fmt.Errorf("sample: %s has a %s backbone conditioned on neither labels nor captions, which this build cannot sample", opts.Checkpoint, meta.Backbone.Kind)
	}
	if flag := zimageFlag(opts); flag != "" {
		return &cmdutil.UsageError{Err: fmt.Errorf("%s applies to caption-conditioned checkpoints; %s is a class-conditional DC checkpoint (see 'dcdit sample --help')", flag, opts.Checkpoint)}
	}
	for _, c := range opts.Classes {
		if c >= classes {
			return fmt.Errorf("--class %d: %s has %d classes, labels 0..%d", c, opts.Checkpoint, classes, classes-1)
		}
	}
	// A label-conditioned DC model samples with DiT's process; its
	// schedule and guided channels are set once the flags are checked.
	proc := &diffusion.DDPM{}
	if want := proc.OutChannels(cfg.InChannels); cfg.OutChannels != want {
		return fmt.Errorf("sample: %s predicts %d channels for %d latent channels; the DDPM sampler needs the learned-sigma output (%d)", opts.Checkpoint, cfg.OutChannels, cfg.InChannels, want)
	}
	pic, err := newPictureOut(opts, cfg.InChannels)
	if err != nil {
		return err
	}
	if !opts.Quiet && opts.NumHeads > 0 && h.Format == dcfile.DC {
		fmt.Fprintf(opts.IO.Err, "warning: --num-heads is ignored: %s stores its head count\n", opts.Checkpoint)
	}
	notes, err := resolveSampling(opts, meta, checkpoint.ProcessDDPM, samplingDefaults{steps: defaultSteps, cfg: defaultCFG})
	if err != nil {
		return err
	}
	// Inference: no parameter tracks gradients, so the ops keep no graph.
	m.Params.SetRequiresGrad(false)
	if bb := m.Backbone.Parameters(); bb != nil {
		bb.SetRequiresGrad(false)
	}
	sched, err := ddpm.Respaced(trainSteps, strconv.Itoa(opts.Steps))
	if err != nil {
		return err
	}
	release, err := cmdutil.OnDeviceDC(opts.Device, opts.Precision, quietLog(opts), m)
	if err != nil {
		return err
	}
	defer release()

	labels := expandLabels(opts)
	rows, cols := cfg.GridRows, cfg.GridCols
	sh := ddpm.Shape{B: len(labels), C: cfg.InChannels, HW: rows * cols}
	guide, guided := guidance(opts, cfg.InChannels, classes)
	proc.Schedule, proc.GuidedChannels = sched, guide.Channels
	rhoCond, rhoUncond := float32(opts.Rho), float32(opts.Rho)
	if opts.RhoUncondGiven {
		rhoUncond = float32(opts.RhoUncond)
	}
	stats := &sample.Stats{}
	d := &sample.DC{Model: m, Rho: rhoCond, RhoUncond: rhoUncond, DenseBelow: float32(opts.DenseBelow),
		CoarseFrom: float32(opts.CoarseFrom), CoarseRho: float32(opts.CoarseRho), Stats: stats, DenseTeacher: opts.DenseTeacher}
	if d.Cache, err = teaCache(opts, sched.Steps()); err != nil {
		return err
	}
	if opts.Lookback {
		d.Lookback = &sample.Lookback{Clean: proc.Clean, Spacing: opts.LookbackSpacing}
	}
	var bar *progress.Bar
	if !opts.Quiet {
		printNotes(opts, notes)
		bar = progress.New(opts.IO.Err, "sampling", sched.Steps())
	}
	L := cfg.Cells()
	start := time.Now()
	x, err := proc.Sample(d.Denoiser(sample.Conditions{Labels: labels, Null: guide.NullClass}), diffusion.Shape(sh), diffusion.SampleOptions{
		Guidance: float64(guide.Scale),
		Seed:     opts.Seed,
		Progress: func(done, total int) {
			note := fmt.Sprintf("kept %.1f/%d tokens", stats.Kept[len(stats.Kept)-1], L)
			if len(stats.KeptUncond) > 0 {
				note += fmt.Sprintf(" (uncond %.1f)", stats.KeptUncond[len(stats.KeptUncond)-1])
			}
			bar.Note(note)
			bar.Set(done)
		},
	})
	bar.Finish()
	if err != nil {
		return fmt.Errorf("sample: %s: %w", opts.Checkpoint, err)
	}
	elapsed := time.Since(start)

	flops := stats.TotalFLOPs()
	perImage := flops / float64(sh.B)
	md := outputMeta(opts, labels, guide, guided)
	md["dcdit.architecture"] = string(arch.DCDiT)
	md["dcdit.rho"] = strconv.FormatFloat(opts.Rho, 'g', -1, 64)
	if guide.Enabled() {
		md["dcdit.rho_uncond"] = strconv.FormatFloat(float64(rhoUncond), 'g', -1, 32)
		md["dcdit.kept_uncond_per_step"] = joinFloats(stats.KeptUncond)
	}
	md["dcdit.tokens"] = strconv.Itoa(L)
	md["dcdit.dense_below"] = strconv.FormatFloat(opts.DenseBelow, 'g', -1, 64)
	coarseMeta(md, opts)
	md["dcdit.kept_per_step"] = joinFloats(stats.Kept)
	md["dcdit.flops_per_image"] = strconv.FormatFloat(perImage, 'g', 8, 64)
	teaCacheMeta(md, d.Cache)
	lookbackMeta(md, opts)
	if err := writeOutputs(opts, x, sh, rows, cols, md, pic); err != nil {
		return err
	}
	if opts.Quiet {
		return nil
	}
	teaCacheNote(opts, d.Cache)
	printWritten(opts, sh, rows, cols, sched.Steps(), guide, guided, elapsed, flops/1e12, pic)
	fmt.Fprintln(opts.IO.Err, dcSummary(opts, guide.Enabled(), rhoCond, rhoUncond, L, stats, perImage))
	return nil
}

// lookbackMeta records --lookback (with its spacing) and --dense-teacher
// in the output's metadata.
func lookbackMeta(md map[string]string, opts *Options) {
	if opts.Lookback {
		md["dcdit.lookback"] = "true"
		if opts.LookbackSpacing > 0 {
			md["dcdit.lookback_spacing"] = strconv.FormatFloat(opts.LookbackSpacing, 'g', -1, 64)
		}
	}
	if opts.DenseTeacher {
		md["dcdit.dense_teacher"] = "true"
	}
}

// coarseMeta records the coarse steps of a run that had them.
func coarseMeta(md map[string]string, opts *Options) {
	if opts.CoarseFrom > 0 {
		md["dcdit.coarse_from"] = strconv.FormatFloat(opts.CoarseFrom, 'g', -1, 64)
		md["dcdit.coarse_rho"] = strconv.FormatFloat(opts.CoarseRho, 'g', -1, 64)
	}
}

// dcSummary is the closing stderr line of a DC run: ρ, the kept tokens per
// image over the steps, and the FLOPs per image.
func dcSummary(opts *Options, guided bool, rhoCond, rhoUncond float32, L int, s *sample.Stats, perImage float64) string {
	lo, hi, avg := span(s.Kept)
	var b strings.Builder
	fmt.Fprintf(&b, "dc: ρ %g", rhoCond)
	switch {
	case guided && rhoUncond != rhoCond:
		fmt.Fprintf(&b, ", unconditional ρ %g (Lite-CFG)", rhoUncond)
	case guided:
		b.WriteString(" on both guidance branches")
	}
	fmt.Fprintf(&b, ": kept %.1f of %d tokens per image on average (%.1f–%.1f over %d steps)", avg, L, lo, hi, len(s.Kept))
	if len(s.KeptUncond) > 0 {
		_, _, u := span(s.KeptUncond)
		fmt.Fprintf(&b, ", unconditional %.1f", u)
	}
	what := "one forward per step"
	if guided {
		what = "both guidance branches"
	}
	fmt.Fprintf(&b, "; %.4g GFLOP per image (%s, per step kept counts in %s)", perImage/1e9, what, opts.Out)
	return b.String()
}

// span returns the minimum, maximum and mean of v (zeros when empty).
func span(v []float64) (lo, hi, avg float64) {
	if len(v) == 0 {
		return 0, 0, 0
	}
	lo, hi = v[0], v[0]
	for _, x := range v {
		lo, hi, avg = min(lo, x), max(hi, x), avg+x
	}
	return lo, hi, avg / float64(len(v))
}

func joinFloats(v []float64) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = strconv.FormatFloat(x, 'g', 6, 64)
	}
	return strings.Join(s, ",")
}

// runDCZImage samples from a DC checkpoint around a Z-Image: conditioned
// as a Z-Image is (--prompt, or --captions and --negative), with flow
// matching's Euler sampler and Z-Image's guidance; the conditional branch
// runs at --rho and, with guidance on, the unconditional one at
// --rho-uncond in the same batch (Lite-CFG when they differ), and steps at
// timesteps σ·T below --dense-below on every cell. The grid is the
// checkpoint's own.
func runDCZImage(opts *Options, m *dc.Model, meta *checkpoint.Meta, captionWidth int) error {
	if opts.Captions == "" && len(opts.Prompts) == 0 {
		return fmt.Errorf("sample: %s is a DC model around a Z-Image: it samples from captions, not class labels; pass --prompt (or --captions)", opts.Checkpoint)
	}
	for _, f := range []struct {
		name string
		set  bool
	}{
		{"--class", !slices.Equal(opts.Classes, []int{0}) && len(opts.Classes) > 0}, {"--num", opts.Num != 1}, {"--num-heads", opts.NumHeads != 0},
		{"--cfg-all-channels", opts.CFGAll}, {"--size", opts.Size != ""}, {"--config", opts.Config != ""},
	} {
		if f.set {
			return &cmdutil.UsageError{Err: fmt.Errorf("%s does not apply to %s, a DC model around a Z-Image (conditioned on captions, on its own %d×%d grid)", f.name, opts.Checkpoint, m.Config.GridRows, m.Config.GridCols)}
		}
	}
	if opts.Device != "" && opts.Device != accel.CPU {
		return &cmdutil.UsageError{Err: fmt.Errorf("--device %s: Z-Image backbones sample on the CPU only for now", opts.Device)}
	}
	pipeline, err := parsePipeline(opts.Schedule)
	if err != nil {
		return &cmdutil.UsageError{Err: fmt.Errorf("--schedule: %w", err)}
	}
	turbo := samplingDefaults{steps: familySteps(meta.Backbone.Kind), cfg: turboCFG, shift: flowmatch.DefaultConfig().Shift}
	notes, err := resolveSampling(opts, meta, checkpoint.ProcessFlowMatching, turbo)
	if err != nil {
		return err
	}
	pos, neg, err := encodePrompts(opts)
	if err != nil {
		return err
	}
	job, err := newZImageJob(opts, pipeline, captionWidth, turbo.steps, pos, neg)
	if err != nil {
		return err
	}
	m.Params.SetRequiresGrad(false)
	if bb := m.Backbone.Parameters(); bb != nil {
		bb.SetRequiresGrad(false)
	}
	cfg := m.Config
	rhoCond, rhoUncond := float32(opts.Rho), float32(opts.Rho)
	if opts.RhoUncondGiven {
		rhoUncond = float32(opts.RhoUncond)
	}
	stats, run := &sample.Stats{}, &zimageRun{}
	d := &sample.DC{Model: m, Rho: rhoCond, RhoUncond: rhoUncond, DenseBelow: float32(opts.DenseBelow),
		CoarseFrom: float32(opts.CoarseFrom), CoarseRho: float32(opts.CoarseRho), Timestep: sample.FlowMatchingTimestep(trainSteps), Stats: stats,
		DenseTeacher: opts.DenseTeacher}
	if d.Cache, err = teaCache(opts, job.sched.Steps()); err != nil {
		return err
	}
	if opts.Lookback {
		d.Lookback = &sample.Lookback{Clean: (&diffusion.FlowMatch{}).Clean, Spacing: opts.LookbackSpacing}
	}
	model := job.model(d.Denoiser(job.conditions()), run, func(bool) { run.flops += stats.FLOPs[len(stats.FLOPs)-1] })
	if !opts.Quiet {
		printNotes(opts, notes)
	}
	md := func() map[string]string {
		md := map[string]string{
			"dcdit.architecture":  string(arch.DCDiT),
			"dcdit.backbone":      meta.Backbone.Kind,
			"dcdit.rho":           strconv.FormatFloat(opts.Rho, 'g', -1, 64),
			"dcdit.rho_uncond":    strconv.FormatFloat(float64(rhoUncond), 'g', -1, 32),
			"dcdit.tokens":        strconv.Itoa(cfg.Cells()),
			"dcdit.dense_below":   strconv.FormatFloat(opts.DenseBelow, 'g', -1, 64),
			"dcdit.kept_per_step": joinFloats(stats.Kept),
		}
		coarseMeta(md, opts)
		teaCacheMeta(md, d.Cache)
		lookbackMeta(md, opts)
		return md
	}
	if err := job.sample(opts, model, cfg.InChannels, cfg.GridRows, cfg.GridCols, run, md); err != nil {
		return err
	}
	if !opts.Quiet {
		teaCacheNote(opts, d.Cache)
		fmt.Fprintln(opts.IO.Err, dcSummary(opts, run.guided, rhoCond, rhoUncond, cfg.Cells(), stats, run.flops/float64(len(job.pos.feats))))
	}
	return nil
}

// familySteps is the sampling steps the family of kind takes unless told
// (family.Costed), else the command's default.
func familySteps(kind string) int {
	if f, err := family.Lookup(kind); err == nil {
		if c, ok := f.(family.Costed); ok {
			return c.Steps()
		}
	}
	return defaultSteps
}

// samplingDefaults are the command's own sampling settings, for a DC
// checkpoint that records none.
type samplingDefaults struct {
	steps                  int
	cfg, denseBelow, shift float64
}

// resolveSampling gives every sampling setting the command line left
// unset the checkpoint's recorded value (Meta.Sampling), else def, and
// checks the result as the flags are checked. The notes it returns, for
// stderr once the inputs have loaded, say which settings were used with
// where each came from and warn of a ρ the model was not trained for.
// process is the one the backbone samples with: a record of another is an
// error.
func resolveSampling(opts *Options, meta *checkpoint.Meta, process string, def samplingDefaults) (notes []string, _ error) {
	rec, err := cmdutil.SamplingRecord(opts.Checkpoint, meta, process)
	if err != nil {
		return nil, fmt.Errorf("sample: %w", err)
	}
	var r checkpoint.Sampling
	if rec != nil {
		r = *rec
	}
	has := rec != nil
	rhoFrom := cmdutil.FromDefault
	if opts.RhoGiven {
		rhoFrom = cmdutil.FromFlag
	}
	used := []cmdutil.Setting{{Flag: "--rho", Value: fmt.Sprint(opts.Rho), From: rhoFrom}}
	opts.Steps = cmdutil.Pick(&used, "--steps", !opts.unset.steps, opts.Steps, has, r.Steps, def.steps)
	opts.CFG = cmdutil.Pick(&used, "--cfg", !opts.unset.cfg, opts.CFG, has, r.CFG, def.cfg)
	opts.DenseBelow = cmdutil.Pick(&used, "--dense-below", !opts.unset.denseBelow, opts.DenseBelow, has, r.DenseBelow, def.denseBelow)
	if err := cmdutil.PickCoarse(&used, &opts.CoarseFrom, &opts.CoarseRho, !opts.unset.coarseFrom, !opts.unset.coarseRho, has, r); err != nil {
		return nil, err
	}
	if process == checkpoint.ProcessFlowMatching {
		opts.Shift = cmdutil.Pick(&used, "--shift", !opts.unset.shift, opts.Shift, has, r.Shift, def.shift)
	}
	opts.unset = unsetFlags{}
	switch {
	case opts.Steps > trainSteps:
		return nil, fmt.Errorf("sample: %s records %d sampling steps, want 1..%d (pass --steps)", opts.Checkpoint, opts.Steps, trainSteps)
	case opts.RhoUncondGiven && !(ddpm.Guidance{Scale: float32(opts.CFG)}).Enabled():
		return nil, &cmdutil.UsageError{Err: fmt.Errorf("--rho-uncond needs classifier-free guidance: %s records --cfg %g, which has no unconditional branch (pass --cfg)", opts.Checkpoint, opts.CFG)}
	}
	notes = []string{cmdutil.SettingsLine("sampling", used)}
	rhos := []float64{opts.Rho}
	if opts.RhoUncondGiven {
		rhos = append(rhos, opts.RhoUncond)
	}
	if w := cmdutil.RhoWarning(opts.Checkpoint, rhos, meta.TrainedRhos); w != "" {
		notes = append(notes, "warning: "+w)
	}
	return notes, nil
}

// printNotes writes resolveSampling's notes to stderr.
func printNotes(opts *Options, notes []string) {
	for _, n := range notes {
		fmt.Fprintln(opts.IO.Err, n)
	}
}

package recipes

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/dcdit/dcdit/params"
)

// Defaults shared by every stage kind, from the paper's hyper-parameter
// table ("Main hyperparameters for ImageNet DC-DiT training").
const (
	DefaultBatchSize    = 256    // global batch size
	DefaultLR           = 1e-4   // AdamW learning rate
	DefaultGradClip     = 1.0    // gradient clipping
	DefaultEMADecay     = 0.9999 // EMA decay (finetune, train)
	DefaultClassDropout = 0.1    // classifier-free dropout
	DefaultMultiBudget  = 5000   // multi-budget warm-up: 5K steps, no tail dropping
	DefaultTargetN      = 4.0    // target compression N
	DefaultRatioWeight  = 0.03   // ratio loss weight λ
	DefaultRatioBatch   = 16     // ratio-loss batch size
	DefaultSigma        = 1.0    // de-chunk smoothing σ
	DefaultWidthFactor  = 4      // encoder/decoder bottleneck D/4
)

// kindDefaults are the defaults that depend on a stage's kind.
type kindDefaults struct {
	loss             string
	trainable        []string
	frozen           []string
	ema              float64
	rho              []float64
	multiBudgetStart int
}

func defaultsFor(kind string, scaffold bool) kindDefaults {
	d := kindDefaults{loss: LossHybrid, trainable: []string{params.GroupAll}, frozen: []string{}, ema: DefaultEMADecay,
		rho: slices.Clone(PaperRho), multiBudgetStart: DefaultMultiBudget}
	switch kind {
	case KindDistill:
		// Grafting stage 1 (Chandrasegaran et al.): only the new
		// operators learn, against the frozen teacher, with L1 (the
		// released grafts), no EMA.
		d.loss, d.trainable, d.ema, d.rho, d.multiBudgetStart = LossL1, []string{params.GroupScaffold}, 0, []float64{0}, 0
	case KindFinetune:
		// Upcycling Z-Image (§4.4): timestep and conditioning embedders
		// stay frozen.
		d.frozen = []string{params.GroupEmbedders}
	case KindTrain:
	default:
		// An unknown kind is reported as such; neutral defaults keep it
		// from causing other problems.
		d.rho, d.multiBudgetStart = []float64{0}, 0
	}
	if !scaffold {
		d.rho, d.multiBudgetStart = []float64{0}, 0
		if kind == KindDistill {
			d.trainable = []string{params.GroupAll}
		}
	}
	return d
}

// defaulter fills values the file left out and records which.
type defaulter struct {
	has  map[string]bool
	mark map[string]bool
}

func setDefault[T any](d *defaulter, key string, p *T, v T) {
	if !d.has[key] {
		*p = v
		d.mark[key] = true
	}
}

func applyDefaults(r *Recipe, has map[string]bool, opts LoadOptions) {
	d := &defaulter{has: has, mark: r.defaults}
	name := strings.TrimSuffix(filepath.Base(r.File), filepath.Ext(r.File))
	setDefault(d, "name", &r.Name, name)
	setDefault(d, "description", &r.Description, "")
	setDefault(d, "seed", &r.Seed, 0)
	setDefault(d, "log_every", &r.LogEvery, 10)
	setDefault(d, "device", &r.Device, "cpu")
	setDefault(d, "precision", &r.Precision, "fp32")
	if r.Base != nil {
		setDefault(d, "base.num_heads", &r.Base.NumHeads, 0)
		setDefault(d, "base.latent_size", &r.Base.LatentSize, 0)
	}
	scaffold := r.Scaffold != nil

	if r.Model != nil {
		m := r.Model
		setDefault(d, "model.kind", &m.Kind, DefaultModelKind)
		defaultModelKeys(d, m)
		patch := 2
		if rules := rulesOf(m.Kind); rules != nil && m.Preset != "" {
			if p, ok := rules.ModelPreset(m.Preset); ok {
				setDefault(d, "model.depth", &m.Depth, p.Depth)
				setDefault(d, "model.hidden_size", &m.HiddenSize, p.Width)
				setDefault(d, "model.num_heads", &m.NumHeads, p.Heads)
				patch = p.Patch
			}
		}
		if scaffold {
			patch = 1 // positions on the latent grid, as the reference DC-DiT
		}
		// Set once: a second setDefault would overwrite the first.
		setDefault(d, "model.patch_size", &m.PatchSize, patch)
		setDefault(d, "model.in_channels", &m.InChannels, 4)
		setDefault(d, "model.input_size", &m.InputSize, 32)
	}
	if scaffold {
		s := r.Scaffold
		setDefault(d, "scaffold.target_n", &s.TargetN, DefaultTargetN)
		setDefault(d, "scaffold.encoder_blocks", &s.EncoderBlocks, 2)
		setDefault(d, "scaffold.decoder_blocks", &s.DecoderBlocks, 2)
		setDefault(d, "scaffold.width_factor", &s.WidthFactor, DefaultWidthFactor)
		setDefault(d, "scaffold.norm_groups", &s.NormGroups, 32)
		setDefault(d, "scaffold.sigma", &s.Sigma, DefaultSigma)
		setDefault(d, "scaffold.plug_back", &s.PlugBack, "nearest_2d")
		setDefault(d, "scaffold.backbone_norm", &s.BackboneNorm, "rmsnorm")
		setDefault(d, "scaffold.router.kind", &s.Router.Kind, "spatial_predictability")
		setDefault(d, "scaffold.router.init", &s.Router.Init, "official")
		setDefault(d, "scaffold.router.drop", &s.Router.Drop, "lowest")
		setDefault(d, "scaffold.encoder_init", &s.EncoderInit, "official")
		setDefault(d, "scaffold.patch_size", &s.PatchSize, 1)
		setDefault(d, "scaffold.head", &s.Head, "official")
		setDefault(d, "scaffold.encoder_norm", &s.EncoderNorm, "rmsnorm")
		setDefault(d, "scaffold.residual", &s.Residual, "official")
		setDefault(d, "scaffold.latent_skip", &s.LatentSkip, false)
		setDefault(d, "scaffold.cond_norm", &s.CondNorm, false)
		setDefault(d, "scaffold.token_embedder", &s.TokenEmbedder, false)
		setDefault(d, "scaffold.dropped_context", &s.DroppedContext, false)
		setDefault(d, "scaffold.chosen_embedding", &s.ChosenEmbedding, false)
		setDefault(d, "scaffold.router.dim_factor", &s.Router.DimFactor, 4)
		setDefault(d, "scaffold.router.groups", &s.Router.Groups, 8)
		setDefault(d, "scaffold.router.ratio_loss_weight", &s.Router.RatioLossWeight, DefaultRatioWeight)
		setDefault(d, "scaffold.router.ratio_batch_size", &s.Router.RatioBatchSize, DefaultRatioBatch)
	}

	setDefault(d, "diffusion.process", &r.Diffusion.Process, r.training().Process)
	setDefault(d, "diffusion.shift", &r.Diffusion.Shift, 3.0)
	setDefault(d, "diffusion.schedule", &r.Diffusion.Schedule, "linear")
	setDefault(d, "diffusion.steps", &r.Diffusion.Steps, 1000)

	source := SourceShapes
	if r.Base != nil {
		source = SourceTeacher
	}
	setDefault(d, "data.source", &r.Data.Source, source)
	setDefault(d, "data.path", &r.Data.Path, "")
	setDefault(d, "data.latents_key", &r.Data.LatentsKey, "latents")
	setDefault(d, "data.labels_key", &r.Data.LabelsKey, "labels")
	setDefault(d, "data.samples", &r.Data.Samples, 1024)
	setDefault(d, "data.sampling_steps", &r.Data.SamplingSteps, 250)
	setDefault(d, "data.cfg", &r.Data.CFG, 1.0)
	setDefault(d, "data.classes", &r.Data.Classes, []int{})
	setDefault(d, "data.captions", &r.Data.Captions, r.training().Captions)
	setDefault(d, "data.caption_table_seed", &r.Data.CaptionTableSeed, 0)
	setDefault(d, "data.prompts", &r.Data.Prompts, "")

	counts := map[string]int{}
	for _, st := range r.Stages {
		counts[st.Kind]++
	}
	seen := map[string]int{}
	for i := range r.Stages {
		st := &r.Stages[i]
		k := func(name string) string { return indexKey("stage", i) + "." + name }
		kd := defaultsFor(st.Kind, scaffold)
		seen[st.Kind]++
		name := st.Kind
		if counts[st.Kind] > 1 {
			name = fmt.Sprintf("%s-%d", st.Kind, seen[st.Kind])
		}
		setDefault(d, k("name"), &st.Name, name)
		setDefault(d, k("batch_size"), &st.BatchSize, DefaultBatchSize)
		setDefault(d, k("lr"), &st.LR, DefaultLR)
		setDefault(d, k("lr_schedule"), &st.LRSchedule, ScheduleConstant)
		setDefault(d, k("min_lr"), &st.MinLR, 0)
		setDefault(d, k("warmup_steps"), &st.WarmupSteps, 0)
		setDefault(d, k("loss"), &st.Loss, kd.loss)
		setDefault(d, k("timestep_weight_cap"), &st.TimestepWeightCap, 0)
		setDefault(d, k("guided_scale"), &st.GuidedScale, 0)
		setDefault(d, k("router_target_weight"), &st.RouterTargetWeight, 0)
		setDefault(d, k("router_targets"), &st.RouterTargets, "edges")
		setDefault(d, k("router_gate"), &st.RouterGate, "natural")
		setDefault(d, k("dydit_lambda"), &st.DyDiTLambda, 0.0)
		setDefault(d, k("dydit_weight"), &st.DyDiTWeight, 1.0)
		setDefault(d, k("dydit_lr_scale"), &st.DyDiTLRScale, 1.0)
		setDefault(d, k("p2_gamma"), &st.P2Gamma, 0)
		setDefault(d, k("p2_k"), &st.P2K, 1)
		if st.Kind == KindDistill {
			setDefault(d, k("target"), &st.Target, "output")
		} else {
			setDefault(d, k("target"), &st.Target, "")
		}
		setDefault(d, k("trainable"), &st.Trainable, kd.trainable)
		setDefault(d, k("frozen"), &st.Frozen, kd.frozen)
		setDefault(d, k("rho"), &st.Rho, kd.rho)
		mbs := kd.multiBudgetStart
		if d.has[k("rho")] && len(st.Rho) <= 1 {
			mbs = 0 // a single budget has no warm-up to speak of
		}
		setDefault(d, k("multi_budget_start"), &st.MultiBudgetStart, mbs)
		setDefault(d, k("dense_fraction"), &st.DenseFraction, 0.0)
		setDefault(d, k("dense_below"), &st.DenseBelow, 0.0)
		setDefault(d, k("coarse_from"), &st.CoarseFrom, 0.0)
		setDefault(d, k("coarse_rho"), &st.CoarseRho, 0.0)
		setDefault(d, k("lookback"), &st.Lookback, 0.0)
		setDefault(d, k("lookback_twins"), &st.LookbackTwins, false)
		setDefault(d, k("lookback_spacing"), &st.LookbackSpacing, 0.0)
		ratio := 0.0
		if scaffold {
			ratio = r.Scaffold.Router.RatioLossWeight
		}
		setDefault(d, k("ratio_loss_weight"), &st.RatioLossWeight, ratio)
		setDefault(d, k("class_dropout"), &st.ClassDropout, DefaultClassDropout)
		setDefault(d, k("grad_clip"), &st.GradClip, DefaultGradClip)
		setDefault(d, k("router_lr_scale"), &st.RouterLRScale, 1.0)
		setDefault(d, k("class_embedder_lr_scale"), &st.ClassEmbedderLRScale, 1.0)
		ema := kd.ema
		if i < len(r.Stages)-1 && r.Eval.Every == 0 {
			// Only the last stage's EMA becomes the model (the next stage
			// starts from the trained weights): an earlier one would be
			// computed and dropped.
			ema = 0
		}
		setDefault(d, k("ema_decay"), &st.EMADecay, ema)
		setDefault(d, k("weight_decay"), &st.WeightDecay, 0)
		setDefault(d, k("betas"), &st.Betas, []float64{0.9, 0.999})
		setDefault(d, k("eps"), &st.Eps, 1e-8)
	}

	setDefault(d, "save.dir", &r.Save.Dir, filepath.Join("runs", r.Name))
	if !d.mark["save.dir"] && opts.OutDir == "" && !filepath.IsAbs(r.Save.Dir) {
		// A path written in the recipe is relative to its folder; the
		// default and --out are relative to the current folder.
		r.Save.Dir = filepath.Join(r.Dir, r.Save.Dir)
	}
	setDefault(d, "save.every", &r.Save.Every, 1000)
	setDefault(d, "save.keep", &r.Save.Keep, 3)
	setDefault(d, "save.dtype", &r.Save.DType, "f32")

	evalRho, lite := []float64{0}, []float64{}
	if scaffold {
		evalRho, lite = slices.Clone(PaperRho), []float64{0, 0.9}
	}
	setDefault(d, "eval.rho", &r.Eval.Rho, evalRho)
	setDefault(d, "eval.lite_cfg", &r.Eval.LiteCFG, lite)
	setDefault(d, "eval.lite_cfg_scale", &r.Eval.LiteCFGScale, 1.25)
	setDefault(d, "eval.dense_below", &r.Eval.DenseBelow, 0.0)
	setDefault(d, "eval.coarse_from", &r.Eval.CoarseFrom, 0.0)
	setDefault(d, "eval.coarse_rho", &r.Eval.CoarseRho, 0.0)
	setDefault(d, "eval.cfg", &r.Eval.CFG, 1.0)
	setDefault(d, "eval.held_out", &r.Eval.HeldOut, 64)
	setDefault(d, "eval.samples", &r.Eval.Samples, 16)
	setDefault(d, "eval.sampling_steps", &r.Eval.SamplingSteps, 250)
	setDefault(d, "eval.boundary_map_timesteps", &r.Eval.BoundaryMapTimesteps, []int{999, 500, 100})
	setDefault(d, "eval.every", &r.Eval.Every, 0)
	setDefault(d, "eval.seed", &r.Eval.Seed, r.Seed)
	setDefault(d, "eval.feature_net", &r.Eval.FeatureNet, "")
	setDefault(d, "eval.random_router", &r.Eval.RandomRouter, true)
	setDefault(d, "eval.spread_random", &r.Eval.SpreadRandom, false)
	setDefault(d, "eval.lookback", &r.Eval.Lookback, false)
	setDefault(d, "eval.lookback_spacing", &r.Eval.LookbackSpacing, 0.0)
	setDefault(d, "eval.dense_teacher", &r.Eval.DenseTeacher, false)
	setDefault(d, "eval.vae", &r.Eval.VAE, "")
}

// BasePath returns base.path resolved against the recipe's folder ("" when
// the recipe has no base).
func (r *Recipe) BasePath() string {
	if r.Base == nil || r.Base.Path == "" {
		return ""
	}
	return r.resolve(r.Base.Path)
}

// DataPath returns data.path resolved against the recipe's folder, or for
// teacher data without a path, the cache file in the run folder.
func (r *Recipe) DataPath() string {
	if r.Data.Path == "" {
		if r.Data.Source == SourceTeacher {
			return filepath.Join(r.Save.Dir, "data.safetensors")
		}
		return ""
	}
	return r.resolve(r.Data.Path)
}

// PromptsPath returns data.prompts resolved against the recipe's folder,
// or "" without prompts.
func (r *Recipe) PromptsPath() string {
	if r.Data.Prompts == "" {
		return ""
	}
	return r.resolve(r.Data.Prompts)
}

func (r *Recipe) resolve(p string) string {
	if filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(r.Dir, p)
}

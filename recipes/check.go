package recipes

import (
	"fmt"
	"math"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/dcdit/dcdit/family"
)

var nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)

// check validates the values of a defaulted recipe without reading any
// checkpoint (only whether the files it names exist).
func check(p *problems, r *Recipe) {
	if !nameRE.MatchString(r.Name) {
		p.bad("name", r.Name, "a name of letters, digits, '.', '_' and '-' (it names the run folder)")
	}
	positive(p, "log_every", r.LogEvery)
	if oneOf(p, "device", r.Device, "cpu", "cuda") && oneOf(p, "precision", r.Precision, "fp32", "tf32") &&
		r.Device == "cpu" && r.Precision != "fp32" {
		p.bad("precision", r.Precision, `"fp32" on the CPU ("tf32" needs device = "cuda")`)
	}

	switch {
	case r.Base != nil && r.Model != nil:
		p.add("model", "found both [base] and [model], expected one: [base] to upcycle a checkpoint, [model] to train from scratch")
	case r.Base == nil && r.Model == nil:
		p.add("", "found neither [base] nor [model], expected one: [base] with the checkpoint to upcycle, or [model] sizing a backbone to train from scratch")
	}
	if r.Base != nil {
		checkBase(p, r)
	}
	if r.Model != nil {
		checkModel(p, r.Model)
	}
	if r.Scaffold != nil {
		checkScaffold(p, r.Scaffold)
	}
	oneOf(p, "diffusion.schedule", r.Diffusion.Schedule, "linear")
	positive(p, "diffusion.steps", r.Diffusion.Steps)
	checkTraining(p, r)
	checkData(p, r)
	checkStages(p, r)

	atLeast(p, "save.every", r.Save.Every, 0)
	positive(p, "save.keep", r.Save.Keep)
	oneOf(p, "save.dtype", r.Save.DType, "f32", "bf16", "f16")
	checkEval(p, r)
	checkIgnored(p, r)
}

func checkBase(p *problems, r *Recipe) {
	if r.Base.Path == "" {
		p.add("base.path", "missing, expected the path of the checkpoint to upcycle")
	} else if _, err := os.Stat(r.BasePath()); err != nil {
		where := r.Base.Path
		if r.BasePath() != r.Base.Path {
			where = fmt.Sprintf("%s (resolved against the recipe's folder: %s)", r.Base.Path, r.BasePath())
		}
		if os.IsNotExist(err) {
			p.add("base.path", "the base checkpoint %s does not exist; expected a checkpoint file or folder", where)
		} else {
			p.add("base.path", "cannot open the base checkpoint %s: %v", where, err)
		}
	}
	atLeast(p, "base.num_heads", r.Base.NumHeads, 0)
	atLeast(p, "base.latent_size", r.Base.LatentSize, 0)
}

func checkModel(p *problems, m *Model) {
	missing := "missing, expected an integer ≥ 1"
	if reads(rulesOf(m.Kind), "preset") {
		missing += " (or a preset)"
	}
	for _, f := range []struct {
		key string
		v   int
	}{
		{"model.depth", m.Depth}, {"model.hidden_size", m.HiddenSize}, {"model.num_heads", m.NumHeads},
		{"model.patch_size", m.PatchSize}, {"model.in_channels", m.InChannels}, {"model.input_size", m.InputSize},
	} {
		if f.v < 1 {
			if f.v == 0 && m.Preset == "" {
				p.add(f.key, "%s", missing)
			} else {
				p.bad(f.key, f.v, "an integer ≥ 1")
			}
		}
	}
	if m.HiddenSize > 0 && m.NumHeads > 0 && m.HiddenSize%m.NumHeads != 0 {
		p.bad("model.num_heads", m.NumHeads, "a divisor of hidden_size = %d", m.HiddenSize)
	}
	if m.PatchSize > 0 && m.InputSize > 0 && m.InputSize%m.PatchSize != 0 {
		p.bad("model.input_size", m.InputSize, "a multiple of patch_size = %d", m.PatchSize)
	}
}

func checkScaffold(p *problems, s *Scaffold) {
	if !(s.TargetN > 1) {
		p.bad("scaffold.target_n", s.TargetN, "a number > 1 (the target downsampling factor N)")
	}
	positive(p, "scaffold.encoder_blocks", s.EncoderBlocks)
	positive(p, "scaffold.decoder_blocks", s.DecoderBlocks)
	positive(p, "scaffold.width_factor", s.WidthFactor)
	positive(p, "scaffold.norm_groups", s.NormGroups)
	if !(s.Sigma > 0) {
		p.bad("scaffold.sigma", s.Sigma, "a number > 0")
	}
	oneOf(p, "scaffold.plug_back", s.PlugBack, "nearest_2d")
	oneOf(p, "scaffold.backbone_norm", s.BackboneNorm, "rmsnorm", "none")
	oneOf(p, "scaffold.router.kind", s.Router.Kind, "spatial_predictability")
	oneOf(p, "scaffold.router.init", s.Router.Init, "official", "predictability")
	oneOf(p, "scaffold.router.drop", s.Router.Drop, "lowest", "spread")
	oneOf(p, "scaffold.encoder_init", s.EncoderInit, "official", "patch")
	oneOf(p, "scaffold.head", s.Head, "official", "wide")
	oneOf(p, "scaffold.encoder_norm", s.EncoderNorm, "rmsnorm", "none")
	oneOf(p, "scaffold.residual", s.Residual, "official", "relative")
	positive(p, "scaffold.patch_size", s.PatchSize)
	positive(p, "scaffold.router.dim_factor", s.Router.DimFactor)
	positive(p, "scaffold.router.groups", s.Router.Groups)
	if !(s.Router.RatioLossWeight >= 0) {
		p.bad("scaffold.router.ratio_loss_weight", s.Router.RatioLossWeight, "a number ≥ 0")
	}
	atLeast(p, "scaffold.router.ratio_batch_size", s.Router.RatioBatchSize, 0)
}

func checkData(p *problems, r *Recipe) {
	d := &r.Data
	if !oneOf(p, "data.source", d.Source, SourceTeacher, SourceFile, SourceShapes) {
		return
	}
	switch d.Source {
	case SourceTeacher:
		if r.Base == nil {
			p.add("data.source", "found \"teacher\" without [base], expected a teacher checkpoint in [base] (or source \"file\" or \"shapes\")")
		}
	case SourceFile:
		if d.Path == "" {
			p.add("data.path", "missing, expected the safetensors file of latents and labels (source \"file\")")
		} else if _, err := os.Stat(r.DataPath()); err != nil {
			p.add("data.path", "the data file %s does not exist (resolved: %s)", d.Path, r.DataPath())
		}
	}
	if d.LatentsKey == "" {
		p.bad("data.latents_key", d.LatentsKey, "a tensor name")
	}
	if d.LabelsKey == "" {
		p.bad("data.labels_key", d.LabelsKey, "a tensor name")
	}
	positive(p, "data.samples", d.Samples)
	if d.Prompts != "" {
		switch {
		case !r.flowMatchingBase():
			p.add("data.prompts", "found without a [base] trained with flow matching (diffusion.process = %q), expected it only when a caption-conditioned teacher draws the samples for the prompts", ProcessFlowMatching)
		default:
			if _, err := os.Stat(r.PromptsPath()); err != nil {
				p.add("data.prompts", "the prompts file %s does not exist (resolved: %s)", d.Prompts, r.PromptsPath())
			}
		}
	}
	if d.Source == SourceTeacher {
		if d.SamplingSteps < 1 || d.SamplingSteps > r.Diffusion.Steps {
			p.bad("data.sampling_steps", d.SamplingSteps, "an integer in 1..diffusion.steps = %d", r.Diffusion.Steps)
		}
		if !(d.CFG >= 1) {
			p.bad("data.cfg", d.CFG, "a guidance scale ≥ 1 (1: none)")
		}
	}
	for i, c := range d.Classes {
		if c < 0 {
			p.bad(indexKey("data.classes", i), c, "a class label ≥ 0")
		}
		if slices.Index(d.Classes, c) < i {
			p.bad(indexKey("data.classes", i), c, "unique class labels")
		}
	}
}

func checkStages(p *problems, r *Recipe) {
	if len(r.Stages) == 0 {
		p.add("", "found no [[stage]], expected at least one (kind \"distill\", \"finetune\" or \"train\")")
		return
	}
	names := map[string]int{}
	for i := range r.Stages {
		st := &r.Stages[i]
		k := func(name string) string { return indexKey("stage", i) + "." + name }
		if prev, ok := names[st.Name]; ok {
			p.add(k("name"), "%q is also the name of stage[%d], expected unique stage names", st.Name, prev)
		}
		names[st.Name] = i
		if !nameRE.MatchString(st.Name) {
			p.bad(k("name"), st.Name, "a name of letters, digits, '.', '_' and '-'")
		}
		knownKind := false
		if st.Kind == "" {
			p.add(k("kind"), "missing, expected \"distill\", \"finetune\" or \"train\"")
		} else {
			knownKind = oneOf(p, k("kind"), st.Kind, KindDistill, KindFinetune, KindTrain)
		}
		if st.Kind == KindDistill {
			if r.Base == nil {
				p.add(k("kind"), "found \"distill\" without [base], expected a teacher checkpoint in [base]")
			}
			if r.Scaffold == nil {
				p.add(k("kind"), "found \"distill\" without [scaffold], expected a DC scaffold to graft onto the teacher")
			}
		}
		if st.Steps == 0 && !p.lines.has(k("steps")) {
			p.add(k("steps"), "missing, expected the number of steps (an integer ≥ 1)")
		} else {
			positive(p, k("steps"), st.Steps)
		}
		positive(p, k("batch_size"), st.BatchSize)
		if !(st.LR > 0) {
			p.bad(k("lr"), st.LR, "a learning rate > 0")
		}
		oneOf(p, k("lr_schedule"), st.LRSchedule, ScheduleConstant, ScheduleCosine, ScheduleLinear)
		if !(st.MinLR >= 0 && st.MinLR <= st.LR) {
			p.bad(k("min_lr"), st.MinLR, "a number in [0, lr = %g]", st.LR)
		}
		if st.WarmupSteps < 0 || (st.Steps > 0 && st.WarmupSteps > st.Steps) {
			p.bad(k("warmup_steps"), st.WarmupSteps, "an integer in 0..steps = %d", st.Steps)
		}
		switch {
		case !knownKind: // the loss depends on the kind
		case st.Kind == KindDistill:
			oneOf(p, k("loss"), st.Loss, LossL1, LossL2)
			oneOf(p, k("target"), st.Target, "output", "eps")
			if !(st.TimestepWeightCap >= 0) || math.IsInf(st.TimestepWeightCap, 0) {
				p.bad(k("timestep_weight_cap"), st.TimestepWeightCap, "a finite number ≥ 0 (0: uniform)")
			}
			if !(st.GuidedScale >= 0) || math.IsInf(st.GuidedScale, 0) {
				p.bad(k("guided_scale"), st.GuidedScale, "a finite guidance scale ≥ 0 (0: off)")
			} else if st.GuidedScale > 0 && st.BatchSize%2 != 0 {
				p.bad(k("batch_size"), st.BatchSize, "an even number with guided_scale (each sample is paired with its unconditional twin)")
			}
			if !(st.RouterTargetWeight >= 0) || math.IsInf(st.RouterTargetWeight, 0) {
				p.bad(k("router_target_weight"), st.RouterTargetWeight, "a finite weight ≥ 0 (0: off)")
			} else if st.RouterTargetWeight > 0 && r.Scaffold == nil {
				p.bad(k("router_target_weight"), st.RouterTargetWeight, "0 without [scaffold] (a fixed-patch DiT has no router)")
			}
			if oneOf(p, k("router_targets"), st.RouterTargets, "edges", "spread") && st.RouterTargets != "edges" && !(st.RouterTargetWeight > 0) {
				p.add(k("router_targets"), "found %q with router_target_weight 0, expected a weight > 0 to fit them with", st.RouterTargets)
			}
			for _, key := range []string{"p2_gamma", "p2_k"} {
				if p.lines.has(k(key)) {
					p.add(k(key), "found in a distill stage, expected P2 weighting only in stages with the hybrid loss (train, finetune)")
				}
			}
		default:
			if st.TimestepWeightCap != 0 {
				p.add(k("timestep_weight_cap"), "found %v in a %s stage, expected it only in distill stages", st.TimestepWeightCap, st.Kind)
			}
			if st.GuidedScale != 0 {
				p.add(k("guided_scale"), "found %v in a %s stage, expected it only in distill stages", st.GuidedScale, st.Kind)
			}
			if st.RouterTargetWeight != 0 {
				p.add(k("router_target_weight"), "found %v in a %s stage, expected it only in distill stages (the targets are the teacher's)", st.RouterTargetWeight, st.Kind)
			}
			if p.lines.has(k("router_targets")) {
				p.add(k("router_targets"), "found in a %s stage, expected it only in distill stages (the targets are the teacher's)", st.Kind)
			}
			if !(st.P2Gamma >= 0) || math.IsInf(st.P2Gamma, 0) {
				p.bad(k("p2_gamma"), st.P2Gamma, "a finite number ≥ 0 (0: uniform)")
			}
			if !(st.P2K > 0) || math.IsInf(st.P2K, 0) {
				p.bad(k("p2_k"), st.P2K, "a finite number > 0")
			} else if st.P2Gamma == 0 && p.lines.has(k("p2_k")) {
				p.add(k("p2_k"), "found %v with p2_gamma = 0, expected p2_gamma > 0 (k shapes the P2 weights, which are off)", st.P2K)
			}
			oneOf(p, k("loss"), st.Loss, LossHybrid)
			if st.Target != "" {
				p.add(k("target"), "found %q in a %s stage, expected target only in distill stages", st.Target, st.Kind)
			}
		}
		if len(st.Trainable) == 0 {
			p.add(k("trainable"), "found an empty list, expected at least one group or pattern")
		}
		for j, s := range st.Trainable {
			if msg := checkSelector(s); msg != "" {
				p.add(indexKey(k("trainable"), j), "found %q, %s", s, msg)
			}
		}
		for j, s := range st.Frozen {
			if msg := checkSelector(s); msg != "" {
				p.add(indexKey(k("frozen"), j), "found %q, %s", s, msg)
			}
		}
		if checkRho(p, k("rho"), st.Rho, true) {
			if r.Scaffold == nil && !slices.Equal(st.Rho, []float64{0}) {
				p.bad(k("rho"), st.Rho, "[0.0] without [scaffold] (tail dropping needs a router)")
			}
		}
		if st.MultiBudgetStart < 0 {
			p.bad(k("multi_budget_start"), st.MultiBudgetStart, "an integer ≥ 0")
		} else if len(st.Rho) > 1 && st.Steps > 0 && st.MultiBudgetStart >= st.Steps {
			p.add(k("multi_budget_start"), "found %d (%s), expected fewer than steps = %d: multi-budget training would never start; lower it, or set rho = [0.0] to train at the natural budget only",
				st.MultiBudgetStart, defaultNote(r, k("multi_budget_start")), st.Steps)
		}
		if !(st.DenseFraction >= 0 && st.DenseFraction < 1) {
			p.bad(k("dense_fraction"), st.DenseFraction, "a number in [0, 1) (the share of steps that keep every cell)")
		} else if r.Scaffold == nil && st.DenseFraction != 0 {
			p.bad(k("dense_fraction"), st.DenseFraction, "0 without [scaffold] (every step of a plain DiT is dense)")
		}
		if !(st.DenseBelow >= 0 && st.DenseBelow <= float64(r.Diffusion.Steps)) {
			p.bad(k("dense_below"), st.DenseBelow, "a timestep in 0..%d (diffusion.steps)", r.Diffusion.Steps)
		} else if r.Scaffold == nil && st.DenseBelow != 0 {
			p.bad(k("dense_below"), st.DenseBelow, "0 without [scaffold] (every step of a plain DiT is dense)")
		}
		checkCoarse(p, r, k(""), "", st.CoarseFrom, st.CoarseRho, st.DenseBelow)
		switch {
		case !(st.Lookback >= 0 && st.Lookback <= 1):
			p.bad(k("lookback"), st.Lookback, "a share in [0, 1]")
		case st.Lookback == 0:
		case r.Scaffold == nil:
			p.bad(k("lookback"), st.Lookback, "0 without [scaffold] (a plain DiT keeps every cell)")
		case st.Kind != KindDistill || (st.Loss != "l1" && st.Loss != "l2"):
			p.add(k("lookback"), "found %g, expected 0 in a %s stage with loss %q: lookback ranks the cells on the teacher's clean estimate, which only distillation (loss l1 or l2) has", st.Lookback, st.Kind, st.Loss)
		}
		checkSpacing(p, k("lookback_spacing"), st.LookbackSpacing, st.Lookback > 0, "lookback > 0")
		switch {
		case !st.LookbackTwins:
		case !(st.Lookback > 0):
			p.add(k("lookback_twins"), "found true with lookback %g, expected lookback > 0 (the twins are lookback's samples)", st.Lookback)
		case st.GuidedScale > 0:
			p.add(k("lookback_twins"), "found true with guided_scale %g, expected one of them: both pair the batch", st.GuidedScale)
		}
		if !(st.RatioLossWeight >= 0) {
			p.bad(k("ratio_loss_weight"), st.RatioLossWeight, "a number ≥ 0")
		} else if r.Scaffold == nil && st.RatioLossWeight != 0 {
			p.bad(k("ratio_loss_weight"), st.RatioLossWeight, "0 without [scaffold] (there is no router)")
		}
		if r.Scaffold != nil && r.Scaffold.Router.RatioBatchSize > 0 && st.BatchSize > 0 && st.BatchSize%r.Scaffold.Router.RatioBatchSize != 0 {
			p.bad(k("batch_size"), st.BatchSize, "a multiple of scaffold.router.ratio_batch_size = %d (the ratio loss groups the batch)", r.Scaffold.Router.RatioBatchSize)
		}
		if oneOf(p, k("router_gate"), st.RouterGate, "natural", "kept") && st.RouterGate != "natural" && r.Scaffold == nil {
			p.add(k("router_gate"), "found %q, expected \"natural\" without [scaffold] (the model has no router)", st.RouterGate)
		}
		checkDyDiT(p, r, st, k)
		if !(st.ClassDropout >= 0 && st.ClassDropout < 1) {
			p.bad(k("class_dropout"), st.ClassDropout, "a probability in [0, 1)")
		}
		if !(st.GradClip >= 0) {
			p.bad(k("grad_clip"), st.GradClip, "a norm ≥ 0 (0: off)")
		}
		if !(st.RouterLRScale > 0) || math.IsInf(st.RouterLRScale, 0) {
			p.bad(k("router_lr_scale"), st.RouterLRScale, "a finite factor > 0")
		} else if st.RouterLRScale != 1 && r.Scaffold == nil {
			p.bad(k("router_lr_scale"), st.RouterLRScale, "1: the model has no router without a [scaffold]")
		}
		if !(st.ClassEmbedderLRScale > 0) || math.IsInf(st.ClassEmbedderLRScale, 0) {
			p.bad(k("class_embedder_lr_scale"), st.ClassEmbedderLRScale, "a finite factor > 0")
		}
		if !(st.EMADecay >= 0 && st.EMADecay < 1) {
			p.bad(k("ema_decay"), st.EMADecay, "a decay in [0, 1) (0: off)")
		}
		if !(st.WeightDecay >= 0) {
			p.bad(k("weight_decay"), st.WeightDecay, "a number ≥ 0")
		}
		if len(st.Betas) != 2 {
			p.bad(k("betas"), st.Betas, "two numbers [β₁, β₂]")
		} else {
			for j, b := range st.Betas {
				if !(b >= 0 && b < 1) {
					p.bad(indexKey(k("betas"), j), b, "a number in [0, 1)")
				}
			}
		}
		if !(st.Eps > 0) {
			p.bad(k("eps"), st.Eps, "a number > 0")
		}
	}
}

// checkRho validates a set of tail-drop fractions; it reports whether the
// set is well formed.
func checkRho(p *problems, key string, rho []float64, needZero bool) bool {
	ok := true
	if len(rho) == 0 {
		p.add(key, "found an empty list, expected tail-drop fractions 0 ≤ ρ < 1 such as [0.0, 0.2, 0.4]")
		return false
	}
	for i, x := range rho {
		ek := indexKey(key, i)
		switch {
		case !(x >= 0 && x < 1):
			p.bad(ek, x, "a tail-drop fraction 0 ≤ ρ < 1")
			ok = false
		case i > 0 && x == rho[i-1]:
			p.bad(ek, x, "unique values (%s appears twice)", show(x))
			ok = false
		case i > 0 && x < rho[i-1]:
			p.bad(ek, x, "values in increasing order (it follows %s)", show(rho[i-1]))
			ok = false
		}
	}
	if ok && needZero && rho[0] != 0 {
		p.bad(key, rho, "a set including 0.0, the natural budget (paper §3.5)")
		ok = false
	}
	return ok
}

func checkEval(p *problems, r *Recipe) {
	e := &r.Eval
	if checkRho(p, "eval.rho", e.Rho, false) && r.Scaffold == nil && !slices.Equal(e.Rho, []float64{0}) {
		p.bad("eval.rho", e.Rho, "[0.0] without [scaffold]")
	}
	switch {
	case len(e.LiteCFG) == 0:
	case r.Scaffold == nil:
		p.bad("eval.lite_cfg", e.LiteCFG, "[] without [scaffold] (Lite-CFG needs tail dropping)")
	case len(e.LiteCFG) != 2:
		p.bad("eval.lite_cfg", e.LiteCFG, "a pair [conditional ρ, unconditional ρ] such as [0.0, 0.9]")
	default:
		for i, x := range e.LiteCFG {
			if !(x >= 0 && x < 1) {
				p.bad(indexKey("eval.lite_cfg", i), x, "a tail-drop fraction 0 ≤ ρ < 1")
			}
		}
		if !(e.LiteCFGScale > 1) {
			p.bad("eval.lite_cfg_scale", e.LiteCFGScale, "a guidance scale > 1 (Lite-CFG guides)")
		}
	}
	if !(e.CFG >= 1) {
		p.bad("eval.cfg", e.CFG, "a guidance scale ≥ 1 (1: none)")
	}
	if !(e.DenseBelow >= 0 && e.DenseBelow <= float64(r.Diffusion.Steps)) {
		p.bad("eval.dense_below", e.DenseBelow, "a timestep in 0..%d (diffusion.steps)", r.Diffusion.Steps)
	}
	checkCoarse(p, r, "eval.", "eval.", e.CoarseFrom, e.CoarseRho, e.DenseBelow)
	if e.SpreadRandom && !e.RandomRouter {
		p.bad("eval.spread_random", e.SpreadRandom, "false without eval.random_router (it is the random router kept apart)")
	}
	checkSpacing(p, "eval.lookback_spacing", e.LookbackSpacing, e.Lookback, "eval.lookback")
	if e.DenseTeacher && (r.Scaffold == nil || r.Scaffold.Head != "wide") {
		p.bad("eval.dense_teacher", e.DenseTeacher, `false without scaffold.head = "wide" (the dense steps run the wide head)`)
	}
	atLeast(p, "eval.held_out", e.HeldOut, 0)
	atLeast(p, "eval.samples", e.Samples, 0)
	if e.SamplingSteps < 1 || e.SamplingSteps > r.Diffusion.Steps {
		p.bad("eval.sampling_steps", e.SamplingSteps, "an integer in 1..diffusion.steps = %d", r.Diffusion.Steps)
	}
	for i, t := range e.BoundaryMapTimesteps {
		if t < 0 || t >= r.Diffusion.Steps {
			p.bad(indexKey("eval.boundary_map_timesteps", i), t, "a timestep in 0..%d", r.Diffusion.Steps-1)
		}
	}
	atLeast(p, "eval.every", e.Every, 0)
	if e.FeatureNet != "" {
		if _, err := os.Stat(r.FeatureNetPath()); err != nil {
			p.add("eval.feature_net", "the feature network %s does not exist (resolved: %s)", e.FeatureNet, r.FeatureNetPath())
		}
	}
	if e.VAE != "" {
		if _, err := os.Stat(r.VAEPath()); err != nil {
			p.add("eval.vae", "the VAE %s does not exist (resolved: %s)", e.VAE, r.VAEPath())
		}
	}
}

// defaultNote says whether a value came from the file or a default.
func defaultNote(r *Recipe, key string) string {
	if r.defaults[key] {
		return "the default"
	}
	return "as written"
}

func positive(p *problems, key string, v int) { atLeast(p, key, v, 1) }

func atLeast(p *problems, key string, v, lo int) {
	if v < lo {
		p.bad(key, v, "an integer ≥ %d", lo)
	}
}

// oneOf reports v unless it is one of choices; it reports whether v is.
func oneOf(p *problems, key, v string, choices ...string) bool {
	if slices.Contains(choices, v) {
		return true
	}
	q := make([]string, len(choices))
	for i, c := range choices {
		q[i] = fmt.Sprintf("%q", c)
	}
	msg := "one of " + strings.Join(q, ", ")
	if len(choices) == 1 {
		msg = q[0] + " (the only one supported)"
	}
	if c := closest(v, choices); c != "" && v != "" {
		msg += fmt.Sprintf(" (did you mean %q?)", c)
	}
	p.bad(key, v, "%s", msg)
	return false
}

// checkIgnored refuses settings written in the file that the run would
// accept and then not use, so that a recipe never says more than what
// runs: data settings of another source, a decay floor without a decay,
// a multi-budget warm-up without budgets to draw, an EMA that no one
// reads, and evaluation settings of a run that is not evaluated.
func checkIgnored(p *problems, r *Recipe) {
	written := func(key string) bool { return !r.defaults[key] && (p.lines == nil || p.lines.has(key)) }
	d := &r.Data
	bySource := []struct {
		key    string
		source []string
		why    string
	}{
		{"data.path", []string{SourceFile, SourceTeacher}, "procedural data has no file"},
		{"data.latents_key", []string{SourceFile}, "only a data file has tensors to name"},
		{"data.labels_key", []string{SourceFile}, "only a data file has tensors to name"},
		{"data.samples", []string{SourceTeacher, SourceShapes}, "a data file has as many samples as it holds"},
		{"data.sampling_steps", []string{SourceTeacher}, "only the teacher samples"},
		{"data.cfg", []string{SourceTeacher}, "only the teacher samples"},
		{"data.classes", []string{SourceTeacher}, "only the teacher's samples take classes"},
		{"data.prompts", []string{SourceTeacher}, "only the teacher samples for prompts"},
	}
	for _, b := range bySource {
		if written(b.key) && !slices.Contains(b.source, d.Source) {
			p.add(b.key, "found in a recipe with data.source = %q, expected it only with source %s: %s",
				d.Source, quoteJoin(b.source), b.why)
		}
	}
	for i := range r.Stages {
		st := &r.Stages[i]
		k := func(name string) string { return indexKey("stage", i) + "." + name }
		if written(k("min_lr")) && st.LRSchedule == ScheduleConstant {
			p.add(k("min_lr"), "found with lr_schedule = %q, expected min_lr only with \"cosine\" or \"linear\" (a constant rate never reaches it)", st.LRSchedule)
		}
		if written(k("multi_budget_start")) && len(st.Rho) == 1 && st.MultiBudgetStart > 0 {
			p.add(k("multi_budget_start"), "found %d with rho = %s, expected it only with more than one ρ to draw from (the stage trains at ρ = %s throughout)",
				st.MultiBudgetStart, show(st.Rho), show(st.Rho[0]))
		}
		if written(k("ema_decay")) && st.EMADecay > 0 && i < len(r.Stages)-1 && r.Eval.Every == 0 {
			p.add(k("ema_decay"), "found %s in stage %d of %d, expected 0: the next stage starts from the trained weights, so only the last stage's EMA is used (or set eval.every, which evaluates it)",
				show(st.EMADecay), i+1, len(r.Stages))
		}
	}
	evaluated := r.Base != nil && r.Scaffold != nil
	for _, s := range r.Settings() {
		if !strings.HasPrefix(s.Key, "eval.") || !written(s.Key) {
			continue
		}
		switch {
		case !evaluated:
			p.add(s.Key, "found in a recipe without %s, expected no [eval] settings: only a DC model ([scaffold]) upcycled from a [base] teacher is evaluated", missingForEval(r))
		case s.Key == "eval.lite_cfg_scale" && len(r.Eval.LiteCFG) == 0:
			p.add(s.Key, "found with an empty eval.lite_cfg, expected it only with a Lite-CFG pair to guide")
		}
	}
}

func missingForEval(r *Recipe) string {
	switch {
	case r.Base == nil && r.Scaffold == nil:
		return "[base] and [scaffold]"
	case r.Base == nil:
		return "[base]"
	}
	return "[scaffold]"
}

func quoteJoin(v []string) string {
	q := make([]string, len(v))
	for i, s := range v {
		q[i] = strconv.Quote(s)
	}
	return strings.Join(q, " or ")
}

// checkTraining checks what the model trains with: the [model] keys its
// family reads and the family's own rules (family.ModelRules), the
// diffusion process and its keys, and the captions.
func checkTraining(p *problems, r *Recipe) {
	written := func(key string) bool { return !r.defaults[key] && (p.lines == nil || p.lines.has(key)) }
	if r.flowMatchingBase() {
		checkFlowMatchingBase(p, r, written)
		return
	}
	tr := r.training()
	known := r.Model != nil && oneOf(p, "model.kind", r.Model.Kind, configurerKinds()...)
	if known {
		checkModelRules(p, r, written)
	}
	// A [base] states its process (flow matching took the branch above).
	if oneOf(p, "diffusion.process", r.Diffusion.Process, ProcessDDPM, ProcessFlowMatching) && known && r.Diffusion.Process != tr.Process {
		p.add("diffusion.process", "found %q with model.kind = %q, expected %q (the family trains with %s)", r.Diffusion.Process, r.Model.Kind, tr.Process, processWords(tr.Process))
	}
	switch r.Diffusion.Process {
	case ProcessFlowMatching:
		checkFlowMatching(p, r, written)
	case ProcessDDPM:
		if written("diffusion.shift") {
			p.add("diffusion.shift", "found with diffusion.process = %q, expected it only with \"flow_matching\"", r.Diffusion.Process)
		}
	}
	d := &r.Data
	switch {
	case written("data.captions") && d.Source != SourceShapes:
		p.add("data.captions", "found with data.source = %q, expected it only with \"shapes\" (a data file carries its own captions)", d.Source)
	case tr.Captions && d.Source == SourceShapes && !d.Captions:
		p.add("data.captions", "found false with model.kind = %q, expected true: the family trains on captions", r.Model.Kind)
	case d.Captions && !tr.Captions:
		p.add("data.captions", "found true with a model that takes class labels, expected it only with model.kind = %s or a [base] trained with flow matching (diffusion.process = %q)", quoteJoin(captionKinds()), ProcessFlowMatching)
	}
	if !tr.Captions && written("data.caption_table_seed") {
		p.add("data.caption_table_seed", "found without a caption-conditioned model, expected it only with model.kind = %s (the table feeds its captions)", quoteJoin(captionKinds()))
	}
}

// checkFlowMatchingBase checks a recipe that upcycles a [base] trained
// with flow matching (diffusion.process = "flow_matching"; the pipeline
// checks that the file is such a model, conditioned on captions). Its
// data are captioned shapes or a file with captions, and the settings
// that read DDPM's noise schedule or the null class are refused.
func checkFlowMatchingBase(p *problems, r *Recipe, written func(string) bool) {
	checkFlowMatching(p, r, written)
	d := &r.Data
	switch {
	case written("data.captions") && d.Source != SourceShapes:
		p.add("data.captions", "found with data.source = %q, expected it only with \"shapes\" (a data file carries its own captions)", d.Source)
	case d.Source == SourceShapes && !d.Captions:
		p.add("data.captions", "found false with a [base] trained with flow matching (diffusion.process = %q), expected true: it is conditioned on captions", ProcessFlowMatching)
	case d.Source == SourceTeacher && len(d.Classes) > 0:
		p.add("data.classes", "found with a teacher trained with flow matching, expected it only with a DDPM teacher that takes class labels (a caption-conditioned teacher's samples are drawn for captions of every class)")
	}
	if written("data.caption_table_seed") {
		p.add("data.caption_table_seed", "found with a [base], expected it only with model.kind = %s (a base's caption table is in its metadata)", quoteJoin(captionKinds()))
	}
	for i := range r.Stages {
		for _, k := range []string{"p2_gamma", "p2_k", "timestep_weight_cap", "class_embedder_lr_scale"} {
			if key := indexKey("stage", i) + "." + k; written(key) {
				p.add(key, "found with diffusion.process = %q, expected it only with DDPM and class labels (it reads DDPM's noise schedule or the null class)", ProcessFlowMatching)
			}
		}
	}
}

// checkFlowMatching checks the [diffusion] keys of flow matching.
func checkFlowMatching(p *problems, r *Recipe, written func(string) bool) {
	if !(r.Diffusion.Shift > 0) || math.IsInf(r.Diffusion.Shift, 0) {
		p.bad("diffusion.shift", r.Diffusion.Shift, "a finite shift > 0")
	}
	if written("diffusion.schedule") {
		p.add("diffusion.schedule", "found with diffusion.process = %q, expected it only with \"ddpm\" (flow matching has no β schedule)", r.Diffusion.Process)
	}
}

// configurerKinds are the registered kinds whose families size models
// from a recipe's [model] (family.Configurer), in kind order.
func configurerKinds() []string {
	var kinds []string
	for _, k := range family.Kinds() {
		if f, _ := family.Lookup(k); f != nil {
			if _, ok := f.(family.Configurer); ok {
				kinds = append(kinds, k)
			}
		}
	}
	return kinds
}

// checkDyDiT checks a stage's DyDiT keys: λ in [0, 1], on only in a DC
// stage on the CPU, and its weight and learning-rate factor only with it.
func checkDyDiT(p *problems, r *Recipe, st *Stage, k func(string) string) {
	switch {
	case !(st.DyDiTLambda >= 0 && st.DyDiTLambda <= 1):
		p.bad(k("dydit_lambda"), st.DyDiTLambda, "a FLOPs ratio in (0, 1], or 0 (off)")
	case st.DyDiTLambda > 0 && r.Scaffold == nil:
		p.bad(k("dydit_lambda"), st.DyDiTLambda, "0 without [scaffold] (the width gates go into a DC model's main network)")
	case st.DyDiTLambda > 0 && r.Device == "cuda":
		p.bad(k("dydit_lambda"), st.DyDiTLambda, "0 with device = \"cuda\" (DyDiT's width gates run on the CPU only for now)")
	}
	if !(st.DyDiTWeight >= 0) || math.IsInf(st.DyDiTWeight, 0) {
		p.bad(k("dydit_weight"), st.DyDiTWeight, "a finite weight ≥ 0")
	} else if p.lines.has(k("dydit_weight")) && st.DyDiTLambda == 0 {
		p.add(k("dydit_weight"), "found %v with dydit_lambda = 0, expected dydit_lambda > 0 (the penalty it weighs is off)", st.DyDiTWeight)
	}
	if !(st.DyDiTLRScale > 0) || math.IsInf(st.DyDiTLRScale, 0) {
		p.bad(k("dydit_lr_scale"), st.DyDiTLRScale, "a finite factor > 0")
	} else if p.lines.has(k("dydit_lr_scale")) && st.DyDiTLambda == 0 {
		p.add(k("dydit_lr_scale"), "found %v with dydit_lambda = 0, expected dydit_lambda > 0 (the routers it scales train with it)", st.DyDiTLRScale)
	}
}

// checkCoarse checks the coarse steps of a stage or the evaluation
// (prefix is their keys' prefix, "stage[i]." or "eval.", and sibling how
// a message names the keys beside them, "" or "eval."): from a timestep
// above dense_below, ρ a tail-drop fraction that needs them, and a
// scaffold to drop from.
func checkCoarse(p *problems, r *Recipe, prefix, sibling string, from, rho, denseBelow float64) {
	switch {
	case !(from >= 0 && from <= float64(r.Diffusion.Steps)):
		p.bad(prefix+"coarse_from", from, "a timestep in 0..%d (diffusion.steps)", r.Diffusion.Steps)
	case from > 0 && from <= denseBelow:
		p.bad(prefix+"coarse_from", from, "a timestep above %sdense_below = %g (the steps below it run dense)", sibling, denseBelow)
	case !(rho >= 0 && rho < 1):
		p.bad(prefix+"coarse_rho", rho, "a tail-drop fraction 0 ≤ ρ < 1")
	case from == 0 && rho != 0:
		p.bad(prefix+"coarse_rho", rho, "0 without %scoarse_from (no step is coarse)", sibling)
	case from > 0 && r.Scaffold == nil:
		p.bad(prefix+"coarse_from", from, "0 without [scaffold] (a plain DiT drops nothing)")
	}
}

// checkSpacing checks a lookback_spacing (key) at value: a finite number
// ≥ 0, and 0 unless lookback is on (needs names what turns it on).
func checkSpacing(p *problems, key string, spacing float64, lookback bool, needs string) {
	switch {
	case !(spacing >= 0) || math.IsInf(spacing, 1):
		p.bad(key, spacing, "a finite spacing ≥ 0 (0: ranked where the estimate changes)")
	case spacing > 0 && !lookback:
		p.add(key, "found %g without %s, expected 0: it chooses lookback's cells", spacing, needs)
	}
}

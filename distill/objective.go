package distill

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"

	"github.com/nlpodyssey/spago/mat"

	"github.com/dcdit/dcdit/cond"
	"github.com/dcdit/dcdit/datasets/shapes"
	"github.com/dcdit/dcdit/dc"
	"github.com/dcdit/dcdit/diffusion"
	"github.com/dcdit/dcdit/diffusion/ddpm"
	"github.com/dcdit/dcdit/family"
	"github.com/dcdit/dcdit/ops"
)

// Metrics are what one training step measured. Fields a stage does not
// compute stay zero.
type Metrics struct {
	Loss  float64 `json:"loss"`            // the objective that was differentiated
	MSE   float64 `json:"mse,omitempty"`   // ε mean squared error (hybrid loss)
	VB    float64 `json:"vb,omitempty"`    // variational-bound term (hybrid loss)
	Ratio float64 `json:"ratio,omitempty"` // ratio loss (DC models)
	// Guided is the distance between the student's and the teacher's
	// guided predictions (DCObjective.GuidedScale).
	Guided float64 `json:"guided,omitempty"`
	// Router is the cross-entropy of the router against the keep targets
	// (DCObjective.RouterTargetWeight).
	Router float64 `json:"router,omitempty"`
	// Width is the FLOPs ratio the backbone's width gates ran the batch
	// at (DCObjective.WidthTarget).
	Width float64 `json:"width,omitempty"`
	Rho   float64 `json:"rho"`            // tail-drop fraction used (dc.Dense: every cell kept)
	Kept  float64 `json:"kept,omitempty"` // kept tokens / grid tokens (DC models)
}

// Objective computes one step's loss on a batch and accumulates its
// gradient into the model's parameters.
type Objective interface {
	// Step runs forward and backward for step number step (from 0, within
	// the stage) on the batch b; rng is the step's own random stream
	// (timesteps, noise, tail-drop fraction).
	Step(step int, b *Batch, rng *rand.Rand) (Metrics, error)
}

// Batch is one step's samples: clean latents X0 [B, C, H, W], their class
// labels (the null class where dropped for classifier-free guidance) and,
// from a data set with captions, their captions as vocabulary indices
// (empty where dropped).
type Batch struct {
	X0       []float32
	C, H, W  int
	Labels   []int
	Captions [][]int
}

// P2 weighs the hybrid loss's ε term by 1/(K + SNR_t)^Gamma
// (ddpm.Schedule.P2Weights); Gamma = 0 is DiT's uniform weighting.
type P2 struct {
	K, Gamma float64
}

// process is the DDPM process the weighting applies to.
func (p P2) process(s *ddpm.Schedule) *diffusion.DDPM {
	return &diffusion.DDPM{Schedule: s, P2: diffusion.P2{K: p.K, Gamma: p.Gamma}}
}

// settings adds the weighting to a fingerprint when it is on; uniform
// weighting adds nothing, so run folders made before P2 existed resume.
func (p P2) settings(s map[string]string) map[string]string {
	if p.Gamma != 0 {
		s["p2_k"], s["p2_gamma"] = num(p.K), num(p.Gamma)
	}
	return s
}

// lossMetrics reports the batch means of a process's loss terms; a term
// the process does not have stays zero.
func lossMetrics(l *diffusion.Losses) Metrics {
	var m Metrics
	m.Loss = mean(l.Loss)
	if l.MSE != nil {
		m.MSE = mean(l.MSE)
	}
	if l.VB != nil {
		m.VB = mean(l.VB)
	}
	return m
}

// Budget says which tail-drop fraction a DC training step uses:
// multi-budget training runs at ρ = 0 for the first Warmup steps of the
// stage, then draws ρ uniformly from Rhos at every step — or, with
// probability Dense, runs with every cell a token (dc.Dense).
type Budget struct {
	Rhos   []float64
	Warmup int
	// Dense is the share of the steps after the warm-up that keep every
	// cell. Those steps hold the kept cells' path to the teacher's
	// prediction on the full grid, which sampling uses at low noise and
	// which training at the router's budgets alone lets drift.
	Dense float64
	// DenseBelow, when > 0, keeps every cell of the samples whose
	// timestep (larger: noisier; DDPM's t, flow matching's σ·T) is below
	// it, as sampling with the same dense_below does (dc.FracAt): the
	// drawn ρ applies to the noisier samples only.
	DenseBelow float64
	// CoarseFrom, when > 0, makes a sample with a budget (ρ > 0) whose
	// timestep is at or above it drop at least CoarseRho of its
	// boundaries, as sampling with the same eval.coarse_from and
	// eval.coarse_rho does (dc.Schedule), so that the model is trained at
	// the coarse steps it is sampled with.
	CoarseFrom, CoarseRho float64
}

// schedule is the budget's dc.Schedule.
func (b Budget) schedule() dc.Schedule {
	return dc.Schedule{DenseBelow: float32(b.DenseBelow), CoarseFrom: float32(b.CoarseFrom), CoarseRho: float32(b.CoarseRho)}
}

// noiseTimesteps are a batch's noise levels as timesteps, the scale
// DenseBelow is given on: DDPM's model times are its timesteps; flow
// matching's are 1 − σ, its timesteps σ·T.
func noiseTimesteps(proc diffusion.Process, levels []int, ts []float32) ([]float32, error) {
	fm, ok := proc.(*diffusion.FlowMatch)
	if !ok {
		return ts, nil
	}
	if fm.Table == nil {
		return nil, fmt.Errorf("distill: flow matching has no training table")
	}
	_, steps, err := fm.Table.Lookup(levels)
	return steps, err
}

// cleanMap returns, per sample at noise level levels[i], the a and c of
// keepTargets' clean estimate u = a·pred + c·x for the teacher's
// prediction pred: DDPM's ε̂ − x/√(1−ᾱ_t), flow matching's x + σ·v̂.
func (o *DCObjective) cleanMap(proc diffusion.Process, levels []int) (a, c []float64, err error) {
	a, c = make([]float64, len(levels)), make([]float64, len(levels))
	if fm, ok := proc.(*diffusion.FlowMatch); ok {
		if fm.Table == nil {
			return nil, nil, fmt.Errorf("distill: flow matching has no training table")
		}
		sigmas, _, err := fm.Table.Lookup(levels)
		if err != nil {
			return nil, nil, err
		}
		for i, s := range sigmas {
			a[i], c[i] = float64(s), 1
		}
		return a, c, nil
	}
	for i, v := range levels {
		a[i], c[i] = 1, -1/o.Schedule.SqrtOneMinusAlphasCumprod[v]
	}
	return a, c, nil
}

// fracs gives each sample of a batch drawn at timesteps ts its drop
// fraction: the step's ρ, dc.Dense below DenseBelow, at least CoarseRho
// from CoarseFrom (dc.Schedule).
func (b Budget) fracs(rho float64, ts []float32) []float32 {
	if !(b.DenseBelow > 0) && !(b.CoarseFrom > 0) {
		return []float32{float32(rho)}
	}
	f := make([]float32, len(ts))
	for i, t := range ts {
		f[i] = b.schedule().Frac(float32(rho), t)
	}
	return f
}

// routed reports, per sample at timestep ts, whether sampling routes
// there: every sample without DenseBelow.
func (b Budget) routed(ts []float32) []bool {
	r := make([]bool, len(ts))
	for i, t := range ts {
		r[i] = !(float64(t) < b.DenseBelow)
	}
	return r
}

// rho picks the step's fraction.
func (b Budget) rho(step int, rng *rand.Rand) float64 {
	if step < b.Warmup {
		return 0
	}
	// Only a stage that asks for dense steps draws for them, so that a
	// stage without keeps its random stream.
	if b.Dense > 0 && rng.Float64() < b.Dense {
		return float64(dc.Dense)
	}
	if len(b.Rhos) == 0 {
		return 0
	}
	return b.Rhos[rng.IntN(len(b.Rhos))]
}

// DCLoss selects what a DC model is trained against.
type DCLoss string

// The DC objectives: grafting distillation onto a frozen teacher's
// prediction (L1 or L2), or DiT's hybrid diffusion loss.
const (
	DistillL1 DCLoss = "l1"
	DistillL2 DCLoss = "l2"
	Hybrid    DCLoss = "hybrid"
)

// DCObjective trains a DC model: on a noisy input x_t of the diffusion
// process the model predicts at the step's ρ, and the loss is either the
// distance to the frozen teacher's prediction on the same (x_t, t, y)
// (distillation; with DDPM both the ε and the variance channels) or the
// process's own loss (finetuning, training from scratch: DiT's hybrid
// loss, flow matching's velocity loss), plus RatioWeight × the ratio loss
// on the natural (pre-drop) mask. A batch with captions conditions on
// them (through CaptionTable), one without on its labels.
type DCObjective struct {
	Model   *dc.Model
	Teacher Teacher // distillation only; run without gradients
	// Schedule is DDPM's, the process unless Process is set.
	Schedule *ddpm.Schedule
	// Process, when set, is the diffusion process in DDPM's place (flow
	// matching for a Z-Image backbone). The options that read DDPM's
	// schedule (WeightCap, P2) are refused with it;
	// Budget.DenseBelow is then a timestep σ·T.
	Process diffusion.Process
	// CaptionTable holds one caption feature row (CaptionDim wide) per
	// vocabulary word: the text encoder's stand-in for batches with
	// captions.
	CaptionTable []float32
	CaptionDim   int
	// EmptyCaption is the caption of the guided pairs' unconditional twins
	// (Dataset.EmptyCaption; nil: the empty caption).
	EmptyCaption []int
	// NullClass is the unconditional label of guided pairs (GuidedScale).
	NullClass int
	Loss      DCLoss
	Budget    Budget
	// RatioWeight scales the ratio loss (0.03 in the paper); TargetN and
	// RatioBatchSize come from the model's config.
	RatioWeight float64
	// EpsOnly restricts distillation to the ε channels (the first C);
	// otherwise every output channel, learned σ included, is matched.
	EpsOnly bool
	// WeightCap, when > 0, weights each sample's distillation distance by
	// 1 + min(√((1−ᾱ_t)/ᾱ_t), WeightCap), normalised to mean 1 over the
	// timesteps: the sampler turns an ε error at t into an error of
	// √((1−ᾱ_t)/ᾱ_t) times it in its estimate of x0, so a uniform weight
	// spends the capacity where sampling forgives it (low t) and starves
	// the steps whose errors it amplifies (high t).
	WeightCap float64
	// P2 weighs the hybrid loss's ε term per timestep (zero value:
	// uniform). Hybrid loss only.
	P2 P2
	// GuidedScale, when > 0, distils on pairs: the first half of each
	// batch is seen twice, with its labels and with the null class (with
	// its captions and with the empty prompt), at the same noisy input,
	// timestep and budget, and the loss adds the mean distance between the
	// student's and the teacher's predictions guided as the teacher's
	// sampling guides at this scale (Teacher.Guidance: u + g·(c − u) on
	// the guided channels), divided by g. Sampling multiplies the error
	// of the label's share c − u by g, and that share is a few per cent
	// of the prediction at high noise, where the per-prediction distance
	// barely sees it. Distillation only.
	GuidedScale float64
	// RouterTargetWeight, when > 0, adds this weight times the binary
	// cross-entropy of the router's boundary probability against keep
	// targets: in every sample, the 1/N of the cells whose drop cost —
	// how far the teacher's clean estimate there differs from its grid
	// neighbours' (keepTargets) — is largest. H-Net's straight-through
	// gate tells the router only whether a token's features should be
	// scaled, not which cells lose most when dropped; the targets say
	// that, on every sample, dense ones included. Distillation only.
	RouterTargetWeight float64
	// RouterTargets selects the targets RouterTargetWeight fits:
	// TargetsEdges (the default) or TargetsSpread.
	RouterTargets RouterTargets
	// KeptGate trains through dc.Model.ForwardKeptGate: the gate's
	// gradient ranks a boundary the tail drop removed lower, not higher.
	KeptGate bool
	// Lookback, when > 0, is the share of the samples with a budget (ρ >
	// 0, not dense), drawn per sample, trained on the cells
	// dc.LookbackKeep chooses on the teacher's clean estimate at their
	// input (at LookbackSpacing), as many as
	// the router keeps: the cells sampling with lookback keeps
	// (sample.Lookback ranks them on the previous step's estimate, one
	// step noisier). Trained on the router's cells only, the decoder
	// learns to fill in around a choice that sampling does not make. The
	// router learns from the other samples alone
	// (dc.Model.ForwardChoosing), and it needs them: with every budget on
	// the lookback cells, its ρ 0 choice fell apart (docs/results.md).
	// Distillation only.
	Lookback float64
	// LookbackTwins trains every sample Lookback puts on lookback cells
	// twice, in the same batch: once on those cells and once on the
	// router's own, so that the decoder learns the cells sampling keeps
	// while the router still learns its order from every budget (the
	// gate's gradient where a budget dropped its cells is what ranks
	// them). A step with budgets runs up to twice the samples. Not with
	// GuidedScale, whose twins are the unconditional branch.
	LookbackTwins bool
	// LookbackSpacing is the spacing of dc.LookbackKeep that Lookback's
	// cells are chosen at: > 0 dc.CoverKeep's, 0 dc.ChangeKeep's. It
	// should be sampling's (sample.Lookback.Spacing).
	LookbackSpacing float64
	// WidthTarget, when > 0, is DyDiT's target FLOPs ratio λ for a
	// width-gated backbone (family.WidthGated, which the model's must be):
	// the loss adds WidthWeight·(r − λ)², r the batch's FLOPs ratio of the
	// gated blocks as the gates ran them (WidthRatio), whose gradient
	// reaches the routers through the straight-through gates.
	WidthTarget, WidthWeight float64
}

// RouterTargets names what the router is fitted to (DCObjective).
type RouterTargets string

// The router targets: the 1/N of the cells of largest drop cost, by
// binary cross-entropy (keepTargets), or an order for tail dropping, by
// a ranking loss on the samples sampling routes (spreadOrders).
const (
	TargetsEdges  RouterTargets = "edges"
	TargetsSpread RouterTargets = "spread"
)

// timestepWeights returns each sample's distillation weight (nil: all 1).
func (o *DCObjective) timestepWeights(t []int) []float64 {
	if !(o.WeightCap > 0) {
		return nil
	}
	ratio := o.Schedule.SqrtRecipm1AlphasCumprod
	w := func(t int) float64 { return 1 + min(ratio[t], o.WeightCap) }
	var z float64
	for s := range ratio {
		z += w(s)
	}
	z /= float64(len(ratio))
	ws := make([]float64, len(t))
	for i, v := range t {
		ws[i] = w(v) / z
	}
	return ws
}

// process is the objective's diffusion process.
func (o *DCObjective) process() diffusion.Process {
	if o.Process != nil {
		return o.Process
	}
	return o.P2.process(o.Schedule)
}

// checkProcess refuses the options that read DDPM's schedule when another
// process trains.
func (o *DCObjective) checkProcess() error {
	if o.Process == nil {
		if o.Schedule == nil {
			return fmt.Errorf("distill: a DC objective needs DDPM's schedule or a diffusion process")
		}
		return nil
	}
	for _, f := range []struct {
		name string
		on   bool
	}{{"timestep_weight_cap", o.WeightCap > 0}, {"p2_gamma", o.P2.Gamma != 0}} {
		if f.on {
			return fmt.Errorf("distill: %s reads DDPM's noise schedule; the objective trains with %s", f.name, processName(o.Process))
		}
	}
	return nil
}

// condition is the conditioning at model times ts: the captions caps
// through the caption table when there are any, else the labels y.
func (o *DCObjective) condition(caps [][]int, ts []float32, y []int) (cond.Input, error) {
	if caps == nil {
		return cond.Input{T: ts, Labels: y}, nil
	}
	in, err := shapes.CaptionInputs(caps[:len(ts)], o.CaptionTable, o.CaptionDim)
	if err != nil {
		return cond.Input{}, err
	}
	return cond.Input{T: ts, Captions: in}, nil
}

// Step implements Objective.
func (o *DCObjective) Step(step int, b *Batch, rng *rand.Rand) (Metrics, error) {
	x0, y, caps := b.X0, b.Labels, b.Captions
	cfg := o.Model.Config
	B, L := len(y), cfg.Tokens()
	if err := o.checkProcess(); err != nil {
		return Metrics{}, err
	}
	// The distillation's timestep weights read DDPM's schedule
	// (checkProcess); the draw, the input, the conditioning time, the
	// router targets' clean estimate and the process's loss go through
	// the process seam.
	proc := o.process()
	pairs := o.GuidedScale > 0
	if pairs {
		if o.Loss == Hybrid || o.Teacher == nil {
			return Metrics{}, fmt.Errorf("distill: guided distillation needs a teacher and an l1 or l2 loss, got %s", o.Loss)
		}
		if B%2 != 0 {
			return Metrics{}, fmt.Errorf("distill: guided distillation pairs the batch, got %d samples", B)
		}
		B /= 2
	}
	if o.RouterTargetWeight > 0 && o.Loss == Hybrid {
		return Metrics{}, fmt.Errorf("distill: router targets come from a teacher's prediction, the %s loss has none", o.Loss)
	}
	sh := diffusion.Shape{B: B, C: cfg.InChannels, HW: L}
	nz, xt, ts, err := noisyBatch(proc, rng, x0[:B*cfg.InChannels*L], sh)
	if err != nil {
		return Metrics{}, err
	}
	t := nz.Levels
	if pairs {
		// The twins: the same inputs with the null class.
		xt, ts, t = slices.Concat(xt, xt), slices.Concat(ts, ts), slices.Concat(t, t)
		y = slices.Concat(y[:B:B], slices.Repeat([]int{o.NullClass}, B))
		if caps != nil {
			// The empty prompt is the captions' unconditional branch.
			caps = slices.Concat(caps[:B:B], slices.Repeat([][]int{o.EmptyCaption}, B))
		}
		B *= 2
	}
	rho := o.Budget.rho(step, rng)

	in, err := o.condition(caps, ts, y)
	if err != nil {
		return Metrics{}, err
	}
	steps, err := noiseTimesteps(proc, t, ts)
	if err != nil {
		return Metrics{}, err
	}
	fracs := o.Budget.fracs(rho, steps)
	var target []float32 // the teacher's prediction, when distilling
	var lf []float32     // the lookback fractions of the samples, with Lookback
	if o.Loss == DistillL1 || o.Loss == DistillL2 {
		if target, err = o.teacher(xt, in); err != nil {
			return Metrics{}, err
		}
		if o.Lookback > 0 {
			lf = o.lookbackFracs(fracs, B, rng)
			if o.LookbackTwins {
				tw, err := o.twins(twinBatch{xt: xt, ts: ts, t: t, y: y, caps: caps, target: target, fracs: fracs}, lf)
				if err != nil {
					return Metrics{}, err
				}
				xt, ts, t, y, caps, target, fracs, lf = tw.xt, tw.ts, tw.t, tw.y, tw.caps, tw.target, tw.fracs, tw.lf
				B = len(y)
				if in, err = o.condition(caps, ts, y); err != nil {
					return Metrics{}, err
				}
			}
		}
	} else if o.Lookback > 0 {
		return Metrics{}, fmt.Errorf("distill: lookback ranks cells on the teacher's clean estimate, the %s loss has no teacher", o.Loss)
	}
	// The model's inputs, built once the batch is final (lookback's twins
	// extend it).
	cv, err := o.Model.Backbone.Condition(in)
	if err != nil {
		return Metrics{}, err
	}
	tokens := dc.ToTokens(xt, B, cfg.InChannels, cfg.GridRows, cfg.GridCols, cfg.Patch())
	x := mat.NewDense[float32](mat.WithShape(B*cfg.Cells(), cfg.CellIn()), mat.WithBacking(tokens))
	var choose dc.Chooser
	if o.Lookback > 0 {
		if choose, err = o.lookback(proc, target, tokens, t, lf, B); err != nil {
			return Metrics{}, err
		}
	}
	res, err := o.Model.ForwardChoosing(x, cv, fracs, choose, o.KeptGate)
	if err != nil {
		return Metrics{}, err
	}
	out := mat.Data[float32](res.Out.Value()) // [B·cells, OutChannels·p²]
	grad := make([]float32, len(out))
	var m Metrics
	var routerTerm mat.Tensor // RouterTargetWeight's surrogate, Σ logit·∂loss/∂logit
	switch o.Loss {
	case DistillL1, DistillL2:
		if o.RouterTargetWeight > 0 {
			a, c, err := o.cleanMap(proc, t)
			if err != nil {
				return Metrics{}, err
			}
			// The targets train the router alone (DetachedLogits): through
			// the encoder too they pulled its features from the prediction
			// (FD 24.9 at ρ 0.8 against 7.9 detached; docs/results.md).
			logit := o.Model.DetachedLogits(res)
			g := make([]float32, B*cfg.Cells())
			switch o.RouterTargets {
			case "", TargetsEdges:
				keep := int(math.Round(float64(cfg.Cells()) / cfg.TargetN))
				label, mask := keepTargets(target, tokens, cfg.CellOut(), cfg.CellIn(), a, c, cfg.CellRows(), cfg.CellCols(), keep)
				m.Router = keepLoss(g, mat.Data[float32](logit.Value()), label, mask)
			case TargetsSpread:
				z := mat.Data[float32](logit.Value())
				m.Router = rankLoss(g, z, spreadOrders(z, cfg.CellRows(), cfg.CellCols(), o.Budget.routed(steps)))
			default:
				return Metrics{}, fmt.Errorf("distill: router targets %q, want %s or %s", o.RouterTargets, TargetsEdges, TargetsSpread)
			}
			routerTerm = ops.Sum(ops.Mul(logit, mat.NewDense[float32](mat.WithShape(B*cfg.Cells(), 1), mat.WithBacking(g))))
		}
		if o.EpsOnly {
			m.Loss = distanceCols(grad, out, target, cfg.CellOut(), cfg.CellIn(), o.Loss == DistillL1)
		} else {
			m.Loss = distance(grad, out, target, o.Loss == DistillL1)
		}
		ws := o.timestepWeights(t)
		if ws != nil {
			m.Loss = weighSamples(grad, out, target, ws, cfg.CellOut(), cfg.CellIn(), o.EpsOnly, o.Loss == DistillL1)
		}
		if pairs {
			channels, g := o.Teacher.Guidance(o.GuidedScale)
			guided := channels * cfg.Patch() * cfg.Patch()
			m.Guided = guidedDistance(grad, out, target, ws, B/2*cfg.Cells(), cfg.CellOut(), guided, g, o.Loss == DistillL1)
			m.Loss += m.Guided
		}
	case Hybrid:
		img := dc.FromTokens(out, B, cfg.OutChannels, cfg.GridRows, cfg.GridCols, cfg.Patch())
		gimg := make([]float32, len(img))
		l, err := proc.Loss(gimg, img, x0[:B*cfg.InChannels*L], nz, sh)
		if err != nil {
			return Metrics{}, err
		}
		copy(grad, dc.ToTokens(gimg, B, cfg.OutChannels, cfg.GridRows, cfg.GridCols, cfg.Patch()))
		m = lossMetrics(l)
	default:
		return Metrics{}, fmt.Errorf("distill: unknown DC loss %q (want l1, l2 or hybrid)", o.Loss)
	}

	// One scalar to differentiate: Σ out·∂loss/∂out + w·ratio.
	total := ops.Sum(ops.Mul(res.Out, mat.NewDense[float32](mat.WithShape(res.Out.Shape()...), mat.WithBacking(grad))))
	if routerTerm != nil {
		m.Loss += o.RouterTargetWeight * m.Router
		total = ops.Add(total, ops.Scale(routerTerm, o.RouterTargetWeight))
	}
	if o.RatioWeight > 0 {
		ratio, err := res.RatioLoss(cfg.TargetN, cfg.RatioBatchSize)
		if err != nil {
			return Metrics{}, err
		}
		m.Ratio = float64(mat.Data[float32](ratio.Value())[0])
		m.Loss += o.RatioWeight * m.Ratio
		total = ops.Add(total, ops.Scale(ratio, o.RatioWeight))
	}
	if o.WidthTarget > 0 {
		pen, err := o.widthPenalty(cv, res.Chunks.NumKept, &m)
		if err != nil {
			return Metrics{}, err
		}
		total = ops.Add(total, pen)
	}
	err = ops.Backward(total)
	// The graph is done with: its buffers serve the next step.
	ops.Release(total)
	if err != nil {
		return Metrics{}, err
	}
	m.Rho = rho
	m.Kept = float64(res.Chunks.Offsets[len(res.Chunks.Offsets)-1]) / float64(B*cfg.Cells())
	return m, nil
}

// widthPenalty is WidthWeight·(r − WidthTarget)² of the batch's FLOPs
// ratio r under cv over packed lengths; it records r and adds the
// penalty to m's loss.
func (o *DCObjective) widthPenalty(cv cond.Value, lengths []int, m *Metrics) (mat.Tensor, error) {
	g, ok := family.GatedWidth(o.Model.Backbone)
	if !ok {
		return nil, fmt.Errorf("distill: a width target of %v needs a backbone with width gates; the %s backbone has none", o.WidthTarget, family.KindOf(o.Model.Backbone))
	}
	r, err := g.WidthRatio(cv, lengths)
	if err != nil {
		return nil, fmt.Errorf("distill: width ratio: %w", err)
	}
	d := ops.Sub(r, mat.NewDense[float32](mat.WithShape(1, 1), mat.WithBacking([]float32{float32(o.WidthTarget)})))
	pen := ops.Scale(ops.Mul(d, d), o.WidthWeight)
	m.Width = float64(mat.Data[float32](r.Value())[0])
	m.Loss += float64(mat.Data[float32](pen.Value())[0])
	return pen, nil
}

// lookbackFracs is the batch's drop fractions fracs (one, or one per
// sample) with each budget drawn out of Lookback's share set to 0 (so
// that dc.BudgetsOnly leaves it the router's cells); the draws come from
// rng only when the share is below 1.
func (o *DCObjective) lookbackFracs(fracs []float32, B int, rng *rand.Rand) []float32 {
	if len(fracs) != B {
		fracs = slices.Repeat(fracs[:1], B)
	} else {
		fracs = slices.Clone(fracs)
	}
	if o.Lookback >= 1 {
		return fracs
	}
	for i, f := range fracs {
		if f > 0 && !(rng.Float64() < o.Lookback) {
			fracs[i] = 0
		}
	}
	return fracs
}

// twinBatch is a step's batch as LookbackTwins extends it: the noisy
// inputs, their times and levels, labels, captions (nil without), the
// teacher's prediction in cells, the drop fractions (one, or one per
// sample) and, once extended, the lookback fractions of its samples.
type twinBatch struct {
	xt, ts    []float32
	t, y      []int
	caps      [][]int
	target    []float32
	fracs, lf []float32
}

// twins appends to b a twin of every sample lf (lookbackFracs' per-sample
// fractions) sends to lookback cells; it returns the batch, with per-sample
// fractions, and the lookback fractions of the whole: 0 for every first
// sample, which keeps the router's cells, and the twins' own.
func (o *DCObjective) twins(b twinBatch, lf []float32) (twinBatch, error) {
	if o.GuidedScale > 0 {
		return twinBatch{}, fmt.Errorf("distill: lookback twins and guided distillation both pair the batch; use one")
	}
	B := len(b.y)
	if len(lf) != B {
		return twinBatch{}, fmt.Errorf("distill: lookback twins: %d lookback fractions for %d samples", len(lf), B)
	}
	var idx []int
	for i, f := range lf {
		if f > 0 {
			idx = append(idx, i)
		}
	}
	fracs := b.fracs
	if len(fracs) != B {
		fracs = slices.Repeat(fracs[:1], B)
	}
	out := twinBatch{
		xt:     appendRows(b.xt, idx, len(b.xt)/B),
		ts:     appendRows(b.ts, idx, 1),
		t:      appendRows(b.t, idx, 1),
		y:      appendRows(b.y, idx, 1),
		target: appendRows(b.target, idx, len(b.target)/B),
		fracs:  appendRows(fracs, idx, 1),
	}
	if b.caps != nil {
		out.caps = appendRows(b.caps, idx, 1)
	}
	all := make([]float32, B, B+len(idx))
	for _, i := range idx {
		all = append(all, lf[i])
	}
	out.lf = all
	return out, nil
}

// appendRows is s, of rows of width values, followed by copies of the rows
// idx.
func appendRows[T any](s []T, idx []int, width int) []T {
	out := slices.Clone(s)
	for _, i := range idx {
		out = append(out, s[i*width:(i+1)*width]...)
	}
	return out
}

// lookback is the Chooser of a batch of B samples at noise levels t whose
// budgets (drop fractions frac, one per sample) choose their cells on the
// teacher's clean estimate (Lookback): dc.LookbackKeep on it; a fraction
// of 0 keeps the router's. keepTargets' map u = a·pred + c·x is the
// estimate itself under flow matching and, under DDPM, the estimate times
// −√ᾱ/√(1 − ᾱ), which ChangeKeep's ranks ignore but CoverKeep's spacing,
// in latent units, does not: the map is undone here for the cover.
func (o *DCObjective) lookback(proc diffusion.Process, pred, tokens []float32, t []int, fracs []float32, B int) (dc.Chooser, error) {
	cfg := o.Model.Config
	if len(fracs) != B {
		return nil, fmt.Errorf("distill: lookback: %d drop fractions for %d samples", len(fracs), B)
	}
	a, c, err := o.cleanMap(proc, t)
	if err != nil {
		return nil, err
	}
	if _, fm := proc.(*diffusion.FlowMatch); !fm && o.LookbackSpacing > 0 {
		for i, v := range t {
			s := -o.Schedule.SqrtOneMinusAlphasCumprod[v] / o.Schedule.SqrtAlphasCumprod[v]
			a[i], c[i] = a[i]*s, c[i]*s
		}
	}
	L, k, stride := cfg.Cells(), cfg.CellIn(), cfg.CellOut()
	u := make([]float32, B*L*k)
	for b := range B {
		for l := range L {
			r := b*L + l
			for j := range k {
				u[r*k+j] = float32(a[b]*float64(pred[r*stride+j]) + c[b]*float64(tokens[r*k+j]))
			}
		}
	}
	x0 := dc.FromTokens(u, B, cfg.InChannels, cfg.GridRows, cfg.GridCols, cfg.Patch())
	choose, err := dc.LookbackKeep(x0, B, cfg.InChannels, cfg.CellRows(), cfg.CellCols(), cfg.Patch(), o.LookbackSpacing)
	if err != nil {
		return nil, fmt.Errorf("distill: lookback: %w", err)
	}
	return dc.BudgetsOnly(choose, fracs), nil
}

// teacher returns the frozen teacher's prediction at (x_t, in) in the DC
// model's cell layout [B·cells, OutChannels·p²].
func (o *DCObjective) teacher(xt []float32, in cond.Input) ([]float32, error) {
	if o.Teacher == nil {
		return nil, fmt.Errorf("distill: %s distillation needs a teacher", o.Loss)
	}
	cfg := o.Model.Config
	if oc := o.Teacher.OutChannels(); oc != cfg.OutChannels {
		return nil, fmt.Errorf("distill: the teacher predicts %d channels, the DC model %d", oc, cfg.OutChannels)
	}
	img, err := o.Teacher.Predict(xt, in, cfg.GridRows, cfg.GridCols)
	if err != nil {
		return nil, err
	}
	return dc.ToTokens(img, in.Samples(), cfg.OutChannels, cfg.GridRows, cfg.GridCols, cfg.Patch()), nil
}

// distance writes the gradient of the mean L1 or L2 distance between out
// and target into grad and returns the distance.
func distance(grad, out, target []float32, l1 bool) float64 {
	n := float64(len(out))
	s := 0.0
	for i, v := range out {
		d := float64(v) - float64(target[i])
		if l1 {
			s += math.Abs(d)
			switch {
			case d > 0:
				grad[i] = float32(1 / n)
			case d < 0:
				grad[i] = float32(-1 / n)
			}
		} else {
			s += d * d
			grad[i] = float32(2 * d / n)
		}
	}
	return s / n
}

// weighSamples scales each sample's share of grad (rows [B·L, cols],
// sample b's rows contiguous) by its weight and returns the weighted
// distance, the mean over the matched values of w_b·|d| (L1) or w_b·d².
func weighSamples(grad, out, target []float32, ws []float64, cols, k int, epsOnly, l1 bool) float64 {
	per := len(grad) / len(ws)
	matched := cols
	if epsOnly {
		matched = k
	}
	var s float64
	for b, w := range ws {
		for i := b * per; i < (b+1)*per; i++ {
			if epsOnly && i%cols >= k {
				continue
			}
			grad[i] *= float32(w)
			d := float64(out[i]) - float64(target[i])
			if l1 {
				s += w * math.Abs(d)
			} else {
				s += w * d * d
			}
		}
	}
	return s / float64(len(ws)*per/cols*matched)
}

// guidedDistance adds to grad the gradient of the mean distance between
// the guided predictions u + s·(c − u) of out and target, divided by s
// (Teacher.Guidance's factor), over the first k of every row's cols
// values, and returns it. The first half rows of out and target are the
// conditional predictions, the second half their unconditional twins; ws
// (nil: 1) weighs each sample of the whole batch, a pair by its
// conditional sample's weight.
func guidedDistance(grad, out, target []float32, ws []float64, half, cols, k int, s float64, l1 bool) float64 {
	n := float64(half * k)
	perSample := half
	if ws != nil {
		perSample = 2 * half / len(ws)
	}
	var sum float64
	for r := range half {
		w := 1.0
		if ws != nil {
			w = ws[r/perSample]
		}
		for j := range k {
			c, u := r*cols+j, (half+r)*cols+j
			d := (float64(out[u]) + s*(float64(out[c])-float64(out[u])) -
				(float64(target[u]) + s*(float64(target[c])-float64(target[u])))) / s
			var g float64 // ∂(w·dist/n)/∂d
			if l1 {
				sum += w * math.Abs(d)
				switch {
				case d > 0:
					g = w / n
				case d < 0:
					g = -w / n
				}
			} else {
				sum += w * d * d
				g = 2 * w * d / n
			}
			// ∂d/∂c = 1, ∂d/∂u = (1 − s)/s.
			grad[c] += float32(g)
			grad[u] += float32(g * (1 - s) / s)
		}
	}
	return sum / n
}

// distanceCols is distance over the first k of every row's cols values,
// leaving the other gradients at zero.
func distanceCols(grad, out, target []float32, cols, k int, l1 bool) float64 {
	rows := len(out) / cols
	o, tg, g := make([]float32, rows*k), make([]float32, rows*k), make([]float32, rows*k)
	for r := range rows {
		copy(o[r*k:(r+1)*k], out[r*cols:r*cols+k])
		copy(tg[r*k:(r+1)*k], target[r*cols:r*cols+k])
	}
	d := distance(g, o, tg, l1)
	for r := range rows {
		copy(grad[r*cols:r*cols+k], g[r*k:(r+1)*k])
	}
	return d
}

func mean(v []float32) float64 {
	s := 0.0
	for _, x := range v {
		s += float64(x)
	}
	return s / float64(len(v))
}

// Settings implements Describer: the loss and its terms, the budgets, the
// schedule, and the model settings that shape the loss but not the
// parameter layout.
func (o *DCObjective) Settings() map[string]string {
	cfg := o.Model.Config
	rhos := make([]string, len(o.Budget.Rhos))
	for i, r := range o.Budget.Rhos {
		rhos[i] = num(r)
	}
	s := map[string]string{
		"kind":               "dc",
		"loss":               string(o.Loss),
		"rho":                "[" + strings.Join(rhos, ", ") + "]",
		"multi_budget_start": strconv.Itoa(o.Budget.Warmup),
		"dense_fraction":     num(o.Budget.Dense),
		"dense_below":        num(o.Budget.DenseBelow),
		"guided_scale":       num(o.GuidedScale),
		"ratio_loss_weight":  num(o.RatioWeight),
		"eps_only":           strconv.FormatBool(o.EpsOnly),
		"weight_cap":         num(o.WeightCap),
		"target_n":           num(cfg.TargetN),
		"ratio_batch_size":   strconv.Itoa(cfg.RatioBatchSize),
		"dechunk_sigma":      num(cfg.Sigma),
		"teacher":            "none",
	}
	if o.Teacher != nil {
		s["teacher"] = o.Teacher.Describe()
	}
	// DDPM's as run folders made before the process seam recorded it.
	if o.Process != nil {
		s["process"] = processName(o.Process)
	} else {
		s["diffusion_steps"] = strconv.Itoa(o.Schedule.Steps())
	}
	if o.CaptionTable != nil {
		s["caption_table"] = tableDigest(o.CaptionTable)
	}
	if o.EmptyCaption != nil {
		s["empty_caption"] = fmt.Sprint(o.EmptyCaption)
	}
	// Only when on, so that run folders made before it existed resume.
	if o.RouterTargetWeight != 0 {
		s["router_target_weight"] = num(o.RouterTargetWeight)
	}
	if o.RouterTargets != "" && o.RouterTargets != TargetsEdges {
		s["router_targets"] = string(o.RouterTargets)
	}
	if o.KeptGate {
		s["router_gate"] = "kept"
	}
	if o.Budget.CoarseFrom > 0 {
		s["coarse_from"], s["coarse_rho"] = num(o.Budget.CoarseFrom), num(o.Budget.CoarseRho)
	}
	if o.Lookback > 0 {
		s["lookback"] = num(o.Lookback)
	}
	if o.LookbackTwins {
		s["lookback_twins"] = "true"
	}
	if o.WidthTarget > 0 {
		s["dydit_lambda"], s["dydit_weight"] = num(o.WidthTarget), num(o.WidthWeight)
	}
	return o.P2.settings(s)
}

// noisyBatch draws a step's noise levels and noise, forms the noisy input
// and the model's conditioning times: the part of a training step every
// objective shares.
func noisyBatch(proc diffusion.Process, rng *rand.Rand, x0 []float32, sh diffusion.Shape) (*diffusion.Noise, []float32, []float32, error) {
	nz, err := proc.Draw(rng, sh)
	if err != nil {
		return nil, nil, nil, err
	}
	xt := make([]float32, len(x0))
	if err := proc.Noisy(xt, x0, nz, sh); err != nil {
		return nil, nil, nil, err
	}
	ts, err := proc.ModelTimes(nz)
	if err != nil {
		return nil, nil, nil, err
	}
	return nz, xt, ts, nil
}

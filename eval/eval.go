// Package eval measures a DC model against the fixed-patch model it was
// upcycled from (its teacher: a DiT with DDPM, or a Z-Image with flow
// matching and captions, through the Teacher seam) across tail-drop
// fractions ρ, as the paper's elastic-inference results do, on a latent
// data set. Below, DiT's terms; a Z-Image teacher conditions on the data's
// captions (and prompt following joins the scores), noises the inputs to
// the flow-matching level nearest each timestep σ·1000, compares the
// whole velocity and samples with its Euler schedule:
//
//   - kept tokens, forward FLOPs and wall time per image, over held-out
//     noisy inputs x_t = q_sample(x0, t, ε) of the data set's first
//     NumInputs samples at timesteps t_i = ⌊(i + ½)·1000/NumInputs⌋ spread
//     over [0, 1000) (so the means are those of a sampler that visits every
//     timestep equally);
//   - ε relative MSE against the teacher on those inputs, the same
//     (x_t, t, y) going to both: Σ‖ε_dc − ε_teacher‖² / Σ‖ε_teacher‖² over
//     the ε channels (the first C of the 2C outputs), pooled over inputs;
//   - latent PSNR of DC samples against teacher samples drawn from the same
//     noise (DDPM ancestral sampling over Steps respaced steps, the same
//     seed for the initial and every step's noise, labels 0, 1, 2, … in
//     turn): 10·log10(R² / MSE) with R the data set's value range
//     (max − min), capped at MaxPSNR;
//   - guidance: the rows are unguided unless Options.CFG > 1; Lite-CFG runs
//     the conditional branch at one ρ and the unconditional at another;
//     either is compared with the teacher at the same guidance scale
//     (DiT's forward_with_cfg, first 3 channels);
//   - with a feature network (Options.Features), the samples as a
//     distribution: the Fréchet distance (FID's formula) of their features
//     to the features of the data set's first NumSamples samples, and the
//     fraction classified as the label they were drawn for; beside them
//     the network's accuracy on the data and the Fréchet distance between
//     two disjoint halves of the data (the floor at that sample count);
//   - the random-router baseline (unless Options.NoRandomRouter), with a
//     feature network: each row's samples drawn again from the same noise
//     with the kept cells chosen uniformly at random (dc.RandomKeep), as
//     many in every sample at every step as the router kept there, and
//     scored the same way — whether the router's choice of cells matters;
//     with Options.SpreadRandom also with the random cells kept apart as
//     the spread drop keeps them (dc.SpreadRandomKeep) — whether it is the
//     ranking or the spacing;
//   - the kept tokens of each sampling step, per row (the paper's temporal
//     finding: noisy steps need fewer tokens);
//   - the edge density ratio: with the data set's edge masks (or, without
//     them, masks derived from the latents: cells whose 4-neighbour differs
//     by more than DeriveEdgesFraction of the value range), at ρ = 0 on
//     noisy inputs at EdgeTimesteps (moderate noise: 100, 200, 300 by
//     default, where ᾱ_t ≈ 0.90, 0.66, 0.40 on DiT's linear schedule), the
//     fraction of edge cells the router kept over the fraction of flat
//     cells kept, pooled over samples and timesteps. The first and last
//     cell of every grid are left out: the router always keeps them.
//
// Run returns a Report (JSON via encoding/json, a text table via
// WriteTable) that also holds what the pictures need: WriteBoundaryPNG
// draws where the router kept tokens, WriteTrajectoryPNG the same along
// the ρ = 0 sampling run, WriteElasticGridPNG the samples across ρ and
// WriteParetoPNG the Fréchet distance against compute.
package eval

import (
	"errors"
	"fmt"
	"hash/fnv"
	"image"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"time"

	"github.com/dcdit/dcdit/datasets"
	"github.com/dcdit/dcdit/dc"
	"github.com/dcdit/dcdit/diffusion"
	"github.com/dcdit/dcdit/eval/featnet"
	"github.com/dcdit/dcdit/params"
	"github.com/dcdit/dcdit/sample"
)

// TrainSteps is the length of the training diffusion (DiT's 1000 steps).
const TrainSteps = 1000

// MaxPSNR caps the PSNR of identical samples (zero error), in dB.
const MaxPSNR = 100.0

// Defaults of Options.
var (
	DefaultRhos              = []float64{0, 0.3, 0.6}
	DefaultEdgeTimesteps     = []int{100, 200, 300}
	DefaultBoundaryTimesteps = []int{50, 250, 500, 750, 950}
	DefaultProbeTimesteps    = []int{100, 300, 500, 700, 900}
)

const (
	defaultNumInputs   = 64
	defaultNumSamples  = 8
	defaultSteps       = 10
	defaultBatchSize   = 16
	defaultNumBoundary = 4
	// maxGridSamples bounds the elastic grid's default columns.
	maxGridSamples = 20
)

// FeatureNet is the network samples are scored with: features for the
// Fréchet distance and a class for the accuracy (package featnet's Net).
type FeatureNet interface {
	// Features returns n×Dim() features of n latents [n, c, h, w].
	Features(latents []float32, n, c, h, w int) ([]float64, error)
	// Classify returns the class of each of n latents.
	Classify(latents []float32, n, c, h, w int) ([]int, error)
	// Dim is the feature width.
	Dim() int
}

// PictureScorer scores samples as pictures.
type PictureScorer interface {
	// Score decodes n latents [n, c, h, w] into pictures and returns their
	// FID against its reference and their Inception Score. name is the
	// row's file-safe name ("teacher", "rho0.6", "lite0-0.8"), under
	// which the scorer may save the pictures.
	Score(name string, latents []float32, n, c, h, w int) (fid, is float64, err error)
}

// LatentRenderer draws one latent [c, h, w] as a picture whose sides are
// a whole multiple of h and w.
type LatentRenderer interface {
	Render(latent []float32, c, h, w int) (*image.RGBA, error)
}

// Lite configures the Lite-CFG row: the conditional branch at tail-drop
// fraction Cond, the unconditional one at Uncond, guidance scale Scale.
type Lite struct {
	Cond, Uncond float64
	Scale        float64
}

// Options configure an evaluation; zero fields take the defaults.
type Options struct {
	// Rhos are the tail-drop fractions, one row each (default 0, 0.3,
	// 0.6), each in [0, 1).
	Rhos []float64
	// CFG is the guidance scale of the ρ rows (≤ 1: none, the default):
	// above 1 both branches run at the row's ρ and the teacher is guided
	// too (DiT's forward_with_cfg, first 3 channels).
	CFG float64
	// Lite, when set, adds the Lite-CFG row.
	Lite *Lite
	// DenseBelow makes every cell a token (dc.Dense) at timesteps below
	// it (DDPM's t, flow matching's σ·T), in the ρ rows and the Lite-CFG
	// row: elastic inference that spends the full grid on the low-noise
	// steps. 0: never.
	DenseBelow float64
	// CoarseFrom makes the steps at timesteps at or above it drop at
	// least CoarseRho of their boundaries in the rows and Lite-CFG
	// branches with a budget (ρ > 0; dc.Schedule): the noisiest steps at
	// a handful of tokens. 0: never.
	CoarseFrom, CoarseRho float64
	// NumInputs is the number of held-out noisy inputs (data samples
	// 0..NumInputs−1, fewer if the data set is smaller); default 64.
	NumInputs int
	// NumSamples is the number of samples drawn per row (in one batch)
	// for the PSNR, the Fréchet distance and the class accuracy; default 8.
	NumSamples int
	// GridSamples is the elastic grid's columns, each row's first samples
	// (default min(NumSamples, 20)).
	GridSamples int
	// Features, when set, scores the samples as a distribution (Fréchet
	// distance to the data, class accuracy).
	Features FeatureNet
	// NoRandomRouter leaves out the random-router baseline (RandomRouter),
	// which draws every row's samples a second time.
	NoRandomRouter bool
	// SpreadRandom adds to the random-router baseline its cells kept
	// apart (dc.SpreadRandomKeep), which draws every row's samples a
	// third time: what spacing alone is worth, and what the router's
	// ranking adds to it.
	SpreadRandom bool
	// Pictures, when set, also scores every row's samples as pictures:
	// decoded by a VAE, FID against a reference (package pictures).
	Pictures PictureScorer
	// Renderer, when set, draws the report's pictures (elastic grid,
	// boundary maps, trajectory) from the latents, e.g. through a VAE;
	// without one they are linear latent-to-RGB previews.
	Renderer LatentRenderer
	// Steps is the number of sampling steps (DiffusionSteps respaced);
	// default 10.
	Steps int
	// DiffusionSteps is the length T of the diffusion the model and its
	// teacher were trained with (default TrainSteps, DiT's 1000): the
	// sampler respaces it, and the held-out inputs' and maps' timesteps
	// lie in [0, T).
	DiffusionSteps int
	// BatchSize bounds the images per forward pass; default 16.
	BatchSize int
	// Seed draws the noise of the inputs and of the samplers.
	Seed uint64
	// EdgeTimesteps are the timesteps of the edge density measure
	// (default 100, 200, 300).
	EdgeTimesteps []int
	// BoundaryTimesteps are the columns of the boundary map (default 50,
	// 250, 500, 750, 950); NumBoundary its rows (data samples, default 4).
	BoundaryTimesteps []int
	NumBoundary       int
	// ProbeTimesteps are the timesteps of the one-step error table
	// (Report.PerTimestep; default 100, 300, 500, 700, 900; an empty,
	// non-nil slice: none).
	ProbeTimesteps []int
	// Progress, if set, is called after each forward batch with the work
	// done and the total (in forward batches).
	Progress func(done, total int)
	// TeaCache, when set, sweeps TeaCache's step cache: at each of its
	// thresholds the teacher and every ρ are sampled again with the cache
	// (Report.TeaCache), beside the uncached rows.
	TeaCache *TeaCache
	// Lookback samples every row's steps after the first with the cells
	// chosen on the previous step's clean estimate (sample.Lookback), as
	// many as the router keeps. The random router and the TeaCache sweep
	// keep their own choice.
	Lookback bool
	// LookbackSpacing chooses lookback's cells (sample.Lookback.Spacing):
	// > 0 dc.CoverKeep's at that spacing, 0 dc.ChangeKeep's.
	LookbackSpacing float64
	// DenseTeacher runs the rows' dense steps (every cell kept: below
	// DenseBelow) through the backbone and the wide head alone
	// (sample.DC.DenseTeacher): the teacher's own pass when those are the
	// teacher's. The TeaCache sweep runs its dense steps as before.
	DenseTeacher bool
}

// TeaCache is the step-cache sweep of an evaluation: its thresholds, each
// model under its own calibration (sample.TeaCache).
type TeaCache struct {
	Thresholds []float64
	// Teacher and Model are the teacher's and the DC model's rescalings.
	Teacher, Model sample.Poly
}

// TeaCacheRun is one threshold of the sweep: the teacher and the DC model
// at each ρ, sampled with the step cache from the uncached rows' noise.
// GFLOPs per image count the steps as they ran: a skipped branch step
// costs what runs outside the blocks and the cache's signal.
type TeaCacheRun struct {
	Threshold float64     `json:"threshold"`
	Teacher   CachedRow   `json:"teacher"`
	Rows      []CachedRow `json:"rows"`
}

// CachedRow is one model setting sampled with the step cache: the
// teacher (Rho nil) or the DC model at a ρ. SamplePSNR compares its
// samples with the uncached teacher's.
type CachedRow struct {
	Rho            *float64 `json:"rho,omitempty"`
	GFLOPsPerImage float64  `json:"gflops_per_image"`
	SamplePSNR     float64  `json:"sample_psnr_db"`
	Quality
	// KeptPerStep is a DC row's mean kept tokens per image of the
	// conditional branch at each sampling step.
	KeptPerStep []float64     `json:"kept_per_step,omitempty"`
	TeaCache    TeaCacheStats `json:"teacache"`
}

// TeaCacheStats is what a row's step cache did: its threshold and the
// branch steps it skipped of those its sampling run took.
type TeaCacheStats struct {
	Threshold    float64 `json:"threshold"`
	SkippedSteps int     `json:"skipped_steps"`
	BranchSteps  int     `json:"branch_steps"`
}

// Row is one tail-drop fraction's results (the JSON row schema). With
// guided rows (Options.CFG > 1) kept tokens are the mean over both
// branches and FLOPs and time count both. Kept tokens and time are
// measured on the held-out inputs (one forward each, timesteps uniform);
// GFLOPs per image is the mean over the sampling run's steps.
type Row struct {
	Rho            float64 `json:"rho"`
	KeptTokens     float64 `json:"kept_tokens"`
	GFLOPsPerImage float64 `json:"gflops_per_image"`
	MsPerImage     float64 `json:"ms_per_image"`
	EpsRelMSE      float64 `json:"eps_rel_mse"`
	SamplePSNR     float64 `json:"sample_psnr_db"`
	Quality
	RandomRouter
	// KeptPerStep is the mean kept tokens per image of the conditional
	// branch at each sampling step, first (noisiest) to last; the steps'
	// timesteps are Report.SamplingTimesteps.
	KeptPerStep []float64 `json:"kept_per_step"`
}

// Quality scores samples as a distribution (with Options.Features; null
// without): FD is the Fréchet distance of their features to the data's,
// ClassAccuracy the fraction classified as the label they were drawn for.
//
// RMS is the samples' root mean square value, beside the data's
// (FeatureNetStats.DataRMS): the feature network normalises each sample's
// scale away, so FD does not see samples that drift to saturated colours,
// and this does.
type Quality struct {
	FD            *float64 `json:"fd"`
	ClassAccuracy *float64 `json:"class_accuracy"`
	RMS           *float64 `json:"sample_rms"`
	// FID and IS are the decoded samples' Fréchet Inception Distance to
	// the reference and their Inception Score (Options.Pictures).
	FID *float64 `json:"fid,omitempty"`
	IS  *float64 `json:"inception_score,omitempty"`
	// PromptFollowing is the share of samples whose class and foreground
	// colour are their caption's (shapes.PromptFollowing), for a
	// caption-conditioned teacher.
	PromptFollowing *float64 `json:"prompt_following,omitempty"`
}

// RandomRouter scores a setting's samples drawn again from the same noise
// with the router's choice of kept cells replaced by a uniformly random
// one (dc.RandomKeep: the same count in every sample at every step; the
// de-chunk weighs the tokens with the router's probabilities, see
// dc.Chooser), as Quality scores the router's: what the router's choice
// is worth. The random draws come from their own stream of the run's
// seed. Null without a feature network or with Options.NoRandomRouter.
type RandomRouter struct {
	FDRandomRouter              *float64 `json:"fd_random_router"`
	AccuracyRandomRouter        *float64 `json:"accuracy_random_router"`
	PromptFollowingRandomRouter *float64 `json:"prompt_following_random_router,omitempty"`
	// The same with the random cells kept apart (Options.SpreadRandom).
	FDSpreadRandom              *float64 `json:"fd_spread_random,omitempty"`
	AccuracySpreadRandom        *float64 `json:"accuracy_spread_random,omitempty"`
	PromptFollowingSpreadRandom *float64 `json:"prompt_following_spread_random,omitempty"`
}

// randomRouter files q as the random router's scores.
func randomRouter(q Quality) RandomRouter {
	return RandomRouter{FDRandomRouter: q.FD, AccuracyRandomRouter: q.ClassAccuracy, PromptFollowingRandomRouter: q.PromptFollowing}
}

// FeatureNetStats describes the feature network on the evaluation's data.
type FeatureNetStats struct {
	// Accuracy is the fraction of data samples classified as their label.
	Accuracy float64 `json:"accuracy"`
	Dim      int     `json:"dim"`
	// Samples is the data samples the reference statistics hold;
	// FloorSamples the size of each half behind data_fd_floor.
	Samples      int `json:"samples"`
	FloorSamples int `json:"floor_samples"`
	// DataRMS is the reference samples' root mean square value.
	DataRMS float64 `json:"data_rms"`
}

// LiteRow is the Lite-CFG pair's results. Kept tokens are per branch;
// FLOPs and time count both branches of one guided image; the ε error
// and PSNR compare the guided output with the teacher's at the same scale.
type LiteRow struct {
	RhoCond          float64 `json:"rho_cond"`
	RhoUncond        float64 `json:"rho_uncond"`
	Scale            float64 `json:"cfg_scale"`
	KeptTokens       float64 `json:"kept_tokens"` // mean of the two branches
	KeptTokensCond   float64 `json:"kept_tokens_cond"`
	KeptTokensUncond float64 `json:"kept_tokens_uncond"`
	GFLOPsPerImage   float64 `json:"gflops_per_image"`
	MsPerImage       float64 `json:"ms_per_image"`
	EpsRelMSE        float64 `json:"eps_rel_mse"`
	SamplePSNR       float64 `json:"sample_psnr_db"`
	Quality
	RandomRouter
	// TeacherGFLOPsPerImage is the guided teacher's cost (two forwards).
	TeacherGFLOPsPerImage float64 `json:"teacher_gflops_per_image"`
	// TeacherQuality scores the teacher's samples at this row's scale.
	TeacherQuality Quality `json:"teacher_quality"`
}

// TeacherRow is the fixed-patch teacher's cost on the same inputs, in the
// rows' terms (both forwards with guided rows).
type TeacherRow struct {
	Tokens         int     `json:"tokens"`
	GFLOPsPerImage float64 `json:"gflops_per_image"`
	MsPerImage     float64 `json:"ms_per_image"`
	Quality
}

// EdgeStats are the counts behind the edge density ratio.
type EdgeStats struct {
	// Derived is set when the data set had no edge masks and they were
	// derived from the latents (datasets.Set.DeriveEdges at Threshold).
	Derived          bool    `json:"derived"`
	Threshold        float64 `json:"threshold,omitempty"`
	Timesteps        []int   `json:"timesteps"`
	EdgeCells        int     `json:"edge_cells"`
	FlatCells        int     `json:"flat_cells"`
	EdgeKeptFraction float64 `json:"edge_kept_fraction"`
	FlatKeptFraction float64 `json:"flat_kept_fraction"`
}

// Report is an evaluation's result; its JSON form is
// {"rows": [...], "lite_cfg": {...}, "edge_density_ratio": r, ...}.
type Report struct {
	Rows    []Row      `json:"rows"`
	LiteCFG *LiteRow   `json:"lite_cfg,omitempty"`
	Teacher TeacherRow `json:"teacher"`
	// TeaCache is the step-cache sweep (Options.TeaCache), one run per
	// threshold.
	TeaCache []TeaCacheRun `json:"teacache,omitempty"`
	// EdgeDensityRatio is null when the router kept no flat cell or there
	// is no edge cell.
	EdgeDensityRatio *float64   `json:"edge_density_ratio"`
	Edges            *EdgeStats `json:"edges,omitempty"`
	// FeatureNet and DataFDFloor are set with Options.Features.
	FeatureNet  *FeatureNetStats `json:"feature_net,omitempty"`
	DataFDFloor *float64         `json:"data_fd_floor,omitempty"`
	// SamplingTimesteps are the sampler's timesteps, first to last.
	SamplingTimesteps []int `json:"sampling_timesteps"`
	// PerTimestep is the one-step error at each Options.ProbeTimesteps.
	PerTimestep []TimestepRow `json:"per_timestep"`

	Tokens     int        `json:"tokens"` // the scaffold's cells L (the most tokens a sample can keep)
	CFG        float64    `json:"cfg"`    // the rows' guidance scale (≤ 1: none)
	NumInputs  int        `json:"num_inputs"`
	NumSamples int        `json:"num_samples"`
	Steps      int        `json:"steps"`
	Seed       uint64     `json:"seed"`
	DataRange  [2]float64 `json:"data_range"`
	// GridRows names the elastic grid's rows, top to bottom.
	GridRows []string `json:"grid_rows"`
	// Process is the teacher's diffusion process: ProcessDDPM or
	// ProcessFlowMatching (the sampler, its timesteps and guidance).
	Process string `json:"process"`
	// Drop is the rule the rows dropped boundaries by: "lowest" (the
	// reference tail drop) or "spread" (dc.SpreadDrop).
	Drop string `json:"drop"`
	// Lookback says the rows chose their kept cells by the previous
	// step's clean estimate (Options.Lookback).
	Lookback bool `json:"lookback,omitempty"`
	// LookbackSpacing is Options.LookbackSpacing (absent: 0, the change
	// ranking).
	LookbackSpacing float64 `json:"lookback_spacing,omitempty"`
	// DenseTeacher says the rows' dense steps ran as the teacher
	// (Options.DenseTeacher).
	DenseTeacher bool `json:"dense_teacher,omitempty"`
	// DenseBelow, CoarseFrom and CoarseRho are the rows' schedule over
	// the sampling steps (Options.DenseBelow, Options.CoarseFrom).
	DenseBelow float64 `json:"dense_below"`
	CoarseFrom float64 `json:"coarse_from,omitempty"`
	CoarseRho  float64 `json:"coarse_rho,omitempty"`

	pics pictures
}

// pictures holds what the PNG writers draw.
type pictures struct {
	c, h, w int
	// render draws a latent (Options.Renderer); nil uses the linear
	// preview.
	render LatentRenderer
	// grid holds each grid row's samples [NumSamples, C, H, W].
	grid [][]float32
	// boundary: NumBoundary data samples × len(boundaryT) timesteps.
	boundaryX0   []float32 // [NumBoundary, C, H, W]
	boundaryT    []int
	boundaryKept [][]bool // [timestep][NumBoundary·H·W]
	// trajectory: the ρ = 0 sampling run's kept masks per step (first to
	// last) and its final samples.
	trajKept  [][]bool // [step][NumSamples·H·W]
	trajT     []int
	trajFinal []float32
}

// withDefaults fills zero options and validates them.
func (o Options) withDefaults() (Options, error) {
	if o.Rhos == nil {
		o.Rhos = DefaultRhos
	}
	if o.EdgeTimesteps == nil {
		o.EdgeTimesteps = DefaultEdgeTimesteps
	}
	if o.BoundaryTimesteps == nil {
		o.BoundaryTimesteps = DefaultBoundaryTimesteps
	}
	if o.ProbeTimesteps == nil {
		o.ProbeTimesteps = DefaultProbeTimesteps
	}
	for p, def := range map[*int]int{&o.NumInputs: defaultNumInputs, &o.NumSamples: defaultNumSamples, &o.Steps: defaultSteps,
		&o.BatchSize: defaultBatchSize, &o.NumBoundary: defaultNumBoundary} {
		if *p == 0 {
			*p = def
		}
	}
	if o.DiffusionSteps == 0 {
		o.DiffusionSteps = TrainSteps
	}
	if o.DiffusionSteps < 1 {
		return o, fmt.Errorf("eval: a diffusion of %d steps, want at least 1", o.DiffusionSteps)
	}
	if o.GridSamples == 0 {
		o.GridSamples = min(o.NumSamples, maxGridSamples)
	}
	switch {
	case o.GridSamples < 1 || o.GridSamples > o.NumSamples:
		return o, fmt.Errorf("eval: %d grid columns of %d samples per row: want 1..%d", o.GridSamples, o.NumSamples, o.NumSamples)
	case len(o.Rhos) == 0:
		return o, errors.New("eval: no tail-drop fraction to evaluate")
	case o.NumInputs < 1 || o.NumSamples < 1 || o.BatchSize < 1 || o.NumBoundary < 1:
		return o, fmt.Errorf("eval: inputs %d, samples %d, batch %d, boundary rows %d: want each ≥ 1", o.NumInputs, o.NumSamples, o.BatchSize, o.NumBoundary)
	case math.IsNaN(o.CFG) || math.IsInf(o.CFG, 0):
		return o, fmt.Errorf("eval: guidance scale %v: want a finite scale", o.CFG)
	case o.Steps < 1 || o.Steps > o.DiffusionSteps:
		return o, fmt.Errorf("eval: %d sampling steps, want 1..%d", o.Steps, o.DiffusionSteps)
	case !(o.DenseBelow >= 0 && o.DenseBelow <= float64(o.DiffusionSteps)):
		return o, fmt.Errorf("eval: dense below t = %v, want 0..%d", o.DenseBelow, o.DiffusionSteps)
	case !(o.CoarseFrom >= 0 && o.CoarseFrom <= float64(o.DiffusionSteps)):
		return o, fmt.Errorf("eval: coarse from t = %v, want 0..%d", o.CoarseFrom, o.DiffusionSteps)
	case !(o.CoarseRho >= 0 && o.CoarseRho < 1):
		return o, fmt.Errorf("eval: coarse ρ = %v, want 0 ≤ ρ < 1", o.CoarseRho)
	case !(o.LookbackSpacing >= 0) || math.IsInf(o.LookbackSpacing, 1):
		return o, fmt.Errorf("eval: lookback spacing %v, want a finite value ≥ 0", o.LookbackSpacing)
	case o.LookbackSpacing > 0 && !o.Lookback:
		return o, fmt.Errorf("eval: lookback spacing %v without lookback: it chooses lookback's cells", o.LookbackSpacing)
	}
	for _, r := range o.Rhos {
		if !(r >= 0 && r < 1) {
			return o, fmt.Errorf("eval: ρ = %v, want 0 ≤ ρ < 1", r)
		}
	}
	if l := o.Lite; l != nil {
		if !(l.Cond >= 0 && l.Cond < 1 && l.Uncond >= 0 && l.Uncond < 1) {
			return o, fmt.Errorf("eval: Lite-CFG fractions %v, %v: want each in [0, 1)", l.Cond, l.Uncond)
		}
		if !(l.Scale > 1) || math.IsInf(l.Scale, 0) {
			return o, fmt.Errorf("eval: Lite-CFG guidance scale %v: want a finite scale > 1", l.Scale)
		}
	}
	for _, ts := range [][]int{o.EdgeTimesteps, o.BoundaryTimesteps, o.ProbeTimesteps} {
		for _, t := range ts {
			if t < 0 || t >= o.DiffusionSteps {
				return o, fmt.Errorf("eval: timestep %d outside [0, %d)", t, o.DiffusionSteps)
			}
		}
	}
	return o, nil
}

// check makes sure model, teacher and data describe the same latents.
func check(m *dc.Model, teacher Teacher, data *datasets.Set) error {
	cfg := m.Config
	if data.C != cfg.InChannels || data.H != cfg.GridRows || data.W != cfg.GridCols {
		return fmt.Errorf("eval: the data set holds [%d %d %d] latents, the models take [%d %d %d]",
			data.C, data.H, data.W, cfg.InChannels, cfg.GridRows, cfg.GridCols)
	}
	if err := teacher.check(cfg, data); err != nil {
		return err
	}
	return data.Validate()
}

// Run evaluates m against teacher on data.
func Run(m *dc.Model, teacher Teacher, data *datasets.Set, opts Options) (*Report, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	if err := check(m, teacher, data); err != nil {
		return nil, err
	}
	if !teacher.probes() {
		o.ProbeTimesteps = nil
	}
	restore := noGrad(m)
	defer restore()

	e := &evaluator{m: m, tc: teacher, o: o, data: data, refs: map[float64]*reference{}}
	e.cfg = m.Config
	e.L = e.cfg.Tokens()
	e.n = e.cfg.InChannels * e.L
	e.nIn = min(o.NumInputs, data.N)
	e.total = e.work()
	lo, hi := data.Range()
	r := &Report{
		Tokens: e.cfg.Cells(), CFG: o.CFG, NumInputs: e.nIn, NumSamples: o.NumSamples, Steps: o.Steps, Seed: o.Seed,
		DataRange: [2]float64{float64(lo), float64(hi)},
	}
	r.Drop = "lowest"
	if e.cfg.SpreadDrop {
		r.Drop = "spread"
	}
	r.Lookback, r.LookbackSpacing = o.Lookback, o.LookbackSpacing
	r.DenseTeacher = o.DenseTeacher
	r.DenseBelow = o.DenseBelow
	if o.CoarseFrom > 0 {
		r.CoarseFrom, r.CoarseRho = o.CoarseFrom, o.CoarseRho
	}
	r.pics.c, r.pics.h, r.pics.w = e.cfg.InChannels, e.cfg.GridRows, e.cfg.GridCols
	r.pics.render = e.o.Renderer
	e.r = r
	if e.train, e.sampler, r.SamplingTimesteps, err = teacher.processes(o); err != nil {
		return nil, err
	}
	r.Process = teacher.process()
	if err := e.inputs(); err != nil {
		return nil, err
	}
	if o.Features != nil {
		if err := e.realStats(); err != nil {
			return nil, err
		}
	}
	if err := e.rows(); err != nil {
		return nil, err
	}
	if err := e.timesteps(); err != nil {
		return nil, err
	}
	if o.Lite != nil {
		if err := e.lite(); err != nil {
			return nil, err
		}
	}
	if err := e.edges(); err != nil {
		return nil, err
	}
	if err := e.boundaries(); err != nil {
		return nil, err
	}
	return r, nil
}

// evaluator carries one run's state.
type evaluator struct {
	m    *dc.Model
	tc   Teacher
	cfg  *dc.Config
	o    Options
	data *datasets.Set
	r    *Report

	L, n, nIn   int
	done, total int
	// train is the process the held-out inputs are noised with (the full
	// training schedule), sampler the one samples are drawn with.
	train, sampler diffusion.Process

	// real holds the feature statistics of the data's first NumSamples
	// samples (with Options.Features).
	real featnet.Moments

	// The held-out inputs.
	xt []float32 // [nIn, C, H, W]
	t  []int     // their timesteps (Options' scale)
	tm []float32 // the model times of those timesteps
	y  []int     // their conditions (Teacher's keys)
	// refs holds the teacher's results per guidance scale.
	refs map[float64]*reference
}

// reference is what the teacher gives at one guidance scale.
type reference struct {
	eps     []float32 // ε on the held-out inputs [nIn, C, H, W]
	samples []float32 // [NumSamples, C, H, W]
	ms      float64   // wall time per (guided) image on the inputs
	quality Quality
}

// setting is one way to run the DC model: the conditional branch at
// tail-drop fraction cond; with a guidance scale > 1, also the
// unconditional branch at uncond, batched with it (Lite-CFG when they
// differ).
type setting struct{ cond, uncond, scale float64 }

func (s setting) guided(t Teacher) bool { return t.guided(s.scale) }

// randomStream is the random router's stream of the run's seed under s:
// one per way of running the model (an unguided setting is its ρ alone),
// whatever other rows the run has, and apart from the held-out inputs'
// (1), the edge density's (100 + k) and the boundary maps' (200 + j).
func (s setting) randomStream(t Teacher) uint64 {
	if !s.guided(t) {
		s.uncond, s.scale = s.cond, 0
	}
	h := fnv.New64a()
	fmt.Fprintf(h, "random router %g %g %g", s.cond, s.uncond, s.scale)
	return h.Sum64()
}

// name is the setting's file-safe name, for the pictures of its samples.
func (s setting) name() string {
	if s.cond == s.uncond {
		return "rho" + scaleName(s.cond) + "-cfg" + scaleName(s.scale)
	}
	return "lite" + scaleName(s.cond) + "-" + scaleName(s.uncond) + "-cfg" + scaleName(s.scale)
}

// measured is a setting's results.
type measured struct {
	keptCond, keptUncond float64 // mean kept tokens per image of each branch
	gflops, ms           float64 // per (guided) image: both branches
	epsRelMSE, psnr      float64
	samples              []float32
	quality              Quality
	random               RandomRouter
	keptPerStep          []float64
	stepGFLOPs           []float64 // per guided image, each sampling step
	masks                [][]bool  // the sampling run's kept masks, when asked for
}

func (e *evaluator) batches(n int) int { return (n + e.o.BatchSize - 1) / e.o.BatchSize }

// work counts the forward batches (and sampling steps) Run performs, for
// progress.
func (e *evaluator) work() int {
	in, smp := e.batches(e.nIn), e.o.Steps
	runs := len(e.o.Rhos) + 1 // each ρ and the teacher
	settings := len(e.o.Rhos)
	if l := e.o.Lite; l != nil {
		runs++
		settings++
		if l.Scale != e.o.CFG {
			runs++ // the teacher at the Lite-CFG scale
		}
	}
	w := runs * (in + smp)
	if e.randomRouter() {
		w += settings * smp
		if e.o.SpreadRandom {
			w += settings * smp
		}
	}
	if tc := e.o.TeaCache; tc != nil {
		w += len(tc.Thresholds) * (1 + len(e.o.Rhos)) * smp
	}
	w += (len(e.o.EdgeTimesteps) + len(e.o.ProbeTimesteps)) * in
	return w + len(e.o.BoundaryTimesteps)*e.batches(min(e.o.NumBoundary, e.data.N))
}

func (e *evaluator) step() {
	e.done++
	if e.o.Progress != nil {
		e.o.Progress(e.done, e.total)
	}
}

// randomRouter says whether the rows get the random-router baseline:
// asked for, and a feature network to score it.
func (e *evaluator) randomRouter() bool {
	return !e.o.NoRandomRouter && e.o.Features != nil
}

// noise draws standard normal values from a stream of the run's seed.
func (e *evaluator) noise(stream uint64, n int) []float32 {
	rng := rand.New(rand.NewPCG(e.o.Seed, stream))
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(rng.NormFloat64())
	}
	return v
}

// noised returns data samples 0..k−1 noised by the training process at
// timesteps t (one per sample), with noise from stream, the model times of
// those timesteps, and the samples' conditions.
func (e *evaluator) noised(k int, t []int, stream uint64) (xt, tm []float32, y []int, err error) {
	idx := make([]int, k)
	for i := range idx {
		idx[i] = i
	}
	x0, labels, err := e.data.Batch(nil, nil, idx)
	if err != nil {
		return nil, nil, nil, err
	}
	y = e.tc.keys(idx, labels)
	levels := make([]int, k)
	for i, v := range t {
		levels[i] = e.tc.level(v)
	}
	nz := &diffusion.Noise{Levels: levels, Noise: e.noise(stream, len(x0))}
	xt = make([]float32, len(x0))
	if err := e.train.Noisy(xt, x0, nz, diffusion.Shape{B: k, C: e.cfg.InChannels, HW: e.L}); err != nil {
		return nil, nil, nil, fmt.Errorf("eval: %w", err)
	}
	if tm, err = e.train.ModelTimes(nz); err != nil {
		return nil, nil, nil, fmt.Errorf("eval: %w", err)
	}
	return xt, tm, y, nil
}

// inputs builds the held-out noisy inputs: data samples 0..nIn−1 at
// timesteps spread evenly over [0, DiffusionSteps).
func (e *evaluator) inputs() error {
	e.t = make([]int, e.nIn)
	for i := range e.t {
		e.t[i] = int((float64(i) + 0.5) * float64(e.o.DiffusionSteps) / float64(e.nIn))
	}
	var err error
	e.xt, e.tm, e.y, err = e.noised(e.nIn, e.t, 1)
	return err
}

// teacherForward runs the teacher on a batch x [B, C, H, W] at model
// times t for conditions y, guided inside at scale when it guides: the B
// (guided) outputs.
func (e *evaluator) teacherForward(x, t []float32, y []int, scale float64) ([]float32, error) {
	c, err := e.tc.conditions(y)
	if err != nil {
		return nil, err
	}
	m := e.tc.model(c)
	if e.tc.guided(scale) {
		m = sample.SelfGuided(m, e.tc.rule, float32(scale), e.L)
	}
	return m(x, t, false)
}

// reference runs the teacher at a guidance scale (once per scale).
func (e *evaluator) reference(scale float64) (*reference, error) {
	if ref, ok := e.refs[scale]; ok {
		return ref, nil
	}
	ref := &reference{eps: make([]float32, 0, len(e.xt))}
	var elapsed time.Duration
	for lo := 0; lo < e.nIn; lo += e.o.BatchSize {
		hi := min(lo+e.o.BatchSize, e.nIn)
		start := time.Now()
		out, err := e.teacherForward(e.xt[lo*e.n:hi*e.n], e.tm[lo:hi], e.y[lo:hi], scale)
		elapsed += time.Since(start)
		if err != nil {
			return nil, fmt.Errorf("eval: teacher: %w", err)
		}
		ref.eps = append(ref.eps, e.epsOf(out, hi-lo)...)
		e.step()
	}
	ref.ms = ms(elapsed) / float64(e.nIn)
	if !slices.ContainsFunc(ref.eps, func(v float32) bool { return v != 0 }) {
		// Every relative error would divide by zero: a teacher whose
		// output layer still holds its zero initialisation.
		return nil, fmt.Errorf("eval: teacher: its prediction is 0 on all %d held-out inputs (an untrained teacher, whose output layer starts at zero?): the errors relative to it are undefined", e.nIn)
	}
	c, err := e.tc.conditions(e.tc.sampleKeys(e.o.NumSamples))
	if err != nil {
		return nil, fmt.Errorf("eval: teacher: %w", err)
	}
	if ref.samples, err = e.sample(e.tc.model(c), scale); err != nil {
		return nil, fmt.Errorf("eval: teacher: %w", err)
	}
	if ref.quality, err = e.score("teacher-cfg"+scaleName(scale), ref.samples); err != nil {
		return nil, fmt.Errorf("eval: teacher: %w", err)
	}
	e.refs[scale] = ref
	return ref, nil
}

// epsOf keeps the predicted channels a sampler reads of the first b
// outputs: the first n = C·HW values of each (DDPM: ε of 2C channels; flow
// matching: the whole velocity).
func (e *evaluator) epsOf(out []float32, b int) []float32 {
	per := e.tc.outChannels() * e.L
	eps := make([]float32, 0, b*e.n)
	for i := range b {
		eps = append(eps, out[i*per:i*per+e.n]...)
	}
	return eps
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// relMSE is Σ(a − b)² / Σb².
func relMSE(a, b []float32) float64 {
	var num, den float64
	for i := range a {
		d := float64(a[i]) - float64(b[i])
		num += d * d
		den += float64(b[i]) * float64(b[i])
	}
	if den == 0 {
		return math.Inf(1)
	}
	return num / den
}

// psnr is 10·log10(R² / MSE) over all values, capped at MaxPSNR.
func psnr(a, b []float32, rangeR float64) float64 {
	var s float64
	for i := range a {
		d := float64(a[i]) - float64(b[i])
		s += d * d
	}
	mse := s / float64(len(a))
	if mse == 0 || rangeR <= 0 {
		return MaxPSNR
	}
	return min(10*math.Log10(rangeR*rangeR/mse), MaxPSNR)
}

// dc is the DC model under setting s, recording into stats (nil: not
// at all): with a scale that guides, it runs [x; x] with [y;
// unconditional] in one batch, the branches at their fractions, combined
// as the teacher's process guides. Samples at times below DenseBelow run
// dc.Dense, those at or above CoarseFrom at CoarseRho or more.
func (e *evaluator) dc(s setting, stats *sample.Stats) *sample.DC {
	d := &sample.DC{Model: e.m, Rho: float32(s.cond), RhoUncond: float32(s.uncond), DenseBelow: float32(e.o.DenseBelow),
		CoarseFrom: float32(e.o.CoarseFrom), CoarseRho: float32(e.o.CoarseRho), Timestep: e.tc.timestep(), Stats: stats,
		DenseTeacher: e.o.DenseTeacher}
	if s.guided(e.tc) {
		d.Rule, d.Scale = e.tc.rule, float32(s.scale)
	}
	return d
}

// forward runs the DC model on a batch x [B, C, H, W] at model times t
// for conditions y under setting s: [B, OutChannels, H, W] unguided, or
// [2B, OutChannels, H, W] guided, the first B the guided outputs.
func (e *evaluator) forward(s setting, x, t []float32, y []int) ([]float32, *dc.Result, error) {
	c, err := e.tc.conditions(y)
	if err != nil {
		return nil, nil, err
	}
	return e.dc(s, nil).Forward(x, t, c, false)
}

// routed runs the DC model at ρ = 0 (never dense) on a batch, for where
// its router keeps tokens.
func (e *evaluator) routed(x, t []float32, y []int) (*dc.Result, error) {
	c, err := e.tc.conditions(y)
	if err != nil {
		return nil, err
	}
	in, err := c.Input(t, false)
	if err != nil {
		return nil, err
	}
	_, res, err := e.m.Predict(x, in, nil)
	return res, err
}

// sample draws NumSamples samples for the teacher's sampleKeys (labels
// 0, 1, 2, … mod the data set's classes; the data's first captions) from
// the run's seed, in one batch (so that the samples do not depend on
// BatchSize), guided at scale (off at ≤ 1) by the process.
func (e *evaluator) sample(model diffusion.Model, scale float64) ([]float32, error) {
	x, err := e.sampler.Sample(model,
		diffusion.Shape{B: e.o.NumSamples, C: e.cfg.InChannels, HW: e.L}, diffusion.SampleOptions{
			Guidance: scale, Seed: e.o.Seed,
			Progress: func(done, total int) { e.step() },
		})
	if err != nil {
		return nil, fmt.Errorf("eval: sampling: %w", err)
	}
	return x, nil
}

// measure evaluates one setting against the teacher at its scale;
// masks asks for the sampling run's kept masks.
func (e *evaluator) measure(s setting, masks bool) (*measured, error) {
	ref, err := e.reference(s.scale)
	if err != nil {
		return nil, err
	}
	eps := make([]float32, 0, len(ref.eps))
	var elapsed time.Duration
	var keptC, keptU int
	for lo := 0; lo < e.nIn; lo += e.o.BatchSize {
		hi := min(lo+e.o.BatchSize, e.nIn)
		start := time.Now()
		out, res, err := e.forward(s, e.xt[lo*e.n:hi*e.n], e.tm[lo:hi], e.y[lo:hi])
		elapsed += time.Since(start)
		if err != nil {
			return nil, err
		}
		b := hi - lo
		eps = append(eps, e.epsOf(out, b)...)
		for i, k := range res.Chunks.NumKept {
			if i < b {
				keptC += k
			} else {
				keptU += k
			}
		}
		e.step()
	}
	n := float64(e.nIn)
	m := &measured{
		keptCond: float64(keptC) / n, keptUncond: float64(keptU) / n,
		ms:        ms(elapsed) / n,
		epsRelMSE: relMSE(eps, ref.eps),
	}
	c, err := e.tc.conditions(e.tc.sampleKeys(e.o.NumSamples))
	if err != nil {
		return nil, err
	}
	// The DC model guides itself (Lite-CFG inside): the process samples
	// it unguided.
	stats := &sample.Stats{RecordMasks: masks}
	d := e.dc(s, stats)
	if e.o.Lookback {
		d.Lookback = &sample.Lookback{Clean: e.sampler.Clean, Spacing: e.o.LookbackSpacing}
	}
	if m.samples, err = e.sample(d.Denoiser(c), 0); err != nil {
		return nil, err
	}
	m.keptPerStep, m.masks = stats.Kept, stats.Masks
	m.stepGFLOPs = e.perImage(stats.FLOPs)
	// What an image costs is what its sampling run spends: the router
	// (and DenseBelow) spend differently at each step.
	m.gflops = mean(m.stepGFLOPs)
	m.psnr = psnr(m.samples, ref.samples, e.r.DataRange[1]-e.r.DataRange[0])
	if m.quality, err = e.score(s.name(), m.samples); err != nil {
		return nil, err
	}
	if e.randomRouter() {
		// The same noise as the router's samples: only the kept cells
		// differ.
		rng := rand.New(rand.NewPCG(e.o.Seed, s.randomStream(e.tc)))
		q, err := e.chosenQuality(s, c, dc.RandomKeep(rng))
		if err != nil {
			return nil, fmt.Errorf("random router: %w", err)
		}
		m.random = randomRouter(q)
		if e.o.SpreadRandom {
			cfg := e.m.Config
			q, err := e.chosenQuality(s, c, dc.SpreadRandomKeep(rng, cfg.CellRows(), cfg.CellCols()))
			if err != nil {
				return nil, fmt.Errorf("random router kept apart: %w", err)
			}
			m.random.FDSpreadRandom, m.random.AccuracySpreadRandom, m.random.PromptFollowingSpreadRandom = q.FD, q.ClassAccuracy, q.PromptFollowing
		}
	}
	return m, nil
}

// chosenQuality scores setting s's samples drawn with choose's cells in
// place of the router's.
func (e *evaluator) chosenQuality(s setting, c sample.Conditions, choose dc.Chooser) (Quality, error) {
	d := e.dc(s, nil)
	d.Choose = choose
	x, err := e.sample(d.Denoiser(c), 0)
	if err != nil {
		return Quality{}, err
	}
	return e.scoreFeatures(x)
}

// perImage turns a sampling run's FLOPs per step into GFLOPs per image.
func (e *evaluator) perImage(flops []float64) []float64 {
	g := make([]float64, len(flops))
	for i, f := range flops {
		g[i] = f / float64(e.o.NumSamples) / 1e9
	}
	return g
}

// scaleName is a guidance scale in grid row names.
func scaleName(scale float64) string { return strconv.FormatFloat(scale, 'g', -1, 64) }

// rows evaluates every ρ (both branches at ρ when the rows are guided).
func (e *evaluator) rows() error {
	scale := e.o.CFG
	ref, err := e.reference(scale)
	if err != nil {
		return err
	}
	e.r.Teacher = TeacherRow{Tokens: e.tc.tokens(), GFLOPsPerImage: e.tc.forwardGFLOPs(), MsPerImage: ref.ms, Quality: ref.quality}
	name := "teacher"
	if e.tc.guided(scale) {
		e.r.Teacher.GFLOPsPerImage *= 2
		name += " cfg=" + scaleName(scale)
	}
	e.r.GridRows = append(e.r.GridRows, name)
	e.r.pics.grid = append(e.r.pics.grid, e.gridOf(ref.samples))
	for i, rho := range e.o.Rhos {
		// The first row's sampling run is the trajectory picture's.
		m, err := e.measure(setting{cond: rho, uncond: rho, scale: scale}, i == 0)
		if err != nil {
			return fmt.Errorf("eval: ρ = %v: %w", rho, err)
		}
		if i == 0 {
			e.r.pics.trajKept, e.r.pics.trajFinal = m.masks, m.samples
		}
		kept := m.keptCond
		if e.tc.guided(scale) {
			kept = (m.keptCond + m.keptUncond) / 2
		}
		e.r.Rows = append(e.r.Rows, Row{Rho: rho, KeptTokens: kept, GFLOPsPerImage: m.gflops, MsPerImage: m.ms, EpsRelMSE: m.epsRelMSE, SamplePSNR: m.psnr,
			Quality: m.quality, RandomRouter: m.random, KeptPerStep: m.keptPerStep})
		e.r.GridRows = append(e.r.GridRows, "rho="+strconv.FormatFloat(rho, 'g', -1, 64))
		e.r.pics.grid = append(e.r.pics.grid, e.gridOf(m.samples))
	}
	e.r.pics.trajT = e.r.SamplingTimesteps
	if tc := e.o.TeaCache; tc != nil {
		for _, th := range tc.Thresholds {
			if err := e.teaCache(th, ref); err != nil {
				return fmt.Errorf("eval: TeaCache %g: %w", th, err)
			}
		}
	}
	return nil
}

// teaCache samples the teacher and every ρ with the step cache at
// threshold th, at the rows' guidance scale, whose uncached teacher
// samples are ref's.
func (e *evaluator) teaCache(th float64, ref *reference) error {
	o, scale, steps := e.o.TeaCache, e.o.CFG, len(e.r.SamplingTimesteps)
	run := TeaCacheRun{Threshold: th}
	c, err := e.tc.conditions(e.tc.sampleKeys(e.o.NumSamples))
	if err != nil {
		return err
	}
	tc, err := sample.NewTeaCache(th, o.Teacher, steps)
	if err != nil {
		return err
	}
	model, f, err := e.tc.cached(c, tc)
	if err != nil {
		return fmt.Errorf("teacher: %w", err)
	}
	samples, err := e.sample(model, scale)
	if err != nil {
		return fmt.Errorf("teacher: %w", err)
	}
	gflops := tc.TeacherFLOPs(e.tc.forwardGFLOPs()*1e9, f, e.o.NumSamples) / float64(e.o.NumSamples*steps) / 1e9
	if run.Teacher, err = e.cachedRow(fmt.Sprintf("teacher teacache=%g", th), "teacher-teacache"+scaleName(th), nil, gflops, samples, ref, tc); err != nil {
		return fmt.Errorf("teacher: %w", err)
	}
	for _, rho := range e.o.Rhos {
		stats := &sample.Stats{}
		d := e.dc(setting{cond: rho, uncond: rho, scale: scale}, stats)
		d.DenseTeacher = false // the cache plans every step, dense ones too
		if d.Cache, err = sample.NewTeaCache(th, o.Model, steps); err != nil {
			return err
		}
		if samples, err = e.sample(d.Denoiser(c), 0); err != nil {
			return fmt.Errorf("ρ = %v: %w", rho, err)
		}
		name := fmt.Sprintf("rho=%g teacache=%g", rho, th)
		row, err := e.cachedRow(name, "rho"+scaleName(rho)+"-teacache"+scaleName(th), &rho, mean(e.perImage(stats.FLOPs)), samples, ref, d.Cache)
		if err != nil {
			return fmt.Errorf("ρ = %v: %w", rho, err)
		}
		row.KeptPerStep = stats.Kept
		run.Rows = append(run.Rows, row)
	}
	e.r.TeaCache = append(e.r.TeaCache, run)
	return nil
}

// cachedRow scores one cached sampling run's samples: grid names its row
// of the elastic grid, file its pictures.
func (e *evaluator) cachedRow(grid, file string, rho *float64, gflops float64, samples []float32, ref *reference, tc *sample.TeaCache) (CachedRow, error) {
	q, err := e.score(file, samples)
	if err != nil {
		return CachedRow{}, err
	}
	skipped, total := tc.Skipped()
	e.r.GridRows = append(e.r.GridRows, grid)
	e.r.pics.grid = append(e.r.pics.grid, e.gridOf(samples))
	return CachedRow{Rho: rho, GFLOPsPerImage: gflops, SamplePSNR: psnr(samples, ref.samples, e.r.DataRange[1]-e.r.DataRange[0]),
		Quality: q, TeaCache: TeaCacheStats{Threshold: tc.Threshold, SkippedSteps: skipped, BranchSteps: total}}, nil
}

// lite evaluates the Lite-CFG pair against the teacher at its scale.
func (e *evaluator) lite() error {
	l := e.o.Lite
	m, err := e.measure(setting{cond: l.Cond, uncond: l.Uncond, scale: l.Scale}, false)
	if err != nil {
		return fmt.Errorf("eval: Lite-CFG: %w", err)
	}
	e.r.LiteCFG = &LiteRow{
		RhoCond: l.Cond, RhoUncond: l.Uncond, Scale: l.Scale,
		KeptTokens: (m.keptCond + m.keptUncond) / 2, KeptTokensCond: m.keptCond, KeptTokensUncond: m.keptUncond,
		GFLOPsPerImage: m.gflops, MsPerImage: m.ms, EpsRelMSE: m.epsRelMSE, SamplePSNR: m.psnr, Quality: m.quality, RandomRouter: m.random,
		TeacherGFLOPsPerImage: 2 * e.tc.forwardGFLOPs(),
		TeacherQuality:        e.refs[l.Scale].quality,
	}
	if l.Scale != e.o.CFG {
		e.r.GridRows = append(e.r.GridRows, "teacher cfg="+scaleName(l.Scale))
		e.r.pics.grid = append(e.r.pics.grid, e.gridOf(e.refs[l.Scale].samples))
	}
	e.r.GridRows = append(e.r.GridRows, fmt.Sprintf("lite cfg=%s rho=%g/%g", scaleName(l.Scale), l.Cond, l.Uncond))
	e.r.pics.grid = append(e.r.pics.grid, e.gridOf(m.samples))
	return nil
}

// edges measures where the router keeps tokens at ρ = 0.
func (e *evaluator) edges() error {
	st := &EdgeStats{Timesteps: e.o.EdgeTimesteps}
	masks := e.data.Edges
	if masks == nil {
		st.Derived = true
		st.Threshold = datasets.DeriveEdgesFraction * (e.r.DataRange[1] - e.r.DataRange[0])
		masks = e.data.DeriveEdges(st.Threshold)
	}
	hw := e.data.H * e.data.W
	var keptEdge, keptFlat int
	for k, tv := range e.o.EdgeTimesteps {
		t := make([]int, e.nIn)
		for i := range t {
			t[i] = tv
		}
		xt, tm, y, err := e.noised(e.nIn, t, 100+uint64(k))
		if err != nil {
			return err
		}
		for lo := 0; lo < e.nIn; lo += e.o.BatchSize {
			hi := min(lo+e.o.BatchSize, e.nIn)
			res, err := e.routed(xt[lo*e.n:hi*e.n], tm[lo:hi], y[lo:hi])
			if err != nil {
				return fmt.Errorf("eval: edge density: %w", err)
			}
			for b := range hi - lo {
				edge := masks[(lo+b)*hw : (lo+b+1)*hw]
				kept := e.cfg.LatentMask(res.Chunks.Kept[b*e.cfg.Cells() : (b+1)*e.cfg.Cells()])
				// The first and last cell are always kept (forced
				// boundaries): they say nothing about the router.
				for l := range e.L {
					if c := e.cfg.CellOf(l); c == 0 || c == e.cfg.Cells()-1 {
						continue
					}
					switch {
					case edge[l]:
						st.EdgeCells++
						if kept[l] {
							keptEdge++
						}
					default:
						st.FlatCells++
						if kept[l] {
							keptFlat++
						}
					}
				}
			}
			e.step()
		}
	}
	if st.EdgeCells > 0 {
		st.EdgeKeptFraction = float64(keptEdge) / float64(st.EdgeCells)
	}
	if st.FlatCells > 0 {
		st.FlatKeptFraction = float64(keptFlat) / float64(st.FlatCells)
	}
	e.r.Edges = st
	if st.FlatKeptFraction > 0 && st.EdgeCells > 0 {
		ratio := st.EdgeKeptFraction / st.FlatKeptFraction
		e.r.EdgeDensityRatio = &ratio
	}
	return nil
}

// boundaries records the kept masks of the first data samples at the
// boundary-map timesteps (ρ = 0).
func (e *evaluator) boundaries() error {
	k := min(e.o.NumBoundary, e.data.N)
	p := &e.r.pics
	p.boundaryT = e.o.BoundaryTimesteps
	idx := make([]int, k)
	for i := range idx {
		idx[i] = i
	}
	x0, _, err := e.data.Batch(nil, nil, idx)
	if err != nil {
		return err
	}
	p.boundaryX0 = x0
	for j, tv := range e.o.BoundaryTimesteps {
		t := make([]int, k)
		for i := range t {
			t[i] = tv
		}
		xt, tm, y, err := e.noised(k, t, 200+uint64(j))
		if err != nil {
			return err
		}
		var kept []bool
		for lo := 0; lo < k; lo += e.o.BatchSize {
			hi := min(lo+e.o.BatchSize, k)
			res, err := e.routed(xt[lo*e.n:hi*e.n], tm[lo:hi], y[lo:hi])
			if err != nil {
				return fmt.Errorf("eval: boundary map: %w", err)
			}
			kept = append(kept, e.cfg.LatentMask(res.Chunks.Kept)...)
			e.step()
		}
		p.boundaryKept = append(p.boundaryKept, kept)
	}
	return nil
}

// noGrad turns gradient tracking off for the DC model's parameters (the
// scaffold's and the backbone's), so that
// inference keeps no graph, and returns a function restoring each
// parameter's own setting: during training, frozen parameters track no
// gradient and the others do.
func noGrad(m *dc.Model) func() {
	sets := []*params.Set{m.Params}
	if bb := m.Backbone.Parameters(); bb != nil {
		sets = append(sets, bb)
	}
	var ps []*params.Param
	var was []bool
	for _, s := range sets {
		for _, p := range s.List() {
			ps, was = append(ps, p), append(was, p.RequiresGrad())
			p.SetRequiresGrad(false)
		}
	}
	return func() {
		for i, p := range ps {
			p.SetRequiresGrad(was[i])
		}
	}
}

// mean is the average of v (0 for none).
func mean(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	var s float64
	for _, x := range v {
		s += x
	}
	return s / float64(len(v))
}

// Package recipes decodes, checks and plans dcdit's TOML recipes: one file
// that drives a whole run — upcycling a pretrained DiT into a DC-DiT
// (grafting-style distillation, then finetuning with multi-budget
// training), or training a DiT or DC-DiT from scratch — and its
// evaluation.
//
// Decoding is strict: an unknown key, a value of the wrong type or a value
// out of range is a [Problem] naming the file, the key, its line, what was
// expected and what was found, and every problem of a file is reported at
// once. Keys left out take the defaults documented on each field (several
// depend on the stage's kind, see [Stage]); [Recipe.Settings] lists every
// value with a mark on the defaulted ones, so `dcdit recipe plan` shows
// exactly what a run will use.
//
// Relative paths in a recipe are resolved against the recipe's folder.
//
// A recipe in brief (every key, with its default, is documented on the
// types below):
//
//	name = "toy-dit"
//	seed = 0
//	[base]                 # the pretrained teacher; layout auto-detected
//	path = "../testdata/teacher/model.safetensors"
//	[scaffold]             # the DC scaffold grafted around the backbone
//	target_n = 4.0
//	[scaffold.router]
//	ratio_loss_weight = 0.03
//	[data]                 # what the stages train on
//	source = "teacher"
//	samples = 256
//	[[stage]]              # run in order
//	kind = "distill"
//	steps = 200
//	[[stage]]
//	kind = "finetune"
//	steps = 400
//	rho = [0.0, 0.2, 0.4, 0.6]
//	[save]
//	every = 100
//	[eval]
//	rho = [0.0, 0.3, 0.6]
package recipes

import (
	"github.com/dcdit/dcdit/family"
	"github.com/dcdit/dcdit/upcycle"
)

// Stage kinds.
const (
	// KindDistill is grafting-style distillation: the DC model learns to
	// reproduce the frozen teacher's prediction on the same noisy input,
	// timestep and class (L1 or L2), plus the ratio loss.
	KindDistill = "distill"
	// KindFinetune trains with the DiT hybrid loss (and multi-budget
	// training when the model has a scaffold), starting from the previous
	// stage or the upcycled base.
	KindFinetune = "finetune"
	// KindTrain trains with the DiT hybrid loss from the weights at hand:
	// a fresh initialisation when the recipe has [model] instead of [base].
	KindTrain = "train"
)

// Loss names.
const (
	LossL1     = "l1"     // distill: mean |student − teacher|
	LossL2     = "l2"     // distill: mean (student − teacher)²
	LossHybrid = "hybrid" // finetune/train: DiT's ε MSE + variational bound on learned σ
)

// Data sources.
const (
	// SourceTeacher generates the training latents with the base model
	// (DDPM ancestral sampling, as `dcdit sample` does).
	SourceTeacher = "teacher"
	// SourceFile reads latents and labels from a safetensors file.
	SourceFile = "file"
	// SourceShapes generates dcdit's procedural data set of flat coloured
	// shapes with sharp edges directly as latents, deterministically from
	// the seed (used to train the bundled toy teacher).
	SourceShapes = "shapes"
)

// Learning-rate schedules (after the linear warm-up).
const (
	ScheduleConstant = "constant" // stay at lr
	ScheduleCosine   = "cosine"   // cosine decay from lr to min_lr at the last step
	ScheduleLinear   = "linear"   // linear decay from lr to min_lr at the last step
)

// The diffusion.process values.
const (
	ProcessDDPM         = family.ProcessDDPM
	ProcessFlowMatching = family.ProcessFlowMatching
)

// DefaultModelKind is model.kind when [model] leaves it out: the
// class-conditional DiT.
const DefaultModelKind = "dit"

// Recipe is a decoded, defaulted recipe. Exactly one of Base and Model is
// set; Scaffold is nil for a fixed-patch DiT.
type Recipe struct {
	// Name names the run (its default output folder is runs/<name>).
	// Default: the file's base name without extension.
	Name string `toml:"name"`
	// Description is free text for the run's model card. Default: empty.
	Description string `toml:"description"`
	// Seed seeds every random draw of the run (initialisation, data
	// order, noise, timesteps, ρ draws). Default: 0.
	Seed int64 `toml:"seed"`
	// LogEvery is the number of steps between lines of the metrics log.
	// Default: 10.
	LogEvery int `toml:"log_every"`
	// Device is where the models run: "cpu", or "cuda" for the first
	// CUDA GPU (the driver and libraries are loaded at run time). The
	// optimiser, checkpoints and evaluation metrics stay on the host, so a
	// run may resume on the other device. Default: "cpu".
	Device string `toml:"device"`
	// Precision is a CUDA device's matrix-product precision: "fp32" (TF32
	// off, the CPU's parity reference) or "tf32". Default: "fp32".
	Precision string `toml:"precision"`

	// Base is the pretrained checkpoint to upcycle; nil when training
	// from scratch.
	Base *Base `toml:"base"`
	// Model sizes a backbone trained from scratch; nil when Base is set.
	Model *Model `toml:"model"`
	// Scaffold is the DC scaffold; nil trains or finetunes a fixed-patch
	// DiT.
	Scaffold *Scaffold `toml:"scaffold"`

	// Diffusion is the training noise process.
	Diffusion Diffusion `toml:"diffusion"`
	// Data is what the stages train on.
	Data Data `toml:"data"`
	// Stages run in order, each starting from the previous one's weights
	// (the first from the upcycled base or a fresh initialisation). At
	// least one.
	Stages []Stage `toml:"stage"`
	// Save sets checkpointing.
	Save Save `toml:"save"`
	// Eval sets the evaluation run after the last stage.
	Eval Eval `toml:"eval"`

	// File is the recipe's path as given; Dir is the folder relative
	// paths are resolved against.
	File string `toml:"-"`
	Dir  string `toml:"-"`
	// Text is the recipe exactly as it was read: what a trained model
	// embeds, even if the file changes while the run goes on.
	Text string `toml:"-"`

	defaults  map[string]bool   // display keys filled in by defaults
	overrides map[string]string // display key → the flag that set it
	lines     *keyLines
}

// Base is the pretrained checkpoint: a .safetensors file, a sharded folder
// or its index, a PyTorch .pt/.pth/.bin (a bare state dict or DiT's
// training checkpoint, whose "ema" is used), or a diffusers model folder.
// Its naming (DiT original or diffusers) is detected from its keys.
type Base struct {
	// Path to the checkpoint, relative to the recipe's folder. Required.
	Path string `toml:"path"`
	// NumHeads overrides the attention head count, which DiT checkpoints
	// do not store (presets and config.json are used otherwise). Default:
	// 0, infer.
	NumHeads int `toml:"num_heads"`
	// LatentSize is the side of the latent grid the scaffold is built
	// for, for a Z-Image base, which has no fixed resolution (128: 1024²
	// images through its 8× VAE); a DiT's is its own. Default: 0.
	LatentSize int `toml:"latent_size"`
}

// Model sizes a backbone built from scratch (recipes without [base]).
// Kind, depth, hidden_size, num_heads, patch_size, in_channels and
// input_size size every family's model; the other keys belong to the
// families that read them (family.ModelRules: a key the family of
// model.kind does not read is refused when written, and its default is
// the one of the family that reads it).
type Model struct {
	// Kind is the registered family whose model this sizes
	// (family.Configurer): "dit" (a class-conditional DiT, trained with
	// DDPM) or "zimage" (a caption-conditioned Z-Image, trained with flow
	// matching on captioned data) in a standard build. Default: "dit".
	Kind string `toml:"kind"`
	// RefinerDepth is the noise- and context-refiner blocks each of a
	// model with refiners (Z-Image's). Default: 1.
	RefinerDepth int `toml:"refiner_depth"`
	// CaptionDim is a caption-conditioned model's caption feature width:
	// the embedding table standing in for the text encoder has rows this
	// wide. Default: 32.
	CaptionDim int `toml:"caption_dim"`
	// SeqMultiOf is the multiple a caption-conditioned model pads its
	// image and caption sequences to with learned pad tokens (Z-Image's
	// reference 32). Default: 32.
	SeqMultiOf int `toml:"seq_multi_of"`
	// Preset is a size the family names ("DiT-S/2", "DiT-B/2", "DiT-L/2",
	// "DiT-XL/2", also /4 and /8 for a DiT) giving depth, hidden_size,
	// num_heads and patch_size; keys written next to it override it.
	// Default: none.
	Preset string `toml:"preset"`
	// Depth is the number of transformer blocks. Required without preset.
	Depth int `toml:"depth"`
	// HiddenSize is the token width D. Required without preset.
	HiddenSize int `toml:"hidden_size"`
	// NumHeads is the attention head count. Required without preset.
	NumHeads int `toml:"num_heads"`
	// PatchSize is the patch side of a fixed-patch DiT. With a scaffold
	// it is the grid unit of the position embedding relative to the
	// latent grid (1: positions on the latent grid, as the reference
	// DC-DiT). Default: 1 with a scaffold; without one the preset's,
	// else 2.
	PatchSize int `toml:"patch_size"`
	// InChannels is the latent channel count C. Default: 4.
	InChannels int `toml:"in_channels"`
	// InputSize is the latent side length (image side / 8). Default: 32.
	InputSize int `toml:"input_size"`
	// NumClasses is the number of class labels (the null class for
	// guidance comes on top). Default: 1000.
	NumClasses int `toml:"num_classes"`
	// LearnSigma makes the model predict the variance too (2C outputs).
	// Default: true.
	LearnSigma bool `toml:"learn_sigma"`
	// MLPRatio is the MLP hidden width over D. Default: 4.
	MLPRatio float64 `toml:"mlp_ratio"`
	// ClassEmbeddingStd is the standard deviation of the class table's
	// normal initialisation when the model starts from scratch (the
	// checkpoint format is DiT's either way). DiT draws N(0, 0.02²); a
	// short run on small data learns to use the label much sooner from
	// a table of unit scale (docs/results.md). Default: 0.02.
	ClassEmbeddingStd float64 `toml:"class_embedding_std"`
}

// Settings is the table in family-neutral terms, as the family model.kind
// names turns it into its config (family.Configurer).
func (m *Model) Settings() family.ModelSettings {
	return family.ModelSettings{Depth: m.Depth, Width: m.HiddenSize, Heads: m.NumHeads, Patch: m.PatchSize,
		InChannels: m.InChannels, InputSize: m.InputSize, Classes: m.NumClasses, LearnSigma: m.LearnSigma,
		MLPRatio: m.MLPRatio, RefinerDepth: m.RefinerDepth, CaptionWidth: m.CaptionDim, SeqMultiple: m.SeqMultiOf}
}

// Scaffold is the DC scaffold: latent embedder, conv encoder, router,
// elastic chunking, de-chunking, conv decoder and final layer around the
// backbone. Defaults follow the paper's DC-DiT (Table "Main hyperparameters"
// and "Architecture details by scale").
type Scaffold struct {
	// TargetN is the ratio loss's target downsampling factor N > 1
	// (N = 4 matches DiT's patch 2). Default: 4.
	TargetN float64 `toml:"target_n"`
	// EncoderBlocks is the number of conv blocks before routing.
	// Default: 2.
	EncoderBlocks int `toml:"encoder_blocks"`
	// DecoderBlocks is the number of conv blocks after de-chunking.
	// Default: 2.
	DecoderBlocks int `toml:"decoder_blocks"`
	// WidthFactor sets the encoder/decoder width E = D / width_factor
	// (must divide D). Default: 4.
	WidthFactor int `toml:"width_factor"`
	// NormGroups is the GroupNorm group count of the conv blocks (must
	// divide E). Default: 32.
	NormGroups int `toml:"norm_groups"`
	// Sigma is the de-chunk Gaussian's standard deviation in latent grid
	// units (the reference uses 2.0 at 512 px). Default: 1.0.
	Sigma float64 `toml:"sigma"`
	// PlugBack is how each grid position takes a kept token's features:
	// "nearest_2d" (nearest kept token by 2-D distance, ties to the first
	// in raster order). Default: "nearest_2d".
	PlugBack string `toml:"plug_back"`
	// EncoderInit is how the latent embedder and encoder start when
	// upcycling: "official" (DC-DiT's random init) or "patch" (they start
	// out computing the base DiT's patch embedding of the p×p patch at
	// each position, so that the grafted blocks see the inputs they were
	// trained on from the first step; needs patch size ≤ 2). Default:
	// "official".
	EncoderInit string `toml:"encoder_init"`
	// PatchSize is the side of the latent patch one scaffold cell holds:
	// 1 (the official DC-DiT: a cell per latent position) or the base
	// DiT's patch size (the scaffold keeps the base's patch grid, and with
	// encoder_init = "patch" and head = "wide" the grafted model starts as
	// the base itself). Default: 1.
	PatchSize int `toml:"patch_size"`
	// Head is the output layer: "official" (DC-DiT's final layer at the
	// decoder's width E) or "wide" (plus a head at width D on the
	// decoder's input, started as the base's final layer and added to the
	// official one; see upcycle.Graft). Default: "official".
	Head string `toml:"head"`
	// EncoderNorm is what ends the encoder: "rmsnorm" (the official
	// DC-DiT's) or "none" (an upcycled DiT's blocks then see its patch
	// embeddings unnormalised, as they were trained). Default: "rmsnorm".
	EncoderNorm string `toml:"encoder_norm"`
	// Residual is what a cell adds to its plugged-back token before the
	// decoder: "official" (residual_proj of its encoding) or "relative"
	// (the same minus that of the kept cell whose token it takes, so kept
	// cells pass their token on unchanged). Default: "official".
	Residual string `toml:"residual"`
	// LatentSkip adds dc.Config.LatentSkip's linear path from a cell's
	// input (relative to its token's cell) to its prediction. Default:
	// false.
	LatentSkip bool `toml:"latent_skip"`
	// CondNorm adds dc.Config.CondNorm's trainable LayerNorm on the
	// conditioning vector the scaffold's blocks read (paper §4.4's
	// adaptor for DC-Z-Image). Default: false.
	CondNorm bool `toml:"cond_norm"`
	// TokenEmbedder gives the backbone its tokens from token_embedder, a
	// Linear of each kept cell's latents started as the base's patch
	// embedding (dc.Config.TokenEmbedder: the blocks read the teacher's
	// tokens while the encoder serves the router, the residual and the
	// decoder); cells must be the base's patches. Default: false.
	TokenEmbedder bool `toml:"token_embedder"`
	// DroppedContext adds to each kept token a learned term of its
	// dropped neighbours' encoder features, zero where none is dropped
	// (dc.Config.DroppedContext). Default: false.
	DroppedContext bool `toml:"dropped_context"`
	// ChosenEmbedding adds dc.Config.ChosenEmbedding: the decoder told
	// whether a sample's cells are the router's or were chosen for it (a
	// lookback budget). Default: false.
	ChosenEmbedding bool `toml:"chosen_embedding"`
	// BackboneNorm is what follows the transformer blocks: "rmsnorm" (as
	// DC-DiT's main network; new, initialised to ones when upcycling) or
	// "none". Default: "rmsnorm".
	BackboneNorm string `toml:"backbone_norm"`
	// Router sets the router and the ratio loss.
	Router Router `toml:"router"`
}

// Upcycle returns the scaffold's choices as package upcycle takes them
// (Graft, Scaffold.Config): the one conversion, used by the planner and
// the pipeline alike.
func (s *Scaffold) Upcycle() upcycle.Scaffold {
	return upcycle.Scaffold{
		WidthFactor: s.WidthFactor, EncoderBlocks: s.EncoderBlocks, DecoderBlocks: s.DecoderBlocks,
		Sigma: s.Sigma, TargetN: s.TargetN, RatioLossWeight: s.Router.RatioLossWeight,
		RatioBatchSize: s.Router.RatioBatchSize, NormGroups: s.NormGroups, RouterGroups: s.Router.Groups,
		RouterInit: s.Router.Init, RouterDimFactor: s.Router.DimFactor, EncoderInit: s.EncoderInit,
		PatchSize: s.PatchSize, WideHead: s.Head == "wide", NoEncoderNorm: s.EncoderNorm == "none",
		RelativeResidual: s.Residual == "relative", LatentSkip: s.LatentSkip, CondNorm: s.CondNorm,
		SpreadDrop: s.Router.Drop == "spread", TokenEmbedder: s.TokenEmbedder, DroppedContext: s.DroppedContext,
		ChosenEmbedding: s.ChosenEmbedding,
	}
}

// Router sets the spatial-predictability router and its ratio loss.
type Router struct {
	// Kind is the router: "spatial_predictability" (DC-DiT's conv
	// scorer on the local prediction residual). Default:
	// "spatial_predictability".
	Kind string `toml:"kind"`
	// Init is how the router starts: "official" (DC-DiT's random init) or
	// "predictability" (the context predictor as the neighbours' mean and
	// a scorer that grows with the residual, so that tokens the
	// neighbourhood predicts badly start as boundaries; for short runs).
	// Default: "official".
	Init string `toml:"init"`
	// Drop is how a budget ρ > 0 drops boundaries, in the multi-budget
	// stages and in elastic inference: "lowest" (the reference tail drop,
	// the lowest-probability ones) or "spread" (as many, the kept ones
	// picked apart on the grid: dc.SpreadDrop). The model file records it.
	// Default: "lowest".
	Drop string `toml:"drop"`
	// DimFactor sets the router's bottleneck width D / dim_factor.
	// Default: 4.
	DimFactor int `toml:"dim_factor"`
	// Groups is the GroupNorm group count of the router's scorer (must
	// divide the bottleneck). Default: 8.
	Groups int `toml:"groups"`
	// RatioLossWeight is λ, the ratio loss's weight; stages may override
	// it. Default: 0.03.
	RatioLossWeight float64 `toml:"ratio_loss_weight"`
	// RatioBatchSize groups the batch for the ratio loss (its statistics
	// per group of this many samples, averaged); it must divide every
	// stage's batch size; 0 takes the whole batch. Default: 16.
	RatioBatchSize int `toml:"ratio_batch_size"`
}

// Diffusion is the training noise process: DiT's DDPM, or Z-Image's
// flow matching.
type Diffusion struct {
	// Process is "ddpm" (DiT) or "flow_matching" (Z-Image's rectified
	// flow). With [model] it must be the one the family of model.kind
	// trains with (family.ModelTraining); a [base] states its own.
	// Default: the family's with [model], else "ddpm".
	Process string `toml:"process"`
	// Shift is flow matching's timestep shift σ' = sσ/(1+(s−1)σ), which
	// the training table and sampling use (flow_matching only).
	// Default: 3, Z-Image's.
	Shift float64 `toml:"shift"`
	// Schedule is DDPM's β schedule: "linear" (ddpm only). Default:
	// "linear".
	Schedule string `toml:"schedule"`
	// Steps is the number of training timesteps T (t ~ U{0..T−1}); the
	// teacher's samples and the evaluation use it too. With [base] it
	// must be the schedule the base was trained with: the one its
	// embedded recipe (dcdit.recipe) names, else DiT's 1000 (checked when
	// the run starts). Default: 1000.
	Steps int `toml:"steps"`
}

// Data is what the stages train on: clean latents x₀ with class labels,
// noised at random timesteps during training.
type Data struct {
	// Source is "teacher" (generated by the base model), "file" (a
	// safetensors file) or "shapes" (dcdit's procedural data set).
	// Default: "teacher" with a base, "shapes" without.
	Source string `toml:"source"`
	// Path is the safetensors file of source "file", relative to the
	// recipe's folder. With "teacher", where generated samples are cached
	// (reused when present and generated with the same settings).
	// Default: "" (file: required; teacher: <run folder>/data.safetensors;
	// shapes: refused, there is no file).
	Path string `toml:"path"`
	// LatentsKey names the latents tensor [N, C, H, W] in the file
	// (source "file" only). Default: "latents".
	LatentsKey string `toml:"latents_key"`
	// LabelsKey names the integer labels tensor [N]; when the file has no
	// such tensor, the metadata "dcdit.labels" (as `dcdit sample` writes)
	// is used (source "file" only). Default: "labels".
	LabelsKey string `toml:"labels_key"`
	// Samples is how many latents to generate (teacher, shapes; a file
	// has what it holds). Default: 1024.
	Samples int `toml:"samples"`
	// SamplingSteps is the teacher's DDPM steps per sample (respaced from
	// the training steps; teacher only). Default: 250.
	SamplingSteps int `toml:"sampling_steps"`
	// CFG is the teacher's guidance scale when generating (1: none, the
	// teacher's own conditional distribution, which the hybrid loss
	// targets; teacher only). Default: 1.0.
	CFG float64 `toml:"cfg"`
	// Classes restricts generated labels to these classes (cycled
	// evenly; teacher only). Default: empty, all classes.
	Classes []int `toml:"classes"`
	// Captions gives each procedural sample a caption (shapes only; a
	// data file carries its own when it has them), which a
	// caption-conditioned model trains on. Default: true when the family
	// of model.kind trains on captions (family.ModelTraining), else false.
	Captions bool `toml:"captions"`
	// CaptionTableSeed seeds the caption embedding table, the text
	// encoder's stand-in (shapes.EmbeddingTable; the model records it).
	// Default: 0.
	CaptionTableSeed int64 `toml:"caption_table_seed"`
	// Prompts is a file of prompts, one per line (relative to the
	// recipe's folder), that a Z-Image teacher draws its samples for (the
	// paper's upcycling data): each encoded by the text encoder of the
	// base's repository (its text_encoder/ and tokenizer/ folders), sample
	// i drawn for prompt i mod the prompt count, so data.samples = the
	// prompt count draws one sample per prompt and a multiple of it
	// several (teacher source and a [base] trained with flow matching
	// only). Default: "", captions of the shapes data.
	Prompts string `toml:"prompts"`
}

// Stage is one training stage. Defaults that depend on the kind:
//
//	key                 distill      finetune          train
//	loss                "l1"         "hybrid"          "hybrid"
//	trainable           ["scaffold"] ["all"]           ["all"]
//	frozen              []           ["embedders"]     []
//	ema_decay           0 (off)      0.9999            0.9999
//	rho                 [0.0]        [0.0, 0.1 … 0.6]  [0.0, 0.1 … 0.6]
//	multi_budget_start  0            5000              5000
//
// Without a scaffold rho is [0.0] and multi_budget_start 0 for every kind.
type Stage struct {
	// Name identifies the stage in logs, checkpoints and resume (unique).
	// Default: the kind, numbered when repeated ("finetune-2").
	Name string `toml:"name"`
	// Kind is "distill", "finetune" or "train". Required.
	Kind string `toml:"kind"`
	// Steps is the number of optimiser steps. Required, ≥ 1.
	Steps int `toml:"steps"`
	// BatchSize is the number of samples per step. Default: 256.
	BatchSize int `toml:"batch_size"`
	// LR is the peak learning rate (AdamW). Default: 1e-4.
	LR float64 `toml:"lr"`
	// LRSchedule is what follows the warm-up: "constant", "cosine" or
	// "linear" (both decay to min_lr at the last step). Default:
	// "constant".
	LRSchedule string `toml:"lr_schedule"`
	// MinLR is where "cosine" and "linear" end (refused with
	// "constant"). Default: 0.
	MinLR float64 `toml:"min_lr"`
	// WarmupSteps ramps the learning rate linearly from 0 to lr over
	// this many steps. Default: 0.
	WarmupSteps int `toml:"warmup_steps"`
	// Loss is "l1" or "l2" for distill, "hybrid" for finetune and train.
	Loss string `toml:"loss"`
	// Target is what distillation matches: "output" (every output
	// channel, including learned-σ ones) or "eps" (the first C
	// channels). Distill only. Default: "output".
	Target string `toml:"target"`
	// TimestepWeightCap, when > 0, weights each sample's distillation
	// distance by 1 + min(√((1−ᾱ_t)/ᾱ_t), cap), normalised to mean 1 over
	// the timesteps: how much the sampler amplifies an ε error at t in
	// its estimate of x0, capped. Distill only. Default: 0 (uniform).
	TimestepWeightCap float64 `toml:"timestep_weight_cap"`
	// GuidedScale, when > 0, also distils the teacher's classifier-free
	// guided prediction at this scale (the teacher's convention: DiT's
	// u + s·(c − u), Z-Image's c + s·(c − u)): each sample of the first
	// half of a batch is paired with its unconditional twin (the null
	// class, or the empty prompt; same noisy input, timestep and budget),
	// so batch_size must be even. The label's share
	// of the prediction is small at high noise but multiplied by the scale
	// in sampling. Distill only. Default: 0 (off).
	GuidedScale float64 `toml:"guided_scale"`
	// RouterTargetWeight, when > 0, also fits the router to keep, in
	// every sample, the 1/N of its cells where the teacher's clean
	// estimate differs most from its neighbours' (binary cross-entropy,
	// this weight): where a dropped cell's token and the latent skip
	// cannot carry its prediction. Distill only. Default: 0 (off).
	RouterTargetWeight float64 `toml:"router_target_weight"`
	// RouterTargets is what router_target_weight fits the router to:
	// "edges" (the cells above, by binary cross-entropy) or "spread" (an
	// order for tail dropping, on the samples at the routed timesteps, by
	// a ranking loss: first the cells farthest, up to two cells, from
	// those ranked before them, in the router's own order among equally
	// far ones, so that every budget keeps cells spread over the
	// picture). Distill only. Default: "edges".
	RouterTargets string `toml:"router_targets"`
	// RouterGate is the decision the straight-through gate reads in
	// training: "natural" (the router's own, H-Net's) or "kept" (after
	// tail dropping, so that the gate's gradient ranks a boundary the
	// tail drop removed lower, where on the natural decision it ranks it
	// higher and flattens the order tail dropping reads;
	// dc.Model.ForwardKeptGate). The prediction is the same. DC stages
	// only. Default: "natural".
	RouterGate string `toml:"router_gate"`
	// DyDiTLambda, when > 0, finetunes with DyDiT's timestep-wise dynamic
	// width (Zhao et al. 2024): the stage gives the DC model's main
	// network a width router per block when it has none (every gate
	// starting on, so that the model starts as it was), trains the
	// routers whatever trainable says, and adds dydit_weight·(r − λ)² to
	// the loss, r the batch's FLOPs of the blocks' attention and MLP as
	// the gates run them over the same ungated. The model then keeps its
	// routers (the stages after, its file). In [0, 1]; DC stages around a
	// backbone that takes width gates (DC-DiT's main network, a grafted
	// DiT's included), on the CPU. Default: 0 (off).
	DyDiTLambda float64 `toml:"dydit_lambda"`
	// DyDiTWeight weighs the FLOPs-ratio penalty (with dydit_lambda > 0
	// only). Default: 1.
	DyDiTWeight float64 `toml:"dydit_weight"`
	// DyDiTLRScale multiplies the learning rate of the width routers
	// (group width_router): they start at bias 2, and AdamW moves a
	// parameter by about the learning rate per step, so a short finetune
	// needs a larger factor to turn gates off (with dydit_lambda > 0
	// only). Default: 1.
	DyDiTLRScale float64 `toml:"dydit_lr_scale"`
	// P2Gamma and P2K weigh the hybrid loss's ε term by 1/(k + SNR_t)^γ
	// (P2 weighting, Choi et al. 2022): γ = 1, k = 1 keeps the weight of
	// the noisy steps that decide what a sample shows and fades the
	// low-noise ones that dominate the uniform loss. Train and finetune
	// only. Default: γ = 0 (DiT's uniform loss), k = 1.
	P2Gamma float64 `toml:"p2_gamma"`
	P2K     float64 `toml:"p2_k"`
	// Trainable lists the parameters to train: group names
	// (params.Groups, which the model answers for each of its parameters
	// through its ParamGroups) or glob patterns over the model's
	// parameter names: a DC model's are the reference DC-DiT names (the
	// scaffold's as dc.ScaffoldShapes lists them, "hnet.encoder.*"; the
	// main network's under hnet.Prefix; a pretrained backbone's under
	// dc.BackbonePrefix), a fixed-patch model's its own. Default: by kind.
	Trainable []string `toml:"trainable"`
	// Frozen lists parameters to keep fixed even if Trainable selects
	// them (same syntax). Default: by kind.
	Frozen []string `toml:"frozen"`
	// Rho is the set of tail-drop fractions ρ (sorted, unique, 0 ≤ ρ < 1,
	// including 0) drawn uniformly, one per step, after the multi-budget
	// warm-up. Default: by kind.
	Rho []float64 `toml:"rho"`
	// MultiBudgetStart is the number of steps trained at ρ = 0 before ρ
	// is drawn from Rho (the multi-budget warm-up; refused when written
	// with a single ρ). Default: by kind.
	MultiBudgetStart int `toml:"multi_budget_start"`
	// DenseFraction is the share of the steps after the warm-up that run
	// with every cell a token instead of at a drawn ρ (0 ≤ it < 1, DC
	// stages only), so that the full grid — what sampling uses below
	// eval.dense_below — is trained against the teacher too. Default: 0.
	DenseFraction float64 `toml:"dense_fraction"`
	// DenseBelow, when > 0, keeps every cell of the samples drawn at a
	// timestep below it (DC stages only; DDPM's t, flow matching's σ·T):
	// training spends the router's budgets where sampling with the same
	// eval.dense_below does, on the noisy steps. Default: 0 (every sample
	// at the step's ρ).
	DenseBelow float64 `toml:"dense_below"`
	// CoarseFrom, when > 0, makes a sample with a budget (ρ > 0) drawn at
	// a timestep at or above it drop at least CoarseRho of its
	// boundaries (DC stages only; above dense_below): the coarse steps of
	// eval.coarse_from and eval.coarse_rho, trained as sampled. Default:
	// 0 (none).
	CoarseFrom float64 `toml:"coarse_from"`
	// CoarseRho is the least tail-drop fraction at the coarse steps
	// (0 ≤ it < 1; needs coarse_from). Default: 0.
	CoarseRho float64 `toml:"coarse_rho"`
	// Lookback is the share (0 ≤ it ≤ 1) of the samples with a budget
	// (ρ > 0, not dense) trained on the cells an ideal router ranks on
	// the teacher's clean estimate, as many as the router keeps: the
	// cells eval.lookback keeps at sampling, ranked there on the previous
	// step's estimate (distill stages with an l1 or l2 loss only). The
	// router learns from the others. Default: 0 (the router's cells).
	Lookback float64 `toml:"lookback"`
	// LookbackTwins trains each of lookback's samples twice in its batch:
	// on the lookback cells and on the router's own, so that the router
	// still learns its order from every budget (needs lookback > 0; not
	// with guided_scale). A step with budgets runs up to twice the
	// samples. Default: false.
	LookbackTwins bool `toml:"lookback_twins"`
	// LookbackSpacing chooses lookback's cells: > 0 covers the estimate
	// at that spacing (dc.CoverKeep: a dropped cell takes the best token
	// near it, one cell² of distance costing as much as this many
	// squared latent units of value), 0 ranks them where the estimate
	// changes and keeps them apart (dc.ChangeKeep). Set it as
	// eval.lookback_spacing, whose cells sampling keeps (needs lookback >
	// 0). Default: 0.
	LookbackSpacing float64 `toml:"lookback_spacing"`
	// RatioLossWeight is λ for this stage. Default: the scaffold's
	// router.ratio_loss_weight.
	RatioLossWeight float64 `toml:"ratio_loss_weight"`
	// ClassDropout is the probability of replacing a label by the null
	// class (for classifier-free guidance). Default: 0.1.
	ClassDropout float64 `toml:"class_dropout"`
	// GradClip is the global gradient-norm clip (0: off). Default: 1.0.
	GradClip float64 `toml:"grad_clip"`
	// RouterLRScale multiplies the learning rate of the router's
	// parameters (a param group of its own), so that a short run can
	// train the new router faster than the rest. Default: 1.
	RouterLRScale float64 `toml:"router_lr_scale"`
	// ClassEmbedderLRScale multiplies the learning rate of the class
	// embedding table (y_embedder.*). The label reaches every block only
	// as the class embedding added to the timestep embedding, and in a
	// short from-scratch run the timestep part grows ~50× larger than
	// the class part (docs/results.md), so the label hardly moves the
	// prediction; a faster-learning table keeps it audible. Default: 1.
	ClassEmbedderLRScale float64 `toml:"class_embedder_lr_scale"`
	// EMADecay is the decay of the exponential moving average of the
	// weights (0: off). Only the last stage's EMA becomes the model (a
	// stage starts from the previous one's trained weights), so a value
	// written on an earlier stage is refused unless eval.every evaluates
	// it. Default: by kind on the last stage (and on every stage with
	// eval.every), else 0.
	EMADecay float64 `toml:"ema_decay"`
	// WeightDecay is AdamW's decoupled weight decay. Default: 0.
	WeightDecay float64 `toml:"weight_decay"`
	// Betas are AdamW's (β₁, β₂). Default: [0.9, 0.999].
	Betas []float64 `toml:"betas"`
	// Eps is AdamW's ε. Default: 1e-8.
	Eps float64 `toml:"eps"`
}

// Save sets checkpointing.
type Save struct {
	// Dir is the run folder (checkpoints, metrics log, manifest, final
	// model), relative to the recipe's folder; `--out` overrides it.
	// Default: runs/<name> in the current folder.
	Dir string `toml:"dir"`
	// Every is the number of steps between checkpoints (0: only at the
	// end of each stage). Default: 1000.
	Every int `toml:"every"`
	// Keep is how many step checkpoints to keep (the oldest are removed;
	// each stage's final checkpoint is always kept). Default: 3.
	Keep int `toml:"keep"`
	// DType is the storage type of the final model: "f32", "bf16" or
	// "f16". Default: "f32".
	DType string `toml:"dtype"`
}

// Eval sets the evaluation after the last stage: per ρ, kept tokens,
// FLOPs, wall time, ε relative MSE against the teacher on held-out noisy
// inputs and latent PSNR of samples against the teacher's from the same
// noise; plus boundary maps and an elastic grid of samples. Only a DC
// model ([scaffold]) upcycled from a [base] teacher is evaluated; any
// [eval] key in another recipe is refused.
type Eval struct {
	// Rho lists the tail-drop fractions to evaluate (sorted, unique,
	// 0 ≤ ρ < 1). Default: [0.0, 0.1 … 0.6] with a scaffold, [0.0]
	// without.
	Rho []float64 `toml:"rho"`
	// LiteCFG is a (conditional ρ, unconditional ρ) pair evaluated with
	// guidance lite_cfg_scale; empty: none. Default: [0.0, 0.9] with a
	// scaffold (the paper's Lite-CFG setting), empty without.
	LiteCFG []float64 `toml:"lite_cfg"`
	// LiteCFGScale is the guidance scale of the Lite-CFG row (> 1;
	// refused when written without a lite_cfg pair). Default: 1.25.
	LiteCFGScale float64 `toml:"lite_cfg_scale"`
	// CFG is the guidance scale of the per-ρ sample rows (1: none).
	// Default: 1.0.
	CFG float64 `toml:"cfg"`
	// DenseBelow runs the sampling steps at timesteps below it (DDPM's t,
	// flow matching's σ·T) on every cell (dc.Dense), in every row:
	// elastic inference that spends the
	// full grid where a cell without a token cannot know its clean value
	// well enough (docs/design.md). 0: never. Default: 0.
	DenseBelow float64 `toml:"dense_below"`
	// CoarseFrom makes the sampling steps at timesteps at or above it
	// drop at least CoarseRho of their boundaries, in every row
	// (dc.Schedule): the noisiest steps block out the picture from a
	// handful of tokens, and the tokens they leave serve the steps that
	// draw it. 0: never. Default: 0.
	CoarseFrom float64 `toml:"coarse_from"`
	// CoarseRho is the least drop fraction of the steps from CoarseFrom
	// (0 ≤ ρ < 1; written only with coarse_from). Default: 0.
	CoarseRho float64 `toml:"coarse_rho"`
	// HeldOut is the number of held-out noisy inputs (not trained on)
	// for the ε relative MSE. Default: 64.
	HeldOut int `toml:"held_out"`
	// Samples is the number of samples drawn per ρ for the latent PSNR
	// and the sample grid. Default: 16.
	Samples int `toml:"samples"`
	// SamplingSteps is the DDPM steps per sample. Default: 250.
	SamplingSteps int `toml:"sampling_steps"`
	// BoundaryMapTimesteps are the diffusion timesteps at which boundary
	// maps are drawn. Default: [999, 500, 100].
	BoundaryMapTimesteps []int `toml:"boundary_map_timesteps"`
	// Every also evaluates every this many steps of each stage (the
	// stage's EMA weights; 0: only at the end), appending one JSON line
	// per evaluation to the run folder's eval-log.jsonl. DC models with a
	// [base] teacher only. Default: 0.
	Every int `toml:"every"`
	// Seed seeds the held-out inputs and sampling noise. Default: the
	// recipe's seed.
	Seed int64 `toml:"seed"`
	// FeatureNet is a feature network (package eval/featnet, e.g. the
	// bundled testdata/featnet/model.safetensors) that scores each row's
	// samples as a distribution: Fréchet distance to held-out data and
	// class accuracy, with pareto.png. Relative to the recipe's folder.
	// Default: "" (no distribution measures).
	FeatureNet string `toml:"feature_net"`
	// RandomRouter adds the random-router baseline to every row and the
	// Lite-CFG pair, with a feature network: their samples drawn again
	// with the kept cells chosen uniformly at random, as many per sample
	// and step as the router kept (package eval's RandomRouter).
	// Default: true.
	RandomRouter bool `toml:"random_router"`
	// SpreadRandom adds to the random-router baseline its cells kept apart
	// as the spread drop keeps them, a third sampling run per row: what
	// spacing alone is worth (package eval's Options.SpreadRandom, `dcdit
	// eval --spread-random`). Needs random_router. Default: false.
	SpreadRandom bool `toml:"spread_random"`
	// Lookback samples every row with the kept cells of each step after
	// the first chosen on the previous step's clean estimate, as many as
	// the router keeps (package eval's Options.Lookback, `dcdit eval
	// --lookback`). Default: false.
	Lookback bool `toml:"lookback"`
	// LookbackSpacing chooses lookback's cells, as the stage key of that
	// name (`dcdit eval --lookback-spacing`; needs lookback). Default: 0
	// (ranked where the estimate changes, kept apart).
	LookbackSpacing float64 `toml:"lookback_spacing"`
	// DenseTeacher runs the sampling steps that keep every cell (below
	// dense_below) through the backbone and the wide head alone, without
	// the router, de-chunk and decoder: the teacher's own pass when the
	// encoder is the grafted patch embedding and the blocks and the wide
	// head stay frozen (package eval's Options.DenseTeacher, `dcdit eval
	// --dense-teacher`). Needs scaffold.head = "wide". Default: false.
	DenseTeacher bool `toml:"dense_teacher"`
	// VAE is a VAE (a diffusers folder or an LDM single file, see package
	// vae) that draws the evaluation's pictures — the elastic grid, the
	// boundary maps, the trajectory — decoded instead of as linear
	// latent-to-RGB previews. Relative to the recipe's folder. Default: ""
	// (previews).
	VAE string `toml:"vae"`
}

// VAEPath returns eval.vae resolved against the recipe's folder ("" when
// unset).
func (r *Recipe) VAEPath() string {
	if r.Eval.VAE == "" {
		return ""
	}
	return r.resolve(r.Eval.VAE)
}

// FeatureNetPath returns eval.feature_net resolved against the recipe's
// folder ("" when unset).
func (r *Recipe) FeatureNetPath() string {
	if r.Eval.FeatureNet == "" {
		return ""
	}
	return r.resolve(r.Eval.FeatureNet)
}

// PaperRho is the paper's set of tail-drop fractions for multi-budget
// training (§4.1 and Appendix "Multi-budget training").
var PaperRho = []float64{0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6}

// HasScaffold reports whether the recipe builds a DC model.
func (r *Recipe) HasScaffold() bool { return r.Scaffold != nil }

// IsDefault reports whether the value at a display key ("stage[1].lr",
// "scaffold.router.groups") was filled in by a default rather than
// written in the file.
func (r *Recipe) IsDefault(key string) bool { return r.defaults[key] }

// Line returns the line of a display key in the recipe file, or of the
// nearest enclosing table written there; 0 when unknown.
func (r *Recipe) Line(key string) int {
	if r.lines == nil {
		return 0
	}
	return r.lines.lineOf(key)
}

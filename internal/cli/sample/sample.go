// Package sample implements `dcdit sample`: class-conditional DDPM
// sampling from a DiT or DC checkpoint, or flow-matching sampling from a
// Z-Image checkpoint conditioned on precomputed caption features, writing
// the latents and, optionally, a linear preview of them.
package sample

import (
	"fmt"
	"io"
	"math"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/dcdit/dcdit/diffusion"
	"github.com/dcdit/dcdit/diffusion/ddpm"
	"github.com/dcdit/dcdit/diffusion/flowmatch"
	"github.com/dcdit/dcdit/family"
	"github.com/dcdit/dcdit/gpu/accel"
	"github.com/dcdit/dcdit/internal/cli/cmdutil"
	"github.com/dcdit/dcdit/internal/cli/iostreams"
	"github.com/dcdit/dcdit/internal/cli/progress"
	"github.com/dcdit/dcdit/loaders/arch"
	"github.com/dcdit/dcdit/loaders/dtype"
	"github.com/dcdit/dcdit/loaders/safetensors"
	"github.com/dcdit/dcdit/sample"
)

// Options are the flags and arguments of `dcdit sample`.
type Options struct {
	IO         *iostreams.IO
	Checkpoint string
	Classes    []int // labels, each sampled Num times
	Num        int   // samples per label
	Steps      int
	CFG        float64
	CFGAll     bool
	Seed       uint64
	Out        string
	PNG        string
	// VAE, when set, decodes the --png grid (see pictureOut).
	VAE      string
	NumHeads int
	// Drop is --drop: the tail drop's rule ("": the file's).
	Drop string
	// Lookback is --lookback: the kept cells from the previous step's
	// clean estimate (sample.Lookback).
	Lookback bool
	// LookbackSpacing is --lookback-spacing: lookback covers the estimate
	// at this spacing (sample.Lookback.Spacing; 0: the change ranking).
	LookbackSpacing float64
	// DenseTeacher is --dense-teacher: the dense steps through the
	// backbone and the wide head alone (sample.DC.DenseTeacher).
	DenseTeacher bool
	Quiet        bool
	// Device and Precision choose where the model runs (cmdutil.OnDevice).
	Device, Precision string
	// Rho is the tail-drop fraction ρ of a DC checkpoint's conditional
	// branch (and, without RhoUncond, of the unconditional one).
	Rho float64
	// RhoUncond is the unconditional branch's ρ (Lite-CFG).
	RhoUncond float64
	// RhoGiven and RhoUncondGiven say whether the flags were set.
	RhoGiven, RhoUncondGiven bool
	// DenseBelow runs a DC checkpoint's sampling steps below this
	// timestep on every cell (0: never).
	DenseBelow float64
	// CoarseFrom makes a DC checkpoint's sampling steps at and above this
	// timestep drop at least CoarseRho of their boundaries (0: never).
	CoarseFrom, CoarseRho float64

	// Z-Image checkpoints (see zimage.go).

	// Captions and Negative are safetensors files of text-encoder
	// features (cap_feats, cap_lens): one positive caption per sample,
	// and the negative ones guidance contrasts them with.
	Captions, Negative string
	// Prompts are text prompts, encoded by the model repository's text
	// encoder (or TextEncoder and Tokenizer); for a Z-Image trained by
	// dcdit on the shapes captions, by the caption table it records (the
	// text encoder's stand-in). The unguided branch is NegativePrompt
	// (default empty), as in the pipelines.
	Prompts                []string
	NegativePrompt         string
	TextEncoder, Tokenizer string
	// Size is the latent grid "HxW"; empty takes defaultZImageSize.
	Size string
	// Config is a config.json for what a Z-Image checkpoint's shapes
	// cannot tell (axes_dims, rope_theta, t_scale); empty takes the
	// model folder's own.
	Config string
	// Schedule names the pipeline whose schedule and guidance rules the
	// sampler follows ("tongyi" or "diffusers"); empty is tongyi.
	Schedule string
	// Shift is the scheduler's static shift; 0 takes Z-Image-Turbo's 3.
	Shift float64
	// CFGTruncation stops guidance at steps whose model time 1 − σ
	// exceeds it (cfg_truncation), when CFGTruncationGiven.
	CFGTruncation      float64
	CFGTruncationGiven bool
	// CFGNormalization clamps each guided output's norm to this multiple
	// of the positive output's (cfg_normalization); 0 is off.
	CFGNormalization float64

	// TeaCache is the step cache's threshold (--teacache), when
	// TeaCacheGiven: the model's calibration rescales the changes.
	TeaCache      float64
	TeaCacheGiven bool
	// calib, when set, makes the run a calibration (Calibrate).
	calib *sample.Calibration

	// unset names the sampling flags left at their defaults, which a DC
	// checkpoint's sampling record, or for a Z-Image Z-Image-Turbo's
	// settings, fill in. The command sets it; a caller of Run gives what
	// it means.
	unset unsetFlags
}

// unsetFlags are the sampling flags the command line did not give.
type unsetFlags struct{ steps, cfg, denseBelow, coarseFrom, coarseRho, shift bool }

// Defaults, as in DiT's sample.py.
const (
	defaultSteps = 250
	defaultCFG   = 4.0
	// trainSteps is the length of DiT's training diffusion, which --steps
	// respaces.
	trainSteps = 1000
	// previewScale blows each latent pixel up to the VAE's 8×8, so the
	// preview has the size of the decoded image.
	previewScale = 8
)

// NewCmd returns the sample command. runF replaces the action in tests that
// only check flag parsing; nil samples.
func NewCmd(ios *iostreams.IO, runF func(*Options) error) *cobra.Command {
	opts := &Options{IO: ios}
	cmd := &cobra.Command{
		Use:   "sample CHECKPOINT",
		Short: "Sample latents from a DiT or DC checkpoint (DDPM, class labels, any ρ) or a Z-Image one (flow matching, caption features)",
		Long: `Sample runs DiT's DDPM ancestral sampler over the 1000 training steps respaced
to --steps, from seeded Gaussian noise, with classifier-free guidance, and
writes the final latents to a safetensors file. CHECKPOINT is a DiT checkpoint
(any form and naming inspect reads) or a DC checkpoint (architecture dcdit),
told apart from its headers. An official DC-DiT state dict (safetensors or
PyTorch) samples as a DC checkpoint: its head count, de-chunk σ and trained
ρ come from the YAML config beside it (model.pt, model.yaml, as 'dcdit
convert --layout official' writes them) or pickled in a training
checkpoint; without one the head count is --num-heads and σ the official
default, 1 (warned of).

--num samples are drawn for each --class label, so '--class 1,207 --num 4'
gives 8 samples, ordered by label: 1,1,1,1,207,207,207,207.

Guidance follows DiT's forward_with_cfg: each step evaluates the conditional
and the unconditional (null class) batch together and mixes the first 3 eps
channels as uncond + s·(cond − uncond). --cfg-all-channels guides all
channels, as the diffusers pipeline does. A scale of 1 or less disables
guidance, which halves the work.

The output holds one F32 tensor "latents" [N, C, H, W] in the model's latent
space (DiT: SD VAE latents ×0.18215), written atomically, with metadata
dcdit.checkpoint, dcdit.classes, dcdit.num, dcdit.labels (one per sample),
dcdit.steps, dcdit.cfg, dcdit.cfg_channels, dcdit.seed and dcdit.sampler.
The same checkpoint, seed and flags give bit-identical latents on the same
machine.

--png writes a grid of the samples (one row per --class label, --num
columns): decoded into pictures by the VAE that --vae names (a diffusers VAE
folder or an LDM single file, as 'dcdit decode' takes) or, without --vae, by
the model repository's vae/ when it has one, else through a linear
latent-to-RGB approximation, each latent pixel drawn 8×8, which shows layout
and colour, not a real image. 'dcdit decode' turns the latents file into one
PNG per sample or an .npz sample batch later.

DC checkpoints run at the tail-drop fraction --rho (default 0): in each
sample, the lowest-probability floor(n·ρ) of the router's n boundaries are
dropped before the backbone. --rho-uncond runs the unconditional branch at
its own ρ in the same batched forward (Lite-CFG); without it both branches
use --rho. The output metadata adds dcdit.architecture, dcdit.rho,
dcdit.rho_uncond (with guidance), dcdit.dense_below, dcdit.coarse_from and
dcdit.coarse_rho (with coarse steps), dcdit.tokens (L),
dcdit.kept_per_step and dcdit.kept_uncond_per_step (the mean kept tokens
per image of each step, in sampling order) and dcdit.flops_per_image (FLOPs
actually run per image, both guidance branches included; 2 per
multiply-add as dcdit inspect counts), and a closing line on stderr sums
them up. --rho and --rho-uncond on a DiT
checkpoint are usage errors.

A DC checkpoint made by 'dcdit upcycle' records how its evaluation
sampled (the recipe's eval.sampling_steps, eval.cfg, eval.dense_below,
eval.coarse_from and eval.coarse_rho and, for flow matching,
diffusion.shift; 'dcdit inspect' shows them): each of --steps, --cfg,
--dense-below, --coarse-from, --coarse-rho and --shift not given takes the
recorded value, else the default above. A flag still overrides. One line on stderr
says what the run used and where each value came from (flag, checkpoint
or default), and a --rho or --rho-uncond outside the fractions the model
was trained for (its trained ρ) is warned of, and runs.

Z-Image checkpoints (any naming inspect reads) are sampled with Z-Image's
flow-matching Euler sampler instead, from caption features rather than
class labels:

  dcdit sample ZIMAGE --captions CAPS.safetensors [--negative NEG.safetensors]
      --size HxW --steps N --cfg S --seed K --out X

--prompt (repeated, one sample each) runs the text encoder the way the
pipelines do: Qwen3 from text_encoder/ and its tokenizer from tokenizer/ of
the model repository CHECKPOINT belongs to (Z-Image-Turbo/, or its
transformer/), or from --text-encoder and --tokenizer; the prompts are
encoded before the transformer is loaded and the encoder is dropped, so the
two are never in memory together. Guidance contrasts them with
--negative-prompt (default empty). --captions is the alternative: a
safetensors file of the text encoder's output, computed beforehand ('dcdit
encode-prompts'). It holds cap_feats, F32 [N, L, cap_feat_dim]: the hidden
states of N prompts, padded to L rows; and cap_lens, I64 [N]: each prompt's
valid rows (1..L), the rows past it being ignored. --negative is a file of
the same form with the negative prompts (N of them, or one for all), needed
when guidance is on. A Z-Image trained by dcdit on the shapes captions
('dcdit train' with model.kind = "zimage") records its caption table
instead: --prompt takes text in its vocabulary, and guidance contrasts it
with the empty prompt, as training dropped captions.
--size is the latent grid (the image is 8× larger; default 128x128, i.e.
1024×1024 px), a multiple of the patch size. The output "latents" are
[N, C, H, W] in the pipelines' latent space: the Flux VAE decodes
latents/0.3611 + 0.1159.

The schedule is Z-Image's shifted σ schedule built as --schedule's pipeline
builds it (tongyi: Tongyi-MAI's reference, which guides only for --cfg > 1
and skips a last step at timestep 0; diffusers: ZImagePipeline, which guides
for --cfg > 0), with --shift (default 3, Z-Image-Turbo's). Guidance is
Z-Image's pred = pos + s·(pos − neg), so --cfg s weighs the prompt like
standard guidance with 1 + s; --cfg-truncation and --cfg-normalization are
the pipelines' cfg_truncation and cfg_normalization. Without --steps and
--cfg a Z-Image run takes Z-Image-Turbo's 8 steps and no guidance. The
initial noise comes from --seed (dcdit's generator, not PyTorch's). The
output metadata records the checkpoint, captions, size, schedule, shift,
steps, guidance settings and seed (dcdit.sampler "flowmatch-euler"), and
dcdit.flops_per_image. --class, --num, --num-heads, --cfg-all-channels and
--rho are for DiT and DC checkpoints and the Z-Image flags for Z-Image only.

A DC checkpoint around a Z-Image (a DC-Z-Image: 'dcdit upcycle' of a
Z-Image base) takes both: the Z-Image's captions, sampler, schedule and
guidance, on its own grid (no --size), and --rho, --rho-uncond (Lite-CFG)
and --dense-below and --coarse-from, whose timesteps are σ·1000.

--teacache T caches steps with TeaCache: at each step the relative L1 change
of the first block's modulated input, rescaled by the model's calibration
(CHECKPOINT.teacache.json, written by 'dcdit teacache fit'; there is no
default), is accumulated, and while the sum stays under T the blocks are
skipped and the residual of the last computed step is added instead; the
first and last steps always compute. Each guidance branch keeps its own sum
and residual, but a step computes both when either's sum reaches T. A DC model's skipped step keeps the cells of the branch's last computed
step, and its first dense step (--dense-below) always computes. The metadata adds dcdit.teacache and dcdit.teacache_skipped (branch
steps skipped / run), and the FLOPs count the steps as they ran.
--teacache 0 samples exactly as without it.

While sampling, a progress bar (steps done, elapsed, ETA, and for DC
checkpoints the last step's kept tokens) is drawn on stderr when it is a
terminal; otherwise a plain line appears every 10 seconds.`,
		Example: `  dcdit sample DiT-XL-2-256x256.pt --class 207,360 --num 2 --out latents.safetensors --png preview.png
  dcdit sample my-dit.safetensors --num-heads 8 --class 1 --num 16 --steps 50 --cfg 1.5 --seed 7
  dcdit sample DiT-XL-2-256/ --class 3 --cfg-all-channels --quiet        # a diffusers folder
  dcdit sample dc-dit-xl.safetensors --class 207 --rho 0.3 --rho-uncond 0.9   # DC checkpoint, Lite-CFG
  dcdit sample Z-Image-Turbo/ --captions caps.safetensors --size 128x128 --seed 7 --out z.safetensors
  dcdit sample zimage.safetensors --config config.json --captions caps.safetensors --negative neg.safetensors \
      --schedule diffusers --steps 50 --cfg 4 --cfg-normalization 1 --size 96x128
  dcdit sample runs/toy-zimage-teacher/model --prompt "a red disc" --prompt "a small cyan ring on top" \
      --size 16x16 --steps 25 --cfg 4 --png toy.png
  dcdit sample runs/toy-zimage/model.safetensors --prompt "a red disc" --rho 0.6 --rho-uncond 0.8 \
      --dense-below 600 --steps 25 --cfg 4 --png dc.png                         # DC-Z-Image`,
		Args: cmdutil.ExactArgs(1, "the CHECKPOINT"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Checkpoint = args[0]
			opts.RhoGiven, opts.RhoUncondGiven = cmd.Flags().Changed("rho"), cmd.Flags().Changed("rho-uncond")
			opts.CFGTruncationGiven = cmd.Flags().Changed("cfg-truncation")
			opts.TeaCacheGiven = cmd.Flags().Changed("teacache")
			if err := validate(cmd, opts); err != nil {
				return err
			}
			if runF != nil {
				return runF(opts)
			}
			f := cmd.Flags()
			opts.unset = unsetFlags{steps: !f.Changed("steps"), cfg: !f.Changed("cfg"), denseBelow: !f.Changed("dense-below"), shift: !f.Changed("shift"),
				coarseFrom: !f.Changed("coarse-from"), coarseRho: !f.Changed("coarse-rho")}
			return Run(opts)
		},
	}
	f := cmd.Flags()
	f.IntSliceVar(&opts.Classes, "class", []int{0}, "class labels to sample, comma-separated (each gets --num samples)")
	f.IntVar(&opts.Num, "num", 1, "samples per --class label")
	f.IntVar(&opts.Steps, "steps", defaultSteps, "sampling steps (1..1000): DiT's 1000 training steps respaced, or Z-Image's Euler steps (8 unless given); a DC checkpoint's recorded value unless given")
	f.Float64Var(&opts.CFG, "cfg", defaultCFG, "classifier-free guidance scale; 1 or less disables guidance (Z-Image: 0 unless given, and see --schedule); a DC checkpoint's recorded value unless given")
	f.BoolVar(&opts.CFGAll, "cfg-all-channels", false, "guide all latent channels (diffusers) instead of DiT's first 3")
	f.Uint64Var(&opts.Seed, "seed", 0, "random seed of the initial and per-step noise")
	f.StringVar(&opts.Out, "out", "samples.safetensors", "safetensors file to write the latents to")
	f.StringVar(&opts.PNG, "png", "", "also write a grid of the samples to this PNG: decoded by --vae, else a linear latent-to-RGB preview")
	f.StringVar(&opts.VAE, "vae", "", "VAE folder or file that --png decodes the samples with (default: vae/ of the model repository; see 'dcdit decode --help')")
	f.StringVar(&opts.Drop, "drop", "", "DC checkpoints: "+cmdutil.DropUsage)
	f.BoolVar(&opts.Lookback, "lookback", false, "DC checkpoints: "+cmdutil.LookbackUsage)
	f.Float64Var(&opts.LookbackSpacing, "lookback-spacing", 0, "DC checkpoints: "+cmdutil.LookbackSpacingUsage)
	f.BoolVar(&opts.DenseTeacher, "dense-teacher", false, "DC checkpoints: "+cmdutil.DenseTeacherUsage)
	f.IntVar(&opts.NumHeads, "num-heads", 0, "attention heads, for DiT checkpoints that match no preset and official DC-DiT state dicts without their config (they do not store it)")
	f.BoolVarP(&opts.Quiet, "quiet", "q", false, "print nothing but errors: no progress, warnings or summary")
	cmdutil.DeviceFlags(cmd, &opts.Device, &opts.Precision)
	f.Float64Var(&opts.Rho, "rho", 0, "DC checkpoints: tail-drop fraction ρ in [0, 1), the share of the router's boundaries dropped per sample")
	f.Float64Var(&opts.RhoUncond, "rho-uncond", 0, "DC checkpoints: ρ of the unconditional branch (Lite-CFG; default: --rho)")
	f.Float64Var(&opts.DenseBelow, "dense-below", 0, "DC checkpoints: run the steps below this timestep on every cell (the low-noise steps at full cost; 0: never; default: the checkpoint's recorded value, else 0)")
	f.Float64Var(&opts.CoarseFrom, "coarse-from", 0, "DC checkpoints: at ρ > 0, the steps at and above this timestep drop at least --coarse-rho of their boundaries (the noisiest steps at a handful of tokens; 0: never; default: the checkpoint's recorded value, else 0)")
	f.Float64Var(&opts.CoarseRho, "coarse-rho", 0, "DC checkpoints: the least tail-drop fraction of the steps from --coarse-from (default: the checkpoint's recorded value, else 0)")
	f.StringVar(&opts.Captions, "captions", "", "Z-Image: safetensors file of caption features (cap_feats F32 [N, L, cap_feat_dim], cap_lens I64 [N]) from the text encoder, which dcdit does not run")
	f.StringVar(&opts.Negative, "negative", "", "Z-Image: caption features of the negative prompts guidance contrasts with (N of them, or 1 for all)")
	f.StringArrayVar(&opts.Prompts, "prompt", nil, "Z-Image: a prompt (repeat for several samples; instead of --captions), encoded by the repository's text encoder, or by a dcdit-trained toy's caption table")
	f.StringVar(&opts.NegativePrompt, "negative-prompt", "", "Z-Image with --prompt: the negative prompt guidance contrasts with (default empty)")
	f.StringVar(&opts.TextEncoder, "text-encoder", "", "Z-Image with --prompt: the Qwen3 text encoder (default: text_encoder/ of the model repository)")
	f.StringVar(&opts.Tokenizer, "tokenizer", "", "Z-Image with --prompt: the tokenizer (default: tokenizer/ beside the text encoder)")
	f.StringVar(&opts.Size, "size", "", "Z-Image: latent grid HxW, a multiple of the patch size (the image is 8× larger)")
	f.Lookup("size").DefValue = defaultZImageSize
	f.StringVar(&opts.Config, "config", "", "Z-Image: config.json supplying what the weights do not tell (axes_dims, rope_theta, t_scale); default: the model folder's own")
	f.StringVar(&opts.Schedule, "schedule", "", "Z-Image: the pipeline whose schedule and guidance rules to follow: tongyi or diffusers")
	f.Lookup("schedule").DefValue = flowmatch.Tongyi.String()
	f.Float64Var(&opts.Shift, "shift", 0, "Z-Image: the scheduler's static shift σ' = sσ/(1+(s−1)σ); a DC checkpoint's recorded value unless given")
	f.Lookup("shift").DefValue = strconv.FormatFloat(flowmatch.DefaultConfig().Shift, 'g', -1, 64)
	f.Float64Var(&opts.CFGTruncation, "cfg-truncation", 0, "Z-Image: no guidance at steps whose model time 1−σ exceeds this (cfg_truncation; default off)")
	f.Float64Var(&opts.TeaCache, "teacache", 0, "cache steps (TeaCache) at this threshold of the accumulated rescaled change of the first block's input, under the model's calibration ('dcdit teacache fit'); 0 computes every step")
	f.Float64Var(&opts.CFGNormalization, "cfg-normalization", 0, "Z-Image: clamp each guided output's norm to this multiple of the positive output's (cfg_normalization; 0 is off)")
	return cmd
}

// validate rejects flag values that are wrong whatever the checkpoint: they
// are usage errors (exit 2).
func validate(cmd *cobra.Command, o *Options) error {
	spacing := cmdutil.LookbackSpacingProblem(o.Lookback, o.LookbackSpacing)
	switch {
	case len(o.Classes) == 0:
		return cmdutil.Usagef(cmd, "--class: want at least one label")
	case o.Num < 1:
		return cmdutil.Usagef(cmd, "--num %d: want at least 1 sample per class", o.Num)
	case o.Steps < 1 || o.Steps > trainSteps:
		return cmdutil.Usagef(cmd, "--steps %d: want 1..%d (the training steps are respaced, not extended)", o.Steps, trainSteps)
	case math.IsNaN(o.CFG) || math.IsInf(o.CFG, 0):
		return cmdutil.Usagef(cmd, "--cfg %v: want a finite scale", o.CFG)
	case o.NumHeads < 0:
		return cmdutil.Usagef(cmd, "--num-heads %d: want a positive head count", o.NumHeads)
	case o.Out == "":
		return cmdutil.Usagef(cmd, "--out: want a file name")
	case o.PNG != "" && filepath.Clean(o.PNG) == filepath.Clean(o.Out):
		return cmdutil.Usagef(cmd, "--png and --out both name %s", o.Out)
	case !validRho(o.Rho):
		return cmdutil.Usagef(cmd, "--rho %v: want 0 ≤ ρ < 1 (the fraction of each sample's boundaries dropped)", o.Rho)
	case !validRho(o.RhoUncond):
		return cmdutil.Usagef(cmd, "--rho-uncond %v: want 0 ≤ ρ < 1 (the fraction of each sample's boundaries dropped)", o.RhoUncond)
	case !(o.DenseBelow >= 0) || math.IsInf(o.DenseBelow, 0):
		return cmdutil.Usagef(cmd, "--dense-below %v: want a timestep ≥ 0 (0: never)", o.DenseBelow)
	case !(o.CoarseFrom >= 0) || math.IsInf(o.CoarseFrom, 0):
		return cmdutil.Usagef(cmd, "--coarse-from %v: want a timestep ≥ 0 (0: never)", o.CoarseFrom)
	case !validRho(o.CoarseRho):
		return cmdutil.Usagef(cmd, "--coarse-rho %v: want 0 ≤ ρ < 1", o.CoarseRho)
	case o.TeaCacheGiven && (!(o.TeaCache >= 0) || math.IsInf(o.TeaCache, 0)):
		return cmdutil.Usagef(cmd, "--teacache %v: want a finite threshold ≥ 0", o.TeaCache)
	case o.DenseTeacher && o.TeaCache > 0:
		return cmdutil.Usagef(cmd, "--dense-teacher and --teacache %v: the cache plans every step, dense ones too, so the two do not combine yet", o.TeaCache)
	case spacing != "":
		return cmdutil.Usagef(cmd, "%s", spacing)
	case o.Lookback && o.TeaCache > 0:
		return cmdutil.Usagef(cmd, "--lookback and --teacache %v: a cached step reuses the cells of the step it skips from, so the two do not combine", o.TeaCache)
	case o.RhoUncondGiven && !(ddpm.Guidance{Scale: float32(o.CFG)}).Enabled():
		return cmdutil.Usagef(cmd, "--rho-uncond needs classifier-free guidance (--cfg > 1): with --cfg %g there is no unconditional branch", o.CFG)
	}
	for _, c := range o.Classes {
		if c < 0 {
			return cmdutil.Usagef(cmd, "--class %d: labels are not negative", c)
		}
	}
	return validateZImage(cmd, o)
}

// validRho reports whether ρ is a usable tail-drop fraction (in float32,
// which the model computes in, too).
func validRho(r float64) bool { return r >= 0 && float32(r) < 1 }

// Run samples and writes the outputs.
func Run(opts *Options) error {
	// Fail before minutes of sampling, not after.
	if err := cmdutil.CheckWritable("--out", opts.Out); err != nil {
		return err
	}
	if opts.PNG != "" {
		if err := cmdutil.CheckWritable("--png", opts.PNG); err != nil {
			return err
		}
	}
	rep, err := detect(opts.Checkpoint, nil)
	if err != nil {
		return err
	}
	a := rep.Architecture
	if a == arch.ZImage {
		if opts.Device != "" && opts.Device != accel.CPU {
			// RoPE and the per-head RMSNorm have no device kernels yet.
			return &cmdutil.UsageError{Err: fmt.Errorf("--device %s: Z-Image checkpoints sample on the CPU only for now", opts.Device)}
		}
		return runZImage(opts, rep)
	}
	if a == arch.DCDiT {
		// Its backbone says whether it takes labels or captions.
		return runDC(opts)
	}
	if flag := zimageFlag(opts); flag != "" {
		return &cmdutil.UsageError{Err: fmt.Errorf("%s applies to Z-Image checkpoints; %s is a %s checkpoint, which is class-conditional (see 'dcdit sample --help')", flag, opts.Checkpoint, a)}
	}
	if opts.RhoGiven || opts.RhoUncondGiven || opts.DenseBelow != 0 || opts.CoarseFrom != 0 || opts.CoarseRho != 0 || opts.Drop != "" || opts.Lookback || opts.DenseTeacher {
		flag := "--rho"
		switch {
		case opts.RhoUncondGiven && !opts.RhoGiven:
			flag = "--rho-uncond"
		case opts.DenseBelow != 0 && !opts.RhoGiven:
			flag = "--dense-below"
		case opts.CoarseFrom != 0 && !opts.RhoGiven:
			flag = "--coarse-from"
		case opts.CoarseRho != 0 && !opts.RhoGiven:
			flag = "--coarse-rho"
		case opts.Drop != "" && !opts.RhoGiven:
			flag = "--drop"
		case opts.Lookback && !opts.RhoGiven:
			flag = "--lookback"
		case !opts.RhoGiven:
			flag = "--dense-teacher"
		}
		return &cmdutil.UsageError{Err: fmt.Errorf("%s applies to DC checkpoints; %s is a %s checkpoint, which has no router (see 'dcdit sample --help')", flag, opts.Checkpoint, a)}
	}
	return runDiT(opts, string(a))
}

// runDiT samples from a class-conditional fixed-patch checkpoint (a DiT,
// or any family's teacher that takes labels and DDPM), opened through its
// family.
func runDiT(opts *Options, kind string) error {
	t, warnings, err := family.OpenTeacher(opts.Checkpoint, family.OpenOptions{NumHeads: opts.NumHeads})
	if err != nil {
		return fmt.Errorf("sample: %w", err)
	}
	classes := t.Conditioning().Classes
	if classes == 0 || t.Process() != family.ProcessDDPM {
		return fmt.Errorf("sample: %s is a %s model conditioned on %+v; this path samples class-conditional DDPM models", opts.Checkpoint, t.Process(), t.Conditioning())
	}
	for _, c := range opts.Classes {
		if c >= classes {
			return fmt.Errorf("--class %d: %s has %d classes, labels 0..%d", c, opts.Checkpoint, classes, classes-1)
		}
	}
	C := t.InChannels()
	if t.OutChannels() != 2*C {
		return fmt.Errorf("sample: %s predicts eps only (learn_sigma false); the DDPM sampler needs DiT's learned-sigma output", opts.Checkpoint)
	}
	rows, cols := t.Grid()
	if rows == 0 || rows != cols {
		return fmt.Errorf("sample: %s takes a %d×%d grid; this path samples square fixed-size grids", opts.Checkpoint, rows, cols)
	}
	pic, err := newPictureOut(opts, C)
	if err != nil {
		return err
	}
	if !opts.Quiet {
		for _, warn := range warnings {
			fmt.Fprintf(opts.IO.Err, "warning: %s\n", warn)
		}
	}
	release, err := cmdutil.OnDevice(opts.Device, opts.Precision, quietLog(opts), t.Parameters())
	if err != nil {
		return err
	}
	defer release()
	sched, err := ddpm.Respaced(trainSteps, strconv.Itoa(opts.Steps))
	if err != nil {
		return err
	}

	labels := expandLabels(opts)
	side := rows
	sh := ddpm.Shape{B: len(labels), C: C, HW: side * side}
	guide, guided := guidance(opts, C, classes)
	proc := &diffusion.DDPM{Schedule: sched, GuidedChannels: guide.Channels}

	var bar *progress.Bar
	if !opts.Quiet {
		bar = progress.New(opts.IO.Err, "sampling", sched.Steps())
	}
	conds := sample.Conditions{Labels: labels, Null: guide.NullClass}
	model := sample.Teacher(t, conds, side, side)
	tc, err := teaCache(opts, sched.Steps())
	if err != nil {
		return err
	}
	var staged family.StagedTeacher
	if tc != nil {
		if staged, err = sample.Staged(t, kind); err != nil {
			return err
		}
		t.Parameters().SetRequiresGrad(false)
		model = tc.Teacher(staged, conds, side, side)
	}
	start := time.Now()
	x, err := proc.Sample(model, diffusion.Shape(sh), diffusion.SampleOptions{
		Guidance: float64(guide.Scale),
		Seed:     opts.Seed,
		Progress: func(done, total int) { bar.Set(done) },
	})
	bar.Finish()
	if err != nil {
		return fmt.Errorf("sample: %s: %w", opts.Checkpoint, err)
	}
	elapsed := time.Since(start)

	md := outputMeta(opts, labels, guide, guided)
	steps := float64(sched.Steps())
	if guide.Enabled() {
		steps *= 2
	}
	tflop := t.ForwardFLOPs(side, side) * steps * float64(sh.B) / 1e12
	if tc != nil {
		tflop = tc.TeacherFLOPs(t.ForwardFLOPs(side, side), staged.StepFLOPs(side, side), sh.B) / 1e12
		teaCacheMeta(md, tc)
		md["dcdit.flops_per_image"] = strconv.FormatFloat(tflop*1e12/float64(sh.B), 'g', 8, 64)
	}
	if err := writeOutputs(opts, x, sh, side, side, md, pic); err != nil {
		return err
	}
	if opts.Quiet {
		return nil
	}
	teaCacheNote(opts, tc)
	printWritten(opts, sh, side, side, sched.Steps(), guide, guided, elapsed, tflop, pic)
	return nil
}

// quietLog is where a command's notes go: stderr, or nowhere with --quiet.
func quietLog(opts *Options) io.Writer {
	if opts.Quiet {
		return nil
	}
	return opts.IO.Err
}

// expandLabels lists one label per sample: each --class label --num times.
func expandLabels(opts *Options) []int {
	labels := make([]int, 0, len(opts.Classes)*opts.Num)
	for _, c := range opts.Classes {
		for range opts.Num {
			labels = append(labels, c)
		}
	}
	return labels
}

// guidance configures classifier-free guidance for a model with C latent
// channels and the given null class, and says how many channels it guides.
func guidance(opts *Options, C, nullClass int) (ddpm.Guidance, int) {
	guide := ddpm.Guidance{Scale: float32(opts.CFG), NullClass: nullClass}
	guided := 3
	if opts.CFGAll {
		guide.Channels, guided = C, C
	}
	return guide, min(guided, C)
}

// outputMeta is the latents file's metadata common to every checkpoint.
func outputMeta(opts *Options, labels []int, guide ddpm.Guidance, guided int) map[string]string {
	cfgChannels := "0"
	if guide.Enabled() {
		cfgChannels = strconv.Itoa(guided)
	}
	return map[string]string{
		"format":             "pt",
		"dcdit.sampler":      "ddpm",
		"dcdit.checkpoint":   opts.Checkpoint,
		"dcdit.classes":      joinInts(opts.Classes),
		"dcdit.num":          strconv.Itoa(opts.Num),
		"dcdit.labels":       joinInts(labels),
		"dcdit.steps":        strconv.Itoa(opts.Steps),
		"dcdit.cfg":          strconv.FormatFloat(opts.CFG, 'g', -1, 64),
		"dcdit.cfg_channels": cfgChannels,
		"dcdit.seed":         strconv.FormatUint(opts.Seed, 10),
	}
}

// writeOutputs writes the latents [B, C, rows, cols] with md, and the
// preview when asked for.
func writeOutputs(opts *Options, x []float32, sh ddpm.Shape, rows, cols int, md map[string]string, pic *pictureOut) error {
	data := dtype.F32Bytes(x)
	shape := []int64{int64(sh.B), int64(sh.C), int64(rows), int64(cols)}
	if err := safetensors.Write(opts.Out, []safetensors.WriteTensor{{Name: "latents", DType: dtype.F32, Shape: shape, Data: data}}, md); err != nil {
		return err
	}
	return pic.write(opts.PNG, x, sh.B, opts.Num, rows, cols)
}

// printWritten reports the written files on stdout.
func printWritten(opts *Options, sh ddpm.Shape, rows, cols, steps int, guide ddpm.Guidance, guided int, elapsed time.Duration, tflop float64, pic *pictureOut) {
	cfgNote := "no guidance"
	if guide.Enabled() {
		cfgNote = fmt.Sprintf("cfg %g on %d channels", opts.CFG, guided)
	}
	fmt.Fprintf(opts.IO.Out, "wrote %s: latents [%d %d %d %d], %d steps, %s, seed %d, %s (%.3g TFLOP)\n",
		opts.Out, sh.B, sh.C, rows, cols, steps, cfgNote, opts.Seed, progress.Duration(elapsed), tflop)
	if pic != nil {
		fmt.Fprintf(opts.IO.Out, "wrote %s: %s\n", opts.PNG, pic.describe())
	}
}

func joinInts(v []int) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = strconv.Itoa(x)
	}
	return strings.Join(s, ",")
}

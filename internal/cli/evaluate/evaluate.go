// Package evaluate implements `dcdit eval`: a DC model against its
// teacher DiT across tail-drop fractions ρ and a Lite-CFG pair, on a latent
// data set (package eval does the work).
package evaluate

import (
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/dcdit/dcdit/datasets"
	"github.com/dcdit/dcdit/datasets/shapes"
	"github.com/dcdit/dcdit/dc"
	"github.com/dcdit/dcdit/dc/checkpoint"
	"github.com/dcdit/dcdit/dc/dcfile"
	"github.com/dcdit/dcdit/diffusion/flowmatch"
	"github.com/dcdit/dcdit/eval"
	"github.com/dcdit/dcdit/eval/featnet"
	"github.com/dcdit/dcdit/family"
	"github.com/dcdit/dcdit/gpu/accel"
	"github.com/dcdit/dcdit/internal/cli/cmdutil"
	"github.com/dcdit/dcdit/internal/cli/iostreams"
	"github.com/dcdit/dcdit/internal/cli/progress"
	"github.com/dcdit/dcdit/loaders"
	"github.com/dcdit/dcdit/params"
)

// Options are the flags and arguments of `dcdit eval`.
type Options struct {
	IO           *iostreams.IO
	Checkpoint   string
	Teacher      string
	Data         string
	Rhos         []float64
	Lite         []float64 // [cond, uncond]
	NoLite       bool
	CFG          float64 // the rows' guidance scale
	LiteCFG      float64 // the Lite-CFG row's
	Num          int
	Samples      int
	Features     string
	RandomRouter bool // with Features, the random-router baseline in every row
	SpreadRandom bool // with it, the random router kept apart too
	Steps        int
	Batch        int
	ProbeT       []int
	DenseBelow   float64 // model times below it run on every cell
	// CoarseFrom and CoarseRho: the steps at timesteps from CoarseFrom
	// drop at least CoarseRho (0: none).
	CoarseFrom, CoarseRho float64
	Seed                  uint64
	JSON                  bool
	Out                   string
	NumHeads              int
	TeacherHeads          int
	Sigma                 float64
	Drop                  string  // --drop: the tail drop's rule ("": the file's)
	Lookback              bool    // --lookback: the kept cells from the previous step's estimate
	LookbackSpacing       float64 // --lookback-spacing: cover that estimate at this spacing (0: the change ranking)
	DenseTeacher          bool    // --dense-teacher: the dense steps through the backbone and wide head alone
	Shift                 float64 // flow matching's shift (a caption-conditioned Z-Image)
	Quiet                 bool
	// VAE decodes the pictures (and the samples FID scores); Inception
	// and Ref add FID per row against the reference pictures or
	// statistics Ref names.
	VAE, Inception, Ref string
	// Device and Precision choose where the models run (cmdutil.OnDevice).
	Device, Precision string
	// TeaCache are the step cache's thresholds to sweep (each model under
	// its own calibration sidecar); none: no sweep.
	TeaCache []float64

	// unset names the sampling flags left at their defaults, which a DC
	// checkpoint's sampling record fills in. The command sets it; a
	// caller of Run gives what it means.
	unset unsetFlags
}

// unsetFlags are the sampling flags the command line did not give.
type unsetFlags struct{ steps, cfg, denseBelow, coarseFrom, coarseRho, shift, rho, lite bool }

// Defaults of the sampling flags, for a checkpoint that records no
// sampling settings.
const (
	defaultSteps = 10
	defaultCFG   = 1.0
)

// NewCmd returns the eval command. runF replaces the action in tests that
// only check flag parsing; nil evaluates.
func NewCmd(ios *iostreams.IO, runF func(*Options) error) *cobra.Command {
	opts := &Options{IO: ios}
	cmd := &cobra.Command{
		Use:   "eval CHECKPOINT --teacher DIT_CHECKPOINT --data FILE",
		Short: "Evaluate a DC model against its teacher across ρ (kept tokens, FLOPs, time, ε error, samples), or score a fixed-patch model",
		Long: `Eval measures a DC model against the fixed-patch DiT it was upcycled from, at
each tail-drop fraction --rho and for a Lite-CFG pair, on a latent data set
(the file 'dcdit data shapes' writes, or any with latents and labels; use one
the model was not trained on, e.g. another seed):

  kept tokens, GFLOPs and ms per image   mean over --num held-out noisy inputs
                                         x_t = q_sample(x0, t, ε) of the first
                                         --num data samples, t spread evenly
                                         over [0, 1000)
  ε rel MSE      Σ‖ε_dc − ε_teacher‖² / Σ‖ε_teacher‖² on those inputs (the
                 same x_t, t and label to both)
  sample PSNR    latent PSNR (over the data's value range) of --samples DC
                 samples against the teacher's from the same noise (DDPM,
                 --steps respaced steps, labels 0, 1, 2, …)
  FD, class acc  with --features (a feature network, e.g. the bundled
                 testdata/featnet/model.safetensors): the Fréchet distance
                 of the --samples samples' features to those of the data's
                 first --samples samples, and the fraction classified as
                 the label they were drawn for, and their RMS value (FD is
                 blind to saturation; compare data_rms); also the network's accuracy
                 on the data and the FD between two halves of the data (the
                 floor at that count: give the data 2×--samples samples)
  random router  with --features (unless --random-router=false), each row
                 and Lite-CFG sampled again from the same noise with the
                 router's kept cells replaced by as many drawn uniformly at
                 random in every sample at every step (the first and last
                 cell, which the router always keeps, stay): its FD and
                 class accuracy say what the router's choice is worth;
                 --spread-random samples once more with the random cells
                 kept apart as the spread drop keeps them: what spacing
                 alone is worth, and what the ranking adds to it
  by timestep    at the first ρ, unguided, the --num inputs' clean samples
                 all noised to each --probe-t: ε MSE of the DC model and the
                 teacher against the noise and between them, the slope of
                 the DC ε̂ on the teacher's (< 1: it shrinks the noise and
                 its samples stay noisy), and with --features the class
                 accuracy of x̂0 (what each model knows of the shape at t)

A DC checkpoint made by 'dcdit upcycle' records how its evaluation sampled
(the recipe's eval.sampling_steps, eval.cfg, eval.dense_below,
eval.coarse_from and eval.coarse_rho and, for flow matching,
diffusion.shift): each of --steps, --cfg, --dense-below, --coarse-from,
--coarse-rho and --shift not given takes the recorded value, else its
default. One line on stderr says what was used and where each value came
from (flag, checkpoint or default), and a ρ (a row or --lite) outside the
fractions the model was trained for is warned of.

The rows are unguided unless --cfg > 1 (then both branches run at the row's
ρ and the teacher is guided too). Lite-CFG runs the conditional branch at
the first --lite fraction and the unconditional at the second, guidance
--lite-cfg, against the teacher with the same guidance. The edge density
ratio is the fraction of edge cells the router keeps over the fraction of
flat cells, at ρ = 0 on inputs noised to t = 100, 200, 300 (the first and
last cell, always kept, left out); edge cells come from the data set's edge
masks (shapes has them), else from the latents (a 4-neighbour farther than a
quarter of the value range).

The table goes to stdout, or one JSON object with --json:
{"rows": [{"rho", "kept_tokens", "gflops_per_image", "ms_per_image",
"eps_rel_mse", "sample_psnr_db", "fd", "class_accuracy", "sample_rms",
"fd_random_router", "accuracy_random_router", with --spread-random
"fd_spread_random", "accuracy_spread_random", "kept_per_step"}, ...],
"lite_cfg": {...}, "teacher": {..., "fd", "class_accuracy"}, "feature_net":
{"accuracy", ...}, "data_fd_floor", "sampling_timesteps", "edge_density_ratio": r,
"edges": {...}, "per_timestep": [{"t", "rho", "eps_mse", "teacher_eps_mse",
"eps_mse_to_teacher", "eps_slope", "x0_class_accuracy",
"teacher_x0_class_accuracy"}, ...], "drop": "lowest" or "spread",
"lookback": true with --lookback, "lookback_spacing" with --lookback-spacing,
"dense_teacher": true with --dense-teacher, ...}.

--lookback samples every row (not the random router's, not TeaCache's) with
the kept cells of each step after the first chosen on the step before: as
many as the router keeps, ranked where the previous step's clean estimate
changes most (the ideal-router ranking on x̂0) and kept apart as the spread
drop keeps them. The router reads only its own step's noisy latents; at
mid noise the step before has already drawn the shape. With
--lookback-spacing S > 0 the cells cover that estimate instead (greedy
facility location): a dropped cell costs its squared distance in value to
the best kept cell plus S times their squared distance in cells, and each
pick lowers the summed cost most, so a token serves the cells near it that
share its values (S is in squared latent units per cell²).

--out DIR (created if needed) receives eval.json (that object) and three
pictures through the linear latent-to-RGB preview: boundaries.png (data
samples, clean, then noised to t = 50, 250, 500, 750, 950: cells the router
kept at ρ = 0 dotted, dropped ones dimmed), trajectory.png (the first ρ's
samples, with the cells kept at each sampling step dotted, noisiest step
first) and elastic_grid.png (rows: teacher, each ρ, then the teacher at the
Lite-CFG scale and Lite-CFG; columns: samples from the same noise and
label), and with --features pareto.png (FD against GFLOPs per image, the
random router dashed).

--vae draws those pictures decoded by a VAE instead of the linear preview
(see 'dcdit decode --help'). With --inception (pytorch-fid's FID Inception
weights) and --ref (a folder of pictures, an .npz sample batch, or .npz
statistics mu/sigma such as ADM's reference batches) every row, the teacher
and Lite-CFG are also scored as pictures: the FID of their decoded samples
against the reference and their Inception Score ("fid", "inception_score"
in each row's JSON), and --out receives each row's pictures as an .npz
sample batch in samples/ (teacher-cfgS.npz, rhoR-cfgS.npz, liteC-U-cfgS.npz)
that the ADM evaluator reads. FID over --samples pictures is biased high for
small counts: use thousands for numbers to compare with published ones.

CHECKPOINT is a DC checkpoint (dcdit's format, config in its metadata), or a
reference DC-DiT state_dict (AMD-AGI/DynamicChunkingDiT: safetensors or
PyTorch), which stores neither its head count (--num-heads) nor its de-chunk
σ (--dechunk-sigma) unless its YAML config sits beside it (model.pt,
model.yaml) or a training checkpoint pickles it.
--teacache T1,T2,… sweeps TeaCache's step cache (see 'dcdit sample --help'):
at each threshold the teacher and every ρ are sampled again with the cache,
each model under its own calibration (CHECKPOINT.teacache.json and the
teacher's, from 'dcdit teacache fit'), into "teacache": one run per threshold
with the teacher's row and the ρ rows, each recording the branch steps it
skipped; GFLOPs per image count the steps as they ran. The table adds the
sweep, and pareto.png its curves: teacher + TeaCache and, per ρ, DC + TeaCache.

The teacher is any DiT checkpoint 'dcdit sample' reads.

A fixed-patch model (a DiT, or a Z-Image trained by dcdit on the shapes
captions, whose metadata records the caption table) is scored on its own
instead, without --teacher, as a DC evaluation scores its teacher: --samples
samples drawn for the labels 0, 1, 2, … in turn (DDPM over --steps respaced
steps) or for the captions of the data's first samples (flow matching,
--steps Euler steps at --shift), guided at --cfg, give the FD to as many
data samples of the same classes, the class accuracy, for captions prompt
following (the share whose class and foreground colour are their
caption's), and the cost per image and step. On the data a recipe's
evaluation draws ('dcdit data shapes --balanced', with --captions for a
Z-Image) and with its seed, steps and guidance the numbers are its
teacher row's, bit for bit.`,
		Example: `  dcdit data shapes --num 256 --seed 1 --out shapes-eval.safetensors
  dcdit eval run/model.safetensors --teacher testdata/toy-dit/model.safetensors --data shapes-eval.safetensors --out run/eval
  dcdit eval model.safetensors --teacher dit.safetensors --data d.safetensors --rho 0,0.2,0.4,0.6 --no-lite --json
  dcdit data shapes --captions --num 400 --seed 1 --out captioned.safetensors
  dcdit eval runs/toy-zimage-teacher/model --data captioned.safetensors --features testdata/featnet/model.safetensors \
      --samples 200 --steps 25 --cfg 4
  dcdit data shapes --balanced --num 600 --seed 99 --out heldout.safetensors
  dcdit eval testdata/teacher/model.safetensors --data heldout.safetensors --features testdata/featnet/model.safetensors \
      --samples 300 --steps 25 --cfg 4`,
		Args: cmdutil.ExactArgs(1, "the DC CHECKPOINT"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Checkpoint = args[0]
			if isFixedPatch(opts.Checkpoint) {
				if err := validateOwn(cmd, opts); err != nil {
					return err
				}
				return runOwn(opts)
			}
			if err := validate(cmd, opts); err != nil {
				return err
			}
			if runF != nil {
				return runF(opts)
			}
			f := cmd.Flags()
			opts.unset = unsetFlags{steps: !f.Changed("steps"), cfg: !f.Changed("cfg"), denseBelow: !f.Changed("dense-below"), shift: !f.Changed("shift"),
				coarseFrom: !f.Changed("coarse-from"), coarseRho: !f.Changed("coarse-rho"),
				rho: !f.Changed("rho"), lite: !f.Changed("lite")}
			return Run(opts)
		},
	}
	f := cmd.Flags()
	f.StringVar(&opts.Teacher, "teacher", "", "the teacher DiT checkpoint (required)")
	f.StringVar(&opts.Data, "data", "", "data set file of latents and labels, e.g. from 'dcdit data shapes' (required)")
	f.Float64SliceVar(&opts.Rhos, "rho", eval.DefaultRhos, "tail-drop fractions ρ, one table row each (unset: the ρ a DC checkpoint was trained for, if it records them)")
	f.Float64SliceVar(&opts.Lite, "lite", []float64{0, 0.9}, "Lite-CFG pair: ρ of the conditional, then of the unconditional branch (unset: the lowest and highest trained ρ, if recorded)")
	f.BoolVar(&opts.NoLite, "no-lite", false, "skip the Lite-CFG row")
	f.Float64Var(&opts.CFG, "cfg", defaultCFG, "guidance scale of the ρ rows (1 or less: none); a DC checkpoint's recorded value unless given")
	f.Float64Var(&opts.LiteCFG, "lite-cfg", 1.25, "guidance scale of the Lite-CFG row (> 1)")
	f.IntVar(&opts.Num, "num", 64, "held-out noisy inputs (the data set's first samples)")
	f.IntVar(&opts.Samples, "samples", 8, "samples per row for the PSNR, FD, class accuracy and the elastic grid")
	f.StringVar(&opts.Features, "features", "", "feature network for FD and class accuracy (e.g. testdata/featnet/model.safetensors)")
	f.BoolVar(&opts.RandomRouter, "random-router", true, "with --features, also score each row sampled with the kept cells drawn at random, as many as the router kept (=false: skip it)")
	f.BoolVar(&opts.SpreadRandom, "spread-random", false, "with the random router, also score each row with the random cells kept apart as the spread drop keeps them (what spacing alone is worth)")
	f.IntVar(&opts.Steps, "steps", defaultSteps, "DDPM sampling steps (the 1000 training steps respaced); a DC checkpoint's recorded value unless given")
	f.IntVar(&opts.Batch, "batch", 16, "images per forward pass for the held-out inputs")
	f.Float64Var(&opts.DenseBelow, "dense-below", 0, "run the sampling steps below this timestep on every cell (the low-noise steps at full cost; 0: never; default: a DC checkpoint's recorded value, else 0)")
	f.Float64Var(&opts.CoarseFrom, "coarse-from", 0, "the sampling steps at and above this timestep drop at least --coarse-rho of their boundaries in every row with ρ > 0 (the noisiest steps at a handful of tokens; 0: never; default: a DC checkpoint's recorded value, else 0)")
	f.Float64Var(&opts.CoarseRho, "coarse-rho", 0, "the least tail-drop fraction of the steps from --coarse-from (default: a DC checkpoint's recorded value, else 0)")
	opts.ProbeT = slices.Clone(eval.DefaultProbeTimesteps)
	f.Var((*timesteps)(&opts.ProbeT), "probe-t", "timesteps of the one-step error table, comma-separated (\"\": none)")
	f.Uint64Var(&opts.Seed, "seed", 0, "seed of the input and sampling noise")
	f.Float64Var(&opts.Shift, "shift", 0, "a caption-conditioned Z-Image: the sampling schedule's shift (default: a DC checkpoint's recorded shift, else 3, Z-Image's; use the one it was trained with)")
	f.BoolVar(&opts.JSON, "json", false, "print one JSON object instead of the table")
	f.StringVar(&opts.Out, "out", "", "folder for eval.json and the PNGs (created if missing)")
	f.IntVar(&opts.NumHeads, "num-heads", 0, "attention heads of a reference DC-DiT state_dict (DC checkpoints store them)")
	f.IntVar(&opts.TeacherHeads, "teacher-heads", 0, "attention heads of a teacher that matches no DiT preset")
	f.StringVar(&opts.Drop, "drop", "", cmdutil.DropUsage)
	f.BoolVar(&opts.Lookback, "lookback", false, cmdutil.LookbackUsage)
	f.Float64Var(&opts.LookbackSpacing, "lookback-spacing", 0, cmdutil.LookbackSpacingUsage)
	f.BoolVar(&opts.DenseTeacher, "dense-teacher", false, cmdutil.DenseTeacherUsage)
	f.Float64Var(&opts.Sigma, "dechunk-sigma", 1, "de-chunk σ of a reference DC-DiT state_dict (DC checkpoints store it)")
	f.BoolVarP(&opts.Quiet, "quiet", "q", false, "no progress or file list (the table or JSON is still printed)")
	f.StringVar(&opts.VAE, "vae", "", "VAE that decodes the pictures (see 'dcdit decode --help'); with --inception and --ref also FID per row")
	f.StringVar(&opts.Inception, "inception", "", "FID Inception weights (pytorch-fid's .pth or a safetensors copy), with --vae and --ref")
	f.StringVar(&opts.Ref, "ref", "", "FID reference: a folder of pictures, an .npz sample batch or statistics (mu, sigma)")
	f.Float64SliceVar(&opts.TeaCache, "teacache", nil, "TeaCache thresholds to sweep: the teacher and every ρ sampled again with the step cache at each, each model under its calibration ('dcdit teacache fit')")
	cmdutil.DeviceFlags(cmd, &opts.Device, &opts.Precision)
	return cmd
}

// validate rejects flag values that are wrong whatever the files: usage
// errors (exit 2).
func validate(cmd *cobra.Command, o *Options) error {
	spacing := cmdutil.LookbackSpacingProblem(o.Lookback, o.LookbackSpacing)
	switch {
	case o.Teacher == "":
		return cmdutil.Usagef(cmd, "--teacher: want the teacher DiT checkpoint")
	case slices.ContainsFunc(o.TeaCache, func(t float64) bool { return !(t >= 0) || math.IsInf(t, 0) }):
		return cmdutil.Usagef(cmd, "--teacache %v: want finite thresholds ≥ 0", o.TeaCache)
	case o.Data == "":
		return cmdutil.Usagef(cmd, "--data: want a data set file (e.g. from 'dcdit data shapes')")
	case len(o.Rhos) == 0:
		return cmdutil.Usagef(cmd, "--rho: want at least one fraction")
	case spacing != "":
		return cmdutil.Usagef(cmd, "%s", spacing)
	case o.SpreadRandom && !o.RandomRouter:
		return cmdutil.Usagef(cmd, "--spread-random is the random router kept apart, beside the random router: drop --random-router=false")
	case !o.NoLite && len(o.Lite) != 2:
		return cmdutil.Usagef(cmd, "--lite %v: want two fractions, the conditional's then the unconditional's (or --no-lite)", o.Lite)
	case !o.NoLite && !(o.LiteCFG > 1 && !math.IsInf(o.LiteCFG, 0)):
		return cmdutil.Usagef(cmd, "--lite-cfg %v: Lite-CFG needs a finite guidance scale > 1", o.LiteCFG)
	case math.IsNaN(o.CFG) || math.IsInf(o.CFG, 0):
		return cmdutil.Usagef(cmd, "--cfg %v: want a finite guidance scale", o.CFG)
	case o.Num < 1 || o.Samples < 1 || o.Batch < 1:
		return cmdutil.Usagef(cmd, "--num %d, --samples %d, --batch %d: want each ≥ 1", o.Num, o.Samples, o.Batch)
	case o.Steps < 1 || o.Steps > eval.TrainSteps:
		return cmdutil.Usagef(cmd, "--steps %d: want 1..%d", o.Steps, eval.TrainSteps)
	case !(o.CoarseFrom >= 0 && o.CoarseFrom <= eval.TrainSteps):
		return cmdutil.Usagef(cmd, "--coarse-from %v: want a timestep in 0..%d (0: never)", o.CoarseFrom, eval.TrainSteps)
	case !(o.CoarseRho >= 0 && o.CoarseRho < 1):
		return cmdutil.Usagef(cmd, "--coarse-rho %v: want 0 ≤ ρ < 1", o.CoarseRho)
	case o.NumHeads < 0 || o.TeacherHeads < 0:
		return cmdutil.Usagef(cmd, "--num-heads %d, --teacher-heads %d: want positive head counts", o.NumHeads, o.TeacherHeads)
	case !(o.Sigma > 0):
		return cmdutil.Usagef(cmd, "--dechunk-sigma %v: want > 0", o.Sigma)
	case (o.Inception != "") != (o.Ref != ""):
		return cmdutil.Usagef(cmd, "--inception and --ref go together: FID needs the network and a reference")
	case o.Inception != "" && o.VAE == "":
		return cmdutil.Usagef(cmd, "--inception: FID scores pictures; give --vae to decode the samples")
	case o.Inception != "" && o.Samples < 2:
		return cmdutil.Usagef(cmd, "--samples %d: FID needs at least 2 samples per row", o.Samples)
	}
	fracs := o.Rhos
	if !o.NoLite {
		fracs = append(append([]float64(nil), fracs...), o.Lite...)
	}
	for _, r := range fracs {
		if !(r >= 0 && r < 1) {
			return cmdutil.Usagef(cmd, "ρ = %v: want 0 ≤ ρ < 1", r)
		}
	}
	return nil
}

// LoadModel loads the DC model to evaluate, any file dcfile opens: a DC
// checkpoint, or an official DC-DiT state dict, whose head count and
// de-chunk σ, when no config comes with it, are numHeads and sigma. Its
// metadata is what the file records or implies. Any other checkpoint is
// an error naming what it holds. warn, when not nil, receives what
// loading found suspicious or assumed (a DC checkpoint without
// checksums).
func LoadModel(path string, numHeads int, sigma float64, warn func(string)) (*dc.Model, *checkpoint.Meta, error) {
	m, h, err := dcfile.Open(path, dcfile.Options{Heads: numHeads, Sigma: sigma})
	if err != nil {
		return nil, nil, err
	}
	for _, msg := range h.Meta.Warnings {
		if warn != nil {
			warn(fmt.Sprintf("%s: %s", path, msg))
		}
	}
	return m, h.Meta, nil
}

// Run evaluates and prints.
func Run(opts *Options) error {
	if opts.Out != "" {
		if err := prepareOut(opts.Out); err != nil {
			return err
		}
	}
	warn := func(msg string) {
		if !opts.Quiet {
			fmt.Fprintf(opts.IO.Err, "warning: %s\n", msg)
		}
	}
	m, meta, err := LoadModel(opts.Checkpoint, opts.NumHeads, opts.Sigma, warn)
	if err != nil {
		return err
	}
	if err := cmdutil.SetDrop(m.Config, opts.Drop); err != nil {
		return err
	}
	notes, err := resolveSampling(opts, meta, m.Backbone.Spec().Process() == family.ProcessFlowMatching)
	if err != nil {
		return err
	}
	var et eval.Teacher
	var teacherParams *params.Set
	if m.Backbone.Spec().Conditioning().CaptionWidth > 0 {
		zt, err := captionTeacher(opts, m)
		if err != nil {
			return err
		}
		et = zt
	} else {
		teacher, warnings, err := family.OpenTeacher(opts.Teacher, family.OpenOptions{NumHeads: opts.TeacherHeads, Student: m.Backbone.Spec()})
		if err != nil {
			return fmt.Errorf("--teacher: %w", err)
		}
		for _, msg := range warnings {
			warn(msg)
		}
		et, teacherParams = eval.TeacherOf(teacher, nil, 0), teacher.Parameters()
	}
	data, err := datasets.Read(opts.Data)
	if err != nil {
		return fmt.Errorf("--data: %w", err)
	}
	log := opts.IO.Err
	if opts.Quiet {
		log = nil
	}
	release, err := cmdutil.OnDeviceDC(opts.Device, opts.Precision, log, m, teacherParams)
	if err != nil {
		return err
	}
	defer release()
	eo := eval.Options{
		Rhos: opts.Rhos, NumInputs: opts.Num, NumSamples: opts.Samples, Steps: opts.Steps,
		BatchSize: opts.Batch, Seed: opts.Seed, CFG: opts.CFG, ProbeTimesteps: opts.ProbeT, DenseBelow: opts.DenseBelow,
		CoarseFrom: opts.CoarseFrom, CoarseRho: opts.CoarseRho, NoRandomRouter: !opts.RandomRouter, SpreadRandom: opts.SpreadRandom, Lookback: opts.Lookback,
		LookbackSpacing: opts.LookbackSpacing, DenseTeacher: opts.DenseTeacher,
	}
	if opts.Features != "" {
		net, err := featnet.Load(opts.Features)
		if err != nil {
			return fmt.Errorf("--features: %w", err)
		}
		eo.Features = net
	}
	if !opts.NoLite {
		eo.Lite = &eval.Lite{Cond: opts.Lite[0], Uncond: opts.Lite[1], Scale: opts.LiteCFG}
	}
	if len(opts.TeaCache) > 0 {
		if eo.TeaCache, err = teaCache(opts); err != nil {
			return err
		}
	}
	if err := pictureOptions(opts, &eo); err != nil {
		return err
	}
	var bar *progress.Bar
	if !opts.Quiet {
		// Said once every input has loaded: a failure is the one line.
		for _, n := range notes {
			fmt.Fprintln(opts.IO.Err, n)
		}
		eo.Progress = func(done, total int) {
			if bar == nil {
				bar = progress.New(opts.IO.Err, "evaluating", total)
			}
			bar.Set(done)
		}
	}
	r, err := eval.Run(m, et, data, eo)
	bar.Finish()
	if err != nil {
		return fmt.Errorf("eval %s: %w", opts.Checkpoint, err)
	}
	var written []string
	if opts.Out != "" {
		if written, err = r.WriteFiles(opts.Out); err != nil {
			return err
		}
	}
	if opts.JSON {
		js, err := r.JSON()
		if err != nil {
			return err
		}
		_, err = opts.IO.Out.Write(js)
		return err
	}
	if err := r.WriteTable(opts.IO.Out); err != nil {
		return err
	}
	if !opts.Quiet && len(written) > 0 {
		fmt.Fprintf(opts.IO.Out, "wrote %s\n", strings.Join(written, ", "))
	}
	return nil
}

// prepareOut creates the output folder (and its parents) or checks that an
// existing path is a folder.
func prepareOut(dir string) error {
	st, err := os.Stat(dir)
	switch {
	case err == nil && !st.IsDir():
		return fmt.Errorf("--out %s: is a file, want a folder", dir)
	case err == nil:
		return nil
	case !errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("--out %s: %w", dir, err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("--out %s: %w", dir, err)
	}
	return nil
}

// timesteps is a comma-separated list of timesteps whose empty form means
// none (pflag's int slices refuse "").
type timesteps []int

func (t *timesteps) String() string {
	parts := make([]string, len(*t))
	for i, v := range *t {
		parts[i] = strconv.Itoa(v)
	}
	return strings.Join(parts, ",")
}

func (t *timesteps) Set(s string) error {
	out := []int{}
	if s = strings.TrimSpace(s); s != "" {
		for _, p := range strings.Split(s, ",") {
			v, err := strconv.Atoi(strings.TrimSpace(p))
			if err != nil {
				return fmt.Errorf("%q is not a timestep", p)
			}
			out = append(out, v)
		}
	}
	*t = out
	return nil
}

func (t *timesteps) Type() string { return "timesteps" }

// captionTeacher is the evaluation's teacher for a caption-conditioned
// DC model (a DC-Z-Image): --teacher is the model it was upcycled from,
// its captions are read through the caption table the DC checkpoint
// records, sampled with --shift, and costed as the DC model's backbone
// is.
func captionTeacher(opts *Options, m *dc.Model) (eval.Teacher, error) {
	if opts.Device != "" && opts.Device != accel.CPU {
		return nil, fmt.Errorf("--device %s: caption-conditioned backbones run on the CPU only for now", opts.Device)
	}
	ck, err := loaders.Open(opts.Checkpoint)
	if err != nil {
		return nil, err
	}
	meta, err := checkpoint.ParseMeta(ck.Metadata)
	ck.Close()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", opts.Checkpoint, err)
	}
	_, table, found, err := cmdutil.ReadCaptionTable(opts.Checkpoint, meta.Backbone.Spec.Conditioning().CaptionWidth)
	switch {
	case err != nil:
		return nil, err
	case !found:
		return nil, fmt.Errorf("%s records no caption table (metadata %q): dcdit evaluates the DC-Z-Images it upcycled from Z-Images trained on the shapes captions", opts.Checkpoint, shapes.CaptionTableKey)
	}
	// The teacher only predicts: BF16 matrices stay BF16.
	t, _, err := family.OpenTeacher(opts.Teacher, family.OpenOptions{KeepBF16: true, Student: meta.Backbone.Spec})
	if err != nil {
		return nil, fmt.Errorf("--teacher: %w", err)
	}
	shift := opts.Shift
	if shift == 0 {
		shift = flowmatch.DefaultConfig().Shift
	}
	return eval.TeacherOf(t, table, shift), nil
}

// resolveSampling gives every sampling setting the command line left
// unset the DC checkpoint's recorded value (meta.Sampling; meta is nil for
// a reference state_dict), else the command's default, and checks what
// the record gave as the flags are checked. The notes it returns, for
// stderr, say which settings were used with where each came from and warn
// of the ρ the model was not trained for. flow says that the model samples
// with flow matching (a DC-Z-Image), else DDPM.
func resolveSampling(opts *Options, meta *checkpoint.Meta, flow bool) (notes []string, _ error) {
	process := checkpoint.ProcessDDPM
	if flow {
		process = checkpoint.ProcessFlowMatching
	}
	var rec *checkpoint.Sampling
	if meta != nil {
		var err error
		if rec, err = cmdutil.SamplingRecord(opts.Checkpoint, meta, process); err != nil {
			return nil, fmt.Errorf("eval: %w", err)
		}
	}
	var r checkpoint.Sampling
	if rec != nil {
		r = *rec
	}
	has := rec != nil
	var used []cmdutil.Setting
	opts.Steps = cmdutil.Pick(&used, "--steps", !opts.unset.steps, opts.Steps, has, r.Steps, defaultSteps)
	opts.CFG = cmdutil.Pick(&used, "--cfg", !opts.unset.cfg, opts.CFG, has, r.CFG, defaultCFG)
	opts.DenseBelow = cmdutil.Pick(&used, "--dense-below", !opts.unset.denseBelow, opts.DenseBelow, has, r.DenseBelow, 0)
	if err := cmdutil.PickCoarse(&used, &opts.CoarseFrom, &opts.CoarseRho, !opts.unset.coarseFrom, !opts.unset.coarseRho, has, r); err != nil {
		return nil, err
	}
	if flow {
		opts.Shift = cmdutil.Pick(&used, "--shift", !opts.unset.shift, opts.Shift, has, r.Shift, flowmatch.DefaultConfig().Shift)
	}
	if meta != nil && len(meta.TrainedRhos) > 0 {
		// The rows default to the budgets the model was trained for, and
		// the Lite-CFG pair to the extreme two of them.
		trained := slices.Clone(meta.TrainedRhos)
		slices.Sort(trained)
		trained = slices.Compact(trained)
		opts.Rhos = cmdutil.Pick(&used, "--rho", !opts.unset.rho, opts.Rhos, true, trained, opts.Rhos)
		if !opts.NoLite && len(trained) > 1 {
			opts.Lite = cmdutil.Pick(&used, "--lite", !opts.unset.lite, opts.Lite, true, []float64{trained[0], trained[len(trained)-1]}, opts.Lite)
		}
	}
	opts.unset = unsetFlags{}
	if opts.Steps > eval.TrainSteps {
		return nil, fmt.Errorf("eval: %s records %d sampling steps, want 1..%d (pass --steps)", opts.Checkpoint, opts.Steps, eval.TrainSteps)
	}
	notes = []string{cmdutil.SettingsLine("evaluating", used)}
	if meta == nil {
		return notes, nil
	}
	rhos := opts.Rhos
	if !opts.NoLite {
		rhos = append(slices.Clone(rhos), opts.Lite...)
	}
	if w := cmdutil.RhoWarning(opts.Checkpoint, rhos, meta.TrainedRhos); w != "" {
		notes = append(notes, "warning: "+w)
	}
	return notes, nil
}

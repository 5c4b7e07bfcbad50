// Package teacachecmd implements `dcdit teacache fit`: TeaCache's
// calibration of a model on its own sampling trajectories, kept beside the
// model file.
package teacachecmd

import (
	"fmt"
	"math"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/dcdit/dcdit/internal/cli/cmdutil"
	"github.com/dcdit/dcdit/internal/cli/iostreams"
	clisample "github.com/dcdit/dcdit/internal/cli/sample"
	"github.com/dcdit/dcdit/sample"
)

// Degree is the degree of the rescaling polynomial, TeaCache's.
const Degree = 4

// Options are the flags and arguments of `dcdit teacache fit`: what it
// samples (Checkpoint is the MODEL; Out is set by Run).
type Options struct {
	IO *iostreams.IO
	clisample.Calibration
}

// NewCmd returns the teacache command. runF replaces the fit in tests
// that only check flag parsing; nil fits.
func NewCmd(ios *iostreams.IO, runF func(*Options) error) *cobra.Command {
	root := &cobra.Command{
		Use:   "teacache",
		Short: "TeaCache's step cache: calibrate a model for 'dcdit sample/eval --teacache'",
	}
	opts := &Options{IO: ios}
	fit := &cobra.Command{
		Use:   "fit MODEL",
		Short: "Fit a model's TeaCache rescaling on its own sampling trajectories",
		Long: `Fit samples --num images of each --class label from MODEL (a class-conditional
DiT, or a DC checkpoint at --rho), or one of each --prompt from a
caption-conditioned one (a Z-Image, a DC-Z-Image), with the sampling settings a DC checkpoint
records (steps, guidance, dense-below; else 'dcdit sample''s defaults),
computing every step, and records at each step and guidance branch the
relative L1 change of the first block's modulated input and of the model's
output since the previous step. It fits the degree-4 polynomial from the
first to the second by least squares (TeaCache's coefficient estimator) and
writes it, with how it was fitted, to MODEL.teacache.json beside the model
(atomically), where 'dcdit sample --teacache' and 'dcdit eval --teacache'
read it. TeaCache publishes no rescaling for DiT or Z-Image, so a model
samples with --teacache only once fitted.

A DC model's change is measured as its cache measures it: on the encoder's
output at the cells the previous step kept.`,
		Example: `  dcdit teacache fit runs/toy-dit/teacher/model.safetensors
  dcdit teacache fit runs/toy-dit/model.safetensors --rho 0.6 --num 8`,
		Args: cmdutil.ExactArgs(1, "the MODEL"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Checkpoint = args[0]
			if opts.Num < 1 || len(opts.Classes) == 0 {
				return cmdutil.Usagef(cmd, "--num %d with %d labels: want at least one sample", opts.Num, len(opts.Classes))
			}
			if runF != nil {
				return runF(opts)
			}
			return Run(opts)
		},
	}
	f := fit.Flags()
	f.IntSliceVar(&opts.Classes, "class", []int{0, 1, 2, 3, 4, 5, 6, 7}, "class labels of the trajectories, comma-separated")
	f.IntVar(&opts.Num, "num", 4, "trajectories per --class label")
	f.StringArrayVar(&opts.Prompts, "prompt", nil, "caption-conditioned models: a prompt of the trajectories (repeat; one trajectory each), as 'dcdit sample --prompt' takes it")
	f.StringVar(&opts.Size, "size", "", "a Z-Image's latent grid HxW, as 'dcdit sample --size' takes it (a DC model samples on its own grid)")
	f.IntVar(&opts.NumHeads, "num-heads", 0, "attention heads of a DiT that matches no preset (as 'dcdit sample --num-heads')")
	f.Uint64Var(&opts.Seed, "seed", 0, "random seed of the trajectories' noise")
	f.IntVar(&opts.Steps, "steps", 0, "sampling steps of the trajectories (default: the checkpoint's recorded value, else 'dcdit sample''s)")
	f.Float64Var(&opts.CFG, "cfg", 0, "guidance scale of the trajectories (default: the checkpoint's recorded value, else 'dcdit sample''s)")
	f.Float64Var(&opts.Rho, "rho", 0, "DC checkpoints: the tail-drop fraction the trajectories run at")
	root.AddCommand(fit)
	return root
}

// Run fits and writes the sidecar.
func Run(opts *Options) error {
	tmp, err := os.MkdirTemp("", "dcdit-teacache-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	calib := &sample.Calibration{}
	c := opts.Calibration
	c.Out = filepath.Join(tmp, "latents.safetensors")
	steps, cfg, err := clisample.Calibrate(opts.IO, c, calib)
	if err != nil {
		return fmt.Errorf("teacache fit: %w", err)
	}
	poly, err := sample.FitPoly(calib.X, calib.Y, Degree)
	if err != nil {
		return fmt.Errorf("teacache fit: %s: %w", opts.Checkpoint, err)
	}
	var ss float64
	for i, x := range calib.X {
		d := poly.Eval(x) - calib.Y[i]
		ss += d * d
	}
	samples := len(opts.Classes) * opts.Num
	if len(opts.Prompts) > 0 {
		samples = len(opts.Prompts)
	}
	fit := &sample.TeaCacheFit{Coefficients: poly, Pairs: len(calib.X), Samples: samples, Steps: steps, CFG: cfg,
		Rho: opts.Rho, Residual: math.Sqrt(ss / float64(len(calib.X)))}
	if err := sample.WriteTeaCacheFit(opts.Checkpoint, fit); err != nil {
		return err
	}
	fmt.Fprintf(opts.IO.Out, "wrote %s: %d pairs from %d trajectories of %d steps (cfg %g), rescaling %v, RMS error %.3g\n",
		sample.TeaCacheSidecar(opts.Checkpoint), fit.Pairs, fit.Samples, steps, cfg, []float64(poly), fit.Residual)
	return nil
}

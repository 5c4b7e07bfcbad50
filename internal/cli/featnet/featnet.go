// Package featnet implements `dcdit featnet`: training the feature network
// that the toy domain's Fréchet distance and class accuracy use (package
// eval/featnet), and checking a trained one.
package featnet

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/dcdit/dcdit/datasets/shapes"
	"github.com/dcdit/dcdit/eval/featnet"
	"github.com/dcdit/dcdit/internal/cli/cmdutil"
	"github.com/dcdit/dcdit/internal/cli/iostreams"
	"github.com/dcdit/dcdit/internal/cli/progress"
)

// DefaultModel is the bundled network, relative to the repository root.
const DefaultModel = "testdata/featnet/model.safetensors"

// TrainOptions are the flags of `dcdit featnet train`.
type TrainOptions struct {
	IO          *iostreams.IO
	Out         string
	Seed        uint64
	Samples     int
	Steps       int
	Batch       int
	LR          float64
	Noise       float64
	Size        int
	HeldOut     int
	HeldOutSeed uint64
	JSON        bool
	Quiet       bool
}

// CheckOptions are the flags of `dcdit featnet check`.
type CheckOptions struct {
	IO    *iostreams.IO
	Model string
	Num   []int
	Seed  uint64
	Size  int
	JSON  bool
}

// NewCmd returns the featnet command with its subcommands. runTrain and
// runCheck replace the actions in tests that only check flag parsing; nil
// runs them.
func NewCmd(ios *iostreams.IO, runTrain func(*TrainOptions) error, runCheck func(*CheckOptions) error) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "featnet",
		Short: "Train or check the feature network behind the toy domain's FD and class accuracy",
		Long: `The feature network is a small classifier over the ten classes of the
procedural shapes data. Its penultimate features give the Fréchet distance
(FD, FID's formula) between generated samples and real data, and its
predictions give class accuracy; dcdit eval reports both. The trained
network is bundled at ` + DefaultModel + `; "featnet train"
regenerates it bit for bit from the same flags.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return cmdutil.Usagef(cmd, "unknown featnet command %q (have: train, check)", args[0])
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newTrainCmd(ios, runTrain), newCheckCmd(ios, runCheck))
	return cmd
}

func newTrainCmd(ios *iostreams.IO, runF func(*TrainOptions) error) *cobra.Command {
	d := featnet.DefaultTrainOptions()
	opts := &TrainOptions{IO: ios}
	cmd := &cobra.Command{
		Use:   "train",
		Short: "Train the feature network on the shapes data and write its weights",
		Long: `Train trains the feature network on shapes samples 0..samples−1 of --seed
(each step a batch with Gaussian noise of σ uniform in [0, --noise] added,
so that slightly imperfect generated samples still classify by shape),
measures its accuracy on held-out data of another seed, and writes the
weights (safetensors, atomically) with the architecture, data generator
version, seeds, sample counts and held-out accuracy in the metadata.

Training is deterministic: the same flags give the same file bit for bit,
on any machine load and any number of cores. The defaults made the bundled
network.`,
		Example: `  dcdit featnet train --out ` + DefaultModel + `
  dcdit featnet train --out /tmp/f.safetensors --steps 300 --json`,
		Args: cmdutil.ExactArgs(0, "none"),
		RunE: func(cmd *cobra.Command, args []string) error {
			switch {
			case opts.Out == "":
				return cmdutil.Usagef(cmd, "--out: want a file name")
			case opts.Samples < 1 || opts.Steps < 1 || opts.Batch < 1 || opts.HeldOut < 1:
				return cmdutil.Usagef(cmd, "--samples, --steps, --batch and --heldout must be at least 1")
			case opts.Size < featnet.MinSize:
				return cmdutil.Usagef(cmd, "--size %d: want at least %d", opts.Size, featnet.MinSize)
			case !(opts.LR > 0):
				return cmdutil.Usagef(cmd, "--lr %v: want > 0", opts.LR)
			case !(opts.Noise >= 0):
				return cmdutil.Usagef(cmd, "--noise %v: want ≥ 0", opts.Noise)
			case opts.HeldOutSeed == opts.Seed:
				return cmdutil.Usagef(cmd, "--heldout-seed equals --seed: the held-out data must be other data")
			}
			if runF != nil {
				return runF(opts)
			}
			return RunTrain(opts)
		},
	}
	f := cmd.Flags()
	f.StringVar(&opts.Out, "out", DefaultModel, "safetensors file to write")
	f.Uint64Var(&opts.Seed, "seed", d.Seed, "training data seed (also seeds the weights, order and noise)")
	f.IntVar(&opts.Samples, "samples", d.Samples, "training samples")
	f.IntVar(&opts.Steps, "steps", d.Steps, "optimiser steps")
	f.IntVar(&opts.Batch, "batch", d.Batch, "samples per step")
	f.Float64Var(&opts.LR, "lr", d.LR, "AdamW peak learning rate (warm-up, cosine decay)")
	f.Float64Var(&opts.Noise, "noise", d.NoiseSigma, "largest σ of the training noise")
	f.IntVar(&opts.Size, "size", d.Size, "latent side of the training data")
	f.IntVar(&opts.HeldOut, "heldout", d.HeldOutSamples, "held-out samples for the accuracy")
	f.Uint64Var(&opts.HeldOutSeed, "heldout-seed", d.HeldOutSeed, "shapes seed of the held-out data")
	f.BoolVar(&opts.JSON, "json", false, "print one JSON object")
	f.BoolVarP(&opts.Quiet, "quiet", "q", false, "no progress")
	return cmd
}

// TrainResult is `featnet train --json`.
type TrainResult struct {
	Out string `json:"out"`
	featnet.Info
	Config    featnet.Config `json:"config"`
	Params    int            `json:"params"`
	FinalLoss float64        `json:"final_loss"`
	Seconds   float64        `json:"seconds"`
}

// RunTrain trains and writes the network.
func RunTrain(opts *TrainOptions) error {
	if err := cmdutil.CheckWritable("--out", opts.Out); err != nil {
		return err
	}
	to := featnet.DefaultTrainOptions()
	to.Seed, to.Samples, to.Steps, to.Batch, to.LR = opts.Seed, opts.Samples, opts.Steps, opts.Batch, opts.LR
	to.NoiseSigma, to.Size, to.HeldOutSamples, to.HeldOutSeed = opts.Noise, opts.Size, opts.HeldOut, opts.HeldOutSeed
	var bar *progress.Bar
	if !opts.Quiet {
		bar = progress.New(opts.IO.Err, "featnet train", opts.Steps)
		to.Progress = func(step int, loss float64) {
			bar.Note(fmt.Sprintf("loss %.4f", loss))
			bar.Set(step)
		}
	}
	net, rep, err := featnet.Train(to)
	bar.Finish()
	if err != nil {
		return err
	}
	if err := net.Save(opts.Out, nil); err != nil {
		return err
	}
	res := TrainResult{Out: opts.Out, Info: rep.Info, Config: net.Config, Params: rep.Params, FinalLoss: rep.FinalLoss, Seconds: rep.Duration.Seconds()}
	if opts.JSON {
		enc := json.NewEncoder(opts.IO.Out)
		enc.SetIndent("", "  ")
		return enc.Encode(res)
	}
	fmt.Fprintf(opts.IO.Out, "wrote %s: %d parameters, %d features; trained on %s seed %d, %d samples, %d steps of %d in %s (final loss %.4f)\n",
		opts.Out, rep.Params, net.Dim(), rep.Dataset, rep.Seed, rep.TrainSamples, rep.Steps, rep.Batch, progress.Duration(rep.Duration), rep.FinalLoss)
	fmt.Fprintf(opts.IO.Out, "held-out accuracy %.4f (seed %d, %d samples); with σ = %g noise %.4f\n",
		rep.HeldOutAccuracy, rep.HeldOutSeed, rep.HeldOutSamples, rep.NoiseSigma, rep.NoisyAccuracy)
	return nil
}

func newCheckCmd(ios *iostreams.IO, runF func(*CheckOptions) error) *cobra.Command {
	opts := &CheckOptions{IO: ios}
	cmd := &cobra.Command{
		Use:   "check",
		Short: "Measure a feature network's held-out accuracy and the FD floor of real data",
		Long: `Check loads a feature network and, for each --num, generates 2·num held-out
shapes samples (--seed), measures the network's accuracy on them and the
Fréchet distance between their two halves: the floor that an FD of num
generated samples against num real ones cannot be expected to go below
(FD is biased upwards at small counts, so compare FDs at equal counts).`,
		Example: `  dcdit featnet check
  dcdit featnet check --num 200,500,1000 --json`,
		Args: cmdutil.ExactArgs(0, "none"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(opts.Num) == 0 {
				return cmdutil.Usagef(cmd, "--num: want at least one count")
			}
			for _, n := range opts.Num {
				if n < 2 {
					return cmdutil.Usagef(cmd, "--num %d: want at least 2 samples per half", n)
				}
			}
			if opts.Size < featnet.MinSize {
				return cmdutil.Usagef(cmd, "--size %d: want at least %d", opts.Size, featnet.MinSize)
			}
			if runF != nil {
				return runF(opts)
			}
			return RunCheck(opts)
		},
	}
	f := cmd.Flags()
	f.StringVar(&opts.Model, "model", DefaultModel, "feature network weights")
	f.IntSliceVar(&opts.Num, "num", []int{1000}, "samples per half (several: --num 200,500,1000)")
	f.Uint64Var(&opts.Seed, "seed", featnet.DefaultHeldOutSeed, "shapes seed of the real data")
	f.IntVar(&opts.Size, "size", shapes.DefaultSize, "latent side")
	f.BoolVar(&opts.JSON, "json", false, "print one JSON object")
	return cmd
}

// CheckResult is `featnet check --json`.
type CheckResult struct {
	Model    string          `json:"model"`
	Config   featnet.Config  `json:"config"`
	Training featnet.Info    `json:"training"`
	Floors   []featnet.Floor `json:"floors"`
	Seconds  float64         `json:"seconds"`
}

// RunCheck loads the network and measures.
func RunCheck(opts *CheckOptions) error {
	start := time.Now()
	net, err := featnet.Load(opts.Model)
	if err != nil {
		return err
	}
	res := CheckResult{Model: opts.Model, Config: net.Config, Training: net.Info}
	for _, n := range opts.Num {
		fl, err := featnet.DataFloor(net, featnet.FloorOptions{Num: n, Seed: opts.Seed, Size: opts.Size})
		if err != nil {
			return err
		}
		res.Floors = append(res.Floors, fl)
	}
	res.Seconds = time.Since(start).Seconds()
	if opts.JSON {
		enc := json.NewEncoder(opts.IO.Out)
		enc.SetIndent("", "  ")
		return enc.Encode(res)
	}
	in := net.Info
	fmt.Fprintf(opts.IO.Out, "%s: %d features, trained on %s seed %d (%d samples, %d steps); recorded held-out accuracy %.4f\n",
		opts.Model, net.Dim(), in.Dataset, in.Seed, in.TrainSamples, in.Steps, in.HeldOutAccuracy)
	fmt.Fprintf(opts.IO.Out, "real data: %s seed %d, %d×%d\n", shapes.Version, opts.Seed, opts.Size, opts.Size)
	fmt.Fprintf(opts.IO.Out, "%10s  %10s  %12s\n", "per half", "accuracy", "FD floor")
	for _, fl := range res.Floors {
		fmt.Fprintf(opts.IO.Out, "%10d  %10.4f  %12.4f\n", fl.Num, fl.Accuracy, fl.FD)
	}
	return nil
}

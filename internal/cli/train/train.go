// Package train implements `dcdit upcycle` and `dcdit train`: both run a
// TOML recipe end to end through package pipeline.
package train

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/dcdit/dcdit/dc"
	"github.com/dcdit/dcdit/distill"
	"github.com/dcdit/dcdit/internal/cli/cmdutil"
	"github.com/dcdit/dcdit/internal/cli/iostreams"
	"github.com/dcdit/dcdit/internal/cli/progress"
	"github.com/dcdit/dcdit/pipeline"
	"github.com/dcdit/dcdit/recipes"
)

// Options are the flags and arguments of both commands.
type Options struct {
	IO     *iostreams.IO
	Recipe string
	Out    string
	JSON   bool
	Quiet  bool
	// GraftOnly writes the grafted, untrained checkpoint and stops
	// (upcycle only).
	GraftOnly bool
	// Device and Precision override the recipe's device and precision.
	Device, Precision string
	// Base replaces the recipe's base.path (upcycle only).
	Base string
	// upcycle says which command runs: it requires a [base] and a
	// [scaffold]; train requires [model].
	upcycle bool
}

// NewUpcycleCmd returns `dcdit upcycle`; runF replaces the action in tests.
func NewUpcycleCmd(ios *iostreams.IO, runF func(*Options) error) *cobra.Command {
	return newCmd(ios, runF, true)
}

// NewTrainCmd returns `dcdit train`; runF replaces the action in tests.
func NewTrainCmd(ios *iostreams.IO, runF func(*Options) error) *cobra.Command {
	return newCmd(ios, runF, false)
}

func newCmd(ios *iostreams.IO, runF func(*Options) error, upcycle bool) *cobra.Command {
	opts := &Options{IO: ios, upcycle: upcycle}
	cmd := &cobra.Command{
		Use:   "upcycle RECIPE",
		Short: "Graft the DC scaffold onto a pretrained DiT or Z-Image and train it as a recipe says",
		Long: `Upcycle runs a recipe that has a [base] checkpoint and a [scaffold]: it
grafts the encoder, router and decoder around the pretrained DiT's or
Z-Image's blocks, runs the recipe's stages (grafting distillation against the
frozen teacher, then finetuning with multi-budget training), writes the DC
checkpoint to OUT/model.safetensors and evaluates it. A Z-Image base
(diffusion.process = "flow_matching") must be one dcdit trained on the shapes
captions (it records their caption table; recipes/toy-zimage.toml).

Each stage keeps its checkpoints, metrics log (metrics.jsonl) and manifest in
OUT/stages/NAME. Running the same command again resumes where it stopped: the
same step, optimiser state, EMA, random streams and data position. A recipe
edited in any setting that changes the training is refused, naming each
changed setting. A NaN or infinite loss stops the run and leaves the last good
checkpoint in place; so does Ctrl-C. While it runs, OUT is locked: a second
run into it is refused, naming the process that holds it.

With --graft-only it writes the grafted checkpoint before any training and
stops: OUT/model.safetensors for a DiT base; for a Z-Image base (the recipe's
base.latent_size sizing the grid) the sharded folder OUT/model, streamed from
the base's shards without the model ever in memory, so that a full-size
Z-Image grafts on a small machine (recipes/zimage-turbo.toml).`,
		Example: `  dcdit upcycle recipes/toy-dit.toml --out runs/toy
  dcdit upcycle recipes/toy-dit.toml --device cuda   # on the first CUDA GPU
  dcdit recipe plan recipes/dit-xl-2-256.toml   # check a recipe first
  dcdit upcycle RECIPE --graft-only --out DIR   # the grafted, untrained checkpoint
  dcdit upcycle recipes/zimage-turbo.toml --base Z-Image-Turbo/transformer --graft-only`,
		Args: cmdutil.ExactArgs(1, "the RECIPE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Recipe = args[0]
			if runF != nil {
				return runF(opts)
			}
			return Run(opts)
		},
	}
	if !upcycle {
		cmd.Use = "train RECIPE"
		cmd.Short = "Train a DiT or a DC-DiT from scratch as a recipe says"
		cmd.Long = `Train runs a recipe that has a [model] section instead of a [base]: a
fixed-patch DiT (no [scaffold]) or a DC-DiT (with one) initialised as the
original code does and trained with DiT's hybrid loss on the recipe's data.
The model goes to OUT/model.safetensors: a DiT in the original naming (with
its config in the metadata), or a DC checkpoint.

Checkpoints, metrics and resume work as for 'dcdit upcycle'.`
		cmd.Example = `  dcdit train recipes/toy-teacher.toml --out runs/teacher`
	}
	cmd.Flags().StringVarP(&opts.Out, "out", "o", "", "output folder (default: the recipe's save.dir)")
	cmd.Flags().BoolVar(&opts.JSON, "json", false, "print the summary as JSON")
	cmd.Flags().BoolVarP(&opts.Quiet, "quiet", "q", false, "print nothing but errors and the result")
	cmdutil.DeviceFlags(cmd, &opts.Device, &opts.Precision)
	if upcycle {
		cmd.Flags().BoolVar(&opts.GraftOnly, "graft-only", false, "write the grafted, untrained DC checkpoint and stop")
		cmd.Flags().StringVar(&opts.Base, "base", "", "use this checkpoint instead of the recipe's base.path")
	}
	return cmd
}

// Run loads the recipe and runs it.
func Run(opts *Options) error {
	r, err := recipes.Load(opts.Recipe, recipes.LoadOptions{Device: opts.Device, Precision: opts.Precision, BasePath: opts.Base})
	if err != nil {
		return err
	}
	switch {
	case opts.upcycle && (r.Base == nil || !r.HasScaffold()):
		return fmt.Errorf("%s: upcycle needs [base] and [scaffold]; for training from scratch use 'dcdit train'", opts.Recipe)
	case !opts.upcycle && r.Base != nil:
		return fmt.Errorf("%s: the recipe has a [base]: use 'dcdit upcycle' (train starts from [model])", opts.Recipe)
	}
	if opts.GraftOnly {
		return graftOnly(opts, r)
	}
	// Ctrl-C or SIGTERM stops between two steps: the stage keeps its last
	// checkpoint and the folder's lock is released, so the same command
	// resumes.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	po := pipeline.Options{Out: opts.Out, Context: ctx}
	if !opts.Quiet {
		po.Log = opts.IO.Err
		po.OnStep = stepReporter(opts.IO)
	}
	began := time.Now()
	sum, err := pipeline.Run(r, po)
	if err != nil {
		return err
	}
	if opts.JSON {
		enc := json.NewEncoder(opts.IO.Out)
		enc.SetIndent("", "  ")
		return enc.Encode(sum)
	}
	if sum.Eval != nil {
		if err := sum.Eval.WriteTable(opts.IO.Out); err != nil {
			return err
		}
	}
	fmt.Fprintf(opts.IO.Out, "%s in %s\n", sum.Model, progress.Duration(time.Since(began)))
	if len(sum.Files) > 0 {
		fmt.Fprintf(opts.IO.Out, "evaluation: %s\n", strings.Join(sum.Files, ", "))
	}
	fmt.Fprintf(opts.IO.Out, "model card: %s\n", sum.Card)
	return nil
}

// stepReporter draws one progress bar per stage with the loss, ρ, kept
// ratio and speed. A resumed stage's bar counts the steps still to run, so
// that its rate and ETA are this run's.
func stepReporter(ios *iostreams.IO) func(distill.Progress) {
	var bar *progress.Bar
	stage, base := "", 0
	return func(p distill.Progress) {
		if p.Stage != stage {
			bar.Finish()
			base, stage = p.Step-1, p.Stage
			label := p.Stage
			if base > 0 {
				label = fmt.Sprintf("%s (resumed at step %d of %d)", p.Stage, base, p.Steps)
			}
			bar = progress.New(ios.Err, label, p.Steps-base)
		}
		note := fmt.Sprintf("loss %.4f", p.Metrics.Loss)
		switch {
		case p.Metrics.Kept > 0 && p.Metrics.Rho == float64(dc.Dense):
			note += fmt.Sprintf(" dense kept %.2f", p.Metrics.Kept)
		case p.Metrics.Kept > 0:
			note += fmt.Sprintf(" ρ %.2f kept %.2f", p.Metrics.Rho, p.Metrics.Kept)
		}
		if p.Metrics.Width > 0 {
			note += fmt.Sprintf(" width %.2f", p.Metrics.Width)
		}
		bar.Note(note + fmt.Sprintf(" %.2f steps/s", p.StepsPerSec))
		bar.Set(p.Step - base)
		if p.Step == p.Steps {
			bar.Finish()
			bar, stage = nil, ""
		}
	}
}

// graftOnly writes the recipe's grafted checkpoint.
func graftOnly(opts *Options, r *recipes.Recipe) error {
	var bar *progress.Bar
	var report func(done, total int64)
	if !opts.Quiet {
		report = func(done, total int64) {
			if bar == nil {
				bar = progress.NewBytes(opts.IO.Err, "grafting", total)
			}
			bar.Set(int(done))
		}
	}
	began := time.Now()
	path, err := pipeline.GraftOnly(r, opts.Out, report)
	if err != nil {
		return err
	}
	bar.Finish()
	if opts.JSON {
		return json.NewEncoder(opts.IO.Out).Encode(map[string]string{"model": path})
	}
	fmt.Fprintf(opts.IO.Out, "%s (grafted, untrained) in %s\n", path, progress.Duration(time.Since(began)))
	return nil
}

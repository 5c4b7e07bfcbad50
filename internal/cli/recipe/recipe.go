// Package recipe implements `dcdit recipe validate` and `dcdit recipe
// plan`: check a TOML recipe, and say what it will do, from checkpoint
// headers only, in a second.
package recipe

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/dcdit/dcdit/internal/cli/cmdutil"
	"github.com/dcdit/dcdit/internal/cli/iostreams"
	"github.com/dcdit/dcdit/recipes"
)

// Options are the flags and arguments of the recipe commands.
type Options struct {
	IO   *iostreams.IO
	File string
	JSON bool
	Base string
	Out  string
	// Verb is "validate" or "plan".
	Verb string
}

// NewCmd returns the recipe command with its validate and plan
// subcommands. runF replaces the action in tests that only check flag
// parsing; nil runs the real one.
func NewCmd(ios *iostreams.IO, runF func(*Options) error) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "recipe",
		Short: "Check a TOML recipe and show what it will do",
		Long: `A recipe is one TOML file that drives a run: the base checkpoint to upcycle
(or a model to train from scratch), the DC scaffold, the data, the training
stages (distill, finetune, train), checkpointing and evaluation.

Decoding is strict: an unknown key, a value of the wrong type or out of range
is reported with its file, line, key, what was expected and what was found,
every problem at once. Relative paths are resolved against the recipe's folder.`,
		Args: cmdutil.ExactArgs(0, "a subcommand (validate or plan)"),
		RunE: func(cmd *cobra.Command, args []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newVerb(ios, runF, "validate", "Check a recipe: exit 0 with a one-line summary, or 1 with one line per problem",
		`Validate decodes the recipe strictly, checks every value, and reads the base
checkpoint's headers (never its tensor data) to check that the scaffold fits
the backbone and that every parameter pattern selects something.

On success it prints one line starting with "ok:" and exits 0; otherwise it
prints one line per problem (FILE:LINE: KEY: found …, expected …) and exits 1.`,
		`  dcdit recipe validate recipes/toy-dit.toml
  dcdit recipe validate recipes/dit-xl-2-256.toml --base ~/ckpt/DiT-XL-2-256x256.pt`))
	cmd.AddCommand(newVerb(ios, runF, "plan", "Show what a recipe will do: configs, parameters, FLOPs per ρ, memory, stages",
		`Plan validates the recipe like 'validate', then prints, from the base
checkpoint's headers only: the backbone's architecture and config, the DC
model's config, parameter counts (new, copied, trainable and frozen per stage),
FLOPs per image at every evaluated ρ and the Lite-CFG pair, a training memory
estimate per stage (with its formula), each stage's steps, samples, learning-rate
schedule and budgets, and every setting with the defaults marked.`,
		`  dcdit recipe plan recipes/toy-dit.toml
  dcdit recipe plan recipes/dit-b-2-256.toml --base DiT-B-2.pt --json`))
	return cmd
}

func newVerb(ios *iostreams.IO, runF func(*Options) error, verb, short, long, example string) *cobra.Command {
	opts := &Options{IO: ios, Verb: verb}
	cmd := &cobra.Command{
		Use:     verb + " FILE",
		Short:   short,
		Long:    long,
		Example: example,
		Args:    cmdutil.ExactArgs(1, "the recipe FILE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.File = args[0]
			if runF != nil {
				return runF(opts)
			}
			return Run(opts)
		},
	}
	if verb == "plan" {
		cmd.Flags().BoolVar(&opts.JSON, "json", false, "print the plan as one JSON object")
	}
	cmd.Flags().StringVar(&opts.Base, "base", "", "use this checkpoint instead of the recipe's base.path")
	cmd.Flags().StringVar(&opts.Out, "out", "", "use this run folder instead of the recipe's save.dir")
	return cmd
}

// ProblemsError reports that a recipe has problems, which have already
// been printed one per line.
type ProblemsError struct {
	File string
	N    int
}

func (e *ProblemsError) Error() string {
	if e.N == 1 {
		return fmt.Sprintf("%s: 1 problem", e.File)
	}
	return fmt.Sprintf("%s: %d problems", e.File, e.N)
}

// Run validates or plans opts.File.
func Run(opts *Options) error {
	_, pl, err := recipes.Check(opts.File, recipes.LoadOptions{BasePath: opts.Base, OutDir: opts.Out})
	if err != nil {
		ps := recipes.Problems(err)
		for _, p := range ps {
			if p.File == "" {
				p.File = opts.File
			}
			fmt.Fprintln(opts.IO.Err, p.String())
		}
		return &ProblemsError{File: opts.File, N: len(ps)}
	}
	switch {
	case opts.Verb == "validate":
		fmt.Fprintln(opts.IO.Out, Summary(pl))
	case opts.JSON:
		enc := json.NewEncoder(opts.IO.Out)
		enc.SetIndent("", "  ")
		return enc.Encode(pl)
	default:
		WriteTable(opts.IO.Out, pl)
	}
	return nil
}

// Summary is validate's one-line report.
func Summary(pl *recipes.Plan) string {
	var b strings.Builder
	fmt.Fprintf(&b, "ok: %s (%s): %s", pl.Recipe.Name, pl.Recipe.File, backboneName(pl))
	if pl.DC != nil {
		fmt.Fprintf(&b, " → DC-DiT (N %g, E %d)", pl.DC.TargetN, pl.DC.EncDecDim)
	}
	fmt.Fprintf(&b, ", %s parameters", count(pl.Parameters.Total))
	if pl.Parameters.Copied > 0 {
		fmt.Fprintf(&b, " (%s new)", count(pl.Parameters.New))
	}
	stages := make([]string, len(pl.Stages))
	for i, s := range pl.Stages {
		stages[i] = fmt.Sprintf("%s %d×%d", s.Name, s.Steps, s.BatchSize)
	}
	fmt.Fprintf(&b, "; %d stage(s): %s", len(pl.Stages), strings.Join(stages, ", "))
	var rhos []string
	for _, r := range pl.FLOPs.Rows {
		if r.Model == "dc" {
			rhos = append(rhos, fmt.Sprintf("%g", r.Rho))
		}
	}
	if len(rhos) > 0 {
		fmt.Fprintf(&b, "; eval ρ %s", strings.Join(rhos, ", "))
	}
	return b.String()
}

func backboneName(pl *recipes.Plan) string {
	verb := "upcycle"
	if pl.Base == nil {
		verb = "train from scratch"
	}
	return fmt.Sprintf("%s %s (%s)", verb, pl.Backbone.Name(), pl.Backbone.Sizes())
}

// WriteTable prints the plan for people.
func WriteTable(w io.Writer, pl *recipes.Plan) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	defer tw.Flush()
	line := func(k, format string, args ...any) { fmt.Fprintf(tw, "%s\t%s\n", k, fmt.Sprintf(format, args...)) }
	line("recipe", "%s (%s), %s → %s", pl.Recipe.Name, pl.Recipe.File, pl.Recipe.Kind, pl.Recipe.RunDir)
	if b := pl.Base; b != nil {
		line("base", "%s (%s, %s naming, %d tensors, %s, %s parameters)", b.Resolved, b.Format, b.Layout, b.Tensors, bytes(b.Bytes), count(b.Parameters))
	}
	line("backbone", "%s from %s: %s", pl.Backbone.Name(), pl.Backbone.Source, pl.Backbone.Details())
	if d := pl.DC; d != nil {
		line("scaffold", "grid %d×%d at patch %d (%d cells), E %d, D %d, cond %d, router %d; %d encoder + %d decoder blocks; GroupNorm %d, router %d; σ %g; N %g; ratio loss λ %g over groups of %d",
			d.GridRows, d.GridCols, d.Patch(), d.Cells(), d.EncDecDim, d.ModelDim, d.CondDim, d.RouterDim, d.EncoderBlocks, d.DecoderBlocks,
			d.NormGroups, d.RouterGroups, d.Sigma, d.TargetN, d.RatioLossWeight, d.RatioBatchSize)
		if d.WideHead || d.NoEncoderNorm || d.RelativeResidual || d.LatentSkip || d.TokenEmbedder || d.DroppedContext || d.ChosenEmbedding {
			line("scaffold", "not in the official DC-DiT: wide head %v, encoder RMSNorm dropped %v, relative residual %v, latent skip %v, token embedder %v, dropped context %v, chosen embedding %v",
				d.WideHead, d.NoEncoderNorm, d.RelativeResidual, d.LatentSkip, d.TokenEmbedder, d.DroppedContext, d.ChosenEmbedding)
		}
		if s := pl.MainNetworkSummary(); s != "" {
			line("main network", "%s", s)
		}
	}
	tw.Flush()

	ps := pl.Parameters
	fmt.Fprintf(w, "\nparameters: %s total", count(ps.Total))
	if ps.Copied > 0 {
		fmt.Fprintf(w, ", %s copied from the base, %s new; the base has %s, %s not carried over (%s)",
			count(ps.Copied), count(ps.New), count(ps.Base), count(ps.Dropped), strings.Join(ps.DroppedNames, ", "))
	}
	fmt.Fprintln(w)
	fmt.Fprintln(tw, "  GROUP\tPARAMS\tSOURCE")
	for _, g := range ps.ByGroup {
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", g.Group, count(g.Params), g.Source)
	}
	tw.Flush()

	f := pl.FLOPs
	guide := "no guidance"
	if f.CFG > 1 {
		guide = fmt.Sprintf("cfg %g (both branches)", f.CFG)
	}
	fmt.Fprintf(w, "\nFLOPs per image (%d sampling steps, %s; %s)\n", f.SamplingSteps, guide, f.Convention)
	if f.KeptTokens != "" {
		fmt.Fprintf(w, "kept tokens: %s\n", f.KeptTokens)
	}
	if f.Idle != "" {
		fmt.Fprintf(w, "idle blocks: %s\n", f.Idle)
	}
	fmt.Fprintln(tw, "  MODEL\tρ\tKEPT\tPER FORWARD\tPER IMAGE\tVS BASE")
	for _, r := range f.Rows {
		rho := fmt.Sprintf("%.2g", r.Rho)
		if r.Parts == nil { // a fixed-patch model: the base, or one trained without a scaffold
			rho = "-"
		}
		if r.RhoUncond != nil {
			rho = fmt.Sprintf("%.2g/%.2g", r.Rho, *r.RhoUncond)
		}
		rel := "-"
		if r.RelativeToBase > 0 {
			rel = fmt.Sprintf("%.3f", r.RelativeToBase)
		}
		fmt.Fprintf(tw, "  %s\t%s\t%d/%d\t%s\t%s\t%s\n", r.Model, rho, r.Kept, r.Tokens, flops(r.GFLOPsPerForward*1e9), flops(r.TFLOPsPerImage*1e12), rel)
	}
	tw.Flush()

	d := pl.Data
	fmt.Fprintf(w, "\ndata: %s, %d samples", d.Source, d.Samples)
	if d.Path != "" {
		fmt.Fprintf(w, ", %s", d.Path)
	}
	if d.Labels != "" {
		fmt.Fprintf(w, ", labels from %s", d.Labels)
	}
	if d.GenerationTFLOPs > 0 {
		fmt.Fprintf(w, "; generating them costs %s", flops(d.GenerationTFLOPs*1e12))
	}
	fmt.Fprintln(w)

	fmt.Fprintln(w, "\nstages")
	fmt.Fprintln(tw, "  #\tNAME\tKIND\tSTEPS\tBATCH\tSAMPLES\tEPOCHS\tLOSS\tTRAINABLE\tFROZEN\tCOMPUTE\tMEMORY")
	for i, s := range pl.Stages {
		loss := s.Loss
		if s.Target != "" {
			loss += " on " + s.Target
		}
		fmt.Fprintf(tw, "  %d\t%s\t%s\t%d\t%d\t%s\t%.3g\t%s\t%s\t%s\t%s\t%s\n", i+1, s.Name, s.Kind, s.Steps, s.BatchSize,
			count(s.SamplesSeen), s.Epochs, loss, count(s.Trainable), count(s.Frozen), flops(s.PFLOPsTotal*1e15), bytes(s.Memory.Total))
	}
	tw.Flush()
	for i, s := range pl.Stages {
		fmt.Fprintf(w, "stage %d (%s):\n", i+1, s.Name)
		line("  lr", "%s", s.LR.Text)
		line("  budgets", "%s; ratio loss λ %g", s.Budgets, s.RatioLossWeight)
		line("  optimizer", "%s", s.Optimizer)
		line("  trains", "%s", strings.Join(s.TrainableGroups, ", "))
		if len(s.FrozenGroups) > 0 {
			line("  frozen", "%s", strings.Join(s.FrozenGroups, ", "))
		}
		line("  compute", "%s per sample forward (mean over the ρ schedule), %s per training step, %s in all",
			flops(s.GFLOPsPerSample*1e9), flops(s.TFLOPsPerStep*1e12), flops(s.PFLOPsTotal*1e15))
		m := s.Memory
		line("  memory", "%s weights + %s grads + %s AdamW + %s EMA + %s teacher + %s activations (%s per sample) = %s",
			bytes(m.Weights), bytes(m.Grads), bytes(m.Optimizer), bytes(m.EMA), bytes(m.Teacher), bytes(m.Activations), bytes(m.ActivationsPerSample), bytes(m.Total))
		tw.Flush()
	}
	fmt.Fprintf(w, "memory estimate: %s\n", recipes.MemoryFormula)

	for _, warn := range pl.Warnings {
		fmt.Fprintf(w, "warning: %s\n", warn)
	}
	if pl.Base != nil {
		for _, warn := range pl.Base.Warnings {
			fmt.Fprintf(w, "base: %s\n", warn)
		}
	}

	fmt.Fprintln(w, "\nsettings (default: not written in the file)")
	for _, s := range pl.Settings {
		switch {
		case s.Source == "default":
			fmt.Fprintf(tw, "  %s = %s\tdefault\n", s.Key, s.Value)
		case s.Source != "file":
			fmt.Fprintf(tw, "  %s = %s\t%s\n", s.Key, s.Value, s.Source)
		case s.Line > 0:
			fmt.Fprintf(tw, "  %s = %s\tline %d\n", s.Key, s.Value, s.Line)
		default:
			fmt.Fprintf(tw, "  %s = %s\t\n", s.Key, s.Value)
		}
	}
}

// count formats a count with a metric suffix (1.23M).
func count(n int64) string {
	v := float64(n)
	switch {
	case v >= 1e9:
		return fmt.Sprintf("%.3gG", v/1e9)
	case v >= 1e6:
		return fmt.Sprintf("%.4gM", v/1e6)
	case v >= 1e4:
		return fmt.Sprintf("%.4gk", v/1e3)
	}
	return fmt.Sprint(n)
}

// bytes formats a byte count in decimal units.
func bytes(n int64) string {
	v := float64(n)
	switch {
	case v >= 1e12:
		return fmt.Sprintf("%.3g TB", v/1e12)
	case v >= 1e9:
		return fmt.Sprintf("%.3g GB", v/1e9)
	case v >= 1e6:
		return fmt.Sprintf("%.3g MB", v/1e6)
	case v >= 1e3:
		return fmt.Sprintf("%.3g kB", v/1e3)
	}
	return fmt.Sprintf("%d B", n)
}

// flops formats a FLOP count with a metric prefix.
func flops(v float64) string {
	units := []struct {
		s string
		f float64
	}{{"EFLOP", 1e18}, {"PFLOP", 1e15}, {"TFLOP", 1e12}, {"GFLOP", 1e9}, {"MFLOP", 1e6}, {"kFLOP", 1e3}}
	for _, u := range units {
		if v >= u.f {
			return fmt.Sprintf("%.3g %s", v/u.f, u.s)
		}
	}
	return fmt.Sprintf("%.3g FLOP", v)
}

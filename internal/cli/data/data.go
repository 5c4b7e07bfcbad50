// Package data implements `dcdit data`: generating data sets of latents
// and labels (datasets' file format) for training and evaluation, from the
// procedural shapes or from folders of real images through a VAE, and
// measuring what an ideal router could keep of a data set's pictures.
package data

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/dcdit/dcdit/datasets"
	"github.com/dcdit/dcdit/datasets/shapes"
	"github.com/dcdit/dcdit/internal/cli/cmdutil"
	"github.com/dcdit/dcdit/internal/cli/iostreams"
	"github.com/dcdit/dcdit/preview"
)

// ShapesOptions are the flags of `dcdit data shapes`.
type ShapesOptions struct {
	IO    *iostreams.IO
	Num   int
	Size  int
	Seed  uint64
	Out   string
	PNG   string
	Quiet bool
	// Captions adds a caption per sample (shapes.CaptionedSet).
	Captions bool
	// Balanced draws sample i as class i mod the class count
	// (shapes.BalancedSet), as a recipe's evaluation draws its data.
	Balanced bool
}

// previewScale draws each latent cell as 8×8 pixels (the VAE's factor).
const previewScale = 8

// NewCmd returns the data command with its subcommands. runShapes replaces
// the shapes action in tests that only check flag parsing; nil generates.
func NewCmd(ios *iostreams.IO, runShapes func(*ShapesOptions) error) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "data",
		Short: "Generate data sets of latents and labels (procedural shapes, or real images encoded by a VAE); measure their ideal-router bound",
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return cmdutil.Usagef(cmd, "unknown data command %q (have: shapes, encode, bound)", args[0])
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newShapesCmd(ios, runShapes), newEncodeCmd(ios, nil), newBoundCmd(ios, nil))
	return cmd
}

func newShapesCmd(ios *iostreams.IO, runF func(*ShapesOptions) error) *cobra.Command {
	opts := &ShapesOptions{IO: ios}
	cmd := &cobra.Command{
		Use:   "shapes",
		Short: "Generate the procedural shapes data set (flat shapes, sharp edges, 10 classes)",
		Long: `Shapes writes a deterministic procedural data set of 4-channel latents: one
flat-coloured shape on a flat background per sample, one class per shape
kind:

  ` + classList() + `

Size (radius 0.30–0.40 of the side), position and the two colours (9-colour
palette, jittered by k/16) are drawn per sample from a PCG stream seeded by
(--seed, index), one orientation per class, so a seed gives the same file on
every machine. Values lie in [−2, 2] with roughly unit variance, like SD-VAE
latents ×0.18215, and the colours render as named through the linear
latent-to-RGB preview.

The file holds latents [N, 4, S, S] (F32), labels [N] (I64) and edges
[N, S, S] (U8: cells whose 4-neighbourhood crosses the shape boundary, for
the router's edge-density measure), with metadata dcdit.dataset,
dcdit.num_classes, dcdit.classes, dcdit.seed and dcdit.size. With
--captions it also holds captions [N, T] (I64 indices into the metadata
dcdit.vocabulary, padded with −1): "a [size] colour class [on colour]
[position]", 3–7 words, the optional parts drawn per sample. --balanced draws
sample i as class i mod 10, so every class has its share exactly: the data a
recipe's evaluation draws (seed: the recipe's + 1; samples: max(held_out,
2 × samples)), with which 'dcdit eval' reproduces a run's card. It is written
atomically. --png writes a preview grid (10 columns) of the first samples,
at most 100.`,
		Example: `  dcdit data shapes --num 4096 --seed 0 --out shapes-train.safetensors
  dcdit data shapes --num 256 --seed 1 --out shapes-eval.safetensors --png shapes.png
  dcdit data shapes --num 4096 --captions --out shapes-captioned.safetensors`,
		Args: cmdutil.ExactArgs(0, "none"),
		RunE: func(cmd *cobra.Command, args []string) error {
			switch {
			case opts.Num < 1:
				return cmdutil.Usagef(cmd, "--num %d: want at least 1 sample", opts.Num)
			case opts.Size < shapes.MinSize || opts.Size > 4096:
				return cmdutil.Usagef(cmd, "--size %d: want %d..4096", opts.Size, shapes.MinSize)
			case opts.Out == "":
				return cmdutil.Usagef(cmd, "--out: want a file name")
			case opts.PNG != "" && filepath.Clean(opts.PNG) == filepath.Clean(opts.Out):
				return cmdutil.Usagef(cmd, "--png and --out both name %s", opts.Out)
			}
			if runF != nil {
				return runF(opts)
			}
			return RunShapes(opts)
		},
	}
	f := cmd.Flags()
	f.IntVar(&opts.Num, "num", 1024, "number of samples")
	f.IntVar(&opts.Size, "size", shapes.DefaultSize, "latent side length (cells)")
	f.Uint64Var(&opts.Seed, "seed", 0, "seed of the per-sample random streams")
	f.StringVar(&opts.Out, "out", "shapes.safetensors", "safetensors file to write")
	f.StringVar(&opts.PNG, "png", "", "also write a latent-to-RGB preview grid of the first samples (≤ 100) to this PNG")
	f.BoolVarP(&opts.Quiet, "quiet", "q", false, "print nothing but errors")
	f.BoolVar(&opts.Captions, "captions", false, "add a caption per sample (words over a fixed vocabulary)")
	f.BoolVar(&opts.Balanced, "balanced", false, "draw sample i as class i mod the class count, as a recipe's evaluation does")
	return cmd
}

func classList() string {
	parts := make([]string, len(shapes.Classes))
	for i, c := range shapes.Classes {
		parts[i] = fmt.Sprintf("%d %s", i, c)
	}
	return strings.Join(parts, ", ")
}

// RunShapes generates the data set and writes the outputs.
func RunShapes(opts *ShapesOptions) error {
	for flag, path := range map[string]string{"--out": opts.Out, "--png": opts.PNG} {
		if path == "" {
			continue
		}
		if err := cmdutil.CheckWritable(flag, path); err != nil {
			return err
		}
	}
	g, err := shapes.New(opts.Size, opts.Seed)
	if err != nil {
		return err
	}
	draw := map[[2]bool]func(int) (*datasets.Set, error){
		{false, false}: g.Set, {false, true}: g.CaptionedSet,
		{true, false}: g.BalancedSet, {true, true}: g.BalancedCaptionedSet,
	}[[2]bool{opts.Balanced, opts.Captions}]
	set, err := draw(opts.Num)
	if err != nil {
		return err
	}
	if err := datasets.Write(opts.Out, set); err != nil {
		return err
	}
	if opts.PNG != "" {
		n := min(set.N, 100)
		per := set.C * set.H * set.W
		if err := preview.SD.WriteGridPNG(opts.PNG, set.Latents[:n*per], n, min(n, 10), set.H, set.W, previewScale); err != nil {
			return err
		}
	}
	if opts.Quiet {
		return nil
	}
	counts := make([]int, set.NumClasses)
	edges := 0
	for _, l := range set.Labels {
		counts[l]++
	}
	for _, e := range set.Edges {
		if e {
			edges++
		}
	}
	lo, hi := set.Range()
	fmt.Fprintf(opts.IO.Out, "wrote %s: %s, latents [%d %d %d %d], %d classes (%s), seed %d, values in [%.2f, %.2f], %.1f%% edge cells\n",
		opts.Out, shapes.Version, set.N, set.C, set.H, set.W, set.NumClasses, joinCounts(set.Classes, counts), opts.Seed, lo, hi,
		100*float64(edges)/float64(len(set.Edges)))
	if opts.PNG != "" {
		fmt.Fprintf(opts.IO.Out, "wrote %s: the first %d samples, 10 per row (linear latent-to-RGB preview)\n", opts.PNG, min(set.N, 100))
	}
	return nil
}

func joinCounts(names []string, counts []int) string {
	parts := make([]string, len(counts))
	for i, c := range counts {
		parts[i] = fmt.Sprintf("%s %d", names[i], c)
	}
	return strings.Join(parts, ", ")
}

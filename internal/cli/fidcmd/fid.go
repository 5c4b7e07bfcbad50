// Package fidcmd implements `dcdit fid`: the Fréchet Inception Distance
// between two picture sets (folders, .npz sample batches or statistics,
// latents decoded by a VAE) as pytorch-fid computes it, and the statistics
// files it reads.
package fidcmd

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/dcdit/dcdit/fid"
	"github.com/dcdit/dcdit/inception"
	"github.com/dcdit/dcdit/internal/cli/cmdutil"
	"github.com/dcdit/dcdit/internal/cli/iostreams"
	"github.com/dcdit/dcdit/internal/cli/progress"
	"github.com/dcdit/dcdit/pictures"
	"github.com/dcdit/dcdit/vae"
)

// Options are the flags and arguments of `dcdit fid`.
type Options struct {
	IO        *iostreams.IO
	A, B      string
	Inception string
	VAE       string
	SaveStats string
	Batch     int
	IS        bool
	JSON      bool
	Quiet     bool
}

// NewCmd returns the fid command. runF replaces the action in tests that
// only check flag parsing; nil measures.
func NewCmd(ios *iostreams.IO, runF func(*Options) error) *cobra.Command {
	opts := &Options{IO: ios}
	cmd := &cobra.Command{
		Use:   "fid A [B]",
		Short: "Fréchet Inception Distance between two picture sets, as pytorch-fid computes it",
		Long: `FID computes the Fréchet Inception Distance between A and B with pytorch-fid's
FID Inception v3: each picture resized bilinearly to 299×299 (no antialias),
scaled to 2x − 1, its 2048 pool3 features collected; the mean and covariance
of each side in float64, and calculate_frechet_distance with its eps-offset
fallback. The features are streamed: a set of 50 000 pictures is never held
in memory.

Each side is one of:
  a folder            the pictures directly inside it (PNG, JPEG, BMP, PGM,
                      PPM, TIFF, WebP), in name order, read as PIL's
                      convert("RGB")
  an .npz batch       arr_0 uint8 [N, H, W, 3], as DiT's sample_ddp.py writes
                      and the ADM evaluator reads
  an .npz statistics  mu [2048] and sigma [2048, 2048] float64, as
                      pytorch-fid's --save-stats and ADM's reference batches
                      hold them (their statistics are used as they are)
  a latents file      a .safetensors file of latents (dcdit sample), decoded
                      by --vae first

--inception is the weights: pytorch-fid's pt_inception-2015-12-05-6726825d.pth
(read without executing pickled code) or a safetensors copy with the same
names. With one side and --save-stats OUT.npz, the side's statistics are
written instead (np.savez_compressed, mu and sigma), to serve as a reference
later. --is adds each side's Inception Score (the ADM evaluator's: the
1008-way head without its bias, splits of 5000).

The numbers are pytorch-fid's. Published DiT numbers come from the ADM
evaluator (TensorFlow's graph and resize), which differ slightly.`,
		Example: `  dcdit fid samples/ imagenet-val-256/ --inception pt_inception-2015-12-05-6726825d.pth
  dcdit fid samples.npz VIRTUAL_imagenet256_labeled.npz --inception pt_inception.pth --json
  dcdit fid imagenet-val-256/ --save-stats imagenet-val-256.npz --inception pt_inception.pth
  dcdit fid latents.safetensors ref.npz --vae sd-vae-ft-ema/ --inception pt_inception.pth`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) < 1 || len(args) > 2 {
				return cmdutil.Usagef(cmd, "fid takes A and B (or A with --save-stats); got %d argument(s)", len(args))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.A = args[0]
			if len(args) == 2 {
				opts.B = args[1]
			}
			switch {
			case opts.Inception == "":
				return cmdutil.Usagef(cmd, "--inception is required (pytorch-fid's pt_inception-2015-12-05-6726825d.pth or a safetensors copy)")
			case opts.B == "" && opts.SaveStats == "":
				return cmdutil.Usagef(cmd, "one side needs --save-stats OUT.npz; give B to compute a distance")
			case opts.B != "" && opts.SaveStats != "":
				return cmdutil.Usagef(cmd, "--save-stats takes one side, got two")
			case opts.Batch < 1:
				return cmdutil.Usagef(cmd, "--batch %d: want ≥ 1", opts.Batch)
			}
			if runF != nil {
				return runF(opts)
			}
			return Run(opts)
		},
	}
	f := cmd.Flags()
	f.StringVar(&opts.Inception, "inception", "", "FID Inception weights (.pth or .safetensors; required)")
	f.StringVar(&opts.VAE, "vae", "", "VAE that decodes a latents-file side (see 'dcdit decode --help')")
	f.StringVar(&opts.SaveStats, "save-stats", "", "write the one side's statistics to this .npz instead")
	f.IntVar(&opts.Batch, "batch", 32, "pictures per Inception call")
	f.BoolVar(&opts.IS, "is", false, "also report each side's Inception Score")
	f.BoolVar(&opts.JSON, "json", false, "print one JSON object")
	f.BoolVarP(&opts.Quiet, "quiet", "q", false, "print nothing but the result and errors")
	return cmd
}

// SideResult is one side of the --json output.
type SideResult struct {
	Path string `json:"path"`
	// Samples is the number of pictures scored; 0 for a statistics file.
	Samples int      `json:"samples"`
	IS      *float64 `json:"inception_score,omitempty"`
}

// Result is the --json output.
type Result struct {
	FID       float64    `json:"fid"`
	TrCovmean float64    `json:"tr_covmean"`
	Fallback  bool       `json:"eps_fallback"`
	A         SideResult `json:"a"`
	B         SideResult `json:"b"`
	Seconds   float64    `json:"seconds"`
	// ImagesPerSecond is the pictures scored over the run's time.
	ImagesPerSecond float64 `json:"images_per_second"`
}

// Run measures.
func Run(opts *Options) error {
	if opts.SaveStats != "" {
		if err := cmdutil.CheckWritable("--save-stats", opts.SaveStats); err != nil {
			return err
		}
	}
	var codec *pictures.Codec
	if opts.VAE != "" {
		m, err := vae.Open(opts.VAE)
		if err != nil {
			return err
		}
		codec = &pictures.Codec{VAE: m}
	}
	paths := []string{opts.A}
	if opts.B != "" {
		paths = append(paths, opts.B)
	}
	sides := make([]*pictures.Side, len(paths))
	for i, p := range paths {
		s, err := pictures.OpenSide(p, codec)
		if err != nil {
			return err
		}
		if s.Stats != nil && opts.SaveStats != "" {
			return fmt.Errorf("%s already holds statistics: nothing to save", p)
		}
		sides[i] = s
	}
	var net *inception.Net
	needNet := false
	for _, s := range sides {
		needNet = needNet || s.Set != nil
	}
	if needNet {
		var err error
		if net, err = inception.Load(opts.Inception); err != nil {
			return err
		}
	}
	start := time.Now()
	scores := make([]*pictures.Scores, len(sides))
	results := make([]SideResult, len(sides))
	scored := 0
	for i, side := range sides {
		if side.Stats != nil && opts.IS {
			return fmt.Errorf("--is: %s holds statistics, not pictures, so it has no Inception Score", paths[i])
		}
		sc := &pictures.Scorer{Net: net, Batch: opts.Batch, IS: opts.IS}
		var bar *progress.Bar
		if side.Set != nil && !opts.Quiet {
			bar = progress.New(opts.IO.Err, "fid "+paths[i], side.Set.Len())
			sc.Progress = func(done, _ int) { bar.Set(done) }
		}
		s, err := sc.SideStats(side)
		bar.Finish()
		if err != nil {
			return err
		}
		scores[i] = s
		results[i] = SideResult{Path: paths[i]}
		if side.Set != nil {
			results[i].Samples = side.Set.Len()
			scored += side.Set.Len()
		}
		if opts.IS {
			is := s.IS
			results[i].IS = &is
		}
	}
	elapsed := time.Since(start)
	if opts.SaveStats != "" {
		if err := fid.WriteStats(opts.SaveStats, scores[0].Stats); err != nil {
			return err
		}
		if !opts.Quiet {
			fmt.Fprintf(opts.IO.Out, "wrote %s: mu and sigma of %d pictures of %s (%s)\n", opts.SaveStats, results[0].Samples, opts.A, progress.Duration(elapsed))
		}
		return nil
	}
	d, err := fid.FrechetDistance(scores[0].Stats, scores[1].Stats)
	if err != nil {
		return fmt.Errorf("fid %s %s: %w", opts.A, opts.B, err)
	}
	res := Result{FID: d.FID, TrCovmean: d.TrCovmean, Fallback: d.Fallback, A: results[0], B: results[1], Seconds: elapsed.Seconds()}
	if scored > 0 && elapsed > 0 {
		res.ImagesPerSecond = float64(scored) / elapsed.Seconds()
	}
	if opts.JSON {
		enc := json.NewEncoder(opts.IO.Out)
		enc.SetIndent("", "  ")
		return enc.Encode(res)
	}
	fmt.Fprintf(opts.IO.Out, "FID %.6g\n", res.FID)
	if !opts.Quiet {
		for _, s := range []SideResult{res.A, res.B} {
			line := fmt.Sprintf("  %s: %d pictures", s.Path, s.Samples)
			if s.Samples == 0 {
				line = fmt.Sprintf("  %s: statistics", s.Path)
			}
			if s.IS != nil {
				line += fmt.Sprintf(", Inception Score %.4g", *s.IS)
			}
			fmt.Fprintln(opts.IO.Out, line)
		}
		if res.Fallback {
			fmt.Fprintln(opts.IO.Out, "  (singular product of covariances: εI added to both, as pytorch-fid does)")
		}
		if scored > 0 {
			fmt.Fprintf(opts.IO.Out, "  %d pictures in %s (%.3g pictures/s)\n", scored, progress.Duration(elapsed), res.ImagesPerSecond)
		}
	}
	return nil
}

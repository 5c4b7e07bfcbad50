// Package decode implements `dcdit decode`: latents files through a VAE
// into pictures (PNG files, a grid, an ADM-readable .npz sample batch).
package decode

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/dcdit/dcdit/images"
	"github.com/dcdit/dcdit/internal/cli/cmdutil"
	"github.com/dcdit/dcdit/internal/cli/iostreams"
	"github.com/dcdit/dcdit/internal/cli/progress"
	"github.com/dcdit/dcdit/pictures"
	"github.com/dcdit/dcdit/vae"
)

// Options are the flags and arguments of `dcdit decode`.
type Options struct {
	IO      *iostreams.IO
	Latents string
	VAE     string
	Out     string
	Grid    string
	Cols    int
	NPZ     string
	// Scaling and Shift override the VAE's latent convention when Scaling
	// is not 0.
	Scaling, Shift float64
	Quiet          bool
}

// NewCmd returns the decode command. runF replaces the action in tests that
// only check flag parsing; nil decodes.
func NewCmd(ios *iostreams.IO, runF func(*Options) error) *cobra.Command {
	opts := &Options{IO: ios}
	cmd := &cobra.Command{
		Use:   "decode LATENTS",
		Short: "Decode a latents file through a VAE into pictures (PNGs, a grid, an .npz sample batch)",
		Long: `Decode reads the "latents" tensor [N, C, H, W] of LATENTS (what dcdit sample
writes, or a data set), undoes the model's latent scaling, runs the VAE's
decoder and writes 8-bit pictures, quantised as DiT's sample_ddp.py does
(clamp(127.5·x + 128, 0, 255), truncated).

--vae is a diffusers VAE folder (config.json and
diffusion_pytorch_model.safetensors: a standalone one such as
sd-vae-ft-ema/, or a model repository holding vae/), or one safetensors file
in the original LDM naming (a full Stable Diffusion checkpoint's
first_stage_model.*, or FLUX.1's ae.safetensors), F32, F16 or BF16.

The scaling is the VAE's own (config.json's scaling_factor and
shift_factor; for a single file the family's: SD 0.18215, FLUX.1 0.3611
with shift 0.1159), which is what DiT and Z-Image use: raw = z/scaling +
shift. --scaling and --shift override it.

--out writes one PNG per sample (000000.png, …); --grid one PNG of all
samples, --cols to a row; --npz an .npz sample batch (uint8 arr_0 [N, H, W, 3])
that dcdit fid and the ADM evaluator read. At least one is required. The
decoder runs one sample at a time, so a 1024² picture decodes in bounded
memory.`,
		Example: `  dcdit decode samples.safetensors --vae sd-vae-ft-ema/ --out pictures/ --grid grid.png
  dcdit decode zimage.safetensors --vae Z-Image-Turbo/ --out pictures/
  dcdit decode samples.safetensors --vae ae.safetensors --npz samples.npz`,
		Args: cmdutil.ExactArgs(1, "the LATENTS file"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Latents = args[0]
			if opts.VAE == "" {
				return cmdutil.Usagef(cmd, "--vae is required")
			}
			if opts.Out == "" && opts.Grid == "" && opts.NPZ == "" {
				return cmdutil.Usagef(cmd, "nothing to write: give --out, --grid or --npz")
			}
			if opts.Scaling < 0 || (opts.Scaling == 0 && cmd.Flags().Changed("scaling")) {
				return cmdutil.Usagef(cmd, "--scaling %v: want a positive factor", opts.Scaling)
			}
			if cmd.Flags().Changed("shift") && !cmd.Flags().Changed("scaling") {
				return cmdutil.Usagef(cmd, "--shift needs --scaling")
			}
			if runF != nil {
				return runF(opts)
			}
			return Run(opts)
		},
	}
	f := cmd.Flags()
	f.StringVar(&opts.VAE, "vae", "", "VAE folder or file (required)")
	f.StringVar(&opts.Out, "out", "", "folder to write one PNG per sample into")
	f.StringVar(&opts.Grid, "grid", "", "PNG file to write a grid of the samples to")
	f.IntVar(&opts.Cols, "cols", 8, "grid columns")
	f.StringVar(&opts.NPZ, "npz", "", ".npz sample batch (uint8 arr_0 [N, H, W, 3]) to write")
	f.Float64Var(&opts.Scaling, "scaling", 0, "latent scaling factor (default: the VAE's)")
	f.Float64Var(&opts.Shift, "shift", 0, "latent shift factor, with --scaling")
	f.BoolVarP(&opts.Quiet, "quiet", "q", false, "print nothing but errors")
	return cmd
}

// Run decodes opts.Latents.
func Run(opts *Options) error {
	for flag, p := range map[string]string{"--grid": opts.Grid, "--npz": opts.NPZ} {
		if p != "" {
			if err := cmdutil.CheckWritable(flag, p); err != nil {
				return err
			}
		}
	}
	lat, err := pictures.ReadLatents(opts.Latents)
	if err != nil {
		return err
	}
	m, err := vae.Open(opts.VAE)
	if err != nil {
		return err
	}
	codec := &pictures.Codec{VAE: m, Scaling: opts.Scaling, Shift: opts.Shift}
	if err := codec.CheckLatents(lat.C); err != nil {
		return fmt.Errorf("%s with --vae %s: %w", opts.Latents, opts.VAE, err)
	}
	var bar *progress.Bar
	if !opts.Quiet {
		bar = progress.New(opts.IO.Err, "decode", lat.N)
	}
	start := time.Now()
	w, h := m.ImageSize(lat.W), m.ImageSize(lat.H)
	save := pictures.Save{Dir: opts.Out, Grid: opts.Grid, Cols: opts.Cols, NPZ: opts.NPZ}
	err = save.Stream(lat.N, w, h, func(emit func(int, *images.RGB) error) error {
		return codec.Decode(lat.Data, lat.N, lat.C, lat.H, lat.W, func(i int, p *images.RGB) error {
			bar.Set(i + 1)
			return emit(i, p)
		})
	})
	bar.Finish()
	if err != nil {
		return err
	}
	if !opts.Quiet {
		fmt.Fprintf(opts.IO.Out, "decoded %d samples [%d %d %d %d] to %d×%d pictures in %s\n", lat.N, lat.N, lat.C, lat.H, lat.W, w, h, progress.Duration(time.Since(start)))
		for _, o := range []struct{ what, path string }{{"PNG per sample in", opts.Out}, {"grid", opts.Grid}, {"sample batch", opts.NPZ}} {
			if o.path != "" {
				fmt.Fprintf(opts.IO.Out, "wrote %s %s\n", o.what, o.path)
			}
		}
	}
	return nil
}

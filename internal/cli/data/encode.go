package data

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/dcdit/dcdit/datasets"
	"github.com/dcdit/dcdit/images"
	"github.com/dcdit/dcdit/internal/cli/cmdutil"
	"github.com/dcdit/dcdit/internal/cli/iostreams"
	"github.com/dcdit/dcdit/internal/cli/progress"
	"github.com/dcdit/dcdit/pictures"
	"github.com/dcdit/dcdit/vae"
)

// EncodeOptions are the flags of `dcdit data encode`.
type EncodeOptions struct {
	IO        *iostreams.IO
	Images    string
	VAE       string
	Size      int
	Out       string
	Layout    string
	Captions  string
	Flip      bool
	Sample    bool
	Seed      uint64
	NoUpscale bool
	// Scaling and Shift override the VAE's latent convention when Scaling
	// is not 0.
	Scaling, Shift float64
	Quiet          bool
}

var layouts = map[string]images.Layout{"auto": images.Auto, "classes": images.Classes, "flat": images.Flat}

func newEncodeCmd(ios *iostreams.IO, runF func(*EncodeOptions) error) *cobra.Command {
	opts := &EncodeOptions{IO: ios}
	cmd := &cobra.Command{
		Use:   "encode IMAGES",
		Short: "Encode a folder of real images into a latent data set with a VAE",
		Long: `Encode turns a folder of images into a data set that dcdit train and the
finetuning stages read (data.source = "file"), and that eval scores against.

IMAGES is read as torchvision's ImageFolder reads it when it holds
sub-folders — each sub-folder a class, labelled by its rank in name order,
its images found at any depth (ImageNet's train/ layout, as DiT's train.py
reads it) — or as one unlabelled class when it holds only images
(--layout forces either). --captions names a JSON Lines file with one
{"file": "REL/PATH.jpg", "caption": "…"} per image; the captions are stored
as word indices into a vocabulary of their lower-cased words.

Each image is decoded to RGB as PIL's convert("RGB") does (grey, palette,
alpha, 16-bit and CMYK images included), cut to --size as ADM's
center_crop_arr does (halve with BOX while the short side is at least twice
the size, BICUBIC to the size, centre crop; images smaller than the crop are
upscaled unless --no-upscale), read as 2·u/255 − 1, and encoded by the VAE.
The latent is the posterior mean, or with --sample a draw mean + std·ε
seeded by --seed and the image's index; it is scaled as the diffusion model
sees it: (z − shift)·scaling with the VAE's scaling_factor and shift_factor
(--scaling and --shift override them). --flip adds a mirrored copy of every
image after it.

The file is written atomically once every image is encoded: latents
[N, C, size/f, size/f] F32, labels [N] I64, the class names, and metadata
naming the source folder, size, flip, scaling and seed.`,
		Example: `  dcdit data encode imagenet/train --vae sd-vae-ft-ema/ --size 256 --out imagenet256.safetensors
  dcdit data encode photos/ --captions captions.jsonl --vae Z-Image-Turbo/ --size 512 --out photos.safetensors`,
		Args: cmdutil.ExactArgs(1, "the IMAGES folder"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Images = args[0]
			switch {
			case opts.VAE == "":
				return cmdutil.Usagef(cmd, "--vae is required")
			case opts.Size < 1:
				return cmdutil.Usagef(cmd, "--size %d: want the crop's side in pixels", opts.Size)
			case opts.Out == "":
				return cmdutil.Usagef(cmd, "--out: want a file name")
			case opts.Scaling < 0:
				return cmdutil.Usagef(cmd, "--scaling %v: want a positive factor", opts.Scaling)
			case cmd.Flags().Changed("shift") && !cmd.Flags().Changed("scaling"):
				return cmdutil.Usagef(cmd, "--shift needs --scaling")
			case cmd.Flags().Changed("seed") && !opts.Sample:
				return cmdutil.Usagef(cmd, "--seed draws posterior samples: give --sample too")
			}
			if _, ok := layouts[opts.Layout]; !ok {
				return cmdutil.Usagef(cmd, "--layout %q: want auto, classes or flat", opts.Layout)
			}
			if runF != nil {
				return runF(opts)
			}
			return RunEncode(opts)
		},
	}
	f := cmd.Flags()
	f.StringVar(&opts.VAE, "vae", "", "VAE folder or file (required; see 'dcdit decode --help')")
	f.IntVar(&opts.Size, "size", 256, "crop side in pixels")
	f.StringVar(&opts.Out, "out", "data.safetensors", "data set file to write")
	f.StringVar(&opts.Layout, "layout", "auto", "auto, classes (ImageFolder) or flat")
	f.StringVar(&opts.Captions, "captions", "", "JSON Lines file of {\"file\", \"caption\"}, one per image")
	f.BoolVar(&opts.Flip, "flip", false, "add a horizontally flipped copy of every image")
	f.BoolVar(&opts.Sample, "sample", false, "draw each latent from the posterior instead of taking its mean")
	f.Uint64Var(&opts.Seed, "seed", 0, "seed of the posterior draws (with --sample)")
	f.BoolVar(&opts.NoUpscale, "no-upscale", false, "refuse images smaller than the crop instead of upscaling them")
	f.Float64Var(&opts.Scaling, "scaling", 0, "latent scaling factor (default: the VAE's)")
	f.Float64Var(&opts.Shift, "shift", 0, "latent shift factor, with --scaling")
	f.BoolVarP(&opts.Quiet, "quiet", "q", false, "print nothing but errors")
	return cmd
}

// RunEncode encodes opts.Images and writes the data set.
func RunEncode(opts *EncodeOptions) error {
	if err := cmdutil.CheckWritable("--out", opts.Out); err != nil {
		return err
	}
	folder, err := images.Walk(opts.Images, images.WalkOptions{Layout: layouts[opts.Layout], Captions: opts.Captions})
	if err != nil {
		return err
	}
	m, err := vae.Open(opts.VAE)
	if err != nil {
		return err
	}
	codec := &pictures.Codec{VAE: m, Scaling: opts.Scaling, Shift: opts.Shift}
	var bar *progress.Bar
	if !opts.Quiet {
		bar = progress.New(opts.IO.Err, "encode", len(folder.Entries))
	}
	start := time.Now()
	set, err := codec.EncodeFolder(folder, pictures.EncodeOptions{Size: opts.Size, NoUpscale: opts.NoUpscale, Flip: opts.Flip,
		Sample: opts.Sample, Seed: opts.Seed, Progress: func(done, _ int) { bar.Set(done) }})
	bar.Finish()
	if err != nil {
		return err
	}
	if err := datasets.Write(opts.Out, set); err != nil {
		return err
	}
	if !opts.Quiet {
		caps := ""
		if set.Captions != nil {
			caps = fmt.Sprintf(", captions over %d words", len(set.Vocabulary))
		}
		fmt.Fprintf(opts.IO.Out, "wrote %s: %d images of %s (%d classes%s) → latents [%d %d %d %d] in %s\n",
			opts.Out, len(folder.Entries), opts.Images, set.NumClasses, caps, set.N, set.C, set.H, set.W, progress.Duration(time.Since(start)))
	}
	return nil
}

package evaluate

import (
	"encoding/json"
	"fmt"
	"math"

	"github.com/spf13/cobra"

	"github.com/dcdit/dcdit/datasets"
	"github.com/dcdit/dcdit/diffusion/flowmatch"
	"github.com/dcdit/dcdit/eval"
	"github.com/dcdit/dcdit/eval/featnet"
	"github.com/dcdit/dcdit/family"
	"github.com/dcdit/dcdit/gpu/accel"
	"github.com/dcdit/dcdit/internal/cli/cmdutil"
	"github.com/dcdit/dcdit/internal/cli/progress"
	"github.com/dcdit/dcdit/loaders"
	"github.com/dcdit/dcdit/loaders/arch"
)

// isFixedPatch says whether the checkpoint is a fixed-patch model (a DiT
// or a Z-Image, no scaffold), which eval scores on its own rather than
// against a teacher.
func isFixedPatch(path string) bool {
	ck, err := loaders.Open(path)
	if err != nil {
		return false
	}
	defer ck.Close()
	in := arch.Input{Metadata: ck.Metadata, Config: ck.Config}
	for _, t := range ck.Tensors {
		in.Tensors = append(in.Tensors, arch.TensorMeta{Name: t.Name, DType: t.DType, Shape: t.Shape})
	}
	a := arch.Detect(in).Architecture
	return a == arch.DiT || a == arch.ZImage
}

// validateOwn checks the flags of a fixed-patch model's evaluation: the
// data and the feature network, and none of the flags that measure a DC
// model against its teacher.
func validateOwn(cmd *cobra.Command, o *Options) error {
	for _, name := range []string{"teacher", "rho", "lite", "no-lite", "lite-cfg", "num", "batch", "dense-below", "coarse-from", "coarse-rho", "drop", "probe-t",
		"num-heads", "dechunk-sigma", "out", "random-router", "spread-random", "vae", "inception", "ref"} {
		if cmd.Flags().Changed(name) {
			return cmdutil.Usagef(cmd, "--%s measures a DC model against its teacher; %s is a fixed-patch model, scored on its own", name, o.Checkpoint)
		}
	}
	if cmd.Flags().Changed("teacache") {
		return cmdutil.Usagef(cmd, "--teacache: %s is a fixed-patch model, scored on its own without the cache; sample it with 'dcdit sample --teacache'", o.Checkpoint)
	}
	switch {
	case o.Data == "":
		return cmdutil.Usagef(cmd, "--data: want a data set file (e.g. from 'dcdit data shapes --balanced', with --captions for a caption-conditioned model)")
	case o.Features == "":
		return cmdutil.Usagef(cmd, "--features: want the feature network (e.g. testdata/featnet/model.safetensors)")
	case o.Samples < 2:
		return cmdutil.Usagef(cmd, "--samples %d: want ≥ 2 (a Fréchet distance needs a covariance)", o.Samples)
	case math.IsNaN(o.CFG) || math.IsInf(o.CFG, 0) || o.CFG < 0:
		return cmdutil.Usagef(cmd, "--cfg %v: want a finite guidance scale ≥ 0", o.CFG)
	case math.IsNaN(o.Shift) || math.IsInf(o.Shift, 0) || o.Shift < 0:
		return cmdutil.Usagef(cmd, "--shift %v: want a finite shift > 0", o.Shift)
	}
	return nil
}

// runOwn samples the fixed-patch model for the data's conditions — a
// DiT's labels 0, 1, 2, … in turn, a caption-conditioned Z-Image's the
// captions of the data's first --samples samples — with its own process
// (DDPM over --steps respaced steps; flow matching's Euler steps at
// --shift), guided at --cfg, and scores the samples (eval.ScoreTeacher):
// the numbers a DC evaluation on the same data prints for its teacher.
func runOwn(opts *Options) error {
	// A BF16 file's matrices widen to F32, as a recipe's evaluation reads
	// its teacher, so that the numbers are its teacher row's.
	m, _, err := family.OpenTeacher(opts.Checkpoint, family.OpenOptions{NumHeads: opts.TeacherHeads})
	if err != nil {
		return err
	}
	var table []float32
	shift := opts.Shift
	if m.Conditioning().CaptionWidth > 0 {
		if opts.Device != "" && opts.Device != accel.CPU {
			// RoPE and the per-head RMSNorm have no device kernels yet.
			return &cmdutil.UsageError{Err: fmt.Errorf("--device %s: a caption-conditioned model runs on the CPU only for now", opts.Device)}
		}
		var found bool
		if _, table, found, err = cmdutil.ReadCaptionTable(opts.Checkpoint, m.Conditioning().CaptionWidth); err != nil {
			return fmt.Errorf("eval %w", err)
		} else if !found {
			return fmt.Errorf("eval %s: a caption-conditioned model that records no caption table: dcdit scores the Z-Images it trained on the shapes captions", opts.Checkpoint)
		}
		if shift == 0 {
			shift = flowmatch.DefaultConfig().Shift
		}
	}
	release, err := cmdutil.OnDevice(opts.Device, opts.Precision, opts.IO.Err, m.Parameters())
	if err != nil {
		return err
	}
	defer release()
	data, err := datasets.Read(opts.Data)
	if err != nil {
		return fmt.Errorf("--data: %w", err)
	}
	net, err := featnet.Load(opts.Features)
	if err != nil {
		return fmt.Errorf("--features: %w", err)
	}
	eo := eval.Options{NumSamples: opts.Samples, Steps: opts.Steps, CFG: opts.CFG, Seed: opts.Seed, Features: net}
	var bar *progress.Bar
	if !opts.Quiet {
		eo.Progress = func(done, total int) {
			if bar == nil {
				bar = progress.New(opts.IO.Err, "sampling", total)
			}
			bar.Set(done)
		}
	}
	score, err := eval.ScoreTeacher(eval.TeacherOf(m, table, shift), data, eo)
	bar.Finish()
	if err != nil {
		return fmt.Errorf("eval %s on %s: %w", opts.Checkpoint, opts.Data, err)
	}
	if score.Process != eval.ProcessFlowMatching {
		shift = 0
	}
	if opts.JSON {
		js, err := json.MarshalIndent(struct {
			*eval.Score
			Shift float64 `json:"shift,omitempty"`
		}{score, shift}, "", "  ")
		if err != nil {
			return err
		}
		_, err = opts.IO.Out.Write(append(js, '\n'))
		return err
	}
	return writeOwn(opts, score, shift)
}

// writeOwn prints a fixed-patch model's score as a few labelled lines.
func writeOwn(opts *Options, s *eval.Score, shift float64) error {
	drawn, how := "labels 0, 1, 2, … in turn", fmt.Sprintf("%d DDPM steps", s.Steps)
	if s.PromptFollowing != nil {
		drawn = "the data's captions"
	}
	if s.Process == eval.ProcessFlowMatching {
		how = fmt.Sprintf("%d Euler steps at shift %g", s.Steps, shift)
	}
	floor := "n/a (give the data 2×--samples samples of each class drawn)"
	if s.DataFDFloor != nil {
		floor = fmt.Sprintf("%.3f", *s.DataFDFloor)
	}
	w := opts.IO.Out
	fmt.Fprintf(w, "%s: %d samples for %s (%s, cfg %g, seed %d), %.4g GFLOPs per image and step over %d tokens\n",
		opts.Checkpoint, s.NumSamples, drawn, how, s.CFG, s.Seed, s.GFLOPsPerImage, s.Tokens)
	fmt.Fprintf(w, "  FD %.3f (data floor %s)\n  class accuracy %.3f\n", *s.FD, floor, *s.ClassAccuracy)
	if s.PromptFollowing != nil {
		fmt.Fprintf(w, "  prompt following %.3f (class and colour as captioned)\n", *s.PromptFollowing)
	}
	_, err := fmt.Fprintf(w, "  sample RMS %.3f (data %.3f); feature network accuracy on the data %.3f\n", *s.RMS, s.FeatureNet.DataRMS, s.FeatureNet.Accuracy)
	return err
}

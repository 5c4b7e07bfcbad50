package evaluate

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"

	"github.com/spf13/cobra"

	"github.com/dcdit/dcdit/datasets"
	"github.com/dcdit/dcdit/datasets/shapes"
	"github.com/dcdit/dcdit/diffusion"
	"github.com/dcdit/dcdit/diffusion/flowmatch"
	"github.com/dcdit/dcdit/eval"
	"github.com/dcdit/dcdit/eval/featnet"
	"github.com/dcdit/dcdit/family"
	"github.com/dcdit/dcdit/gpu/accel"
	"github.com/dcdit/dcdit/internal/cli/cmdutil"
	"github.com/dcdit/dcdit/loaders"
	"github.com/dcdit/dcdit/loaders/arch"
	"github.com/dcdit/dcdit/sample"
)

// isCaptioned says whether the checkpoint is a Z-Image that records a
// caption table (trained by dcdit on the shapes captions), which eval
// scores on its own rather than against a teacher.
func isCaptioned(path string) bool {
	ck, err := loaders.Open(path)
	if err != nil {
		return false
	}
	defer ck.Close()
	if _, ok := ck.Metadata[shapes.CaptionTableKey]; !ok {
		return false
	}
	in := arch.Input{Metadata: ck.Metadata, Config: ck.Config}
	for _, t := range ck.Tensors {
		in.Tensors = append(in.Tensors, arch.TensorMeta{Name: t.Name, DType: t.DType, Shape: t.Shape})
	}
	return arch.Detect(in).Architecture == arch.ZImage
}

// validateCaptioned checks the flags of a caption-conditioned model's
// evaluation: the data and the feature network, and none of the flags
// that measure a DC model against its teacher.
func validateCaptioned(cmd *cobra.Command, o *Options) error {
	for _, name := range []string{"teacher", "rho", "lite", "no-lite", "lite-cfg", "num", "batch", "dense-below", "probe-t",
		"num-heads", "teacher-heads", "dechunk-sigma", "out"} {
		if cmd.Flags().Changed(name) {
			return cmdutil.Usagef(cmd, "--%s measures a DC model against its teacher; %s is a caption-conditioned Z-Image, scored on its own", name, o.Checkpoint)
		}
	}
	switch {
	case o.Device != "" && o.Device != accel.CPU:
		// RoPE and the per-head RMSNorm have no device kernels yet.
		return cmdutil.Usagef(cmd, "--device %s: a Z-Image runs on the CPU only for now", o.Device)
	case o.Data == "":
		return cmdutil.Usagef(cmd, "--data: want a data set file with captions (e.g. from 'dcdit data shapes --captions')")
	case o.Features == "":
		return cmdutil.Usagef(cmd, "--features: want the feature network (e.g. testdata/featnet/model.safetensors)")
	case o.Samples < 2:
		return cmdutil.Usagef(cmd, "--samples %d: want ≥ 2 (a Fréchet distance needs a covariance)", o.Samples)
	case o.Steps < 1 || o.Steps > flowmatch.DefaultConfig().NumTrainTimesteps:
		return cmdutil.Usagef(cmd, "--steps %d: want 1..%d", o.Steps, flowmatch.DefaultConfig().NumTrainTimesteps)
	case math.IsNaN(o.CFG) || math.IsInf(o.CFG, 0) || o.CFG < 0:
		return cmdutil.Usagef(cmd, "--cfg %v: want a finite guidance scale ≥ 0", o.CFG)
	case math.IsNaN(o.Shift) || math.IsInf(o.Shift, 0) || o.Shift < 0:
		return cmdutil.Usagef(cmd, "--shift %v: want a finite shift > 0", o.Shift)
	}
	return nil
}

// runCaptioned samples the caption-conditioned model (a Z-Image) for the
// captions of the data's first --samples samples (flow matching's Euler
// sampler, Tongyi's schedule at --shift, guided by pos + s·(pos − neg)
// against the empty prompt for --cfg > 1) and scores the samples
// (eval.ScoreCaptioned).
func runCaptioned(opts *Options) error {
	// Evaluation trains nothing: BF16 matrices stay BF16.
	m, _, err := family.OpenTeacher(opts.Checkpoint, family.OpenOptions{KeepBF16: true})
	if err != nil {
		return err
	}
	if m.Process() != family.ProcessFlowMatching || m.Conditioning().CaptionWidth == 0 {
		return fmt.Errorf("eval %s: a %s model conditioned on %+v; this scores caption-conditioned flow-matching models", opts.Checkpoint, m.Process(), m.Conditioning())
	}
	inChannels := m.InChannels()
	ct, table, _, err := cmdutil.ReadCaptionTable(opts.Checkpoint, m.Conditioning().CaptionWidth)
	if err != nil {
		return fmt.Errorf("eval %w", err)
	}
	data, err := datasets.Read(opts.Data)
	if err != nil {
		return fmt.Errorf("--data: %w", err)
	}
	n := opts.Samples
	switch {
	case data.Captions == nil:
		return fmt.Errorf("--data %s has no captions; write one with 'dcdit data shapes --captions'", opts.Data)
	case !slices.Equal(data.Vocabulary, ct.Vocabulary):
		return fmt.Errorf("--data %s: its captions use a vocabulary of %d words, %s's table %d", opts.Data, len(data.Vocabulary), opts.Checkpoint, len(ct.Vocabulary))
	case data.C != inChannels:
		return fmt.Errorf("--data %s: %d latent channels, the model takes %d", opts.Data, data.C, inChannels)
	case n > data.N:
		return fmt.Errorf("--samples %d: --data %s holds %d samples", n, opts.Data, data.N)
	}
	net, err := featnet.Load(opts.Features)
	if err != nil {
		return fmt.Errorf("--features: %w", err)
	}
	shift := opts.Shift
	if shift == 0 {
		shift = flowmatch.DefaultConfig().Shift
	}
	sched, err := flowmatch.Config{NumTrainTimesteps: flowmatch.DefaultConfig().NumTrainTimesteps, Shift: shift}.Schedule(flowmatch.Tongyi, opts.Steps)
	if err != nil {
		return err
	}
	pos, err := shapes.CaptionInputs(data.Captions[:n], table, ct.Dim)
	if err != nil {
		return fmt.Errorf("--data %s: %w", opts.Data, err)
	}
	// Empty captions: the empty prompt, one zero row each.
	neg, _ := shapes.CaptionInputs(make([][]int, n), table, ct.Dim)
	model := sample.Teacher(m, sample.Conditions{Captions: pos, Negative: neg}, data.H, data.W)
	proc := &diffusion.FlowMatch{Schedule: sched}
	samples, err := proc.Sample(model, diffusion.Shape{B: n, C: inChannels, HW: data.H * data.W},
		diffusion.SampleOptions{Guidance: opts.CFG, Seed: opts.Seed})
	if err != nil {
		return fmt.Errorf("eval %s: sampling: %w", opts.Checkpoint, err)
	}
	score, err := eval.ScoreCaptioned(samples, n, data, net)
	if err != nil {
		return err
	}
	if opts.JSON {
		js, err := json.MarshalIndent(struct {
			*eval.CaptionedScore
			Steps int     `json:"steps"`
			CFG   float64 `json:"cfg"`
			Shift float64 `json:"shift"`
			Seed  uint64  `json:"seed"`
		}{score, opts.Steps, opts.CFG, shift, opts.Seed}, "", "  ")
		if err != nil {
			return err
		}
		_, err = opts.IO.Out.Write(append(js, '\n'))
		return err
	}
	floor := "n/a (give the data 2×--samples samples)"
	if score.DataFDFloor != nil {
		floor = fmt.Sprintf("%.3f", *score.DataFDFloor)
	}
	_, err = fmt.Fprintf(opts.IO.Out, "%d samples for the data's captions (%d steps, shift %g, cfg %g, seed %d)\n  FD %.3f (floor %s)\n  class accuracy %.3f\n  prompt following %.3f (class and colour as captioned)\n",
		n, opts.Steps, shift, opts.CFG, opts.Seed, score.FD, floor, score.ClassAccuracy, score.PromptFollowing)
	return err
}

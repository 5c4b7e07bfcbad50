package sample

import (
	"fmt"
	"strconv"

	"github.com/dcdit/dcdit/gpu/accel"
	"github.com/dcdit/dcdit/internal/cli/cmdutil"
	"github.com/dcdit/dcdit/internal/cli/iostreams"
	"github.com/dcdit/dcdit/sample"
)

// teaCache is the step cache of a run of steps model calls: with
// --teacache, at that threshold under the model's calibration (its
// sidecar file); for a calibration, one that computes every step; else
// nil.
func teaCache(opts *Options, steps int) (*sample.TeaCache, error) {
	if opts.calib != nil {
		return sample.NewCalibrating(opts.calib), nil
	}
	if !opts.TeaCacheGiven {
		return nil, nil
	}
	if opts.Device != "" && opts.Device != accel.CPU {
		return nil, &cmdutil.UsageError{Err: fmt.Errorf("--teacache runs on the CPU only for now (--device %s)", opts.Device)}
	}
	fit, err := sample.ReadTeaCacheFit(opts.Checkpoint)
	if err != nil {
		return nil, err
	}
	return sample.NewTeaCache(opts.TeaCache, fit.Coefficients, steps)
}

// teaCacheMeta records a cached run in the output's metadata.
func teaCacheMeta(md map[string]string, tc *sample.TeaCache) {
	if tc == nil {
		return
	}
	s, n := tc.Skipped()
	md["dcdit.teacache"] = strconv.FormatFloat(tc.Threshold, 'g', -1, 64)
	md["dcdit.teacache_skipped"] = fmt.Sprintf("%d/%d", s, n)
}

// teaCacheNote is the stderr line of a cached run.
func teaCacheNote(opts *Options, tc *sample.TeaCache) {
	if tc == nil || opts.Quiet || opts.calib != nil {
		return
	}
	s, n := tc.Skipped()
	fmt.Fprintf(opts.IO.Err, "teacache: threshold %g skipped %d of %d branch steps\n", tc.Threshold, s, n)
}

// Calibration is what `dcdit teacache fit` samples: num samples of each
// label in classes from checkpoint (a class-conditional DiT or DC model),
// or one of each prompt (a caption-conditioned one), under the sampling
// settings it records (or the defaults), at ρ for a DC model, every step
// computed.
type Calibration struct {
	Checkpoint string
	Classes    []int
	Num        int
	Prompts    []string
	// Size is a Z-Image's latent grid, as --size takes it; NumHeads is
	// --num-heads.
	Size     string
	NumHeads int
	Seed     uint64
	Rho      float64
	// Steps and CFG, when not 0, replace the recorded settings.
	Steps int
	CFG   float64
	// Out is the latents file the run writes (the caller removes it).
	Out string
}

// Calibrate runs c, adding TeaCache's calibration pairs to calib, and
// returns the steps and guidance scale it sampled with.
func Calibrate(ios *iostreams.IO, c Calibration, calib *sample.Calibration) (steps int, cfg float64, _ error) {
	opts := &Options{IO: ios, Checkpoint: c.Checkpoint, Classes: c.Classes, Num: c.Num, Seed: c.Seed, Rho: c.Rho, RhoGiven: c.Rho != 0, NumHeads: c.NumHeads,
		Steps: defaultSteps, CFG: defaultCFG, Out: c.Out, Quiet: true, calib: calib,
		unset: unsetFlags{steps: c.Steps == 0, cfg: c.CFG == 0, denseBelow: true, coarseFrom: true, coarseRho: true, shift: true}}
	if len(c.Prompts) > 0 {
		opts.Prompts, opts.Classes, opts.Num, opts.Size = c.Prompts, []int{0}, 1, c.Size
	}
	if c.Steps != 0 {
		opts.Steps = c.Steps
	}
	if c.CFG != 0 {
		opts.CFG = c.CFG
	}
	err := Run(opts)
	return opts.Steps, opts.CFG, err
}

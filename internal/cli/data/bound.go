package data

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/dcdit/dcdit/datasets"
	"github.com/dcdit/dcdit/dc"
	"github.com/dcdit/dcdit/internal/cli/cmdutil"
	"github.com/dcdit/dcdit/internal/cli/iostreams"
)

// BoundOptions are the flags of `dcdit data bound`.
type BoundOptions struct {
	IO   *iostreams.IO
	Data string
	// Patches are the cell sides to measure, in latent positions.
	Patches []int
	// Keep are the kept amounts: "75%" (of a sample's cells, rounded) or
	// a count of cells.
	Keep []string
	JSON bool
	// Teacher, when set, replaces the data's latents by the teacher's
	// clean estimates of the first Samples of them noised to each of
	// Sigmas (flow matching) or Timesteps (DDPM), with noise from Seed.
	Teacher   string
	Samples   int
	Sigmas    []float64
	Timesteps []int
	Seed      uint64
	// CFG guides the teacher's prediction at this scale (≤ 1: unguided).
	CFG float64
}

// BoundRow is one kept amount's bound at one cell size.
type BoundRow struct {
	// Level is the noise level of a teacher's clean estimates (σ, or a
	// DDPM timestep); absent for the data's own latents.
	Level *float64 `json:"level,omitempty"`
	Patch int      `json:"patch"`
	Cells int      `json:"cells"`
	Kept  int      `json:"kept"`
	Frac  float64  `json:"kept_fraction"`
	// RelMSE is the plug-back's squared error over the clean estimates'
	// squared norm.
	RelMSE float64 `json:"rel_mse"`
	// RelVelocity is the same error over the norm of a flow-matching
	// velocity: with the data's latents x, of ε − x with unit noise
	// (E|ε − x|² = |x|² + values), the oracle's relative velocity MSE at
	// any σ were the clean estimate exact; with a flow-matching teacher,
	// of its predicted velocity. Absent for a DDPM teacher.
	RelVelocity *float64 `json:"rel_velocity_mse,omitempty"`
}

func newBoundCmd(ios *iostreams.IO, runF func(*BoundOptions) error) *cobra.Command {
	opts := &BoundOptions{IO: ios}
	cmd := &cobra.Command{
		Use:   "bound DATA",
		Short: "Measure the ideal-router bound of a data set's latents: the error of copying the nearest kept cell",
		Long: `Bound measures, on the latents of a data set (the data's own clean
values, or any clean estimates written in the same format), how much of each
picture a DC model could keep at a given number of tokens with an ideal
router: each sample keeps its cells of largest local change (the mean
squared difference to its grid neighbours; the first and last cell always,
as the router's forced boundaries), and every other cell copies the values of
the kept cell nearest to it, as the model's plug-back does. A cell is a
patch×patch block of latents: the teacher's patch grid.

It prints, per cell size and kept amount, the squared error relative to the
data's squared norm, and relative to the norm of a flow-matching velocity
ε − x with unit noise: the relative velocity MSE of an oracle that gives each
dropped cell its token's clean estimate and its own noise exactly.

With --teacher the clean estimates are a fixed-patch teacher's instead: the
first --samples of the data, noised with seeded Gaussian noise to each level
(--sigma for a flow-matching teacher, x = (1 − σ)·x0 + σ·ε; --timestep for a
DDPM one), conditioned on their labels or captions (a Z-Image trained on the
shapes captions reads them through the caption table it records), unguided
or, with --cfg, guided against the null class or the empty prompt as the
teacher samples.
The velocity error is then relative to the teacher's predicted velocity; a
DDPM teacher's error is relative to its clean estimate's norm.

--keep takes fractions of a sample's cells ("31%", rounded to a count) or
counts of cells ("40"); a count above a grid's cells is an error.`,
		Example: `  dcdit data shapes --num 1000 --seed 99 --size 32 --out s32.safetensors
  dcdit data bound s32.safetensors --patch 2 --keep 75%,50%,31%,16%,60
  dcdit data shapes --num 64 --seed 99 --captions --out held.safetensors
  dcdit data bound held.safetensors --teacher testdata/zimage-teacher/model --sigma 0.97,0.9,0.8 --patch 2`,
		Args: cmdutil.ExactArgs(1, "DATA"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Data = args[0]
			for _, p := range opts.Patches {
				if p < 1 {
					return cmdutil.Usagef(cmd, "--patch %d: want a cell side of at least 1", p)
				}
			}
			for _, k := range opts.Keep {
				if _, _, err := parseKeep(k); err != nil {
					return cmdutil.Usagef(cmd, "--keep %q: %v", k, err)
				}
			}
			switch {
			case opts.Teacher == "" && (len(opts.Sigmas) > 0 || len(opts.Timesteps) > 0):
				return cmdutil.Usagef(cmd, "--sigma and --timestep: noise levels of a --teacher's clean estimates")
			case opts.Teacher != "" && len(opts.Sigmas)+len(opts.Timesteps) == 0:
				return cmdutil.Usagef(cmd, "--teacher: want noise levels (--sigma for flow matching, --timestep for DDPM)")
			case opts.Samples < 1:
				return cmdutil.Usagef(cmd, "--samples %d: want at least 1", opts.Samples)
			}
			for _, v := range opts.Sigmas {
				if !(v > 0 && v <= 1) {
					return cmdutil.Usagef(cmd, "--sigma %v: want a level in (0, 1]", v)
				}
			}
			if runF != nil {
				return runF(opts)
			}
			return RunBound(opts)
		},
	}
	f := cmd.Flags()
	f.IntSliceVar(&opts.Patches, "patch", []int{1, 2}, "cell sides to measure, in latent positions")
	f.StringSliceVar(&opts.Keep, "keep", []string{"75%", "50%", "31%", "16%"}, `kept amounts: a fraction of the cells ("31%") or a count ("40")`)
	f.BoolVar(&opts.JSON, "json", false, "print the rows as JSON")
	f.StringVar(&opts.Teacher, "teacher", "", "measure a fixed-patch teacher's clean estimates of the data instead of the data")
	f.IntVar(&opts.Samples, "samples", 64, "with --teacher: the data samples to noise (the first ones)")
	f.Float64SliceVar(&opts.Sigmas, "sigma", nil, "with a flow-matching --teacher: noise levels σ in (0, 1]")
	f.IntSliceVar(&opts.Timesteps, "timestep", nil, "with a DDPM --teacher: timesteps")
	f.Uint64Var(&opts.Seed, "seed", 0, "with --teacher: seed of the noise")
	f.Float64Var(&opts.CFG, "cfg", 1, "with --teacher: guide its prediction at this scale (≤ 1: unguided)")
	return cmd
}

// parseKeep reads a kept amount: a percentage (frac > 0) or a count.
func parseKeep(s string) (count int, frac float64, err error) {
	if p, ok := strings.CutSuffix(s, "%"); ok {
		v, err := strconv.ParseFloat(p, 64)
		if err != nil || !(v > 0 && v <= 100) {
			return 0, 0, fmt.Errorf("want a percentage in (0, 100]")
		}
		return 0, v / 100, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		return 0, 0, fmt.Errorf("want a percentage or a count of at least 1")
	}
	return n, 0, nil
}

// Bound measures the ideal-router bound of the clean estimates x
// ([n, c, h, w]) at each cell side and kept amount (parseKeep's forms).
// velocity is the squared norm the velocity error is relative to (0: none
// is reported).
func Bound(x []float32, n, c, h, w int, velocity float64, patches []int, keep []string) ([]BoundRow, error) {
	energy := sumSquares(x)
	var rows []BoundRow
	for _, p := range patches {
		if h%p != 0 || w%p != 0 {
			return nil, fmt.Errorf("data bound: cells of %d×%d do not tile the %d×%d latents", p, p, h, w)
		}
		cells := (h / p) * (w / p)
		counts := make([]int, len(keep))
		for i, k := range keep {
			cnt, frac, err := parseKeep(k)
			if err != nil {
				return nil, fmt.Errorf("data bound: keep %q: %w", k, err)
			}
			if frac > 0 {
				cnt = max(int(math.Round(frac*float64(cells))), 1)
			}
			counts[i] = cnt
		}
		errs, err := dc.IdealDrop(x, n, c, h/p, w/p, p, counts)
		if err != nil {
			return nil, fmt.Errorf("data bound: %w", err)
		}
		for i, e := range errs {
			r := BoundRow{Patch: p, Cells: cells, Kept: counts[i], Frac: float64(counts[i]) / float64(cells), RelMSE: e / energy}
			if velocity > 0 {
				v := e / velocity
				r.RelVelocity = &v
			}
			rows = append(rows, r)
		}
	}
	return rows, nil
}

// RunBound reads the data set and prints its bound.
func RunBound(opts *BoundOptions) error {
	set, err := datasets.Read(opts.Data)
	if err != nil {
		return err
	}
	var rows []BoundRow
	if opts.Teacher == "" {
		// Unit noise: E|ε − x|² = |x|² + one per value.
		vel := sumSquares(set.Latents) + float64(len(set.Latents))
		rows, err = Bound(set.Latents, set.N, set.C, set.H, set.W, vel, opts.Patches, opts.Keep)
	} else {
		rows, err = teacherBound(opts, set)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", opts.Data, err)
	}
	if opts.JSON {
		enc := json.NewEncoder(opts.IO.Out)
		enc.SetIndent("", "  ")
		return enc.Encode(rows)
	}
	what := "the data's latents"
	if opts.Teacher != "" {
		guide := "unguided"
		if opts.CFG > 1 {
			guide = fmt.Sprintf("guided at %v", opts.CFG)
		}
		what = fmt.Sprintf("%s's clean estimates of the first %d, %s", opts.Teacher, min(opts.Samples, set.N), guide)
	}
	fmt.Fprintf(opts.IO.Out, "%s: %d samples of %d×%d×%d; %s\n", opts.Data, set.N, set.C, set.H, set.W, what)
	tw := tabwriter.NewWriter(opts.IO.Out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "level\tcell\tkept\tof cells\trel MSE\trel velocity MSE")
	for _, r := range rows {
		level, vel := "data", "-"
		if r.Level != nil {
			level = strconv.FormatFloat(*r.Level, 'g', -1, 64)
		}
		if r.RelVelocity != nil {
			vel = fmt.Sprintf("%.4f", *r.RelVelocity)
		}
		fmt.Fprintf(tw, "%s\t%d×%d\t%d\t%.1f%% of %d\t%.4f\t%s\n", level, r.Patch, r.Patch, r.Kept, 100*r.Frac, r.Cells, r.RelMSE, vel)
	}
	return tw.Flush()
}

func sumSquares(x []float32) float64 {
	var s float64
	for _, v := range x {
		s += float64(v) * float64(v)
	}
	return s
}

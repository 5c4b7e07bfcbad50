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
}

// BoundRow is one kept amount's bound at one cell size.
type BoundRow struct {
	Patch int     `json:"patch"`
	Cells int     `json:"cells"`
	Kept  int     `json:"kept"`
	Frac  float64 `json:"kept_fraction"`
	// RelMSE is the plug-back's squared error over the data's own
	// squared norm.
	RelMSE float64 `json:"rel_mse"`
	// RelVelocity is the same error over the norm of a flow-matching
	// velocity ε − x with unit noise (E|ε − x|² = |x|² + values): the
	// oracle's relative velocity MSE at any σ when x is the clean estimate.
	RelVelocity float64 `json:"rel_velocity_mse"`
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

--keep takes fractions of a sample's cells ("31%", rounded to a count) or
counts of cells ("40"); a count above a grid's cells is an error.`,
		Example: `  dcdit data shapes --num 1000 --seed 99 --size 32 --out s32.safetensors
  dcdit data bound s32.safetensors --patch 2 --keep 75%,50%,31%,16%,60`,
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

// Bound measures the ideal-router bound of set's latents at each cell side
// and kept amount (parseKeep's forms).
func Bound(set *datasets.Set, patches []int, keep []string) ([]BoundRow, error) {
	var energy float64
	for _, v := range set.Latents {
		energy += float64(v) * float64(v)
	}
	values := float64(len(set.Latents))
	var rows []BoundRow
	for _, p := range patches {
		if set.H%p != 0 || set.W%p != 0 {
			return nil, fmt.Errorf("data bound: cells of %d×%d do not tile the %d×%d latents", p, p, set.H, set.W)
		}
		cells := (set.H / p) * (set.W / p)
		counts := make([]int, len(keep))
		for i, k := range keep {
			n, frac, err := parseKeep(k)
			if err != nil {
				return nil, fmt.Errorf("data bound: keep %q: %w", k, err)
			}
			if frac > 0 {
				n = max(int(math.Round(frac*float64(cells))), 1)
			}
			counts[i] = n
		}
		errs, err := dc.IdealDrop(set.Latents, set.N, set.C, set.H/p, set.W/p, p, counts)
		if err != nil {
			return nil, fmt.Errorf("data bound: %w", err)
		}
		for i, e := range errs {
			rows = append(rows, BoundRow{Patch: p, Cells: cells, Kept: counts[i], Frac: float64(counts[i]) / float64(cells),
				RelMSE: e / energy, RelVelocity: e / (energy + values)})
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
	rows, err := Bound(set, opts.Patches, opts.Keep)
	if err != nil {
		return fmt.Errorf("%s: %w", opts.Data, err)
	}
	if opts.JSON {
		enc := json.NewEncoder(opts.IO.Out)
		enc.SetIndent("", "  ")
		return enc.Encode(rows)
	}
	fmt.Fprintf(opts.IO.Out, "%s: %d samples of %d×%d×%d\n", opts.Data, set.N, set.C, set.H, set.W)
	tw := tabwriter.NewWriter(opts.IO.Out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "cell\tkept\tof cells\trel MSE\trel velocity MSE")
	for _, r := range rows {
		fmt.Fprintf(tw, "%d×%d\t%d\t%.1f%% of %d\t%.4f\t%.4f\n", r.Patch, r.Patch, r.Kept, 100*r.Frac, r.Cells, r.RelMSE, r.RelVelocity)
	}
	return tw.Flush()
}

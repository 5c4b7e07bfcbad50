// Package bench implements `dcdit bench`: times dcdit's kernels on the
// workloads that the PyTorch reference script (shared/bench/
// torch_reference.py) times, under the same case names and timing rules, so
// the two can be compared line by line.
package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/dcdit/dcdit/internal/cli/cmdutil"
	"github.com/dcdit/dcdit/internal/cli/iostreams"
)

// Options are the flags of `dcdit bench`.
type Options struct {
	IO      *iostreams.IO
	JSON    bool
	Filter  string
	Quick   bool
	Compare string

	cases []benchCase // nil: the full suite; tests substitute small cases
}

// NewCmd returns the bench command. runF replaces the action in tests that
// only check flag parsing; nil runs the benchmarks.
func NewCmd(ios *iostreams.IO, runF func(*Options) error) *cobra.Command {
	opts := &Options{IO: ios}
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Time dcdit's kernels on the workloads of the PyTorch reference",
		Long: `Bench times GEMMs of DiT-S shapes, packed attention and 3x3 convolution
forward and backward, a DiT-S block, the DiT-S/2 forward and training step,
the DC-DiT-S forward and training step at tail-drop fractions 0, 0.3 and 0.6
(router set to keep about a quarter of the 1024 tokens), and an AdamW step
over 33 M parameters. Each figure is the best of several runs after a
warm-up, with the case names and timing rules of torch_reference.py, so that
its JSON and ours compare line by line (the reference has no DC-DiT cases).
GFLOP is the work one run executes, counted with the tokens it actually kept
(the DC-DiT cases' kept counts vary with ρ), so times compare against work.

With --compare, the JSON printed by torch_reference.py (its "best" list; a
file printed by 'dcdit bench --json' also works) adds the reference's figures
and two ratios: time ratio = dcdit time / reference time (below 1: dcdit is
faster) and GFLOP/s ratio = dcdit GFLOP/s / reference GFLOP/s (above 1:
dcdit is faster).`,
		Example: `  dcdit bench
  dcdit bench --quick --filter '^gemm_'
  /usr/bin/python3 torch_reference.py --quick > torch.json && dcdit bench --quick --compare torch.json
  dcdit bench --json > dcdit.json`,
		Args: cmdutil.ExactArgs(0, "none"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if runF != nil {
				return runF(opts)
			}
			return Run(opts)
		},
	}
	cmd.Flags().BoolVar(&opts.JSON, "json", false, "print one JSON object")
	cmd.Flags().StringVar(&opts.Filter, "filter", "", "run only the cases whose name matches this regular expression")
	cmd.Flags().BoolVar(&opts.Quick, "quick", false, "fewer repetitions (3 instead of 7), like torch_reference.py --quick")
	cmd.Flags().StringVar(&opts.Compare, "compare", "", "JSON printed by torch_reference.py, to show its figures and the ratios")
	return cmd
}

// Result is one benchmark run; it is also the --json schema.
type Result struct {
	CPU     CPUInfo      `json:"cpu"`
	Threads int          `json:"threads"`
	Cases   []CaseResult `json:"cases"`
	// Reference says where the compared figures come from (--compare only).
	Reference *Reference `json:"reference,omitempty"`
}

// CaseResult is the timing of one case. GFLOP and GFLOPS are set where the
// case has a meaningful FLOP count, NsPerParam for the optimiser.
type CaseResult struct {
	Name string  `json:"name"`
	MS   float64 `json:"ms"`
	// GFLOP is the work one run executes (for model cases, counted with
	// the tokens the run actually kept), so that time can be read against
	// work across cases.
	GFLOP      float64 `json:"gflop,omitempty"`
	GFLOPS     float64 `json:"gflops,omitempty"`
	NsPerParam float64 `json:"ns_per_param,omitempty"`

	// With --compare: the reference's figures for the same case, the time
	// ratio (dcdit / reference: ms, or ns per parameter) and the GFLOP/s
	// ratio (dcdit / reference). Absent when the reference lacks the case.
	Ref         *RefCase `json:"reference,omitempty"`
	TimeRatio   float64  `json:"time_ratio,omitempty"`
	GFLOPSRatio float64  `json:"gflops_ratio,omitempty"`
}

// Reference is the file given to --compare.
type Reference struct {
	File  string `json:"file"`
	Torch string `json:"torch,omitempty"`
	// Missing lists the reference's cases that matched the filter but that
	// dcdit does not run (yet).
	Missing []RefCase `json:"missing"`
}

// RefCase is one entry of the reference's "best" list.
type RefCase struct {
	Name       string  `json:"name"`
	MS         float64 `json:"ms,omitempty"`
	GFLOPS     float64 `json:"gflops,omitempty"`
	NsPerParam float64 `json:"ns_per_param,omitempty"`
}

// Repetitions timed after the warm-up, as in torch_reference.py.
const (
	reps      = 7
	quickReps = 3
)

// Run selects the cases, times them and prints the result.
func Run(opts *Options) error {
	cases := opts.cases
	if cases == nil {
		cases = allCases()
	}
	var filter *regexp.Regexp
	if opts.Filter != "" {
		re, err := regexp.Compile(opts.Filter)
		if err != nil {
			return &cmdutil.UsageError{Err: fmt.Errorf("--filter %q is not a regular expression: %v", opts.Filter, err)}
		}
		filter = re
		var kept []benchCase
		for _, c := range cases {
			if re.MatchString(c.name) {
				kept = append(kept, c)
			}
		}
		if len(kept) == 0 {
			names := make([]string, len(cases))
			for i, c := range cases {
				names[i] = c.name
			}
			return &cmdutil.UsageError{Err: fmt.Errorf("--filter %q matches no case; the cases are %s", opts.Filter, strings.Join(names, ", "))}
		}
		cases = kept
	}
	// Read the reference first: a bad file should not cost a full run.
	var ref *refFile
	if opts.Compare != "" {
		r, err := readReference(opts.Compare)
		if err != nil {
			return err
		}
		ref = r
	}

	base := reps
	if opts.Quick {
		base = quickReps
	}
	res := &Result{CPU: cpuInfo(), Threads: runtime.GOMAXPROCS(0), Cases: []CaseResult{}}
	for i, c := range cases {
		fmt.Fprintf(opts.IO.Err, "bench: %s (%d/%d)\n", c.name, i+1, len(cases))
		n := base
		if c.reps != nil {
			n = c.reps(base)
		}
		res.Cases = append(res.Cases, measure(c, n))
	}
	if ref != nil {
		res.Reference = ref.apply(res.Cases, filter)
	}
	if opts.JSON {
		enc := json.NewEncoder(opts.IO.Out)
		enc.SetIndent("", "  ")
		return enc.Encode(res)
	}
	writeTable(opts.IO.Out, res)
	return nil
}

// measure times one case: a warm-up run, then the best of reps runs.
func measure(c benchCase, reps int) CaseResult {
	w := c.setup()
	// Collect the previous cases' buffers now rather than during a timing.
	runtime.GC()
	if w.reset != nil {
		w.reset()
	}
	w.run()
	best := time.Duration(math.MaxInt64)
	for range max(reps, 1) {
		if w.reset != nil {
			w.reset()
		}
		t0 := time.Now()
		w.run()
		best = min(best, time.Since(t0))
	}
	sec := best.Seconds()
	r := CaseResult{Name: c.name, MS: round(sec*1e3, 3)}
	if w.flops > 0 {
		r.GFLOP = round(w.flops/1e9, 6)
		r.GFLOPS = round(w.flops/sec/1e9, 1)
	}
	if w.params > 0 {
		r.NsPerParam = round(sec*1e9/float64(w.params), 3)
	}
	return r
}

func round(x float64, digits int) float64 {
	p := math.Pow(10, float64(digits))
	return math.Round(x*p) / p
}

// refFile is the JSON of torch_reference.py ("best") or of dcdit bench
// --json ("cases").
type refFile struct {
	path  string
	Torch string    `json:"torch"`
	Best  []RefCase `json:"best"`
	Cases []RefCase `json:"cases"`
}

func readReference(path string) (*refFile, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("compare: %w", err)
	}
	r := &refFile{path: path}
	if err := json.Unmarshal(raw, r); err != nil {
		return nil, fmt.Errorf("compare: %s: not the JSON of torch_reference.py: %v", path, err)
	}
	if r.Best == nil {
		r.Best = r.Cases
	}
	if len(r.Best) == 0 {
		return nil, fmt.Errorf(`compare: %s: no "best" (torch_reference.py) or "cases" (dcdit bench --json) list`, path)
	}
	// The figures divide ours: a zero-ish, negative or huge one would make
	// ratios that are meaningless or infinite (and --json cannot hold Inf).
	for i, c := range r.Best {
		for _, f := range []struct {
			key string
			v   float64
		}{{"ms", c.MS}, {"gflops", c.GFLOPS}, {"ns_per_param", c.NsPerParam}} {
			if f.v != 0 && !(f.v >= minRefFigure && f.v <= maxRefFigure) {
				return nil, fmt.Errorf("compare: %s: case %d (%.40q): %s = %g, want 0 (absent) or %g … %g", path, i, c.Name, f.key, f.v, minRefFigure, maxRefFigure)
			}
		}
	}
	return r, nil
}

// The range a reference's ms, gflops and ns_per_param must lie in.
const (
	minRefFigure = 1e-6
	maxRefFigure = 1e9
)

// apply fills each case's reference figures and ratios and lists the
// reference's cases, among those the filter selects, that did not run.
func (r *refFile) apply(cases []CaseResult, filter *regexp.Regexp) *Reference {
	byName := map[string]RefCase{}
	for _, c := range r.Best {
		byName[c.Name] = c
	}
	ran := map[string]bool{}
	for i := range cases {
		c := &cases[i]
		ran[c.Name] = true
		ref, ok := byName[c.Name]
		if !ok {
			continue
		}
		c.Ref = &ref
		switch {
		case c.MS > 0 && ref.MS > 0:
			c.TimeRatio = round(c.MS/ref.MS, 3)
		case c.NsPerParam > 0 && ref.NsPerParam > 0:
			c.TimeRatio = round(c.NsPerParam/ref.NsPerParam, 3)
		}
		if c.GFLOPS > 0 && ref.GFLOPS > 0 {
			c.GFLOPSRatio = round(c.GFLOPS/ref.GFLOPS, 3)
		}
	}
	out := &Reference{File: r.path, Torch: r.Torch, Missing: []RefCase{}}
	for _, c := range r.Best {
		if !ran[c.Name] && (filter == nil || filter.MatchString(c.Name)) {
			out.Missing = append(out.Missing, c)
		}
	}
	return out
}

func writeTable(w io.Writer, r *Result) {
	features := strings.Join(r.CPU.Features, " ")
	if features == "" {
		features = "no vector extensions detected"
	}
	fmt.Fprintf(w, "cpu      %s (%s; %s)\n", r.CPU.Model, r.CPU.Arch, features)
	fmt.Fprintf(w, "threads  %d\n", r.Threads)
	kernels := fmt.Sprintf("optim %s", r.CPU.Kernels["optim"])
	if r.CPU.KernelsEnv != "" {
		kernels += fmt.Sprintf(" (DCDIT_KERNELS=%s)", r.CPU.KernelsEnv)
	}
	fmt.Fprintf(w, "kernels  %s\n", kernels)
	if r.Reference != nil {
		ref := r.Reference.File
		if r.Reference.Torch != "" {
			ref += ", torch " + r.Reference.Torch
		}
		fmt.Fprintf(w, "compare  %s\n", ref)
	}
	fmt.Fprintln(w)

	// Figures align right; names are padded to one width so that they
	// still read left-aligned.
	width := len("CASE")
	for _, c := range r.Cases {
		width = max(width, len(c.Name))
	}
	if r.Reference != nil {
		for _, c := range r.Reference.Missing {
			width = max(width, len(c.Name))
		}
	}
	name := func(s string) string { return fmt.Sprintf("%-*s", width, s) }
	var buf strings.Builder
	tw := tabwriter.NewWriter(&buf, 0, 4, 2, ' ', tabwriter.AlignRight)
	head := name("CASE") + "\tMS\tGFLOP\tGFLOP/S\tNS/PARAM\t"
	if r.Reference != nil {
		head += "REF MS\tREF GFLOP/S\tREF NS/PARAM\tTIME RATIO\tGFLOP/S RATIO\t"
	}
	fmt.Fprintln(tw, head)
	for _, c := range r.Cases {
		row := fmt.Sprintf("%s\t%s\t%s\t%s\t%s\t", name(c.Name), num(c.MS, 3), sig(c.GFLOP), num(c.GFLOPS, 1), num(c.NsPerParam, 2))
		if r.Reference != nil {
			var ref RefCase
			if c.Ref != nil {
				ref = *c.Ref
			}
			row += fmt.Sprintf("%s\t%s\t%s\t%s\t%s\t", num(ref.MS, 3), num(ref.GFLOPS, 1), num(ref.NsPerParam, 2), num(c.TimeRatio, 2), num(c.GFLOPSRatio, 2))
		}
		fmt.Fprintln(tw, row)
	}
	if r.Reference != nil {
		for _, c := range r.Reference.Missing {
			fmt.Fprintf(tw, "%s\t-\t-\t-\t-\t%s\t%s\t%s\t-\t-\t\n", name(c.Name), num(c.MS, 3), num(c.GFLOPS, 1), num(c.NsPerParam, 2))
		}
	}
	tw.Flush()
	// Right alignment pads the name column on the left by the cell padding.
	for _, line := range strings.SplitAfter(buf.String(), "\n") {
		io.WriteString(w, strings.TrimPrefix(line, "  "))
	}
	if r.Reference != nil {
		fmt.Fprintln(w, "\ntime ratio = dcdit / reference (below 1: dcdit faster); GFLOP/s ratio = dcdit / reference (above 1: dcdit faster)")
		if len(r.Reference.Missing) > 0 {
			fmt.Fprintln(w, "rows with '-' for dcdit are reference cases dcdit does not run yet")
		}
	}
}

// sig formats a work figure: 3 decimals, or all its (rounded) digits
// below 1 (a small GEMM does 0.000066 GFLOP), or "-" where it does not
// apply.
func sig(x float64) string {
	if x == 0 || x >= 1 {
		return num(x, 3)
	}
	return strconv.FormatFloat(x, 'f', -1, 64)
}

// num formats a figure, or "-" for one that does not apply.
func num(x float64, digits int) string {
	if x == 0 {
		return "-"
	}
	return fmt.Sprintf("%.*f", digits, x)
}

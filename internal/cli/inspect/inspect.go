// Package inspect implements `dcdit inspect`: what a checkpoint holds,
// read from headers only.
package inspect

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/dcdit/dcdit/dc/checkpoint"
	"github.com/dcdit/dcdit/family"
	"github.com/dcdit/dcdit/internal/cli/cmdutil"
	"github.com/dcdit/dcdit/internal/cli/iostreams"
	"github.com/dcdit/dcdit/loaders"
	"github.com/dcdit/dcdit/loaders/arch"
)

// Options are the flags and arguments of `dcdit inspect`.
type Options struct {
	IO       *iostreams.IO
	Path     string
	JSON     bool
	Tensors  bool
	Filter   string
	NumHeads int
	// Size is the latent grid "HxW" a Z-Image checkpoint's FLOPs are
	// counted at; empty takes cmdutil.DefaultZImageGrid.
	Size string
	// CaptionLen is the caption length a Z-Image checkpoint's FLOPs are
	// counted with; 0 takes its family's typical one.
	CaptionLen int
}

// NewCmd returns the inspect command. runF replaces the action in tests
// that only check flag parsing; nil runs the real inspection.
func NewCmd(ios *iostreams.IO, runF func(*Options) error) *cobra.Command {
	opts := &Options{IO: ios}
	cmd := &cobra.Command{
		Use:   "inspect PATH",
		Short: "Describe a checkpoint: architecture, config, parameters, dtypes, shards, warnings",
		Long: `Inspect reads a checkpoint's headers (never its tensor data) and reports the
architecture and key naming, the inferred model config, parameter counts by
group, dtypes, shards, metadata and anything suspicious.

PATH may be a .safetensors file, a *.safetensors.index.json, a PyTorch .pt/.pth/
.bin checkpoint (read without executing any pickled code), a folder holding one
of those, or a diffusers model folder (its transformer/ is used, with
config.json when present).`,
		Example: `  dcdit inspect DiT-XL-2-256x256.pt
  dcdit inspect Z-Image-Turbo/ --json
  dcdit inspect model.safetensors --tensors --filter 'blocks\.0\.'`,
		Args: cmdutil.ExactArgs(1, "the checkpoint PATH"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Path = args[0]
			if opts.Size != "" {
				if _, _, err := cmdutil.ParseGrid(opts.Size); err != nil {
					return cmdutil.Usagef(cmd, "--size %q: %v", opts.Size, err)
				}
			}
			if opts.CaptionLen < 0 {
				return cmdutil.Usagef(cmd, "--caption-len %d: want a positive token count", opts.CaptionLen)
			}
			if runF != nil {
				return runF(opts)
			}
			return Run(opts)
		},
	}
	cmd.Flags().BoolVar(&opts.JSON, "json", false, "print one JSON object")
	cmd.Flags().BoolVar(&opts.Tensors, "tensors", false, "list every tensor (name, dtype, shape)")
	cmd.Flags().StringVar(&opts.Filter, "filter", "", "with --tensors, list only names matching this regular expression")
	cmd.Flags().IntVar(&opts.NumHeads, "num-heads", 0, "attention heads, for DiT checkpoints that match no preset and reference DC-DiT state_dicts (they do not store it)")
	cmd.Flags().StringVar(&opts.Size, "size", "", "Z-Image: latent grid HxW to count FLOPs at")
	cmd.Flags().Lookup("size").DefValue = cmdutil.DefaultZImageGrid
	cmd.Flags().IntVar(&opts.CaptionLen, "caption-len", 0, "Z-Image: caption tokens to count FLOPs with")
	cmd.Flags().Lookup("caption-len").DefValue = strconv.Itoa(typicalCaptionLen())
	return cmd
}

// Result is the inspection of one checkpoint; it is also the --json schema.
type Result struct {
	Path              string             `json:"path"`
	Format            loaders.Format     `json:"format"`
	Architecture      arch.Architecture  `json:"architecture"`
	Layout            arch.Layout        `json:"layout"`
	Prefix            string             `json:"prefix,omitempty"`
	Config            any                `json:"config"`
	ConfigFile        string             `json:"config_file,omitempty"`
	Parameters        int64              `json:"parameters"`
	ParametersByGroup map[string]int64   `json:"parameters_by_group"`
	Tensors           int                `json:"tensors"`
	Bytes             int64              `json:"bytes"`
	DTypes            map[string]int     `json:"dtypes"`
	Shards            []loaders.FileInfo `json:"shards"`
	Metadata          map[string]string  `json:"metadata"`
	Training          *loaders.Training  `json:"training,omitempty"`
	Missing           []string           `json:"missing"`
	Unexpected        []string           `json:"unexpected"`
	Mismatched        []arch.Mismatch    `json:"mismatched"`
	Warnings          []string           `json:"warnings"`
	FLOPs             *FLOPsReport       `json:"flops,omitempty"`
	// FLOPsPerRho is a DC-DiT checkpoint's cost at each trained ρ (or 0,
	// 0.3, 0.6), under FLOPsAssumption.
	FLOPsPerRho     []checkpoint.RhoFLOPs `json:"flops_per_rho,omitempty"`
	FLOPsAssumption string                `json:"flops_assumption,omitempty"`
	TensorList      []TensorRow           `json:"tensor_list,omitempty"`
}

// FLOPsReport is the model's compute at its native resolution (DiT), or
// at a latent grid and caption length (Z-Image, which has no native one).
type FLOPsReport struct {
	Convention string `json:"convention"`
	// Tokens are the image tokens (patches).
	Tokens int `json:"tokens"`
	// LatentSize ("HxW") and CaptionTokens are what a Z-Image count
	// assumes.
	LatentSize    string  `json:"latent_size,omitempty"`
	CaptionTokens int     `json:"caption_tokens,omitempty"`
	ForwardFLOPs  float64 `json:"forward_flops"`
	// TFLOPsPerImage is for Steps sampling steps without guidance.
	Steps          int     `json:"steps"`
	TFLOPsPerImage float64 `json:"tflops_per_image"`
}

// flopsSteps is the sampling steps a model is priced over when neither it
// nor its family says (DiT's).
const flopsSteps = 250

// TensorRow is one line of the --tensors listing.
type TensorRow struct {
	Name  string  `json:"name"`
	DType string  `json:"dtype"`
	Shape []int64 `json:"shape"`
	File  string  `json:"file,omitempty"`
}

// Run inspects opts.Path and prints the result.
func Run(opts *Options) error {
	var filter *regexp.Regexp
	if opts.Filter != "" {
		re, err := regexp.Compile(opts.Filter)
		if err != nil {
			return &cmdutil.UsageError{Err: fmt.Errorf("--filter %q is not a regular expression: %v", opts.Filter, err)}
		}
		filter = re
	}
	res, err := inspect(opts)
	if err != nil {
		return err
	}
	if opts.Tensors || filter != nil {
		res.TensorList = listTensors(res.TensorList, filter)
	} else {
		res.TensorList = nil
	}
	if opts.JSON {
		enc := json.NewEncoder(opts.IO.Out)
		enc.SetIndent("", "  ")
		return enc.Encode(res)
	}
	writeTable(opts.IO.Out, res, opts.Tensors || filter != nil)
	return nil
}

func listTensors(rows []TensorRow, filter *regexp.Regexp) []TensorRow {
	if filter == nil {
		return rows
	}
	out := rows[:0:0]
	for _, r := range rows {
		if filter.MatchString(r.Name) {
			out = append(out, r)
		}
	}
	return out
}

// Inspect opens the checkpoint at path and describes it. numHeads, when
// positive, overrides the inferred DiT head count. A checkpoint that takes
// any latent grid (Z-Image) has its FLOPs counted at
// cmdutil.DefaultZImageGrid with its family's typical caption length.
func Inspect(path string, numHeads int) (*Result, error) {
	return inspect(&Options{Path: path, NumHeads: numHeads})
}

func inspect(opts *Options) (*Result, error) {
	path, numHeads := opts.Path, opts.NumHeads
	ck, err := loaders.Open(path)
	if err != nil {
		return nil, err
	}
	defer ck.Close()
	in := ck.ArchInput(numHeads)
	res := &Result{
		Path: ck.Path, Format: ck.Format, ConfigFile: ck.ConfigPath, Tensors: len(ck.Tensors),
		Bytes: ck.TotalBytes(), DTypes: map[string]int{}, Shards: ck.Files, Metadata: ck.Metadata,
		Training: ck.Training,
	}
	multiFile := len(ck.Files) > 1
	for _, t := range ck.Tensors {
		res.Parameters += t.NumElements()
		res.DTypes[t.DType.String()]++
		row := TensorRow{Name: t.Name, DType: t.DType.String(), Shape: t.Shape}
		if multiFile {
			row.File = t.File
		}
		res.TensorList = append(res.TensorList, row)
	}
	rep := arch.Detect(in)
	res.Architecture, res.Layout, res.Prefix, res.Config = rep.Architecture, rep.Layout, rep.Prefix, rep.Config
	res.ParametersByGroup = rep.Parameters
	res.Missing, res.Unexpected, res.Mismatched = rep.Missing, rep.Unexpected, rep.Mismatched
	res.Warnings = append(append([]string{}, ck.Warnings...), rep.Warnings...)
	if b, coster, ok := family.BaseOf(rep); ok && b.Config != nil && len(rep.Missing)+len(rep.Mismatched) == 0 {
		var usage *cmdutil.UsageError
		if res.FLOPs, err = baseFLOPs(b, coster, opts); errors.As(err, &usage) {
			return nil, err
		} else if err != nil {
			// A config detection read but the family cannot count is
			// described all the same.
			res.Warnings = append(res.Warnings, fmt.Sprintf("FLOPs not counted: %v", err))
		}
	}
	if rep.Architecture == arch.DCDiT {
		describeDC(res, ck, numHeads)
	}
	if rep.Architecture == arch.Unknown {
		describeVAE(res, ck)
	}
	if ck.Training != nil {
		res.Warnings = append(res.Warnings, fmt.Sprintf("training checkpoint: using the %q state dict (top-level keys: %s)", ck.Training.Selected, arch.JoinCapped(ck.Training.TopLevel, ", ", 8)))
	}
	// Empty lists and maps print as [] and {} in --json, never null.
	if res.Metadata == nil {
		res.Metadata = map[string]string{}
	}
	res.Missing, res.Unexpected = orEmpty(res.Missing), orEmpty(res.Unexpected)
	if res.Mismatched == nil {
		res.Mismatched = []arch.Mismatch{}
	}
	if res.Shards == nil {
		res.Shards = []loaders.FileInfo{}
	}
	return res, nil
}

// baseFLOPs counts a fixed-patch model through its family over its
// sampling steps: at its own latent size, or, for one that takes any
// grid, at opts' latent grid and caption length. A grid opts states
// wrongly is a usage error.
func baseFLOPs(b family.Base, coster family.BaseCosted, opts *Options) (*FLOPsReport, error) {
	h, w := b.Grid, b.Grid
	var rep FLOPsReport
	if b.AnyGrid {
		size := opts.Size
		if size == "" {
			size = cmdutil.DefaultZImageGrid
		}
		var err error
		if h, w, err = cmdutil.ParseGrid(size); err != nil {
			return nil, &cmdutil.UsageError{Err: fmt.Errorf("--size %q: %w", size, err)}
		}
		if h%b.Patch != 0 || w%b.Patch != 0 {
			return nil, &cmdutil.UsageError{Err: fmt.Errorf("--size %dx%d: %s takes %d×%d patches, so both sides must be multiples of %d", h, w, opts.Path, b.Patch, b.Patch, b.Patch)}
		}
		rep.LatentSize = fmt.Sprintf("%dx%d", h, w)
	}
	if b.CaptionLen > 0 {
		rep.CaptionTokens = opts.CaptionLen
		if rep.CaptionTokens == 0 {
			rep.CaptionTokens = b.CaptionLen
		}
	}
	f, err := coster.BaseFLOPs(b.Config, h, w, rep.CaptionTokens)
	if err != nil {
		return nil, err
	}
	rep.Convention, rep.Tokens, rep.ForwardFLOPs = f.Convention, f.Tokens, f.Forward
	rep.Steps, rep.TFLOPsPerImage = b.Steps, f.Forward*float64(b.Steps)/1e12
	return &rep, nil
}

// typicalCaptionLen is the caption length the registered captioned
// presets are priced with unless told (0 when none reads captions).
func typicalCaptionLen() int {
	for _, p := range family.Presets(0) {
		if p.Base != nil && p.Base.CaptionLen > 0 {
			return p.Base.CaptionLen
		}
	}
	return 0
}

func orEmpty(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func writeTable(w io.Writer, r *Result, withTensors bool) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	row := func(k, format string, args ...any) { fmt.Fprintf(tw, "%s\t%s\n", k, fmt.Sprintf(format, args...)) }
	row("path", "%s", r.Path)
	files := "1 file"
	if len(r.Shards) > 1 {
		files = fmt.Sprintf("%d shards", len(r.Shards))
	}
	row("format", "%s (%s, %s of tensors)", r.Format, files, humanBytes(r.Bytes))
	layout := string(r.Layout)
	if r.Prefix != "" {
		layout += ", prefix " + r.Prefix
	}
	if layout != "" {
		row("architecture", "%s (%s naming)", r.Architecture, layout)
	} else {
		row("architecture", "%s", r.Architecture)
	}
	if r.ConfigFile != "" {
		row("config file", "%s", r.ConfigFile)
	}
	if r.Config != nil && !writeDCConfig(row, r.Config) {
		row("config", "%s", configLine(r.Config))
	}
	row("parameters", "%s (%s)", commas(r.Parameters), humanCount(r.Parameters))
	for _, g := range []string{arch.BucketEmbedders, arch.BucketEncoder, arch.BucketRouter, arch.BucketDecoder, arch.BucketBlocks,
		arch.BucketBackbone, arch.BucketFinalLayer, arch.BucketOther} {
		if n, ok := r.ParametersByGroup[g]; ok && n > 0 {
			row("  "+g, "%s", commas(n))
		}
	}
	if f := r.FLOPs; f != nil && f.LatentSize != "" {
		row("flops", "%s per forward (%s latent: %d image tokens, %d caption tokens), %s per image at %d steps without guidance",
			siFLOP(f.ForwardFLOPs), f.LatentSize, f.Tokens, f.CaptionTokens, siFLOP(f.TFLOPsPerImage*1e12), f.Steps)
	} else if f != nil {
		row("flops", "%s per forward (%d tokens), %s per image at %d steps", siFLOP(f.ForwardFLOPs), f.Tokens, siFLOP(f.TFLOPsPerImage*1e12), f.Steps)
	}
	writeFLOPsPerRho(row, r)
	row("tensors", "%d", r.Tensors)
	row("dtypes", "%s", histogram(r.DTypes))
	if len(r.Shards) > 1 {
		for _, s := range r.Shards {
			row("  shard", "%s (%d tensors, %s)", s.Path, s.Tensors, humanBytes(s.Bytes))
		}
	}
	if r.Training != nil {
		row("training", "state dict %q of {%s}", r.Training.Selected, arch.JoinCapped(r.Training.TopLevel, ", ", 8))
	}
	if len(r.Metadata) > 0 {
		for i, k := range slices.Sorted(maps.Keys(r.Metadata)) {
			label := ""
			if i == 0 {
				label = "metadata"
			}
			v := r.Metadata[k]
			if len(v) > 80 {
				v = v[:77] + "..."
			}
			row(label, "%s = %s", k, v)
		}
	}
	tw.Flush()
	if len(r.Warnings) > 0 {
		fmt.Fprintln(w, "warnings:")
		for _, msg := range r.Warnings {
			fmt.Fprintf(w, "  - %s\n", msg)
		}
	}
	if withTensors {
		fmt.Fprintln(w)
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "NAME\tDTYPE\tSHAPE\tFILE")
		for _, t := range r.TensorList {
			fmt.Fprintf(tw, "%s\t%s\t%v\t%s\n", t.Name, t.DType, t.Shape, t.File)
		}
		tw.Flush()
	}
}

// configLine renders a config struct as "key value · key value".
func configLine(cfg any) string {
	raw, err := json.Marshal(cfg)
	if err != nil {
		return fmt.Sprint(cfg)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		return string(raw)
	}
	parts := make([]string, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		v, _ := json.Marshal(m[k])
		parts = append(parts, k+"="+string(v))
	}
	return strings.Join(parts, " ")
}

func histogram(h map[string]int) string {
	keys := slices.Collect(maps.Keys(h))
	sort.Slice(keys, func(i, j int) bool { return h[keys[i]] > h[keys[j]] || (h[keys[i]] == h[keys[j]] && keys[i] < keys[j]) })
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s ×%d", k, h[k])
	}
	return strings.Join(parts, ", ")
}

func commas(n int64) string {
	s := fmt.Sprint(n)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

func humanCount(n int64) string {
	switch {
	case n >= 1e9:
		return fmt.Sprintf("%.2f B", float64(n)/1e9)
	case n >= 1e6:
		return fmt.Sprintf("%.1f M", float64(n)/1e6)
	case n >= 1e3:
		return fmt.Sprintf("%.1f K", float64(n)/1e3)
	}
	return fmt.Sprint(n)
}

func siFLOP(v float64) string {
	for _, u := range []struct {
		scale  float64
		prefix string
	}{{1e15, "P"}, {1e12, "T"}, {1e9, "G"}, {1e6, "M"}, {1e3, "K"}} {
		if v >= u.scale {
			return fmt.Sprintf("%.2f %sFLOP", v/u.scale, u.prefix)
		}
	}
	return fmt.Sprintf("%.0f FLOP", v)
}

func humanBytes(n int64) string {
	switch {
	case n >= 1e9:
		return fmt.Sprintf("%.2f GB", float64(n)/1e9)
	case n >= 1e6:
		return fmt.Sprintf("%.1f MB", float64(n)/1e6)
	case n >= 1e3:
		return fmt.Sprintf("%.1f kB", float64(n)/1e3)
	}
	return fmt.Sprintf("%d B", n)
}

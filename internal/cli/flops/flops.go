// Package flops implements `dcdit flops`: the forward FLOPs of a model per
// image, by part, and over a sampling run, for a named preset or a
// checkpoint (read from headers only).
package flops

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/dcdit/dcdit/dc"
	"github.com/dcdit/dcdit/dc/dcfile"
	"github.com/dcdit/dcdit/diffusion/ddpm"
	"github.com/dcdit/dcdit/family"
	"github.com/dcdit/dcdit/internal/cli/cmdutil"
	"github.com/dcdit/dcdit/internal/cli/iostreams"
	"github.com/dcdit/dcdit/loaders"
	"github.com/dcdit/dcdit/loaders/arch"
)

// Options are the flags and arguments of `dcdit flops`.
type Options struct {
	IO    *iostreams.IO
	Model string // a preset name or a checkpoint path
	// Resolution is the image side in pixels; 0 takes the checkpoint's own
	// (256 for presets).
	Resolution int
	Steps      int
	CFG        bool
	Rho        []float64 // DC models: tail-drop fractions, one column each
	// RhoUncond, when set (RhoUncondGiven), prices Lite-CFG: the
	// unconditional branch runs at this ρ.
	RhoUncond      float64
	RhoUncondGiven bool
	// KeptRatio is the assumed fraction of grid tokens the router marks as
	// boundaries; 0 takes 1/N (the ratio loss's target).
	KeptRatio float64
	NumHeads  int
	JSON      bool
	// CaptionLen is a captioned model's (Z-Image's) caption length in
	// tokens; 0 takes its family's typical one.
	CaptionLen int

	// stepsDefault says that --steps was left at its default, so that a
	// fixed-patch model takes its own (Z-Image-Turbo: 8). Set by the command only; a caller of
	// Run gives the steps it means.
	stepsDefault bool
}

// Defaults.
const (
	defaultSteps      = 250
	defaultResolution = 256
	// vaeFactor is the SD VAE's downsampling: a 256 px image is a 32×32
	// latent.
	vaeFactor = 8
)

// Convention is the counting rule, printed with every result.
const Convention = "2 FLOPs per multiply-add of every matrix product and convolution, attention H·Σ_b L_b²·(4·d_h+3) over each sample's (packed) tokens, no elementwise work (the DC-DiT reference counter); per image; every sampling step counted, one forward per step, two with guidance"

// NewCmd returns the flops command. runF replaces the action in tests that
// only check flag parsing; nil counts.
func NewCmd(ios *iostreams.IO, runF func(*Options) error) *cobra.Command {
	opts := &Options{IO: ios}
	cmd := &cobra.Command{
		Use:   "flops PRESET|CHECKPOINT",
		Short: "Forward FLOPs per image by part, and TFLOPs per image over a sampling run",
		Long: `Flops counts the floating-point operations of one forward pass per image,
by part, and their total over a sampling run, for a named preset or a
checkpoint (read from its headers only; no tensor data is loaded).

Presets: DiT's models.py sizes DiT-{S,B,L,XL}/{2,4,8} (at --resolution),
the DC-DiT paper's scales ` + dc.PresetNames() + ` (patch 1,
encoder/decoder width D/4 with 2+2 conv blocks, router bottleneck D/4, N = 4,
and the main network of the same-size DiT), and Z-Image's transformer,
` + presetNames(arch.ZImage) + ` (the published config: dim 3840, 30 layers,
2 noise and 2 context refiner layers, 30 heads of 128, FFN 10240,
cap_feat_dim 2560, 2×2 patches of 16 channels). Checkpoints: any DiT or
Z-Image transformer that 'dcdit inspect' reads, dcdit's DC checkpoints, and
official DC-DiT state dicts (hnet.* names; the head count comes from the
YAML config beside the file or pickled in a training checkpoint, else
--num-heads, else the preset of the same width and depth, else 64-wide heads).

Z-Image is counted at --resolution (default 1024, a 128×128 latent: 4096
image tokens) with a caption of --caption-len tokens (default ` + strconv.Itoa(typicalCaptionLen()) + `, about
100 words of prompt in the chat template; the text encoder is not counted).
Image and caption sequences are padded to multiples of 32, and the refiners
and main layers run over the padded sequences, as the model does; the
embedders and the final layer see the real tokens only. Without --steps,
Z-Image-Turbo takes its 8 steps and Z-Image (base) its 50; the base model
samples with guidance, which --cfg counts (the negative caption taken as
long as the positive one).

Convention (the DC-DiT reference's flop_counter.py and the paper's appendix):
2 FLOPs per multiply-add of every matrix product and convolution (linear
layers, patch embedding, timestep MLP, adaLN, conv blocks, router, residual
projection, de-chunk smoothing Σ_b M_b²·D), plus H·Σ_b L_b²·(4·d_h + 3) for
attention over each sample's tokens (packed: no padding); norms,
activations, gathers and other elementwise work are not counted. Figures
are per image. Over a sampling run every step costs one forward, two with
--cfg (the conditional and the unconditional branch); --rho-uncond prices
Lite-CFG, the unconditional branch at a higher tail-drop fraction.

A DC model's cost depends on how many tokens its router keeps, which only a
run can tell. Here each sample is assumed to have floor(R·L) natural
boundaries among its L latent tokens (R = --kept-ratio, default 1/N), of
which tail dropping at ρ removes floor(n·ρ) (in float32, truncated, as the
reference does) — the same count at every step. A DC checkpoint whose main
network has DyDiT's width gates (a recipe stage's dydit_lambda) is read
whole: its routers choose the heads and MLP channel groups each step runs
from the step's timestep (DDPM's 1000 respaced to --steps), and the forward
FLOPs are their mean over the steps.

Against the paper: every step is counted, so the fixed-patch DiT baselines
at 256 px and 250 steps give 3.03 (DiT-S/2), 11.51 (B/2), 40.37 (L/2) and
59.33 (XL/2) TFLOPs per image, 0.4–0.6% above the paper's 3.02, 11.46, 40.21
and 59.00. The difference is the first sampling step: the reference's
printout sums the per-step FLOPs excluding step 1, and --steps 249 gives
3.02, 11.46, 40.21 and 59.10 (53.09 for DiT-B/2 at 512 px, as printed). Only
DiT-XL/2 keeps a residue, 0.16% (0.12% at 512 px: 261.57 against 261.25),
which no step count or guidance convention explains: the paper's guided
XL/2 figure, 118.13 TFLOPs, is 0.05% from our 2 × 59.10, so the 59.00 is
most likely rounded or measured apart. Guidance is not counted by default;
the paper's CFG tables count both branches, as --cfg does.`,
		Example: `  dcdit flops DiT-XL/2                               # 59.33 TFLOPs per image at 256 px, 250 steps
  dcdit flops Z-Image-Turbo                          # 1024 px, 128 caption tokens, 8 steps
  dcdit flops Z-Image --cfg --resolution 768 --caption-len 300
  dcdit flops DC-DiT-S --rho 0,0.3,0.6              # one column per tail-drop fraction
  dcdit flops DC-DiT-XL --resolution 512 --cfg --rho 0 --rho-uncond 0.9 --json
  dcdit flops DiT-XL-2-256x256.pt --steps 50 --cfg
  dcdit flops dcdit-s.safetensors --kept-ratio 0.2 --rho 0.5`,
		Args: cmdutil.ExactArgs(1, "a PRESET name or a CHECKPOINT path"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Model = args[0]
			opts.RhoUncondGiven = cmd.Flags().Changed("rho-uncond")
			if err := validate(cmd, opts); err != nil {
				return err
			}
			if runF != nil {
				return runF(opts)
			}
			opts.stepsDefault = !cmd.Flags().Changed("steps")
			return Run(opts)
		},
	}
	f := cmd.Flags()
	f.IntVar(&opts.Resolution, "resolution", 0, "image side in pixels, a multiple of 8 (default: the checkpoint's own, 256 for presets)")
	f.IntVar(&opts.Steps, "steps", defaultSteps, "sampling steps: model evaluations per image (without guidance)")
	f.BoolVar(&opts.CFG, "cfg", false, "count classifier-free guidance's unconditional branch: two forwards per step")
	f.Float64SliceVar(&opts.Rho, "rho", nil, "DC models: tail-drop fractions ρ in [0, 1), comma-separated or repeated")
	f.Lookup("rho").DefValue = "0"
	f.Float64Var(&opts.RhoUncond, "rho-uncond", 0, "DC models: Lite-CFG, the unconditional branch at this ρ (implies --cfg)")
	f.Float64Var(&opts.KeptRatio, "kept-ratio", 0, "DC models: assumed fraction of tokens the router marks as boundaries (default 1/N)")
	f.IntVar(&opts.NumHeads, "num-heads", 0, "attention heads, for checkpoints that do not store them")
	f.BoolVar(&opts.JSON, "json", false, "print one JSON object")
	f.IntVar(&opts.CaptionLen, "caption-len", 0, "Z-Image models: caption tokens per image")
	f.Lookup("caption-len").DefValue = strconv.Itoa(typicalCaptionLen())
	return cmd
}

// validate rejects flag values that are wrong whatever the model: they
// are usage errors (exit 2).
func validate(cmd *cobra.Command, o *Options) error {
	switch {
	case o.Steps < 1:
		return cmdutil.Usagef(cmd, "--steps %d: want at least 1", o.Steps)
	case o.Resolution < 0 || o.Resolution%vaeFactor != 0:
		return cmdutil.Usagef(cmd, "--resolution %d: want a positive multiple of %d (the VAE's downsampling)", o.Resolution, vaeFactor)
	case o.KeptRatio != 0 && !(o.KeptRatio > 0 && o.KeptRatio <= 1):
		return cmdutil.Usagef(cmd, "--kept-ratio %v: want 0 < ratio ≤ 1", o.KeptRatio)
	case o.RhoUncondGiven && !validRho(o.RhoUncond):
		return cmdutil.Usagef(cmd, "--rho-uncond %v: want 0 ≤ ρ < 1", o.RhoUncond)
	case o.NumHeads < 0:
		return cmdutil.Usagef(cmd, "--num-heads %d: want a positive head count", o.NumHeads)
	case o.CaptionLen < 0:
		return cmdutil.Usagef(cmd, "--caption-len %d: want a positive token count", o.CaptionLen)
	}
	for _, r := range o.Rho {
		if !validRho(r) {
			return cmdutil.Usagef(cmd, "--rho %v: want 0 ≤ ρ < 1", r)
		}
	}
	return nil
}

func validRho(r float64) bool { return r >= 0 && float32(r) < 1 }

// Result is the count for one model; it is also the --json schema.
type Result struct {
	Model        string `json:"model"`            // the argument
	Preset       string `json:"preset,omitempty"` // the preset's name
	Architecture string `json:"architecture"`     // "dit" or "dcdit"
	Config       any    `json:"config"`
	Resolution   int    `json:"resolution"`  // image side, pixels
	LatentSize   int    `json:"latent_size"` // latent grid side
	// Tokens is the model's sequence length before any routing: DiT's
	// patches, a DC model's latent positions, Z-Image's image patches.
	Tokens int `json:"tokens"`
	// CaptionTokens is a Z-Image model's assumed caption length.
	CaptionTokens int  `json:"caption_tokens,omitempty"`
	Steps         int  `json:"steps"`
	CFG           bool `json:"cfg"`
	// KeptRatio is the assumed boundary fraction (DC models).
	KeptRatio  float64 `json:"kept_ratio,omitempty"`
	Convention string  `json:"convention"`
	// ForwardGFLOPs and TFLOPsPerImage repeat the first budget's figures.
	ForwardGFLOPs  float64  `json:"forward_gflops"`
	TFLOPsPerImage float64  `json:"tflops_per_image"`
	Budgets        []Budget `json:"budgets"`
	Warnings       []string `json:"warnings"`
}

// Budget is the cost at one tail-drop fraction (DiT: its only budget).
type Budget struct {
	Rho       *float64 `json:"rho,omitempty"`
	RhoUncond *float64 `json:"rho_uncond,omitempty"`
	// NaturalTokens is the assumed boundary count before tail dropping.
	NaturalTokens int `json:"natural_tokens,omitempty"`
	// KeptTokens reach the transformer blocks (the unconditional
	// branch's under Lite-CFG: KeptTokensUncond).
	KeptTokens       int `json:"kept_tokens"`
	KeptTokensUncond int `json:"kept_tokens_uncond,omitempty"`
	// Parts split ForwardGFLOPs, one forward of the conditional branch.
	Parts         []Part  `json:"parts"`
	ForwardGFLOPs float64 `json:"forward_gflops"`
	// StepGFLOPs is one sampling step: one forward, or both branches with
	// guidance.
	StepGFLOPs     float64 `json:"step_gflops"`
	TFLOPsPerImage float64 `json:"tflops_per_image"`
}

// DCConfig is a DC model's configuration in the JSON: the scaffold (at
// the counted resolution) and its main network.
type DCConfig struct {
	Scaffold *dc.Config `json:"scaffold"`
	// Main is the backbone family's config (DC-DiT's own main network:
	// an hnet config).
	Main any `json:"main_network"`
	// Kind is the backbone's family.
	Kind string `json:"backbone_kind"`
	// main names the backbone in the table.
	main string
}

// describe names a DC model's backbone in one line: as its family
// describes it, else by its kind and config.
func describe(s family.Spec) string {
	if d, ok := s.(family.Describer); ok {
		return d.Describe()
	}
	return fmt.Sprintf("%s backbone %+v", s.Kind(), s.Settings())
}

// Part is one line of the split.
type Part struct {
	Name   string  `json:"name"`
	GFLOPs float64 `json:"gflops"`
}

// model is what a preset or checkpoint resolves to: a fixed-patch base
// (base, with the family that prices it) or a DC model (scaffold and
// backbone).
type model struct {
	preset   string
	base     *family.Base
	coster   family.BaseCosted
	scaffold *dc.Config
	backbone family.Spec // a DC model's backbone: its description and FLOPs
	// gated is a DC model's width-gated backbone, built from the file:
	// its cost depends on each step's timestep.
	gated family.WidthGated
	// native is the model's own latent side.
	native   int
	warnings []string
}

// Run counts and prints.
func Run(opts *Options) error {
	m, err := resolve(opts)
	if err != nil {
		return err
	}
	res, err := count(m, opts)
	if err != nil {
		return err
	}
	if opts.JSON {
		enc := json.NewEncoder(opts.IO.Out)
		enc.SetIndent("", "  ")
		return enc.Encode(res)
	}
	for _, w := range res.Warnings {
		fmt.Fprintf(opts.IO.Err, "warning: %s\n", w)
	}
	writeTable(opts.IO.Out, res)
	return nil
}

// resolve finds the preset or reads the checkpoint's headers.
func resolve(opts *Options) (*model, error) {
	name := opts.Model
	for _, p := range family.Presets(opts.NumHeads) {
		if !strings.EqualFold(name, p.Name) {
			continue
		}
		if p.Base != nil {
			c, ok := p.Family.(family.BaseCosted)
			if !ok {
				return nil, fmt.Errorf("flops: preset %s: its family prices no fixed-patch model", p.Name)
			}
			return &model{preset: p.Name, base: p.Base, coster: c, native: p.Base.Grid}, nil
		}
		sp, ok := dc.LookupPreset(p.Name)
		if !ok {
			return nil, fmt.Errorf("flops: preset %s: no DC scaffold of that name (the scaffolds are %s)", p.Name, dc.PresetNames())
		}
		side := defaultResolution / vaeFactor
		return &model{preset: p.Name, scaffold: sp.Config(side), backbone: p.Backbone, native: side}, nil
	}
	if _, err := os.Stat(name); errors.Is(err, os.ErrNotExist) {
		return nil, &cmdutil.UsageError{Err: fmt.Errorf("flops: %s: no such file, and not a preset (the presets are %s)", name, presetNames(""))}
	}
	ck, err := loaders.Open(name)
	if err != nil {
		return nil, err
	}
	defer ck.Close()
	m := &model{warnings: append([]string{}, ck.Warnings...)}
	rep := arch.Detect(ck.ArchInput(opts.NumHeads))
	if dcfile.FormatOf(rep) != "" {
		return dcModel(ck, opts, m)
	}
	b, coster, ok := family.BaseOf(rep)
	if !ok {
		return nil, fmt.Errorf("flops: %s: architecture %s, want a DiT, Z-Image or DC-DiT checkpoint", name, rep.Architecture)
	}
	if b.Config == nil || len(rep.Missing)+len(rep.Mismatched) > 0 {
		return nil, fmt.Errorf("flops: %s: an incomplete %s (%d tensors missing, %d mis-shaped; see 'dcdit inspect %s')", name, b.What, len(rep.Missing), len(rep.Mismatched), name)
	}
	m.warnings = append(m.warnings, b.Warnings...)
	m.preset, m.base, m.coster, m.native = b.Preset, &b, coster, b.Grid
	return m, nil
}

// dcModel reads a DC model file's header: a DC checkpoint's, whose head
// count --num-heads replaces to price a variant, or an official state
// dict's, whose head count is --num-heads, its config's, or a guess.
func dcModel(ck *loaders.Checkpoint, opts *Options, m *model) (*model, error) {
	h, err := dcfile.ReadHeader(ck, dcfile.Options{Heads: opts.NumHeads, GuessHeads: true, GridSide: opts.Resolution / vaeFactor})
	if err != nil {
		return nil, fmt.Errorf("flops: %s: %w", opts.Model, err)
	}
	cfg, spec := h.Meta.Scaffold, h.Meta.Backbone.Spec
	if r, ok := spec.(family.Reheader); ok && opts.NumHeads > 0 {
		spec = r.WithHeads(opts.NumHeads)
	}
	if r, ok := spec.(family.Recaptioner); ok && opts.CaptionLen > 0 {
		spec = r.WithCaptionLen(opts.CaptionLen)
	}
	m.warnings = append(m.warnings, h.Meta.Warnings...)
	m.preset, m.scaffold, m.backbone, m.native = h.Preset, &cfg, spec, cfg.GridRows
	if family.SpecGated(spec) {
		if opts.NumHeads > 0 {
			return nil, &cmdutil.UsageError{Err: fmt.Errorf("flops: %s: --num-heads cannot reprice a model with width gates (its routers gate its own heads)", opts.Model)}
		}
		// The gates' choices are in the routers' tensors, not the header.
		dm, _, err := dcfile.Open(opts.Model, dcfile.Options{})
		if err != nil {
			return nil, fmt.Errorf("flops: %s: %w", opts.Model, err)
		}
		g, ok := family.GatedWidth(dm.Backbone)
		if !ok {
			return nil, fmt.Errorf("flops: %s: the header describes width gates, and the %s backbone built from the file has none", opts.Model, family.KindOf(dm.Backbone))
		}
		dm.Backbone.Parameters().SetRequiresGrad(false)
		m.gated = g
	}
	if cfg.GridRows != cfg.GridCols {
		return nil, fmt.Errorf("flops: %s: grid %d×%d is not square; --resolution sets a square grid", opts.Model, cfg.GridRows, cfg.GridCols)
	}
	return m, nil
}

// count prices the model at each budget.
func count(m *model, opts *Options) (*Result, error) {
	side := m.native
	if opts.Resolution > 0 {
		side = opts.Resolution / vaeFactor
	}
	guided := opts.CFG || opts.RhoUncondGiven
	if m.base != nil {
		return countBase(m, opts, side, guided)
	}
	res := &Result{Model: opts.Model, Preset: m.preset, Resolution: side * vaeFactor, LatentSize: side,
		Steps: opts.Steps, CFG: guided, Convention: Convention, Warnings: append([]string{}, m.warnings...)}
	cfg := *m.scaffold
	cfg.GridRows, cfg.GridCols = side, side
	L := cfg.Cells()
	ratio := opts.KeptRatio
	if ratio == 0 {
		ratio = 1 / cfg.TargetN
	}
	natural, err := dc.AssumedBoundaries(ratio, L)
	if err != nil {
		return nil, err
	}
	res.Architecture, res.Tokens, res.KeptRatio = string(arch.DCDiT), L, ratio
	res.Config = &DCConfig{Scaffold: &cfg, Main: m.backbone.Settings(), Kind: m.backbone.Kind(), main: describe(m.backbone)}
	// Counting needs only the configurations, no weights, but for the
	// width gates.
	var main dc.BackboneFLOPs = m.backbone
	if m.gated != nil {
		times, err := ddpm.SpaceTimesteps(ddpmSteps, strconv.Itoa(opts.Steps))
		if err != nil {
			return nil, fmt.Errorf("flops: --steps: %w", err)
		}
		main = stepMean{m.gated, times}
		res.Warnings = append(res.Warnings, fmt.Sprintf("the main network's width gates (DyDiT) are counted as they run at each of the %d steps' timesteps; FLOPs per forward are the mean over the steps", opts.Steps))
	}
	rhos := opts.Rho
	if len(rhos) == 0 {
		rhos = []float64{0}
	}
	for _, rho := range rhos {
		kept, err := dc.KeptAfterDrop(natural, float32(rho))
		if err != nil {
			return nil, err
		}
		f := dc.ConfigFLOPs(&cfg, main, []int{kept})
		b := Budget{Rho: &rho, NaturalTokens: natural, KeptTokens: kept, Parts: []Part{
			{"embed", f.Embed / 1e9}, {"encoder", f.Encoder / 1e9}, {"routing", f.Routing / 1e9},
			{"residual", f.Residual / 1e9}, {"main network", f.Backbone / 1e9}, {"dechunk", f.DeChunk / 1e9},
			{"decoder", f.Decoder / 1e9}, {"final", f.Final / 1e9},
		}}
		uncond := f.Total()
		if opts.RhoUncondGiven {
			ru := opts.RhoUncond
			ku, err := dc.KeptAfterDrop(natural, float32(ru))
			if err != nil {
				return nil, err
			}
			b.RhoUncond, b.KeptTokensUncond = &ru, ku
			uncond = dc.ConfigFLOPs(&cfg, main, []int{ku}).Total()
		}
		b.finish(f.Total(), uncond, guided, opts.Steps)
		res.Budgets = append(res.Budgets, b)
	}
	res.ForwardGFLOPs, res.TFLOPsPerImage = res.Budgets[0].ForwardGFLOPs, res.Budgets[0].TFLOPsPerImage
	return res, nil
}

// ddpmSteps is the training diffusion --steps respaces (DiT's, DC-DiT's).
const ddpmSteps = 1000

// stepMean counts a width-gated backbone's forward as the mean over a
// sampling run's timesteps, each step at the width its gates choose.
type stepMean struct {
	g     family.WidthGated
	times []int
}

// FLOPs is the mean over the timesteps.
func (s stepMean) FLOPs(lengths []int) float64 {
	var f float64
	for _, t := range s.times {
		f += s.g.TimedFLOPs(float32(t), lengths)
	}
	return f / float64(len(s.times))
}

// finish fills the totals from one conditional and one unconditional
// forward (used only with guidance).
func (b *Budget) finish(cond, uncond float64, guided bool, steps int) {
	step := cond
	if guided {
		step += uncond
	}
	b.ForwardGFLOPs, b.StepGFLOPs = cond/1e9, step/1e9
	b.TFLOPsPerImage = step * float64(steps) / 1e12
}

func writeTable(w io.Writer, r *Result) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	row := func(k, format string, args ...any) { fmt.Fprintf(tw, "%s\t%s\n", k, fmt.Sprintf(format, args...)) }
	if r.Preset != "" && !strings.EqualFold(r.Preset, r.Model) {
		row("model", "%s (%s)", r.Model, r.Preset)
	} else if r.Preset != "" {
		row("model", "%s (preset)", r.Preset)
	} else {
		row("model", "%s", r.Model)
	}
	switch c := r.Config.(type) {
	case *arch.ZImageConfig:
		row("config", "Z-Image: %d layers, %d noise + %d context refiner layers, dim %d, %s, FFN %d, patch %d, cap_feat_dim %d",
			c.NLayers, c.NRefinerLayers, c.NRefinerLayers, c.Dim, heads(c.NHeads), c.FFNHidden, c.PatchSize, c.CapFeatDim)
		row("resolution", "%d px: %d×%d latent, %d image tokens of %d×%d patches, %d caption tokens (sequences padded to multiples of %d)",
			r.Resolution, r.LatentSize, r.LatentSize, r.Tokens, c.PatchSize, c.PatchSize, r.CaptionTokens, arch.DefaultSeqMultiOf)
	case *arch.DiTConfig:
		row("config", "DiT: depth %d, hidden %d, %s, patch %d", c.Depth, c.HiddenSize, heads(c.NumHeads), c.PatchSize)
		row("resolution", "%d px: %d×%d latent, %d tokens of %d×%d patches", r.Resolution, r.LatentSize, r.LatentSize, r.Tokens, c.PatchSize, c.PatchSize)
	case *DCConfig:
		b := r.Budgets[0]
		row("config", "DC-DiT: %s", dcLine(c))
		row("resolution", "%d px: %d×%d latent, %d tokens at patch 1", r.Resolution, r.LatentSize, r.LatentSize, r.Tokens)
		row("router", "assumed %d boundaries of %d tokens per image (ratio %.4g) before tail dropping", b.NaturalTokens, r.Tokens, r.KeptRatio)
	}
	sampling := fmt.Sprintf("%d steps, no guidance: one forward per step", r.Steps)
	if r.CFG {
		sampling = fmt.Sprintf("%d steps with guidance: two forwards per step (conditional and unconditional)", r.Steps)
		if r.Budgets[0].RhoUncond != nil {
			sampling = fmt.Sprintf("%d steps with Lite-CFG: the unconditional forward at ρ = %g", r.Steps, *r.Budgets[0].RhoUncond)
		}
	}
	row("sampling", "%s", sampling)
	row("convention", "%s", "2 FLOPs per multiply-add, attention H·ΣL²·(4·d_h+3), no elementwise work; per image")
	tw.Flush()
	fmt.Fprintln(w)

	head := "GFLOP PER FORWARD\t"
	for _, b := range r.Budgets {
		if b.Rho != nil {
			head += fmt.Sprintf("ρ=%g\t", *b.Rho)
		} else {
			head += "\t"
		}
	}
	lines := []string{head}
	cells := func(label string, f func(b Budget) string) {
		s := label + "\t"
		for _, b := range r.Budgets {
			s += f(b) + "\t"
		}
		lines = append(lines, s)
	}
	cells("kept tokens", func(b Budget) string { return fmt.Sprint(b.KeptTokens) })
	if r.Budgets[0].RhoUncond != nil {
		cells("kept tokens, unconditional", func(b Budget) string { return fmt.Sprint(b.KeptTokensUncond) })
	}
	for i, p := range r.Budgets[0].Parts {
		cells(p.Name, func(b Budget) string { return gflop(b.Parts[i].GFLOPs) })
	}
	cells("forward", func(b Budget) string { return gflop(b.ForwardGFLOPs) })
	if r.CFG {
		cells("step (both branches)", func(b Budget) string { return gflop(b.StepGFLOPs) })
	}
	cells(fmt.Sprintf("TFLOPs per image, %d steps", r.Steps), func(b Budget) string { return tflop(b.TFLOPsPerImage) })
	var buf strings.Builder
	tw2 := tabwriter.NewWriter(&buf, 0, 4, 2, ' ', tabwriter.AlignRight)
	width := 0
	for _, l := range lines {
		width = max(width, len([]rune(l[:strings.Index(l, "\t")])))
	}
	for _, l := range lines {
		label, rest, _ := strings.Cut(l, "\t")
		fmt.Fprintf(tw2, "%s\t%s\n", padRight(label, width), rest)
	}
	tw2.Flush()
	for _, line := range strings.SplitAfter(buf.String(), "\n") {
		io.WriteString(w, strings.TrimPrefix(line, "  "))
	}
}

// padRight pads s with spaces to width runes, so labels read left-aligned
// in a right-aligned table.
func padRight(s string, width int) string {
	return s + strings.Repeat(" ", max(0, width-len([]rune(s))))
}

// gflop prints a figure with 4 significant digits, small parts included.
func gflop(x float64) string {
	switch {
	case x == 0:
		return "0"
	case math.Abs(x) >= 100:
		return fmt.Sprintf("%.1f", x)
	case math.Abs(x) >= 1:
		return fmt.Sprintf("%.3f", x)
	}
	return fmt.Sprintf("%.4f", x)
}

// tflop prints the per-image total as the paper does (2 decimals), with
// 3 significant digits for tiny models.
func tflop(x float64) string {
	if x >= 1 || x == 0 {
		return fmt.Sprintf("%.2f", x)
	}
	return fmt.Sprintf("%.3g", x)
}

func heads(n int) string {
	if n == 1 {
		return "1 head"
	}
	return fmt.Sprintf("%d heads", n)
}

func dcLine(c *DCConfig) string {
	s := c.Scaffold
	return fmt.Sprintf("%s; enc/dec width %d, %d+%d conv blocks; router %d; N = %g",
		c.main, s.EncDecDim, s.EncoderBlocks, s.DecoderBlocks, s.RouterDim, s.TargetN)
}

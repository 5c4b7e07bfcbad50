package flops

import (
	"fmt"
	"strings"

	"github.com/dcdit/dcdit/family"
	"github.com/dcdit/dcdit/internal/cli/cmdutil"
	"github.com/dcdit/dcdit/loaders/arch"
)

// presetNames lists the registered presets' names, for messages; with an
// architecture, only its fixed-patch ones.
func presetNames(a arch.Architecture) string {
	var names []string
	for _, p := range family.Presets(0) {
		if a == "" || p.Base != nil && p.Base.Architecture == a {
			names = append(names, p.Name)
		}
	}
	return strings.Join(names, ", ")
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

// countBase prices a fixed-patch model at a side×side latent through its
// family.
func countBase(m *model, opts *Options, side int, guided bool) (*Result, error) {
	b := m.base
	if len(opts.Rho) > 0 || opts.RhoUncondGiven || opts.KeptRatio != 0 {
		return nil, &cmdutil.UsageError{Err: fmt.Errorf("flops: %s is a %s: --rho, --rho-uncond and --kept-ratio apply to DC models only", opts.Model, b.What)}
	}
	if side%b.Patch != 0 {
		return nil, &cmdutil.UsageError{Err: fmt.Errorf("flops: --resolution %d: the %d×%d latent does not divide into %d×%d patches (want a multiple of %d px)",
			side*vaeFactor, side, side, b.Patch, b.Patch, b.Patch*vaeFactor)}
	}
	steps := opts.Steps
	if opts.stepsDefault && b.Steps > 0 {
		steps = b.Steps
	}
	capLen := 0
	if b.CaptionLen > 0 {
		capLen = opts.CaptionLen
		if capLen == 0 {
			capLen = b.CaptionLen
		}
	}
	f, err := m.coster.BaseFLOPs(b.Config, side, side, capLen)
	if err != nil {
		return nil, fmt.Errorf("flops: %s: %w", opts.Model, err)
	}
	res := &Result{Model: opts.Model, Preset: m.preset, Architecture: string(b.Architecture), Config: f.Config,
		Resolution: side * vaeFactor, LatentSize: side, Tokens: f.Tokens, CaptionTokens: capLen,
		Steps: steps, CFG: guided, Convention: Convention, Warnings: append([]string{}, m.warnings...)}
	bud := Budget{KeptTokens: f.Tokens}
	for _, p := range f.Parts {
		bud.Parts = append(bud.Parts, Part{p.Name, p.FLOPs / 1e9})
	}
	bud.finish(f.Forward, f.Forward, guided, steps)
	res.Budgets = []Budget{bud}
	res.ForwardGFLOPs, res.TFLOPsPerImage = bud.ForwardGFLOPs, bud.TFLOPsPerImage
	return res, nil
}

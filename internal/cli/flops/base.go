package flops

import (
	"fmt"
	"strings"

	"github.com/dcdit/dcdit/internal/cli/cmdutil"
	"github.com/dcdit/dcdit/loaders/arch"
	"github.com/dcdit/dcdit/zimage"
)

// zimageResolution is Z-Image-Turbo's default image side in pixels (a
// 128×128 latent).
const zimageResolution = 1024

// zimagePreset is a released Z-Image transformer with its pipeline's
// sampling steps.
type zimagePreset struct {
	name  string
	steps int
}

// zimagePresets: both releases share the transformer's architecture
// (reference-formats §3.1); they differ in how they are sampled: Turbo in
// 8 steps without guidance, the base model in the diffusers pipeline's
// default 50 steps with guidance.
var zimagePresets = []zimagePreset{
	{name: "Z-Image-Turbo", steps: zimage.TurboSteps},
	{name: "Z-Image", steps: 50},
}

func zimagePresetNames() string {
	names := make([]string, len(zimagePresets))
	for i, p := range zimagePresets {
		names[i] = p.name
	}
	return strings.Join(names, ", ")
}

// countZImage prices a Z-Image transformer at a side×side latent.
func countZImage(m *model, opts *Options, side int, guided bool) (*Result, error) {
	if len(opts.Rho) > 0 || opts.RhoUncondGiven || opts.KeptRatio != 0 {
		return nil, &cmdutil.UsageError{Err: fmt.Errorf("flops: %s is a Z-Image transformer: --rho, --rho-uncond and --kept-ratio apply to DC models only", opts.Model)}
	}
	c := m.zimage
	if side%c.PatchSize != 0 {
		return nil, &cmdutil.UsageError{Err: fmt.Errorf("flops: --resolution %d: the %d×%d latent does not divide into %d×%d patches (want a multiple of %d px)",
			side*vaeFactor, side, side, c.PatchSize, c.PatchSize, c.PatchSize*vaeFactor)}
	}
	steps := opts.Steps
	if opts.stepsDefault && m.steps > 0 {
		steps = m.steps
	}
	capLen := opts.CaptionLen
	if capLen == 0 {
		capLen = zimage.TypicalCaptionLen
	}
	tokens := (side / c.PatchSize) * (side / c.PatchSize)
	f := zimage.ForwardFLOPs(c, tokens, capLen)
	res := &Result{Model: opts.Model, Preset: m.preset, Architecture: string(arch.ZImage), Config: c,
		Resolution: side * vaeFactor, LatentSize: side, Tokens: tokens, CaptionTokens: capLen,
		Steps: steps, CFG: guided, Convention: Convention, Warnings: append([]string{}, m.warnings...)}
	b := Budget{KeptTokens: tokens, Parts: []Part{
		{"embed", f.Embed / 1e9}, {"refiners", f.Refiners / 1e9}, {"layers", f.Layers / 1e9},
		{"attention", f.Attention / 1e9}, {"final", f.Final / 1e9},
	}}
	fwd := f.Total()
	b.finish(fwd, fwd, guided, steps)
	res.Budgets = []Budget{b}
	res.ForwardGFLOPs, res.TFLOPsPerImage = b.ForwardGFLOPs, b.TFLOPsPerImage
	return res, nil
}

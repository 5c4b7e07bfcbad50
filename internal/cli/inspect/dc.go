package inspect

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/dcdit/dcdit/dc/checkpoint"
	"github.com/dcdit/dcdit/dc/dcfile"
	"github.com/dcdit/dcdit/family"
	"github.com/dcdit/dcdit/loaders"
	"github.com/dcdit/dcdit/loaders/arch"
)

// describeDC completes the report of a DC model file from its headers:
// the config (a DC checkpoint's metadata; the sizes an official state
// dict's shapes give), key accounting against what that config expects,
// and FLOPs per ρ, which an official state dict without its config
// prices only with --num-heads.
func describeDC(res *Result, ck *loaders.Checkpoint, numHeads int) {
	h, err := dcfile.ReadHeader(ck, dcfile.Options{Heads: numHeads})
	if err != nil {
		res.Warnings = append(res.Warnings, err.Error())
		return
	}
	m := h.Meta
	if numHeads > 0 && h.Format == dcfile.DC {
		res.Warnings = append(res.Warnings, "--num-heads is ignored: DC checkpoints store their head count")
	}
	res.Warnings = append(res.Warnings, m.Warnings...)
	res.Config = h.Report
	if h.HeadsUnknown {
		res.Warnings = append(res.Warnings, "heads unknown: a reference DC-DiT state_dict does not store the head count; pass --num-heads for FLOPs per ρ")
	} else {
		// The steps it records sampling with; else its backbone family's
		// (a DC-Z-Image samples as Z-Image-Turbo does, a DC-DiT as DiT).
		steps := flopsSteps
		if m.Sampling != nil {
			steps = m.Sampling.Steps
		} else if f, err := family.Lookup(m.Backbone.Kind); err == nil {
			if c, ok := f.(family.Costed); ok {
				steps = c.Steps()
			}
		}
		res.FLOPsPerRho = m.FLOPsPerRho(steps)
		res.FLOPsAssumption = fmt.Sprintf("per image, one forward; the router keeps 1/target_n = 1/%g of the %d tokens before tail dropping (assumed); tflops_per_image over %d steps without guidance",
			m.Scaffold.TargetN, m.Scaffold.Cells(), steps)
		if family.SpecGated(m.Backbone.Spec) {
			res.FLOPsAssumption += "; the main network's width gates (DyDiT) all on, which the header alone cannot tell apart ('dcdit flops' counts each step's)"
		}
	}
	accountDC(res, ck.Shapes(), h.Expected)
}

// accountDC reports missing, unexpected and mis-shaped tensors.
func accountDC(res *Result, found, expected map[string][]int) {
	for name, want := range expected {
		got, ok := found[name]
		switch {
		case !ok:
			res.Missing = append(res.Missing, name)
		case !slices.Equal(got, want):
			res.Mismatched = append(res.Mismatched, arch.Mismatch{Name: name, Expected: int64s(want), Found: int64s(got)})
		}
	}
	for name := range found {
		if _, ok := expected[name]; !ok {
			res.Unexpected = append(res.Unexpected, name)
		}
	}
	sort.Strings(res.Missing)
	sort.Strings(res.Unexpected)
	sort.Slice(res.Mismatched, func(i, j int) bool { return res.Mismatched[i].Name < res.Mismatched[j].Name })
	if n := len(res.Missing); n > 0 {
		res.Warnings = append(res.Warnings, fmt.Sprintf("%d expected tensors are missing: %s", n, abbreviate(res.Missing)))
	}
	if n := len(res.Unexpected); n > 0 {
		res.Warnings = append(res.Warnings, fmt.Sprintf("%d unexpected tensors: %s", n, abbreviate(res.Unexpected)))
	}
	for _, m := range res.Mismatched {
		res.Warnings = append(res.Warnings, fmt.Sprintf("tensor %s has shape %v, expected %v", m.Name, m.Found, m.Expected))
	}
}

func int64s(v []int) []int64 {
	out := make([]int64, len(v))
	for i, x := range v {
		out[i] = int64(x)
	}
	return out
}

func abbreviate(names []string) string { return arch.JoinCapped(names, ", ", 8) }

// writeDCConfig prints a DC config's rows: scaffold, backbone, trained ρ,
// sampling settings, base, recipe.
func writeDCConfig(row func(k, format string, args ...any), cfg any) bool {
	switch c := cfg.(type) {
	case *checkpoint.Meta:
		row("scaffold", "%s", configLine(c.Scaffold))
		row("backbone", "%s: %s", c.Backbone.Kind, configLine(c.Backbone.Config()))
		if len(c.TrainedRhos) > 0 {
			row("trained ρ", "%s", joinFloats(c.TrainedRhos))
		} else {
			row("trained ρ", "not recorded")
		}
		if c.Sampling != nil {
			row("sampling", "%s (what sample and eval use unless told)", c.Sampling)
		} else {
			row("sampling", "not recorded (sample and eval use their defaults)")
		}
		if b := c.Base; b != nil {
			var id []string
			if b.Architecture != "" {
				id = append(id, fmt.Sprintf("%s, %s naming", b.Architecture, b.Layout))
			}
			if b.SHA256 != "" {
				id = append(id, "sha256 "+b.SHA256)
			} else if b.Size > 0 {
				id = append(id, fmt.Sprintf("%s, modified %s", humanBytes(b.Size), b.ModTime))
			}
			if len(id) > 0 {
				row("base", "%s (%s)", b.Path, strings.Join(id, "; "))
			} else {
				row("base", "%s", b.Path)
			}
		}
		if c.Recipe != "" {
			row("recipe", "%d lines (in --json)", strings.Count(strings.TrimRight(c.Recipe, "\n"), "\n")+1)
		}
		return true
	case map[string]any:
		sc, ok1 := c["scaffold"]
		bb, ok2 := c["backbone"].(map[string]any)
		if !ok1 || !ok2 {
			return false
		}
		row("scaffold", "%s", configLine(sc))
		row("backbone", "%v: %s", bb["kind"], configLine(bb["config"]))
		return true
	}
	return false
}

// writeFLOPsPerRho prints the FLOPs per ρ table rows.
func writeFLOPsPerRho(row func(k, format string, args ...any), r *Result) {
	if len(r.FLOPsPerRho) == 0 {
		return
	}
	row("flops per ρ", "%s", r.FLOPsAssumption)
	for _, f := range r.FLOPsPerRho {
		row(fmt.Sprintf("  ρ %g", f.Rho), "%d tokens kept, %s per forward, %s per image", f.KeptTokens, siFLOP(f.GFLOPs*1e9), siFLOP(f.TFLOPsPerImage*1e12))
	}
}

func joinFloats(v []float64) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = fmt.Sprint(x)
	}
	return strings.Join(s, ", ")
}

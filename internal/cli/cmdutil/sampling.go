package cmdutil

import (
	"fmt"
	"math"
	"strings"

	"github.com/dcdit/dcdit/dc"
	"github.com/dcdit/dcdit/dc/checkpoint"
)

// Source is where a sampling setting's value came from.
type Source string

// The sources of a setting, in the order they win.
const (
	FromFlag       Source = "flag"
	FromCheckpoint Source = "checkpoint"
	FromDefault    Source = "default"
)

// Setting is one setting as a command resolved it: the flag that sets it,
// its value as printed, and where the value came from.
type Setting struct {
	Flag  string
	Value string
	From  Source
}

// Pick is the value of a setting: the flag's when given, else the
// checkpoint's when it records one, else def. It appends what it chose to
// used.
func Pick[T any](used *[]Setting, flag string, given bool, value T, recorded bool, rec, def T) T {
	v, from := def, FromDefault
	switch {
	case given:
		v, from = value, FromFlag
	case recorded:
		v, from = rec, FromCheckpoint
	}
	*used = append(*used, Setting{Flag: flag, Value: fmt.Sprint(v), From: from})
	return v
}

// PickCoarse resolves --coarse-from and --coarse-rho (the values from and
// rho, each given or not) as Pick resolves a setting, from the record r
// when has: they join used only when a flag gives one or r has coarse
// steps. A --coarse-rho with no step coarse is a usage error; a recorded
// ρ whose steps --coarse-from 0 turns off is dropped.
func PickCoarse(used *[]Setting, from, rho *float64, fromGiven, rhoGiven, has bool, r checkpoint.Sampling) error {
	if has && r.CoarseFrom > 0 || fromGiven || rhoGiven {
		*from = Pick(used, "--coarse-from", fromGiven, *from, has, r.CoarseFrom, 0)
		*rho = Pick(used, "--coarse-rho", rhoGiven, *rho, has, r.CoarseRho, 0)
	}
	switch {
	case *from == 0 && *rho != 0 && rhoGiven:
		return &UsageError{Err: fmt.Errorf("--coarse-rho %g: no step is coarse (give --coarse-from)", *rho)}
	case *from == 0:
		*rho = 0
	}
	return nil
}

// SettingsLine is the one line a command prints about the settings it
// used: "sampling with --steps 25 (checkpoint), --cfg 4 (flag), …".
func SettingsLine(what string, used []Setting) string {
	parts := make([]string, len(used))
	for i, s := range used {
		parts[i] = fmt.Sprintf("%s %s (%s)", s.Flag, s.Value, s.From)
	}
	return what + " with " + strings.Join(parts, ", ")
}

// SamplingRecord is the sampling record of the checkpoint at path for a
// model that samples with process (checkpoint.ProcessDDPM or
// ProcessFlowMatching): nil when it records none, an error when it
// records another process, whose settings would mean something else.
func SamplingRecord(path string, meta *checkpoint.Meta, process string) (*checkpoint.Sampling, error) {
	rec := meta.Sampling
	if rec != nil && rec.Process != process {
		return nil, fmt.Errorf("%s: __metadata__ %q records sampling settings for process %s, but its %s backbone samples with %s", path, checkpoint.ConfigKey, rec.Process, meta.Backbone.Kind, process)
	}
	return rec, nil
}

// RhoWarning is the warning for the tail-drop fractions among rhos that
// the checkpoint at path was not trained for (compared in float32, as the
// model computes), or "" when it was trained for all of them or does not
// record its trained set.
func RhoWarning(path string, rhos, trained []float64) string {
	if len(trained) == 0 {
		return ""
	}
	var untrained []string
	seen := map[float32]bool{}
	for _, r := range rhos {
		if seen[float32(r)] {
			continue
		}
		seen[float32(r)] = true
		known := false
		for _, t := range trained {
			known = known || float32(t) == float32(r)
		}
		if !known {
			untrained = append(untrained, fmt.Sprint(r))
		}
	}
	if len(untrained) == 0 {
		return ""
	}
	list := make([]string, len(trained))
	for i, t := range trained {
		list[i] = fmt.Sprint(t)
	}
	return fmt.Sprintf("ρ %s: %s was trained for ρ %s only; other fractions run, untested", strings.Join(untrained, ", "), path, strings.Join(list, ", "))
}

// DropRules are the values of --drop: how elastic inference drops
// boundaries at ρ > 0 (dc.TailDrop, dc.SpreadDrop).
const DropRules = "lowest|spread"

// DropUsage is --drop's help, shared by the commands that sample a DC
// model.
const DropUsage = "how ρ drops boundaries: " + DropRules + " (lowest: the reference's lowest-probability ones; spread: as many, kept apart on the grid; default: the checkpoint's rule)"

// LookbackUsage is --lookback's help, shared by the commands that sample
// a DC model.
const LookbackUsage = "from the second sampling step, keep as many cells as the router, chosen on the previous step's clean estimate: where it changes most, kept apart as the spread drop keeps them (a budget's cells: at ρ 0 the router's own)"

// LookbackSpacingUsage is --lookback-spacing's help, shared by the
// commands that sample a DC model.
const LookbackSpacingUsage = "with --lookback, cover the estimate instead: each token serves the cells near it whose values it shares, one cell² of distance costing as much as this many squared latent units of value (dc.CoverKeep; 0: where it changes most, kept apart)"

// LookbackSpacingProblem is what is wrong with --lookback-spacing at
// spacing beside --lookback (given: lookback), or "".
func LookbackSpacingProblem(lookback bool, spacing float64) string {
	switch {
	case !(spacing >= 0) || math.IsInf(spacing, 1):
		return fmt.Sprintf("--lookback-spacing %v: want a finite spacing ≥ 0 (0: where the estimate changes most, kept apart)", spacing)
	case spacing > 0 && !lookback:
		return fmt.Sprintf("--lookback-spacing %v chooses lookback's cells: add --lookback", spacing)
	}
	return ""
}

// DenseTeacherUsage is --dense-teacher's help, shared by the commands that
// sample a DC model.
const DenseTeacherUsage = "run the steps that keep every cell (below --dense-below) through the backbone and the wide head alone: the teacher's own pass when the encoder is the grafted patch embedding and the blocks and wide head are frozen (needs scaffold.head = \"wide\")"

// SetDrop applies --drop to a DC model's config: "" keeps the rule the
// file records, "lowest" is the reference tail drop, "spread" SpreadDrop.
// Another value is a UsageError.
func SetDrop(cfg *dc.Config, rule string) error {
	switch rule {
	case "":
	case "lowest":
		cfg.SpreadDrop = false
	case "spread":
		cfg.SpreadDrop = true
	default:
		return &UsageError{Err: fmt.Errorf("--drop %q: want one of %s", rule, DropRules)}
	}
	return nil
}

package checkpoint

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/dcdit/dcdit/family"
)

// The diffusion processes a Sampling record names, as recipes name them
// (diffusion.process).
const (
	// ProcessDDPM is DiT's Gaussian diffusion (diffusion/ddpm): the model
	// predicts ε and a learned σ.
	ProcessDDPM = family.ProcessDDPM
	// ProcessFlowMatching is Z-Image's rectified flow (diffusion/flowmatch):
	// the model predicts a velocity.
	ProcessFlowMatching = family.ProcessFlowMatching
)

// Bounds on a Sampling record, whose values a sampler loops over or
// multiplies by: a file is untrusted input.
const (
	// MaxDiffusionSteps bounds sampling_steps and dense_below (a
	// timestep): no diffusion in use is longer than 1000 steps.
	MaxDiffusionSteps = 1 << 16
	// MaxGuidance bounds cfg and shift.
	MaxGuidance = 1e6
)

// Sampling is how a model samples as it was evaluated: the settings
// `dcdit sample` and `dcdit eval` take for every flag not given. JSON
// {"process", "dense_below", "cfg", "sampling_steps"}, for flow
// matching "shift", and with coarse steps "coarse_from" and
// "coarse_rho"; those keys are required and no other is allowed.
type Sampling struct {
	// Process is the diffusion process the model was trained with:
	// ProcessDDPM or ProcessFlowMatching.
	Process string
	// DenseBelow runs the sampling steps at timesteps below it (DDPM's t,
	// flow matching's σ·T) on every cell, whatever ρ (dc.FracAt): a
	// dropped cell cannot know its clean value at low noise. 0: never
	// (the recipe's eval.dense_below; `--dense-below`).
	DenseBelow float64
	// CoarseFrom makes the sampling steps at timesteps at or above it
	// drop at least CoarseRho of their boundaries in a run with a budget
	// (ρ > 0; dc.Schedule; the recipe's eval.coarse_from and eval.coarse_rho;
	// `--coarse-from`, `--coarse-rho`). 0: never, and CoarseRho 0.
	CoarseFrom, CoarseRho float64
	// CFG is the guidance scale (the recipe's eval.cfg; `--cfg`, with the
	// flag's meaning for the process: DDPM guides for a scale above 1).
	CFG float64
	// Steps is the number of sampling steps (eval.sampling_steps;
	// `--steps`).
	Steps int
	// Shift is flow matching's timestep shift σ' = sσ/(1+(s−1)σ)
	// (diffusion.shift; `--shift`); 0 for DDPM, which has none.
	Shift float64
}

// samplingJSON is Sampling as stored; pointers tell an absent key from a
// zero.
type samplingJSON struct {
	Process    *string  `json:"process"`
	DenseBelow *float64 `json:"dense_below"`
	CFG        *float64 `json:"cfg"`
	Steps      *int     `json:"sampling_steps"`
	Shift      *float64 `json:"shift,omitempty"`
	CoarseFrom *float64 `json:"coarse_from,omitempty"`
	CoarseRho  *float64 `json:"coarse_rho,omitempty"`
}

// MarshalJSON writes the record, with "shift" for flow matching only.
func (s Sampling) MarshalJSON() ([]byte, error) {
	if err := s.Validate(); err != nil {
		return nil, fmt.Errorf("checkpoint: sampling: %w", err)
	}
	j := samplingJSON{Process: &s.Process, DenseBelow: &s.DenseBelow, CFG: &s.CFG, Steps: &s.Steps}
	if s.Process == ProcessFlowMatching {
		j.Shift = &s.Shift
	}
	if s.CoarseFrom > 0 {
		j.CoarseFrom, j.CoarseRho = &s.CoarseFrom, &s.CoarseRho
	}
	return json.Marshal(j)
}

// UnmarshalJSON reads the record strictly: unknown and missing keys are
// errors, and so is a value Validate refuses.
func (s *Sampling) UnmarshalJSON(data []byte) error {
	var j samplingJSON
	if err := family.DecodeStrict(data, &j); err != nil {
		return fmt.Errorf("sampling: %w", err)
	}
	for _, f := range []struct {
		key     string
		present bool
	}{{"process", j.Process != nil}, {"dense_below", j.DenseBelow != nil}, {"cfg", j.CFG != nil}, {"sampling_steps", j.Steps != nil}} {
		if !f.present {
			return fmt.Errorf("sampling: %s missing", f.key)
		}
	}
	ns := Sampling{Process: *j.Process, DenseBelow: *j.DenseBelow, CFG: *j.CFG, Steps: *j.Steps}
	switch {
	case ns.Process == ProcessFlowMatching && j.Shift == nil:
		return fmt.Errorf("sampling: shift missing (process %s)", ProcessFlowMatching)
	case ns.Process != ProcessFlowMatching && j.Shift != nil:
		return fmt.Errorf("sampling: shift %v with process %.40q, want it with %s only", *j.Shift, ns.Process, ProcessFlowMatching)
	case j.Shift != nil:
		ns.Shift = *j.Shift
	}
	switch {
	case (j.CoarseFrom == nil) != (j.CoarseRho == nil):
		return errors.New("sampling: coarse_from and coarse_rho go together, and one of them is missing")
	case j.CoarseFrom != nil:
		ns.CoarseFrom, ns.CoarseRho = *j.CoarseFrom, *j.CoarseRho
		if ns.CoarseFrom == 0 {
			return errors.New("sampling: coarse_from 0, want a timestep > 0 (leave both coarse keys out for none)")
		}
	}
	if err := ns.Validate(); err != nil {
		return fmt.Errorf("sampling: %w", err)
	}
	*s = ns
	return nil
}

// Validate checks that every value is usable by a sampler and bounded.
func (s *Sampling) Validate() error {
	switch s.Process {
	case ProcessDDPM:
		if s.Shift != 0 {
			return fmt.Errorf("shift %v with process %s, which has none", s.Shift, ProcessDDPM)
		}
	case ProcessFlowMatching:
		if !(s.Shift > 0 && s.Shift <= MaxGuidance) {
			return fmt.Errorf("shift %v, want 0 < shift ≤ %g", s.Shift, MaxGuidance)
		}
	case "":
		return errors.New("process missing")
	default:
		return fmt.Errorf("process %.40q, want %s or %s", s.Process, ProcessDDPM, ProcessFlowMatching)
	}
	switch {
	case !(s.DenseBelow >= 0 && s.DenseBelow <= MaxDiffusionSteps):
		return fmt.Errorf("dense_below %v, want a timestep in 0 … %d (0: never)", s.DenseBelow, MaxDiffusionSteps)
	case !(s.CFG >= 0 && s.CFG <= MaxGuidance):
		return fmt.Errorf("cfg %v, want a guidance scale in 0 … %g", s.CFG, MaxGuidance)
	case s.Steps < 1 || s.Steps > MaxDiffusionSteps:
		return fmt.Errorf("sampling_steps %d, want 1 … %d", s.Steps, MaxDiffusionSteps)
	case !(s.CoarseFrom >= 0 && s.CoarseFrom <= MaxDiffusionSteps):
		return fmt.Errorf("coarse_from %v, want a timestep in 0 … %d (0: never)", s.CoarseFrom, MaxDiffusionSteps)
	case !(s.CoarseRho >= 0 && s.CoarseRho < 1):
		return fmt.Errorf("coarse_rho %v, want a tail-drop fraction in [0, 1)", s.CoarseRho)
	case s.CoarseFrom == 0 && s.CoarseRho != 0:
		return fmt.Errorf("coarse_rho %v without coarse_from", s.CoarseRho)
	}
	return nil
}

// String is the record in one line: "ddpm, 25 steps, cfg 4, dense below
// t = 600".
func (s *Sampling) String() string {
	out := fmt.Sprintf("%s, %d steps, cfg %g", s.Process, s.Steps, s.CFG)
	if s.Process == ProcessFlowMatching {
		out += fmt.Sprintf(", shift %g", s.Shift)
	}
	if s.DenseBelow > 0 {
		out += fmt.Sprintf(", dense below t = %g", s.DenseBelow)
	} else {
		out += ", never dense"
	}
	if s.CoarseFrom > 0 {
		out += fmt.Sprintf(", budgets at ρ ≥ %g from t = %g", s.CoarseRho, s.CoarseFrom)
	}
	return out
}

package tinydit

import (
	"encoding/json"
	"errors"

	"github.com/dcdit/dcdit/dc"
	"github.com/dcdit/dcdit/family"
	"github.com/dcdit/dcdit/loaders"
)

// Kind names the family in DC checkpoints ("backbone.kind").
const Kind = "tinydit"

// Importing the package registers the family: from then on DC checkpoints
// of kind "tinydit" save, load, inspect, cost and sample like the
// built-in kinds.
func init() { family.Register(Family{}) }

var _ family.TeacherOpener = Family{}

// Family is TinyDiT's model family (kind "tinydit"); it opens the
// teacher files Teacher.Save writes (a family.TeacherOpener).
type Family struct{}

// Kind returns Kind.
func (Family) Kind() string { return Kind }

// Describe names the family for listings (dcdit families).
func (Family) Describe() string {
	return "TinyDiT (examples/tinydit): class-conditional, RMSNorm blocks with FiLM modulation, learned linear positions, DDPM"
}

// DecodeSpec reads {"config": Config} strictly: unknown fields, trailing
// data and a missing config are errors. Spec.Validate checks the values.
func (Family) DecodeSpec(data []byte) (family.Spec, error) {
	var s Spec
	if err := family.DecodeStrict(data, &s); err != nil {
		return nil, err
	}
	if s.Config == nil {
		return nil, errors.New("kind tinydit has no config")
	}
	return s, nil
}

// Spec is a TinyDiT backbone's description in a DC checkpoint: its
// config. Its tensors are Config.Shapes' names under dc.BackbonePrefix.
type Spec struct {
	Config *Config `json:"config"`
}

// MarshalJSON writes {"config": ...}.
func (s Spec) MarshalJSON() ([]byte, error) {
	if s.Config == nil {
		return nil, errors.New("tinydit backbone without a config")
	}
	return json.Marshal(struct {
		Config *Config `json:"config"`
	}{s.Config})
}

// Kind returns Kind.
func (Spec) Kind() string { return Kind }

// Settings returns the *Config.
func (s Spec) Settings() any { return s.Config }

// Validate checks the config and bounds every size it states
// (Config.Validate).
func (s Spec) Validate() error { return s.Config.Validate() }

// Width is D.
func (s Spec) Width() int { return s.Config.Width }

// CondWidth is D (t_embed + y_embed).
func (s Spec) CondWidth() int { return s.Config.Width }

// Process is DDPM: the teacher is trained with DDPM's hybrid loss.
func (Spec) Process() string { return family.ProcessDDPM }

// Conditioning is class labels: DC checkpoints of this kind sample with
// DDPM and --class.
func (s Spec) Conditioning() family.Conditioning {
	return family.Conditioning{Classes: s.Config.NumClasses}
}

// Blocks is the depth's numbered blocks, checked against the file before
// Shapes lists a tensor per block.
func (s Spec) Blocks() []family.Blocks {
	return []family.Blocks{{What: "tinydit depth", Prefix: dc.BackbonePrefix + "blocks.", Count: s.Config.Depth}}
}

// Shapes lists the backbone's tensors under dc.BackbonePrefix.
func (s Spec) Shapes() map[string][]int { return s.Config.Shapes(dc.BackbonePrefix) }

// ParamGroups returns the groups of a tensor Shapes lists, as the
// backbone Build makes answers them; nil for another name.
func (s Spec) ParamGroups(name string) []string {
	if _, ok := s.Shapes()[name]; !ok {
		return nil
	}
	return (&Backbone{Config: s.Config, prefix: dc.BackbonePrefix}).ParamGroups(name)
}

// Build makes the backbone from its stored tensors.
func (s Spec) Build(ts map[string]loaders.Dense) (family.Backbone, error) {
	return New(s.Config, ts, dc.BackbonePrefix)
}

// FLOPs counts what Backbone.FLOPs counts, from the config.
func (s Spec) FLOPs(lengths []int) float64 { return s.Config.FLOPs(lengths) }

// Opens reports whether a file is a tinydit teacher: its metadata's
// FamilyKey names the kind.
func (Family) Opens(c family.Candidate) bool { return c.Metadata[FamilyKey] == Kind }

// OpenTeacher loads a teacher Save wrote, frozen. opts is not read: the
// file states the head count, holds F32 tensors only, and the teacher's
// cost needs nothing from the student.
func (Family) OpenTeacher(path string, _ family.OpenOptions) (family.Teacher, []string, error) {
	t, err := LoadTeacher(path)
	if err != nil {
		return nil, nil, err
	}
	t.Parameters().SetRequiresGrad(false)
	return t, nil, nil
}

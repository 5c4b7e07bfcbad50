package tinydit

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/dcdit/dcdit/family"
	"github.com/dcdit/dcdit/loaders/arch"
	"github.com/dcdit/dcdit/params"
)

// What a recipe needs of the family to check and plan an upcycling of a
// TinyDiT teacher file from its headers (dcdit recipe check, dcdit recipe
// plan): its description from the file's metadata, its price, the backbone
// a graft makes of it, and its tensors.
var (
	_ family.TeacherDescriber = Family{}
	_ family.BaseCosted       = Family{}
	_ family.GraftSpecer      = Family{}
	_ family.Planned          = Family{}
)

// samplingSteps is the DDPM steps a TinyDiT samples with unless told.
const samplingSteps = 250

// DescribeTeacher reads a teacher file's config from its metadata
// (ConfigKey), strictly, and validates it; false for a file without a
// valid one.
func (Family) DescribeTeacher(c family.Candidate) (family.Base, bool) {
	var tc TeacherConfig
	if err := family.DecodeStrict([]byte(c.Metadata[ConfigKey]), &tc); err != nil || tc.Validate() != nil {
		return family.Base{}, false
	}
	return teacherBase(&tc), true
}

func teacherBase(c *TeacherConfig) family.Base {
	return family.Base{Config: c, Architecture: arch.Architecture(Kind), What: "TinyDiT teacher",
		Patch: c.PatchSize, Grid: c.Backbone.GridSize, Steps: samplingSteps}
}

// Presets is empty: TinyDiT has no named sizes.
func (Family) Presets(int) []family.Preset { return nil }

// Steps is DDPM's 250 steps.
func (Family) Steps() int { return samplingSteps }

// Base is false: detection does not read TinyDiT files (DescribeTeacher
// does, from their metadata).
func (Family) Base(*arch.Report) (family.Base, bool) { return family.Base{}, false }

// teacherConfig is cfg as a *TeacherConfig.
func teacherConfig(cfg any) (*TeacherConfig, error) {
	c, ok := cfg.(*TeacherConfig)
	if !ok || c == nil {
		return nil, fmt.Errorf("tinydit: a %T is not a TinyDiT teacher config", cfg)
	}
	return c, nil
}

// onGrid checks that rows×cols is the teacher's own grid.
func onGrid(c *TeacherConfig, rows, cols int) error {
	if G := c.Backbone.GridSize; rows != G || cols != G {
		return fmt.Errorf("tinydit: a %d×%d grid; the teacher's positions are trained on %d×%d", rows, cols, G, G)
	}
	return nil
}

// BaseFLOPs is Teacher.ForwardFLOPs of a teacher of config cfg
// (*TeacherConfig) on its own grid.
func (Family) BaseFLOPs(cfg any, rows, cols, _ int) (family.Cost, error) {
	c, err := teacherConfig(cfg)
	if err == nil {
		err = onGrid(c, rows, cols)
	}
	if err != nil {
		return family.Cost{}, err
	}
	t := &Teacher{Config: c}
	return family.Cost{Config: c, Tokens: t.Tokens(rows, cols), Forward: t.ForwardFLOPs(rows, cols),
		Convention: "2 per multiply-add, plus attention H·L²·(4·d_h+3); per image"}, nil
}

// GraftSpec is the Spec of the backbone Teacher.GraftBackbone makes of a
// teacher of config cfg (*TeacherConfig) on its own grid.
func (Family) GraftSpec(cfg any, rows, cols, _ int) (family.Spec, error) {
	c, err := teacherConfig(cfg)
	if err == nil && (rows != 0 || cols != 0) {
		err = onGrid(c, rows, cols)
	}
	if err != nil {
		return nil, err
	}
	b := c.Backbone
	return Spec{Config: &b}, nil
}

// PlanModel describes a teacher of config cfg (*TeacherConfig) for a
// recipe's plan, on its own grid: its tensors under their names in the
// file (less TensorPrefix). Its activations are left to the planner's
// generic estimate.
func (f Family) PlanModel(cfg any, rows, cols, _ int) (family.ModelPlan, error) {
	c, err := teacherConfig(cfg)
	if err == nil {
		err = errors.Join(c.Validate(), onGrid(c, rows, cols))
	}
	if err != nil {
		return family.ModelPlan{}, err
	}
	b := &Backbone{Config: &c.Backbone}
	shapes := c.Shapes()
	names := slices.Sorted(maps.Keys(shapes))
	tensors := make([]family.PlanTensor, len(names))
	for i, n := range names {
		groups := b.ParamGroups(n)
		switch {
		case strings.HasPrefix(n, "x_embedder."):
			groups = []string{params.GroupEmbedders, params.GroupLatentEmbedder}
		case strings.HasPrefix(n, "final_layer."):
			groups = []string{params.GroupFinalLayer}
		}
		tensors[i] = family.PlanTensor{Name: n, Shape: shapes[n], Groups: groups}
	}
	bc := c.Backbone
	t := &Teacher{Config: c}
	return family.ModelPlan{Config: c, Name: fmt.Sprintf("TinyDiT/%d", c.PatchSize),
		Sizes: fmt.Sprintf("depth %d, width %d, %d heads, %d×%d latents", bc.Depth, bc.Width, bc.Heads, bc.GridSize, bc.GridSize),
		Details: fmt.Sprintf("depth %d, width %d, %d heads, patch %d, %d channels, %d×%d latents, learned σ, %d classes, MLP %d",
			bc.Depth, bc.Width, bc.Heads, c.PatchSize, c.InChannels, bc.GridSize, bc.GridSize, bc.NumClasses, bc.MLPHidden),
		InChannels: c.InChannels, OutChannels: c.OutChannels(), Tokens: t.Tokens(rows, cols), Classes: bc.NumClasses,
		Process: family.ProcessDDPM, Tensors: tensors}, nil
}

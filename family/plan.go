package family

import (
	"fmt"

	"github.com/dcdit/dcdit/loaders"
	"github.com/dcdit/dcdit/loaders/arch"
)

// A recipe is checked and planned (dcdit recipe check, dcdit recipe plan)
// from the headers of the files it names, never their tensors: these are
// what the planner asks of a family on top of BaseCosted, which prices its
// fixed-patch models.

// Planned is implemented by a family whose fixed-patch models a recipe
// plans: a base its TeacherOpener opens, or a [model] its Configurer
// sizes. A family without it is refused by the planner, not by the run.
type Planned interface {
	// PlanModel describes the fixed-patch model of config cfg (a Base's
	// Config, or ModelConfig's) on a rows×cols latent grid, its caption
	// features counted for captionLen tokens (ignored by a family
	// without captions). It validates what a plan reads of cfg.
	PlanModel(cfg any, rows, cols, captionLen int) (ModelPlan, error)
}

// ModelPlan is a fixed-patch model as a recipe's plan counts and prints
// it.
type ModelPlan struct {
	// Config is the config the plan prints (the family's, as given or
	// with what the family names in it, such as a preset), under the JSON
	// key ConfigKey ("" for "config").
	Config    any
	ConfigKey string
	// Name names the model ("DiT-XL/2"); Sizes states its sizes in a few
	// words, for one-line summaries; Details states every size, for the
	// plan's table.
	Name, Sizes, Details string
	// InChannels and OutChannels are the latent channels it reads and
	// predicts; Tokens is its patch tokens on the grid planned.
	InChannels, OutChannels int
	Tokens                  int
	// Classes is its class labels (0: a caption-conditioned model);
	// CaptionPad the multiple its caption sequences are padded to.
	Classes, CaptionPad int
	// Process is the diffusion process it trains with (ProcessDDPM,
	// ProcessFlowMatching).
	Process string
	// Tensors are every tensor its file stores, under the names the plan
	// reports (its family's reference naming), in a stable order.
	Tensors []PlanTensor
	// Activations is the float32 values one sample keeps for the backward
	// pass when it trains; 0 leaves the estimate to the planner's generic
	// one (GenericActivations over its backbone).
	Activations int64
}

// PlanTensor is one tensor of a planned fixed-patch model.
type PlanTensor struct {
	Name   string
	Shape  []int
	Groups []string // its recipe groups (params.Group*)
	// Fixed marks a table the model recomputes (a position table): stored,
	// counted in the base, not a parameter.
	Fixed bool
}

// ActivationCounted is implemented by a Spec that estimates the float32
// values one sample keeps for the backward pass of its backbone over
// tokens image tokens with a caption of captionLen tokens (ignored by a
// backbone without captions). A Spec without it is estimated by
// GenericActivations.
type ActivationCounted interface {
	ActivationFloats(tokens, captionLen int) int64
}

// GenericActivations is the planner's estimate for a backbone that does
// not count its own (ActivationCounted): every numbered block (Spec.Blocks)
// keeps 16·D floats per token, a pre-norm block's residual input, its
// normalised and modulated copies, attention's q, k, v and output, and a
// 4·D MLP hidden layer with its activation (D = Spec.Width); attention
// scores are left out, the family not stating its heads.
func GenericActivations(s Spec, tokens int) int64 {
	var blocks int64
	for _, b := range s.Blocks() {
		blocks += int64(b.Count)
	}
	return blocks * int64(tokens) * 16 * int64(s.Width())
}

// OptionError is an error a family's description of a base checkpoint
// traces to one of the OpenOptions (Option is its name in snake case:
// "num_heads"), so that the caller names the setting that gave it.
type OptionError struct {
	Option string
	Err    error
}

func (e *OptionError) Error() string { return e.Err.Error() }

func (e *OptionError) Unwrap() error { return e.Err }

// TeacherDescriber is implemented by a TeacherOpener whose checkpoints
// are not described by detection's report alone (BaseCosted.Base): a
// family whose files carry their config in their metadata.
type TeacherDescriber interface {
	// DescribeTeacher describes the checkpoint Opens claimed from its
	// headers; false when they state no usable config (Base.Config nil).
	DescribeTeacher(c Candidate) (Base, bool)
}

// Opener returns the registered family that opens a checkpoint as a
// teacher, as OpenTeacher chooses it: the one its metadata names
// (MetadataKey), else the first, in kind order, whose Opens claims it.
func Opener(c Candidate) (Family, TeacherOpener, error) {
	kinds := Kinds() // in kind order, so that the choice is stable
	if k, ok := c.Metadata[MetadataKey]; ok {
		if _, err := Lookup(k); err != nil {
			return nil, nil, fmt.Errorf("%s: metadata %q: %w", c.Path, MetadataKey, err)
		}
		kinds = []string{k}
	}
	for _, k := range kinds {
		f, _ := Lookup(k)
		if o, ok := f.(TeacherOpener); ok && o.Opens(c) {
			return f, o, nil
		}
	}
	return nil, nil, fmt.Errorf("%s holds a %s checkpoint (%s naming), which no registered family (%s) opens as a teacher", c.Path, c.Report.Architecture, c.Report.Layout, KindList())
}

// CandidateOf is what OpenTeacher knows of an open checkpoint before a
// family opens it: detection's report on its headers and its metadata.
func CandidateOf(path string, ck *loaders.Checkpoint, opts OpenOptions) Candidate {
	in := ck.ArchInput(opts.NumHeads)
	if opts.Config != nil {
		in.Config = opts.Config
	}
	return Candidate{Path: path, Report: arch.Detect(in), Metadata: ck.Metadata}
}

// DescribeTeacher describes, from its headers alone, the checkpoint f
// opens (Opener): through its TeacherDescriber, else its BaseCosted.Base
// on detection's report. false when f describes no such checkpoint.
func DescribeTeacher(f Family, c Candidate) (Base, BaseCosted, bool) {
	costs, _ := f.(BaseCosted)
	if d, ok := f.(TeacherDescriber); ok {
		b, ok := d.DescribeTeacher(c)
		return b, costs, ok
	}
	if costs == nil {
		return Base{}, nil, false
	}
	b, ok := costs.Base(c.Report)
	return b, costs, ok
}

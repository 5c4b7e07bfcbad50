package family

import (
	"github.com/dcdit/dcdit/loaders/arch"
	"github.com/dcdit/dcdit/loaders/dtype"
)

// The recipe path (dcdit upcycle, dcdit train) asks these of a family, on
// top of a Teacher: each is optional, and a family without one is refused
// only by the recipes that need it.

// Configured is implemented by a teacher that exposes its family's config
// (a pointer to its config type, as Base.Config holds it), so that another
// family can build its own backbone from the teacher (Adopter).
type Configured interface {
	Config() any
}

// Summarized is implemented by a teacher that names its configuration for
// people in one line: run fingerprints, logs and model cards. A teacher
// with a fixed latent grid names it; one that takes any grid leaves it to
// the caller. Without it, callers use Describe.
type Summarized interface {
	Summary() string
}

// Finetunable is implemented by a teacher whose fixed-patch model trains
// onwards: a recipe with a base and no scaffold finetunes a copy of it.
type Finetunable interface {
	// TrainableCopy returns a copy of the teacher that trains (its
	// gradients on), the teacher staying as it is.
	TrainableCopy() (Model, error)
}

// Saver is implemented by a fixed-patch model that writes itself in its
// family's own format, the one its family's OpenTeacher reads back, so
// that a model a recipe trains from scratch is a teacher of later recipes.
type Saver interface {
	// ModelFile is the name a run folder gives the saved model: a file
	// name with its extension, or a folder's name.
	ModelFile() string
	// SaveModel writes the model at path with metadata added to the
	// file's, its tensors stored as dt where the format takes a choice
	// (a family with one float type ignores dt).
	SaveModel(path string, metadata map[string]string, dt dtype.DType) error
}

// ModelSettings are a recipe's [model] table in family-neutral terms: the
// sizes of a fixed-patch model trained from scratch. A family reads the
// fields it has and ignores the others.
type ModelSettings struct {
	Depth, Width, Heads, Patch int
	InChannels                 int
	// InputSize is the latent side the model is trained on.
	InputSize int
	// Classes is the class labels (0: none); LearnSigma doubles the
	// outputs with a learned variance.
	Classes    int
	LearnSigma bool
	MLPRatio   float64
	// RefinerDepth, CaptionWidth and SeqMultiple size a caption-conditioned
	// model: refiner blocks, the caption features' width, and the multiple
	// its sequences are padded to.
	RefinerDepth, CaptionWidth, SeqMultiple int
}

// Configurer is implemented by a family whose fixed-patch models a recipe
// sizes from its [model] table (model.kind is the family's kind).
type Configurer interface {
	// ModelConfig turns the settings into the family's config (a pointer
	// to its config type, as Initializer.InitModel takes it).
	ModelConfig(s ModelSettings) (any, error)
}

// Adopter is implemented by a family whose backbone a DC model is grafted
// into from another family's pretrained teacher (DC-DiT's main network
// takes a DiT's blocks and embedders). upcycle.Graft asks the registry
// for one before it grafts around the teacher's own network: a family
// that adopts a teacher is the one that recipe path uses.
type Adopter interface {
	// AdoptSpec describes the backbone Adopt builds from a teacher of
	// config cfg (Configured.Config), from the config alone, so that a
	// recipe is planned from headers; false when the family does not take
	// such a teacher.
	AdoptSpec(cfg any) (Spec, bool)
	// Adopt builds the backbone from a copy of the teacher's tensors
	// (Teacher.Parameters, under the teacher's own names); the teacher is
	// left as it is.
	Adopt(t Teacher) (Backbone, error)
	// AdoptedFrom names the teacher tensor a backbone tensor (a name the
	// Spec's Shapes lists) is copied from, or "" for one Adopt starts
	// fresh: a plan says what comes from the base.
	AdoptedFrom(name string) string
}

// AdopterOf returns the first registered family, in kind order, that
// adopts a teacher of config cfg, with its description of the backbone.
func AdopterOf(cfg any) (Adopter, Spec, bool) {
	if cfg == nil {
		return nil, nil, false
	}
	for _, k := range Kinds() {
		f, _ := Lookup(k)
		if a, ok := f.(Adopter); ok {
			if s, ok := a.AdoptSpec(cfg); ok {
				return a, s, true
			}
		}
	}
	return nil, nil, false
}

// GraftSpecer is implemented by a family whose teachers are Graftable, to
// describe the backbone GraftBackbone returns from the teacher's config
// alone: a recipe's plan and a streamed graft, which never hold the
// weights, use it.
type GraftSpecer interface {
	// GraftSpec is the Spec of the backbone grafted from a base of config
	// cfg (a Base's Config) for a rows×cols latent grid, its FLOPs counted
	// for captions of captionLen tokens (0: the family's typical; ignored
	// by a family without captions).
	GraftSpec(cfg any, rows, cols, captionLen int) (Spec, error)
}

// Streamable is implemented by a family whose grafts are written without
// loading the base (upcycle.StreamGraft): the backbone's tensors go from
// the base's files to the DC checkpoint's as they are read, renamed into
// the layout its backbone stores, so a full-size model grafts in the
// memory of its scaffold.
type Streamable interface {
	// StreamGraft is what such a graft needs of a base of config cfg (a
	// Base's Config) on a rows×cols latent grid.
	StreamGraft(cfg any, rows, cols int) (StreamedGraft, error)
}

// StreamedGraft is what a streamed graft needs of the base's family.
type StreamedGraft struct {
	// Spec describes the grafted backbone, as GraftBackbone's.
	Spec Spec
	// InChannels and OutChannels are the latent channels the base reads
	// and predicts.
	InChannels, OutChannels int
	// Layout is the naming the backbone's tensors take inside a DC
	// checkpoint (under arch.DCBackbonePrefix); loaders' conversion plan
	// maps the base's own layout onto it.
	Layout arch.Layout
	// PatchWeight and PatchBias name the patch embedding in Layout, and
	// Embed lays their values out as the scaffold's encoder reads them.
	PatchWeight, PatchBias string
	Embed                  func(w, b []float32) PatchEmbedding
}

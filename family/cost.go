package family

import "github.com/dcdit/dcdit/loaders/arch"

// Costed is implemented by a family whose models dcdit prices from a
// config alone, without weights (dcdit flops, dcdit inspect): its named
// models and how many sampling steps they take.
type Costed interface {
	// Presets lists the family's named models in the order listings print
	// them. heads, when positive, replaces their attention head count, to
	// price a variant (a family whose head count is fixed ignores it).
	Presets(heads int) []Preset
	// Steps is the sampling steps a model of the family takes unless told
	// (its reference pipeline's), a DC model around its backbone included.
	Steps() int
}

// BaseCosted is implemented by a Costed family that has fixed-patch base
// models: presets and the pretrained checkpoints detection reads.
type BaseCosted interface {
	Costed
	// Base reports whether detection's report on a checkpoint is one of the
	// family's fixed-patch models and, if so, describes it. Base.Config is
	// nil when the report states no usable config.
	Base(rep *arch.Report) (Base, bool)
	// BaseFLOPs counts one forward of a base of config cfg (a Base's
	// Config) for one image over a rows×cols latent with a caption of
	// captionLen tokens (ignored by a family without captions); rows and
	// cols must be multiples of the Base's Patch.
	BaseFLOPs(cfg any, rows, cols, captionLen int) (Cost, error)
}

// Preset is a named model of a family: a DC model (Backbone set) or a
// fixed-patch base (Base set).
type Preset struct {
	Name string
	// Backbone is a DC model's main network; its scaffold is package dc's
	// preset of the same name.
	Backbone Spec
	// Base is a fixed-patch model.
	Base *Base
}

// Base is a fixed-patch model of a BaseCosted family, as it is priced.
type Base struct {
	// Config is the family's config (a pointer to its config type).
	Config any
	// Architecture is the model's architecture in detection's terms.
	Architecture arch.Architecture
	// What names the model in messages ("fixed-patch DiT").
	What string
	// Preset is the preset it is or matches; empty for none.
	Preset string
	// Patch is the patch side: a latent it prices has sides that are
	// multiples of it.
	Patch int
	// Grid is the latent side it is priced at unless told: its own, or,
	// for a model that takes any grid (AnyGrid), its family's usual one.
	Grid    int
	AnyGrid bool
	// Steps is the sampling steps it takes unless told.
	Steps int
	// CaptionLen is the caption length it is priced with unless told; 0
	// for a model that reads no captions.
	CaptionLen int
	// Warnings are what detection said of the checkpoint that a price
	// should repeat.
	Warnings []string
}

// Cost is one forward of a fixed-patch base for one image.
type Cost struct {
	// Config is the config as counted (at the latent size priced).
	Config any
	// Tokens are the image tokens.
	Tokens int
	// Parts split Forward, in the order reports print them.
	Parts   []Part
	Forward float64
	// Convention is the family's counting rule in one line.
	Convention string
}

// Part is one named share of a forward's FLOPs.
type Part struct {
	Name  string
	FLOPs float64
}

// Presets lists the presets of every registered Costed family, in kind
// order, each with its family.
func Presets(heads int) []KindPreset {
	var out []KindPreset
	for _, k := range Kinds() {
		f, _ := Lookup(k)
		if c, ok := f.(Costed); ok {
			for _, p := range c.Presets(heads) {
				out = append(out, KindPreset{Preset: p, Family: c})
			}
		}
	}
	return out
}

// KindPreset is a preset with the family that names it.
type KindPreset struct {
	Preset
	Family Costed
}

// BaseOf finds the registered family (in kind order) whose fixed-patch
// models detection's report describes, and its description of the model.
func BaseOf(rep *arch.Report) (Base, BaseCosted, bool) {
	for _, k := range Kinds() {
		f, _ := Lookup(k)
		if c, ok := f.(BaseCosted); ok {
			if b, ok := c.Base(rep); ok {
				return b, c, true
			}
		}
	}
	return Base{}, nil, false
}

// Package family is the model-family registry: the one place that knows
// which backbones exist. A backbone package (dit, zimage, DC-DiT's own main
// network, or a user's) registers a Family from an init function; the
// checkpoint format, the pipelines and the CLI look families up by kind and
// work through the Family, Spec and Backbone interfaces, so that none of
// them names a concrete backbone and adding one edits no core package.
//
// The package sits below the scaffold and the backbones (it imports only
// seam types and loaders), so that a backbone package registers itself
// without importing dc.
//
// The registry is the one package-level state of the project: written by
// init functions before main runs, read-only afterwards (the pattern of
// database/sql's drivers and image's formats).
package family

import (
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/nlpodyssey/spago/mat"

	"github.com/dcdit/dcdit/cond"
	"github.com/dcdit/dcdit/loaders"
	"github.com/dcdit/dcdit/params"
)

// Backbone is the transformer the DC scaffold wraps (dc.Backbone is this
// type): DC-DiT's own main network, a pretrained DiT, Z-Image, a user's.
// The scaffold, the trainer, the checkpoint format and the CLI never look
// inside it: everything they need is a method here.
//
//   - Width: D, the token width it reads and writes (the encoder projects
//     to it, the router and de-chunker work at it).
//   - CondWidth: the width of its conditioning vector, which the scaffold's
//     conv blocks and final layer also read (through their own weights).
//   - Condition(in): the batch's conditioning for timesteps in.T and either
//     labels in.Labels or captions in.Captions (cond.Input; a backbone
//     rejects the kind it does not take). The scaffold reads only its
//     Vector(), [B, CondWidth]; the rest (Z-Image: each sample's refined
//     caption tokens) is for the backbone's own Forward.
//   - Forward(x, c, offsets, pos): the transformer over a packed set of
//     image tokens x [N, D], all samples' kept tokens concatenated (sample
//     s owns rows offsets[s] ≤ r < offsets[s+1]; no token may attend
//     across samples), conditioned per sample on c (a Value this
//     backbone's Condition made), returning the image tokens' hidden
//     states [N, D] in the same order; tokens the backbone adds for
//     itself (caption tokens, padding) stay inside. pos[2r] and pos[2r+1]
//     are the original row and column of token r on the latent grid
//     (integers for DC-DiT's patch-1 grid; treat them as real numbers).
//     Whatever position encoding the backbone uses is its own business,
//     applied at these positions (DiT: 2-D sin-cos on its patch grid;
//     Z-Image: 3-axis RoPE, the first axis its own). Gradients must flow
//     to x and to c.Vector().
//   - Parameters: the arena of its trainable tensors (nil for a backbone
//     that has none, such as one only counted for FLOPs), under the names
//     its checkpoint kind stores them by; the trainer joins it with the
//     scaffold's, inference switches its gradients off, Save writes it.
//   - ParamGroups(name): the groups (params.Group*) one of its parameters
//     belongs to, for freezing and learning-rate groups.
//   - Spec: its description (a copy the caller may keep): what a DC
//     checkpoint's metadata records, and with the tensors rebuilds it.
//   - FLOPs(lengths): the conditioning plus the transformer over packed
//     sequences of the given lengths (dc.BackboneFLOPs).
//
// Shape mismatches inside the ops panic (caller bugs); Condition and
// Forward return errors for invalid arguments they can detect.
type Backbone interface {
	Width() int
	CondWidth() int
	Condition(in cond.Input) (cond.Value, error)
	Forward(x mat.Tensor, c cond.Value, offsets []int, pos []float64) (mat.Tensor, error)
	Parameters() *params.Set
	ParamGroups(name string) []string
	Spec() Spec
	FLOPs(lengths []int) float64
}

// Spec describes one backbone of a family completely enough that, with
// its tensors, it rebuilds the backbone: the family's config and whatever
// else the family records (Z-Image: the caption length its FLOPs count).
// Its JSON encoding (encoding/json) is the object a DC checkpoint stores
// beside the kind, {"config": {...}, ...}; the family's DecodeSpec reads
// it back.
//
// A Spec read from a file is untrusted: Validate must pass before any
// other method sizes anything from it.
type Spec interface {
	// Kind is the family's kind.
	Kind() string
	// Settings is the family's config (a pointer to its config type),
	// for reports and for the family's own code.
	Settings() any
	// Validate checks the config's values and bounds (MaxWidth, …):
	// every size a file states is bounded before it sizes an allocation.
	Validate() error
	// Width and CondWidth are the backbone's token and conditioning
	// widths, which must equal the scaffold's model_dim and cond_dim.
	Width() int
	CondWidth() int
	// Conditioning says what the backbone is conditioned on.
	Conditioning() Conditioning
	// Process is the diffusion process the backbone's family trains and
	// samples with (ProcessDDPM, ProcessFlowMatching), which a DC model
	// around it keeps.
	Process() string
	// Blocks lists the numbered blocks the stored tensors must hold, so
	// that a stated depth is checked against the file before the expected
	// tensor list is built.
	Blocks() []Blocks
	// Shapes lists every tensor the backbone stores in a DC checkpoint,
	// under its stored name, with its shape.
	Shapes() map[string][]int
	// ParamGroups returns the groups (params.Group*) of a tensor Shapes
	// lists, by its stored name, as the backbone Build makes answers
	// them (Backbone.ParamGroups), so that a recipe is planned from
	// headers alone; nil for another name.
	ParamGroups(name string) []string
	// Build rebuilds the backbone from tensors under the names Shapes
	// lists (already checked against it).
	Build(ts map[string]loaders.Dense) (Backbone, error)
	// FLOPs counts the backbone over packed sequences of the given lengths
	// without weights (Backbone.FLOPs of the backbone Build would make).
	FLOPs(lengths []int) float64
}

// Describer is implemented by a Spec that names its model in one line
// for reports ("main network 12 blocks × 384, 6 heads"); a report prints
// a Spec without it as its Settings.
type Describer interface {
	Describe() string
}

// Reheader is implemented by a Spec whose attention head count a report
// may replace to price a variant (dcdit flops --num-heads on a DC
// checkpoint); a family whose head count is fixed does not implement it.
type Reheader interface {
	// WithHeads returns a copy with heads attention heads, unvalidated.
	WithHeads(heads int) Spec
}

// Recaptioner is implemented by a Spec whose FLOPs are counted for a
// caption length it records (a caption-conditioned backbone), so that a
// report prices another length (dcdit flops --caption-len on a DC
// checkpoint).
type Recaptioner interface {
	// WithCaptionLen returns a copy whose FLOPs count captions of n
	// tokens, unvalidated.
	WithCaptionLen(n int) Spec
}

// Conditioning is what a backbone is conditioned on besides the time:
// class labels, caption features, or neither (unconditional).
type Conditioning struct {
	// Classes is the number of class labels (0 … Classes-1; Classes is the
	// null label of classifier-free guidance); 0 without labels.
	Classes int
	// CaptionWidth is the width of the caption features it reads (the
	// text encoder's hidden size); 0 without captions.
	CaptionWidth int
}

// Blocks is a run of numbered blocks a checkpoint must hold: tensors
// Prefix+"N.*" for N = 0 … Count-1. What names the config field that
// states Count.
type Blocks struct {
	What   string
	Prefix string
	Count  int
}

// Family is one kind of backbone: how its description is read from a DC
// checkpoint. A family's Backbone.Spec and its DecodeSpec agree: what one
// writes the other reads back.
type Family interface {
	// Kind names the family in DC checkpoints ("backbone.kind"); unique.
	Kind() string
	// Describe is one line for listings: what the backbone is.
	Describe() string
	// DecodeSpec reads a backbone description (the JSON object beside the
	// kind) strictly: unknown fields and trailing data are errors. It
	// does not validate (Spec.Validate does).
	DecodeSpec(data []byte) (Spec, error)
}

// registry holds the registered families by kind.
var registry struct {
	sync.RWMutex
	byKind map[string]Family
}

// Register adds a family. It is called from a backbone package's init
// function and panics on an empty or repeated kind, as database/sql's
// Register does: two families with one kind is a build defect that no
// caller can handle.
func Register(f Family) {
	registry.Lock()
	defer registry.Unlock()
	k := f.Kind()
	if k == "" {
		panic("family: Register with an empty kind")
	}
	if _, dup := registry.byKind[k]; dup {
		panic(fmt.Sprintf("family: kind %q registered twice", k))
	}
	if registry.byKind == nil {
		registry.byKind = map[string]Family{}
	}
	registry.byKind[k] = f
}

// Lookup returns the family of a kind; the error names the kinds this
// build has.
func Lookup(kind string) (Family, error) {
	registry.RLock()
	f, ok := registry.byKind[kind]
	registry.RUnlock()
	if !ok {
		if kind == "" {
			return nil, fmt.Errorf("backbone kind missing (this build reads %s)", KindList())
		}
		return nil, fmt.Errorf("unknown backbone kind %.40q (this build reads %s)", kind, KindList())
	}
	return f, nil
}

// Kinds lists the registered kinds, sorted.
func Kinds() []string {
	registry.RLock()
	defer registry.RUnlock()
	out := make([]string, 0, len(registry.byKind))
	for k := range registry.byKind {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// KindList is Kinds for messages: "dit, hnet, zimage", or a hint when no
// family is registered (a program that imported none).
func KindList() string {
	k := Kinds()
	if len(k) == 0 {
		return "no backbone family: import github.com/dcdit/dcdit/families to register the built-in ones"
	}
	return strings.Join(k, ", ")
}

// KindOf is a backbone's kind for messages: its Spec's, or "unregistered"
// for a backbone without a description.
func KindOf(b Backbone) string {
	if s := b.Spec(); s != nil {
		return s.Kind()
	}
	return "unregistered"
}

// CheckPacked reports why the arguments of a Backbone.Forward, offsets
// and pos, do not describe n packed tokens of samples samples (offsets from 0 to n, one more than the samples; two
// position values per token), or nil.
func CheckPacked(n, samples int, offsets []int, pos []float64) error {
	if len(pos) != 2*n {
		return fmt.Errorf("%d position values for %d tokens, want two per token", len(pos), n)
	}
	if len(offsets) < 2 || offsets[0] != 0 || offsets[len(offsets)-1] != n || samples != len(offsets)-1 {
		return fmt.Errorf("offsets %v do not describe %d tokens of %d samples", offsets, n, samples)
	}
	for s := 1; s < len(offsets); s++ {
		if offsets[s] < offsets[s-1] {
			return fmt.Errorf("offsets %v decrease at sample %d", offsets, s)
		}
	}
	return nil
}

// Named is implemented by a family that names its models for people
// (model cards, reports) otherwise than by its kind: "DiT", "Z-Image".
type Named interface {
	ModelName() string
}

// ModelName is the name people call a family's models: its Named
// answer, else its kind.
func ModelName(f Family) string {
	if n, ok := f.(Named); ok {
		return n.ModelName()
	}
	return f.Kind()
}

// FileFormatted is implemented by a fixed-patch model whose saved file a
// model card describes in a few words ("DiT's original tensor names").
type FileFormatted interface {
	FileFormat() string
}

package family

import (
	"github.com/nlpodyssey/spago/mat"

	"github.com/dcdit/dcdit/cond"
)

// Stages is one inference forward of a model split around its blocks,
// the seam of step caching (TeaCache, package sample): the stream the
// blocks read, the first block's modulated input (the signal a cache
// watches for change between steps), the blocks, and what follows them.
// A cache that skips the blocks for some samples adds to their stream a
// residual it kept instead (the blocks' output minus their input at the
// last step it computed). Every stage runs without gradients.
type Stages[O any] struct {
	// Hidden is the stream the blocks read, [Offsets[S], Width] row-major
	// for S samples: sample s owns rows Offsets[s] ≤ r < Offsets[s+1]
	// (its image tokens and whatever the family adds, caption tokens
	// among them).
	Hidden  []float32
	Width   int
	Offsets []int
	// Modulated is the first block's modulated input, laid out as Hidden
	// (DiT: modulate(norm1(x), shift, scale); Z-Image:
	// attention_norm1(x)·(1 + scale_msa)).
	Modulated []float32
	// Blocks runs every block over the samples lo ≤ s < hi, whose rows h
	// holds (Hidden's rows Offsets[lo] … Offsets[hi]−1, or their
	// replacement), and returns the output rows in h's layout.
	Blocks func(h []float32, lo, hi int) []float32
	// Finish maps the blocks' output stream (Hidden's layout, every
	// sample) to the forward's output.
	Finish func(h []float32) (O, error)
}

// StepFLOPs are what a step cache changes in a forward's cost (the
// dc.FLOPs convention).
type StepFLOPs struct {
	// Blocks is what the blocks cost: a skipped step does not spend it.
	Blocks float64
	// Modulation is the first block's modulation, which the cache
	// computes at every step for its signal (the block computes its own
	// again when it runs).
	Modulation float64
	// Before is what the stages between the image tokens and the blocks
	// cost, apart from the conditioning (Z-Image: the noise refiner; DiT:
	// nothing): a DC model's cache runs them again when a branch it
	// measured on the cells of its last computed step then computes on
	// the router's new ones.
	Before float64
}

// StagedTeacher is implemented by a Teacher whose Predict splits around
// its blocks (Stages), so that sampling can cache its steps. A family
// without it takes no step cache (dcdit sample --teacache says so).
type StagedTeacher interface {
	// PredictStages is Predict split around the blocks: Finish of the
	// blocks' output over every sample returns what Predict returns, bit
	// for bit.
	PredictStages(xt []float32, in cond.Input, h, w int) (*Stages[[]float32], error)
	// StepFLOPs is the cost split of one unguided forward of one
	// rows×cols latent.
	StepFLOPs(rows, cols int) StepFLOPs
}

// CaptionStepCosted is implemented by a caption-conditioned
// StagedTeacher whose step costs depend on the caption's length (as
// CaptionCosted's forward does).
type CaptionStepCosted interface {
	// CaptionStepFLOPs is StepFLOPs under a caption of captionLen tokens.
	CaptionStepFLOPs(rows, cols, captionLen int) StepFLOPs
}

// StagedBackbone is implemented by a Backbone whose Forward splits
// around its blocks (Stages), so that a DC model's sampling can cache its
// backbone's steps.
type StagedBackbone interface {
	// ForwardStages is Forward split around the blocks, for inference:
	// Finish of the blocks' output over every sample returns what Forward
	// returns, bit for bit.
	ForwardStages(x mat.Tensor, c cond.Value, offsets []int, pos []float64) (*Stages[mat.Tensor], error)
	// StepFLOPs is the cost split of the backbone over packed sequences
	// of the given lengths (as FLOPs counts them).
	StepFLOPs(lengths []int) StepFLOPs
}

// NewStages makes the Stages of a forward from its tensors: the blocks'
// input hidden and the first block's modulated input, both [N, D] over
// the samples offsets delimit; blocks runs the blocks over the samples lo
// ≤ s < hi whose rows x holds, delimited by their own offsets (from 0),
// and finish maps the blocks' output to the forward's output.
func NewStages[O any](hidden, modulated mat.Tensor, offsets []int, blocks func(x mat.Tensor, lo, hi int, offsets []int) mat.Tensor, finish func(h mat.Tensor) (O, error)) *Stages[O] {
	D := hidden.Shape()[1]
	rows := func(h []float32) mat.Tensor {
		return mat.NewDense[float32](mat.WithShape(len(h)/D, D), mat.WithBacking(h))
	}
	return &Stages[O]{
		Hidden:    mat.Data[float32](hidden.Value()),
		Width:     D,
		Offsets:   offsets,
		Modulated: mat.Data[float32](modulated.Value()),
		Blocks: func(h []float32, lo, hi int) []float32 {
			sub := make([]int, hi-lo+1)
			for i := range sub {
				sub[i] = offsets[lo+i] - offsets[lo]
			}
			return mat.Data[float32](blocks(rows(h), lo, hi, sub).Value())
		},
		Finish: func(h []float32) (O, error) { return finish(rows(h)) },
	}
}

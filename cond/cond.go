// Package cond holds the conditioning types of the DC scaffold's Backbone
// seam (dc.Backbone): what a caller asks a backbone to condition on
// (Input: timesteps with class labels or with per-sample caption features
// of different lengths) and what the backbone hands back (Value: the
// per-sample adaLN vector the scaffold reads, plus whatever the backbone's
// own Forward needs, opaque to everyone else).
//
// It sits below the scaffold and the backbones so that a backbone package
// implements dc.Backbone without importing dc.
package cond

import (
	"fmt"

	"github.com/nlpodyssey/spago/mat"
)

// Input is one batch's conditioning request: one timestep per sample and
// either one class label per sample (DiT, DC-DiT) or one caption per sample
// (Z-Image). A backbone rejects the kind it does not take.
type Input struct {
	// T are the times the backbone is conditioned on, one per sample, in
	// its process's convention (diffusion.Process.ModelTimes: DDPM's
	// timestep index as a float; flow matching's model time in [0, 1]).
	T []float32
	// Labels are class labels, one per sample (the backbone's null class
	// for unconditional rows), or nil.
	Labels []int
	// Captions are caption features, one per sample, or nil.
	Captions []Caption
}

// Caption is one sample's caption: text-encoder hidden states, row-major
// [rows, feature width] in Features, of which the first Len rows are valid
// (rows after them, if any, are batch padding and ignored). The feature
// width is the backbone's (Z-Image: cap_feat_dim).
type Caption struct {
	Features []float32
	Len      int
}

// Samples returns the batch size, len(T).
func (in Input) Samples() int { return len(in.T) }

// CheckLabels reports why in is not a batch of labels: one timestep and
// one label per sample, each label in [0, numClasses] (numClasses is the
// null class), no captions; or nil.
func (in Input) CheckLabels(numClasses int) error {
	if in.Captions != nil {
		return fmt.Errorf("%d captions given to a class-conditional backbone, want labels", len(in.Captions))
	}
	if len(in.T) != len(in.Labels) || len(in.T) == 0 {
		return fmt.Errorf("%d timesteps and %d labels, want one of each per sample", len(in.T), len(in.Labels))
	}
	for i, v := range in.Labels {
		if v < 0 || v > numClasses {
			return fmt.Errorf("label %d of sample %d outside [0, %d] (%d is the null class)", v, i, numClasses, numClasses)
		}
	}
	return nil
}

// CheckCaptions reports why in is not a batch of captions of feature
// width dim: one timestep and one caption per sample, each with at least
// one valid row and whole rows covering its valid length, no labels; or
// nil.
func (in Input) CheckCaptions(dim int) error {
	if in.Labels != nil {
		return fmt.Errorf("%d labels given to a caption-conditioned backbone, want captions", len(in.Labels))
	}
	if len(in.T) != len(in.Captions) || len(in.T) == 0 {
		return fmt.Errorf("%d timesteps and %d captions, want one of each per sample", len(in.T), len(in.Captions))
	}
	for s, c := range in.Captions {
		switch {
		case c.Len < 1:
			return fmt.Errorf("caption of sample %d has %d valid rows, want at least 1", s, c.Len)
		case len(c.Features)%dim != 0:
			return fmt.Errorf("caption of sample %d has %d feature values, not whole rows of width %d", s, len(c.Features), dim)
		case len(c.Features)/dim < c.Len:
			return fmt.Errorf("caption of sample %d has %d rows of width %d, fewer than its %d valid ones", s, len(c.Features)/dim, dim, c.Len)
		}
	}
	return nil
}

// Value is a backbone's conditioning of one batch, made by its Condition
// and read back by its Forward. The scaffold reads only Vector; anything
// else (Z-Image: each sample's refined caption tokens) is the backbone's
// own, and a backbone's Forward accepts only a Value its Condition made.
type Value interface {
	// Vector is the per-sample conditioning vector [B, CondWidth] the
	// scaffold's conv blocks and final layer read; gradients flow
	// through it into the backbone's embedders.
	Vector() mat.Tensor
}

// Plain is a Value that is only the vector: the conditioning of a
// class-conditional backbone (DiT: t_embed + y_embed).
type Plain struct{ V mat.Tensor }

// Vector returns the vector.
func (p Plain) Vector() mat.Tensor { return p.V }

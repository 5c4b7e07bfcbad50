// Package sample holds a model as a diffusion process's sampler calls it
// (a diffusion.Model), for the commands, the evaluation and the
// pipelines' teacher data alike: the conditions of a batch (labels or
// captions, with the null class or the empty prompt that guidance
// contrasts them with), a teacher (family.Teacher) under those
// conditions, and a DC model at tail-drop fractions ρ — the
// unconditional branch at its own ρ (Lite-CFG), every cell a token below
// a timestep — with the router's kept tokens and the FLOPs of each step.
//
// The arithmetic is the model's and the process's: this package only
// lays out batches and conditions, so routing a sampler through it
// changes no number.
package sample

import (
	"fmt"

	"github.com/dcdit/dcdit/cond"
)

// Conditions are what a batch of samples is conditioned on, and the
// unconditional condition classifier-free guidance contrasts each with:
// labels with the null class, or captions with their negative (the empty
// prompt, or a negative prompt). One of Labels and Captions is set.
type Conditions struct {
	// Labels are one class label per sample; Null is the null class.
	Labels []int
	Null   int
	// Captions are one caption per sample; Negative one per sample for
	// the unconditional branch (nil when guidance has none to use).
	Captions, Negative []cond.Caption
}

// Len is the number of samples.
func (c Conditions) Len() int {
	if c.Captions != nil {
		return len(c.Captions)
	}
	return len(c.Labels)
}

// Input is the conditioning at model times t: of the samples, one time
// each; or, guided, of the doubled batch a guided sampler hands its model
// ([x; x] at [t; t]), the samples' conditions first and the unconditional
// ones second.
func (c Conditions) Input(t []float32, guided bool) (cond.Input, error) {
	n := c.Len()
	want := n
	if guided {
		want = 2 * n
	}
	if len(t) != want {
		return cond.Input{}, fmt.Errorf("sample: %d model times for %d samples (guided %v), want %d", len(t), n, guided, want)
	}
	in := cond.Input{T: t}
	switch {
	case c.Captions == nil:
		in.Labels = c.Labels
		if guided {
			in.Labels = make([]int, 0, 2*n)
			in.Labels = append(in.Labels, c.Labels...)
			for range n {
				in.Labels = append(in.Labels, c.Null)
			}
		}
	case guided && len(c.Negative) != n:
		return cond.Input{}, fmt.Errorf("sample: guidance needs an unconditional caption per sample: %d for %d captions", len(c.Negative), n)
	case guided:
		in.Captions = append(append(make([]cond.Caption, 0, 2*n), c.Captions...), c.Negative...)
	default:
		in.Captions = c.Captions
	}
	return in, nil
}

package sample

import (
	"fmt"

	"github.com/dcdit/dcdit/diffusion"
	"github.com/dcdit/dcdit/family"
)

// Teacher is a family's teacher as a sampler calls it, on latents of a
// rows×cols grid under the conditions c: its raw output, of the doubled
// batch when the call is guided (the process combines the halves).
func Teacher(t family.Teacher, c Conditions, rows, cols int) diffusion.Model {
	return func(x, tm []float32, guided bool) ([]float32, error) {
		in, err := c.Input(tm, guided)
		if err != nil {
			return nil, err
		}
		return t.Predict(x, in, rows, cols)
	}
}

// SelfGuided is m guided inside by rule at scale (family.Teacher.Guide,
// hw positions per channel): an unguided call of n samples runs m on the
// doubled batch [x; x] at [t; t] and returns the n guided outputs. It is
// a teacher's guided prediction for a caller that compares predictions
// rather than sampling them.
func SelfGuided(m diffusion.Model, rule func(c, u []float32, hw int, s float32), scale float32, hw int) diffusion.Model {
	return func(x, t []float32, guided bool) ([]float32, error) {
		if guided {
			return nil, fmt.Errorf("sample: a self-guided model called for a guided batch of %d samples", len(t))
		}
		out, err := m(append(append(make([]float32, 0, 2*len(x)), x...), x...), append(append(make([]float32, 0, 2*len(t)), t...), t...), true)
		if err != nil {
			return nil, err
		}
		guide(out, len(t), hw, rule, scale)
		return out[:len(out)/2], nil
	}
}

// guide combines a guided batch's outputs out = [cond; uncond], n
// samples each, by rule at scale, writing each sample's guided output into
// both halves.
func guide(out []float32, n, hw int, rule func(c, u []float32, hw int, s float32), scale float32) {
	per := len(out) / (2 * n)
	for b := range n {
		rule(out[b*per:(b+1)*per], out[(n+b)*per:(n+b+1)*per], hw, scale)
	}
}

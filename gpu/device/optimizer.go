package device

import (
	"errors"
	"fmt"
	"math"

	"github.com/dcdit/dcdit/gpu/cuda"
	"github.com/dcdit/dcdit/gpu/cudakernels"
	"github.com/dcdit/dcdit/optim"
)

// Optimizer is a training stage's gradient clip, AdamW and EMA running on
// the device over an Arena, so that a step moves nothing but the gradient
// norm between host and device. It mirrors host objects that stay the
// reference for checkpoints: the optim.AdamW (its mask, segments and
// groups, whose learning rates the trainer keeps setting there) and the
// optim.EMA. Pull copies the device state back into them.
type Optimizer struct {
	ar      *Arena
	opt     *optim.AdamW
	segs    []optim.Segment
	ema     *optim.EMA
	maxNorm float64 // +Inf: measure the norm, never clip
	step    int64

	m, v, avg, work cuda.Buffer
}

// NewOptimizer uploads opt's moments (its State, as resumed) and ema's
// weights (nil: no EMA) beside the arena, whose parameter set opt and ema
// describe.
func (ar *Arena) NewOptimizer(opt *optim.AdamW, maxNorm float64, ema *optim.EMA) (*Optimizer, error) {
	if n := ar.Set().Len(); opt.Mask().Len() != n {
		return nil, fmt.Errorf("device: NewOptimizer: the optimiser covers %d values, the set has %d", opt.Mask().Len(), n)
	}
	if !(maxNorm > 0) {
		return nil, fmt.Errorf("device: NewOptimizer: max norm %v, want a positive number (+Inf: no clip)", maxNorm)
	}
	o := &Optimizer{ar: ar, opt: opt, segs: opt.Segments(), ema: ema, maxNorm: maxNorm}
	st := opt.State()
	o.step = st.Step
	rt := ar.Device().Runtime()
	var err error
	if o.m, err = cuda.Upload(rt, st.M); err == nil {
		if o.v, err = cuda.Upload(rt, st.V); err == nil {
			if o.work, err = rt.Alloc(cudakernels.ClipWorkBytes); err == nil && ema != nil {
				o.avg, err = cuda.Upload(rt, ema.Weights())
			}
		}
	}
	if err != nil {
		return nil, errors.Join(fmt.Errorf("device: NewOptimizer: %w", err), o.Close())
	}
	return o, nil
}

// ClipNorm measures the global norm of the gradients and, with a finite
// max norm, clips them as optim.GradClipper.Clip does. Frozen parameters'
// gradients are zero on the device (nothing accumulates into them), so
// the whole arena's norm is the trainable elements'. A NaN or infinite
// norm comes back as is, the gradients untouched, for the caller to stop.
func (o *Optimizer) ClipNorm() (float64, error) {
	k := o.ar.Device().Kernels()
	var err error
	if math.IsInf(o.maxNorm, 1) {
		err = k.GradNorm(o.work, o.ar.Grad())
	} else {
		err = k.ClipGradNorm(o.work, o.ar.Grad(), o.maxNorm)
	}
	if err != nil {
		return 0, fmt.Errorf("device: gradient norm: %w", err)
	}
	norm, err := cudakernels.ReadNorm(o.work)
	if err != nil && !errors.Is(err, optim.ErrNonFiniteNorm) {
		return 0, fmt.Errorf("device: gradient norm: %w", err)
	}
	return norm, nil
}

// Step applies one AdamW update with the host optimiser's current
// hyperparameters, segment by segment, then folds the parameters into the
// EMA over the trainable ranges.
func (o *Optimizer) Step() error {
	o.step++
	k := o.ar.Device().Kernels()
	scalars := make([]optim.AdamWScalars, o.opt.Groups())
	for i := range scalars {
		scalars[i] = optim.NewAdamWScalars(o.opt.Hyper(i), o.step)
	}
	data, grad := o.ar.Data(), o.ar.Grad()
	for _, s := range o.segs {
		p, err1 := data.Slice(4*s.Lo, 4*s.N)
		g, err2 := grad.Slice(4*s.Lo, 4*s.N)
		m, err3 := o.m.Slice(4*s.Off, 4*s.N)
		v, err4 := o.v.Slice(4*s.Off, 4*s.N)
		if err := errors.Join(err1, err2, err3, err4); err != nil {
			return fmt.Errorf("device: AdamW step %d: %w", o.step, err)
		}
		if err := k.AdamW(p, g, m, v, scalars[s.Group]); err != nil {
			return fmt.Errorf("device: AdamW step %d: %w", o.step, err)
		}
	}
	if o.ema == nil {
		return nil
	}
	for _, r := range o.opt.Mask().Trainable() {
		e, err1 := o.avg.Slice(4*r.Lo, 4*r.Len())
		p, err2 := data.Slice(4*r.Lo, 4*r.Len())
		if err := errors.Join(err1, err2); err != nil {
			return fmt.Errorf("device: EMA step %d: %w", o.step, err)
		}
		if err := k.EMA(e, p, o.ema.Decay); err != nil {
			return fmt.Errorf("device: EMA step %d: %w", o.step, err)
		}
	}
	return nil
}

// Pull copies the device state into the host objects: the parameters
// into the set's arena, the moments and step count into the optimiser,
// the average into the EMA, for a checkpoint or anything that reads them.
func (o *Optimizer) Pull() error {
	if err := o.ar.Download(); err != nil {
		return fmt.Errorf("device: Pull: %w", err)
	}
	n := o.opt.Mask().NumTrainable()
	st := optim.State{Step: o.step, M: make([]float32, n), V: make([]float32, n)}
	if err := errors.Join(cuda.CopyToHost(st.M, o.m), cuda.CopyToHost(st.V, o.v)); err != nil {
		return fmt.Errorf("device: Pull: moments: %w", err)
	}
	if err := o.opt.SetState(st); err != nil {
		return fmt.Errorf("device: Pull: %w", err)
	}
	if o.ema != nil {
		if err := cuda.CopyToHost(o.ema.Weights(), o.avg); err != nil {
			return fmt.Errorf("device: Pull: EMA: %w", err)
		}
	}
	return nil
}

// Push uploads the host parameters again, after something swapped other
// weights into the set's arena and back (an evaluation of the EMA).
func (o *Optimizer) Push() error {
	if err := o.ar.Upload(); err != nil {
		return fmt.Errorf("device: Push: %w", err)
	}
	return nil
}

// Close frees the device state.
func (o *Optimizer) Close() error {
	return errors.Join(o.m.Free(), o.v.Free(), o.avg.Free(), o.work.Free())
}

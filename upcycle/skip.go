package upcycle

import (
	"fmt"
	"math"

	"github.com/nlpodyssey/spago/mat"

	"github.com/dcdit/dcdit/cond"
	"github.com/dcdit/dcdit/dc"
	"github.com/dcdit/dcdit/ops"
)

// LatentSkipPrior starts the latent skip's scale (dc.Config.LatentSkip) as
// the diffusion process says it should be. In a flat region two cells'
// prediction differs by the difference of their inputs divided by the
// noise level: for DDPM's ε, (x − x_token)/√(1 − ᾱ_t); for flow matching's
// data-ward velocity x0 − ε, −(x − x_token)/σ. InitScaffold starts the
// skip's map as the identity on the predicted noise and its scale at 1,
// right only at high noise; here 1 + Linear(SiLU(c)) is fitted by least
// squares to |scale(t)| over the conditionings inputs (each input's times
// T with its labels or captions: every class and the null class, say) —
// weighted by 1/scale(t)², the weight a prediction error has in the
// sampler's x̂0 at t — and set on the outputs that predict the noise (the
// first InChannels·p² of a cell); a negative scale turns the map's
// identity into its negative. Training would have to find this map
// through the conditioning from few low-noise samples; the process knows
// it. It needs no data, only the backbone's conditioning.
func LatentSkipPrior(m *dc.Model, inputs []cond.Input, scale func(t float32) float64) error {
	cfg := m.Config
	if !cfg.LatentSkip {
		return fmt.Errorf("upcycle: latent skip prior: the model has no latent skip")
	}
	if len(inputs) == 0 || inputs[0].Samples() == 0 {
		return fmt.Errorf("upcycle: latent skip prior: no conditioning to fit over")
	}
	K := cfg.CondDim + 1 // features and the bias
	A := make([]float64, K*K)
	rhs := make([]float64, K)
	sign := 0.0
	for _, in := range inputs {
		cv, err := m.Backbone.Condition(in)
		if err != nil {
			return fmt.Errorf("upcycle: latent skip prior: %w", err)
		}
		f := mat.Data[float32](ops.SiLU(cv.Vector()).Value())
		row := make([]float64, K)
		for i, t := range in.T {
			s := scale(t)
			if s == 0 || math.IsNaN(s) || math.IsInf(s, 0) || (sign != 0 && math.Signbit(s) != math.Signbit(sign)) {
				return fmt.Errorf("upcycle: latent skip prior: scale(%g) = %g, want a finite number of one sign, not 0", t, s)
			}
			sign = math.Copysign(1, s)
			s = math.Abs(s)
			for k := range cfg.CondDim {
				row[k] = float64(f[i*cfg.CondDim+k])
			}
			row[K-1] = 1
			w := 1 / (s * s)
			for a := range K {
				rhs[a] += w * row[a] * (s - 1)
				for b := range K {
					A[a*K+b] += w * row[a] * row[b]
				}
			}
		}
	}
	// A little ridge: SiLU(c) spans fewer directions than it has channels.
	var tr float64
	for a := range K {
		tr += A[a*K+a]
	}
	for a := range K {
		A[a*K+a] += 1e-6 * tr / float64(K)
	}
	sol, err := solveSPD(A, rhs, K)
	if err != nil {
		return fmt.Errorf("upcycle: latent skip prior: %w", err)
	}
	w := mat.Data[float32](m.Params.Get("latent_skip.scale.weight").Value()) // [CellOut, CondDim]
	b := mat.Data[float32](m.Params.Get("latent_skip.scale.bias").Value())
	for o := range cfg.CellIn() {
		for k := range cfg.CondDim {
			w[o*cfg.CondDim+k] = float32(sol[k])
		}
		b[o] = float32(sol[K-1])
	}
	if sign < 0 {
		skip := mat.Data[float32](m.Params.Get("latent_skip.weight").Value()) // [CellOut, CellIn]
		for i := range cfg.CellIn() {
			skip[i*cfg.CellIn()+i] = -skip[i*cfg.CellIn()+i]
		}
	}
	return nil
}

// solveSPD solves A·x = b for a symmetric positive definite A [n, n] by
// Cholesky factorisation (A is overwritten).
func solveSPD(A, b []float64, n int) ([]float64, error) {
	for j := range n {
		d := A[j*n+j]
		for k := range j {
			d -= A[j*n+k] * A[j*n+k]
		}
		if !(d > 0) {
			return nil, fmt.Errorf("normal equations not positive definite at %d (pivot %g)", j, d)
		}
		d = math.Sqrt(d)
		A[j*n+j] = d
		for i := j + 1; i < n; i++ {
			s := A[i*n+j]
			for k := range j {
				s -= A[i*n+k] * A[j*n+k]
			}
			A[i*n+j] = s / d
		}
	}
	x := make([]float64, n)
	for i := range n { // L·z = b
		s := b[i]
		for k := range i {
			s -= A[i*n+k] * x[k]
		}
		x[i] = s / A[i*n+i]
	}
	for i := n - 1; i >= 0; i-- { // Lᵀ·x = z
		s := x[i]
		for k := i + 1; k < n; k++ {
			s -= A[k*n+i] * x[k]
		}
		x[i] = s / A[i*n+i]
	}
	return x, nil
}

// LabelInputs are the conditionings LatentSkipPrior fits a class-conditional
// backbone over: the times with every label 0 … numClasses (the last the
// null class).
func LabelInputs(times []float32, numClasses int) []cond.Input {
	var ins []cond.Input
	for y := 0; y <= numClasses; y++ {
		labels := make([]int, len(times))
		for i := range labels {
			labels[i] = y
		}
		ins = append(ins, cond.Input{T: times, Labels: labels})
	}
	return ins
}

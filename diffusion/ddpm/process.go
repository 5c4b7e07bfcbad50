package ddpm

import (
	"fmt"
	"math"
)

// Float is the element type of the arrays: float32 for work, float64 for
// gradient checks.
type Float interface{ ~float32 | ~float64 }

// Shape describes a batch of latents: B samples of C channels over HW
// pixels, stored NCHW. Model outputs have 2C channels (ε, then the
// variance interpolation value v).
type Shape struct{ B, C, HW int }

func (s Shape) check(op string, t []int, sched *Schedule, arrays map[string][2]int) error {
	if len(t) != s.B {
		return fmt.Errorf("ddpm: %s: %d timesteps for a batch of %d", op, len(t), s.B)
	}
	for i, ti := range t {
		if ti < 0 || ti >= sched.Steps() {
			return fmt.Errorf("ddpm: %s: timestep %d of sample %d outside [0, %d)", op, ti, i, sched.Steps())
		}
	}
	for name, lens := range arrays {
		if lens[0] != lens[1] {
			return fmt.Errorf("ddpm: %s: %s has %d values, want %d for shape %+v", op, name, lens[0], lens[1], s)
		}
	}
	return nil
}

// at rounds a table entry to the array type, as _extract_into_tensor does.
func at[T Float](table []float64, t int) T { return T(table[t]) }

// QSample writes x_t = √ᾱ_t·x0 + √(1−ᾱ_t)·ε.
func (s *Schedule) QSample(dst, xStart, noise []float32, t []int, sh Shape) error {
	n := sh.C * sh.HW
	err := sh.check("q_sample", t, s, map[string][2]int{
		"dst": {len(dst), sh.B * n}, "x_start": {len(xStart), sh.B * n}, "noise": {len(noise), sh.B * n}})
	if err != nil {
		return err
	}
	qSample(dst, xStart, noise, t, s, n)
	return nil
}

func qSample[T Float](dst, xStart, noise []T, t []int, s *Schedule, n int) {
	for b, tb := range t {
		a, sig := at[T](s.SqrtAlphasCumprod, tb), at[T](s.SqrtOneMinusAlphasCumprod, tb)
		lo := b * n
		for i := lo; i < lo+n; i++ {
			dst[i] = a*xStart[i] + sig*noise[i]
		}
	}
}

// MeanVariance is p(x_{t−1} | x_t) as the model parameterises it.
type MeanVariance struct {
	Mean, LogVariance, PredXStart []float32
}

// PMeanVariance turns a learned-sigma model output ([B, 2C, HW]: ε, then v)
// at x_t into the mean, log-variance and predicted x0 of p(x_{t−1}|x_t):
// log σ² = frac·log β_t + (1−frac)·log σ̃²_t with frac = (v+1)/2 (v is not
// clamped), x0 = √(1/ᾱ_t)·x_t − √(1/ᾱ_t − 1)·ε, mean = c1·x0 + c2·x_t.
// clip_denoised is not applied, as in DiT's sampling.
func (s *Schedule) PMeanVariance(out, x []float32, t []int, sh Shape) (*MeanVariance, error) {
	n := sh.C * sh.HW
	err := sh.check("p_mean_variance", t, s, map[string][2]int{"model output": {len(out), 2 * sh.B * n}, "x": {len(x), sh.B * n}})
	if err != nil {
		return nil, err
	}
	mv := &MeanVariance{Mean: make([]float32, sh.B*n), LogVariance: make([]float32, sh.B*n), PredXStart: make([]float32, sh.B*n)}
	pMeanVariance(mv.Mean, mv.LogVariance, mv.PredXStart, out, x, t, s, n)
	return mv, nil
}

func pMeanVariance[T Float](mean, logVar, predX, out, x []T, t []int, s *Schedule, n int) {
	for b, tb := range t {
		minLog, maxLog := at[T](s.PosteriorLogVarianceClipped, tb), at[T](s.LogBetas, tb)
		recip, recipm1 := at[T](s.SqrtRecipAlphasCumprod, tb), at[T](s.SqrtRecipm1AlphasCumprod, tb)
		c1, c2 := at[T](s.PosteriorMeanCoef1, tb), at[T](s.PosteriorMeanCoef2, tb)
		eps, v := out[2*b*n:(2*b+1)*n], out[(2*b+1)*n:(2*b+2)*n]
		for i := range n {
			j := b*n + i
			frac := (v[i] + 1) / 2
			logVar[j] = frac*maxLog + (1-frac)*minLog
			px := recip*x[j] - recipm1*eps[i]
			predX[j] = px
			mean[j] = c1*px + c2*x[j]
		}
	}
}

// PSample takes one ancestral step: x_{t−1} = mean + 1[t≠0]·exp(½·log σ²)·z.
// noise is z ~ N(0, I).
func (s *Schedule) PSample(dst, out, x, noise []float32, t []int, sh Shape) (*MeanVariance, error) {
	mv, err := s.PMeanVariance(out, x, t, sh)
	if err != nil {
		return nil, err
	}
	n := sh.C * sh.HW
	if len(dst) != sh.B*n || len(noise) != sh.B*n {
		return nil, fmt.Errorf("ddpm: p_sample: dst has %d and noise %d values, want %d", len(dst), len(noise), sh.B*n)
	}
	for b, tb := range t {
		for j := b * n; j < (b+1)*n; j++ {
			dst[j] = mv.Mean[j]
			if tb != 0 {
				dst[j] += float32(math.Exp(float64(0.5*mv.LogVariance[j]))) * noise[j]
			}
		}
	}
	return mv, nil
}

// Losses are the per-sample terms of the hybrid loss.
type Losses struct {
	Loss, MSE, VB []float32
}

// TrainingLosses evaluates DiT's hybrid loss for a model output at
// x_t = q_sample(x0, t, ε): loss = mse + vb per sample, where mse is the
// mean of (ε − ε̂)² and vb is KL(q(x_{t−1}|x_t,x0) ‖ p(x_{t−1}|x_t)) / ln 2
// averaged over the pixels (the decoder NLL at t = 0), computed with the
// predicted mean detached so that vb trains only the variance.
//
// If grad is not nil it receives scale·∂(Σ_b loss_b)/∂out ([B, 2C, HW]);
// scale = 1/B gives the gradient of the batch mean that training uses.
func (s *Schedule) TrainingLosses(grad, out, xStart, noise []float32, t []int, sh Shape, scale float32) (*Losses, error) {
	return s.WeightedTrainingLosses(grad, out, xStart, noise, t, sh, scale, nil)
}

// WeightedTrainingLosses is TrainingLosses with sample b's ε term weighted
// by mseWeight[b]: loss = w·mse + vb (the variance term, which only trains
// the learned σ, stays unweighted, as in P2's reference). Losses.MSE is
// the unweighted mean squared error. A nil mseWeight weighs every sample 1.
func (s *Schedule) WeightedTrainingLosses(grad, out, xStart, noise []float32, t []int, sh Shape, scale float32, mseWeight []float32) (*Losses, error) {
	n := sh.C * sh.HW
	arrays := map[string][2]int{"model output": {len(out), 2 * sh.B * n}, "x_start": {len(xStart), sh.B * n}, "noise": {len(noise), sh.B * n}}
	if grad != nil {
		arrays["grad"] = [2]int{len(grad), 2 * sh.B * n}
	}
	if mseWeight != nil {
		arrays["mse weights"] = [2]int{len(mseWeight), sh.B}
	}
	if err := sh.check("training_losses", t, s, arrays); err != nil {
		return nil, err
	}
	l := &Losses{Loss: make([]float32, sh.B), MSE: make([]float32, sh.B), VB: make([]float32, sh.B)}
	trainingLosses(l.Loss, l.MSE, l.VB, grad, out, xStart, noise, t, s, n, scale, mseWeight)
	return l, nil
}

// P2Weights returns the perception-prioritised weights of Choi et al.
// (2022) for timesteps t: 1/(k + SNR_t)^γ with SNR_t = ᾱ_t/(1−ᾱ_t). With
// k = 1, γ = 1 the ε loss keeps its weight where the signal is below the
// noise (the steps that decide a sample's content) and fades where it is
// far above it (the last clean-up steps, which the uniform ε loss is
// dominated by).
func (s *Schedule) P2Weights(t []int, k, gamma float64) ([]float32, error) {
	if !(k > 0) || !(gamma >= 0) || math.IsInf(k, 0) || math.IsInf(gamma, 0) {
		return nil, fmt.Errorf("ddpm: P2 weights need k > 0 and γ ≥ 0, both finite; got k = %v, γ = %v", k, gamma)
	}
	w := make([]float32, len(t))
	for i, v := range t {
		if v < 0 || v >= s.Steps() {
			return nil, fmt.Errorf("ddpm: P2 weights: timestep %d outside [0, %d)", v, s.Steps())
		}
		ab := s.AlphasCumprod[v]
		w[i] = float32(math.Pow(k+ab/(1-ab), -gamma))
	}
	return w, nil
}

// Constants of the discretised Gaussian decoder (8-bit data in [−1, 1]).
const (
	binHalfWidth = 1.0 / 255
	edge         = 0.999
	probFloor    = 1e-12
	ln2          = math.Ln2
)

func trainingLosses[T Float](loss, mse, vb, grad, out, xStart, noise []T, t []int, s *Schedule, n int, scale T, mseWeight []T) {
	xt := make([]T, n)
	mean, logVar, predX := make([]T, n), make([]T, n), make([]T, n)
	for b, tb := range t {
		lo := b * n
		qSample(xt, xStart[lo:lo+n], noise[lo:lo+n], t[b:b+1], s, n)
		pMeanVariance(mean, logVar, predX, out[2*lo:2*lo+2*n], xt, t[b:b+1], s, n)
		eps := out[2*lo : 2*lo+n]
		minLog, maxLog := at[T](s.PosteriorLogVarianceClipped, tb), at[T](s.LogBetas, tb)
		c1, c2 := at[T](s.PosteriorMeanCoef1, tb), at[T](s.PosteriorMeanCoef2, tb)
		var gEps, gV []T
		if grad != nil {
			gEps, gV = grad[2*lo:2*lo+n], grad[2*lo+n:2*lo+2*n]
		}
		w := T(1)
		if mseWeight != nil {
			w = mseWeight[b]
		}
		var sumSq, sumVB float64
		// dLogVar/dv: log σ² is linear in v with slope (max − min)/2.
		dlv := (maxLog - minLog) / 2
		for i := range n {
			d := noise[lo+i] - eps[i]
			sumSq += float64(d * d)
			var term, dTerm T // term and its derivative with respect to log σ²
			if tb == 0 {
				term, dTerm = decoderNLL(xStart[lo+i], mean[i], logVar[i])
			} else {
				trueMean := c1*xStart[lo+i] + c2*xt[i]
				term, dTerm = normalKL(trueMean, minLog, mean[i], logVar[i])
			}
			sumVB += float64(term)
			if grad != nil {
				gEps[i] = scale * w * 2 * (eps[i] - noise[lo+i]) / T(n)
				gV[i] = scale * dTerm * dlv / T(float64(n)*ln2)
			}
		}
		mse[b] = T(sumSq / float64(n))
		vb[b] = T(sumVB / float64(n) / ln2)
		loss[b] = w*mse[b] + vb[b]
	}
}

// normalKL is KL(N(m1, e^lv1) ‖ N(m2, e^lv2)) and its derivative in lv2.
func normalKL[T Float](m1, lv1, m2, lv2 T) (kl, dLv2 T) {
	e := T(math.Exp(float64(lv1 - lv2)))
	d := m1 - m2
	inv := T(math.Exp(float64(-lv2)))
	kl = 0.5 * (-1 + lv2 - lv1 + e + d*d*inv)
	dLv2 = 0.5 * (1 - e - d*d*inv)
	return kl, dLv2
}

// approxCDF is the tanh approximation of the standard normal CDF that the
// reference uses, and its derivative.
func approxCDF[T Float](x T) (cdf, pdf T) {
	const k = 0.7978845608028654 // √(2/π)
	const a = 0.044715
	th := T(math.Tanh(float64(k * (x + a*x*x*x))))
	return 0.5 * (1 + th), 0.5 * (1 - th*th) * k * (1 + 3*a*x*x)
}

// decoderNLL is −log P(x0) of the discretised Gaussian with mean m and
// log-variance lv (log-scale lv/2), over bins of half-width 1/255, with the
// edge bins open-ended; and its derivative in lv.
func decoderNLL[T Float](x0, m, lv T) (nll, dLv T) {
	logScale := lv / 2
	inv := T(math.Exp(float64(-logScale)))
	c := x0 - m
	plusIn, minIn := inv*(c+binHalfWidth), inv*(c-binHalfWidth)
	cdfPlus, pdfPlus := approxCDF(plusIn)
	cdfMin, pdfMin := approxCDF(minIn)
	// ∂in/∂logScale = −in for both bin edges.
	var logP, dLogP T
	switch {
	case x0 < -edge:
		logP = T(math.Log(float64(max(cdfPlus, probFloor))))
		if cdfPlus > probFloor {
			dLogP = pdfPlus * -plusIn / cdfPlus
		}
	case x0 > edge:
		tail := 1 - cdfMin
		logP = T(math.Log(float64(max(tail, probFloor))))
		if tail > probFloor {
			dLogP = -pdfMin * -minIn / tail
		}
	default:
		delta := cdfPlus - cdfMin
		logP = T(math.Log(float64(max(delta, probFloor))))
		if delta > probFloor {
			dLogP = (pdfPlus*-plusIn - pdfMin*-minIn) / delta
		}
	}
	// d/dlv = d/dlogScale · ½.
	return -logP, -dLogP / 2
}

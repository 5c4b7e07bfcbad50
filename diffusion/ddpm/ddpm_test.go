package ddpm

import (
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dcdit/dcdit/internal/fixtures"
	"github.com/dcdit/dcdit/loaders/safetensors"
)

// tables pairs each fixture table suffix with the schedule field.
func tables(s *Schedule) map[string][]float64 {
	return map[string][]float64{
		"betas": s.Betas, "alphas_cumprod": s.AlphasCumprod, "alphas_cumprod_prev": s.AlphasCumprodPrev,
		"sqrt_alphas_cumprod": s.SqrtAlphasCumprod, "sqrt_one_minus_alphas_cumprod": s.SqrtOneMinusAlphasCumprod,
		"sqrt_recip_alphas_cumprod": s.SqrtRecipAlphasCumprod, "sqrt_recipm1_alphas_cumprod": s.SqrtRecipm1AlphasCumprod,
		"posterior_variance": s.PosteriorVariance, "posterior_log_variance_clipped": s.PosteriorLogVarianceClipped,
		"posterior_mean_coef1": s.PosteriorMeanCoef1, "posterior_mean_coef2": s.PosteriorMeanCoef2, "log_betas": s.LogBetas,
	}
}

// diffusionInputs are the inputs of a diffusion case's io.safetensors (its
// README's table): the model outputs, latents, noise and timesteps fed to
// each process, and the step counts of the extra respacings. Every other
// tensor is an expected table or result. q_sample's tensors are named after
// the sampling respacing.
func diffusionInputs(c fixtures.Case) []string {
	q := "q" + c.Config["sampling_respacing"].(string)
	return []string{
		"train_x_start", "train_noise", "train_t", "train_model_out",
		"sample_x", "sample_noise", "sample_t", "sample_model_out",
		q + "_x_start", q + "_noise", q + "_t",
		"respace_*.count",
	}
}

// computeDiffusion builds the case's schedules and runs its training
// terms, sampling step and q_sample, recording every result the reference
// provides.
func computeDiffusion(t *testing.T, c fixtures.Case) *fixtures.Got {
	t.Helper()
	io := c.Open(t, "io.safetensors")
	got := fixtures.NewGot()
	kw := c.Config["create_diffusion_kwargs"].(map[string]any)
	T := int(kw["diffusion_steps"].(float64))
	train, err := Respaced(T, c.Config["training_respacing"].(string))
	if err != nil {
		t.Fatal(err)
	}
	sampling := c.Config["sampling_respacing"].(string)
	sample, err := Respaced(T, sampling)
	if err != nil {
		t.Fatal(err)
	}
	const tableTol, tol = 1e-12, 5e-5
	got.F64(fmt.Sprintf("raw_betas_linear_%d", T), LinearBetas(T), tableTol)
	for prefix, s := range map[string]*Schedule{fmt.Sprintf("t%d", T): train, "t" + sampling: sample} {
		for name, v := range tables(s) {
			got.F64(prefix+"_"+name, v, tableTol)
		}
		got.Ints(prefix+"_timestep_map", s.TimestepMap)
	}
	// The extra respacings, discovered from their step counts.
	f, err := safetensors.Open(filepath.Join(c.Dir, "io.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, info := range f.Tensors() {
		key, ok := strings.CutSuffix(info.Name, ".count")
		if !ok {
			continue
		}
		s, err := Respaced(T, fmt.Sprint(io.Ints(info.Name)[0]))
		if err != nil {
			t.Fatal(err)
		}
		got.F64(key+".betas", s.Betas, tableTol)
		got.Ints(key+".timestep_map", s.TimestepMap)
	}

	shp := io.Shape("train_x_start")
	sh := Shape{B: int(shp[0]), C: int(shp[1]), HW: int(shp[2] * shp[3])}
	n := sh.B * sh.C * sh.HW

	// Training: q_sample, p_mean_variance, the true posterior and the
	// hybrid loss on the training diffusion.
	tt, x0 := io.Ints("train_t"), io.F32("train_x_start")
	xt := make([]float32, n)
	if err := train.QSample(xt, x0, io.F32("train_noise"), tt, sh); err != nil {
		t.Fatal(err)
	}
	got.F32("train_x_t", xt, tol)
	mv, err := train.PMeanVariance(io.F32("train_model_out"), xt, tt, sh)
	if err != nil {
		t.Fatal(err)
	}
	got.F32("train_model_mean", mv.Mean, tol)
	got.F32("train_model_log_var", mv.LogVariance, tol)
	got.F32("train_pred_xstart", mv.PredXStart, tol)
	// q_posterior_mean_variance, which the VB term compares p with: the
	// schedule's float64 tables cast to float32 as the reference casts them.
	trueMean, trueLogVar := make([]float32, n), make([]float32, n)
	per := sh.C * sh.HW
	for i := range trueMean {
		tb := tt[i/per]
		trueMean[i] = float32(train.PosteriorMeanCoef1[tb])*x0[i] + float32(train.PosteriorMeanCoef2[tb])*xt[i]
		trueLogVar[i] = float32(train.PosteriorLogVarianceClipped[tb])
	}
	got.F32("train_true_mean", trueMean, tol)
	got.F32("train_true_log_var", trueLogVar, tol)
	losses, err := train.TrainingLosses(nil, io.F32("train_model_out"), x0, io.F32("train_noise"), tt, sh, 1)
	if err != nil {
		t.Fatal(err)
	}
	got.F32("train_mse", losses.MSE, tol)
	got.F32("train_vb", losses.VB, tol)
	got.F32("train_loss", losses.Loss, tol)
	got.Ints("train_model_t", mapped(train, tt))

	// Sampling: one p_sample step of the respaced diffusion.
	st := io.Ints("sample_t")
	out := make([]float32, n)
	smv, err := sample.PSample(out, io.F32("sample_model_out"), io.F32("sample_x"), io.F32("sample_noise"), st, sh)
	if err != nil {
		t.Fatal(err)
	}
	got.F32("sample_out", out, tol)
	got.F32("sample_mean", smv.Mean, tol)
	got.F32("sample_log_var", smv.LogVariance, tol)
	got.F32("sample_pred_xstart", smv.PredXStart, tol)
	got.Ints("sample_model_t", mapped(sample, st))

	// q_sample on the respaced diffusion uses its own tables directly.
	qp := "q" + sampling
	q := make([]float32, n)
	if err := sample.QSample(q, io.F32(qp+"_x_start"), io.F32(qp+"_noise"), io.Ints(qp+"_t"), sh); err != nil {
		t.Fatal(err)
	}
	got.F32(qp+"_x_t", q, tol)
	return got
}

// compareDiffusion checks a diffusion case's io.safetensors against got:
// every tensor must be an input or compared.
func compareDiffusion(c fixtures.Case, got *fixtures.Got, logf func(string, ...any)) []error {
	return fixtures.Compare(filepath.Join(c.Dir, "io.safetensors"), diffusionInputs(c), got, logf)
}

// The schedules, respacings, training terms, sampling step and q_sample
// reproduce the reference's.
func TestFixtureDiffusion(t *testing.T) {
	fixtures.Run(t, "diffusion", func(t *testing.T, c fixtures.Case) {
		fixtures.Report(t, compareDiffusion(c, computeDiffusion(t, c), t.Logf))
	})
}

// A corrupted expected tensor (NaN, or one element 10% off) or a NaN input
// in a copy of the case fails the comparison of TestFixtureDiffusion.
func TestFixtureDiffusionMutations(t *testing.T) {
	fixtures.Run(t, "diffusion", func(t *testing.T, c fixtures.Case) {
		got := computeDiffusion(t, c)
		fixtures.CheckMutations(t, c, "io.safetensors", diffusionInputs(c), func(mc fixtures.Case) []error {
			return compareDiffusion(mc, got, nil)
		})
	})
}

func mapped(s *Schedule, t []int) []int {
	out := make([]int, len(t))
	for i, ti := range t {
		out[i] = s.TimestepMap[ti]
	}
	return out
}

// The loss gradient with respect to the model output matches finite
// differences of the loss (float64), including t = 0 and both edge bins,
// with uniform and with per-sample (P2-style) weights on the ε term.
func TestTrainingLossGradient(t *testing.T) {
	s := Linear(1000)
	sh := Shape{B: 4, C: 2, HW: 3}
	n := sh.C * sh.HW
	rng := rand.New(rand.NewPCG(1, 2))
	out := make([]float64, 2*sh.B*n)
	x0 := make([]float64, sh.B*n)
	noise := make([]float64, sh.B*n)
	for i := range out {
		out[i] = rng.NormFloat64()
	}
	for b := range sh.B {
		for i := range n {
			x0[b*n+i] = 1.1 * rng.NormFloat64()
			noise[b*n+i] = rng.NormFloat64()
			out[(2*b+1)*n+i] = rng.Float64()*2.2 - 1.1
		}
	}
	x0[0], x0[1] = -1.05, 1.02 // both open-ended bins at t = 0
	ts := []int{0, 1, 500, 999}
	for _, weights := range [][]float64{nil, {0.25, 2, 1, 0.5}} {
		w := func(b int) float64 {
			if weights == nil {
				return 1
			}
			return weights[b]
		}
		// lossOf returns the batch means of the loss and of its weighted
		// ε part.
		lossOf := func(o []float64) (loss, eps float64) {
			l, m, v := make([]float64, sh.B), make([]float64, sh.B), make([]float64, sh.B)
			trainingLosses(l, m, v, nil, o, x0, noise, ts, s, n, 1, weights)
			for b := range l {
				if !fixtures.Within(math.Abs(l[b]-(w(b)*m[b]+v[b])), 1e-12) {
					t.Fatalf("weights %v: loss[%d] = %g, want w·mse + vb = %g", weights, b, l[b], w(b)*m[b]+v[b])
				}
				loss += l[b] / float64(sh.B)
				eps += w(b) * m[b] / float64(sh.B)
			}
			return loss, eps
		}
		grad := make([]float64, len(out))
		l, m, v := make([]float64, sh.B), make([]float64, sh.B), make([]float64, sh.B)
		trainingLosses(l, m, v, grad, out, x0, noise, ts, s, n, 1/float64(sh.B), weights)
		for i := range out {
			b, isV := i/(2*n), (i/n)%2 == 1
			// The VB term sees the mean detached, so ε is trained by the MSE
			// alone; v reaches the loss only through the VB term.
			const h = 1e-6
			orig := out[i]
			out[i] = orig + h
			upLoss, upEps := lossOf(out)
			out[i] = orig - h
			downLoss, downEps := lossOf(out)
			out[i] = orig
			fd := (upLoss - downLoss) / (2 * h)
			if !isV {
				fd = (upEps - downEps) / (2 * h)
			}
			if !fixtures.Within(math.Abs(fd-grad[i]), 1e-6*math.Max(1, math.Abs(fd))) {
				t.Errorf("weights %v: ∂loss/∂out[%d] (sample %d, t=%d, v=%v) = %.9g, finite differences %.9g", weights, i, b, ts[b], isV, grad[i], fd)
			}
		}
	}
}

// P2 weights are 1/(k + SNR)^γ: ≈ 1 at pure noise, small where the
// signal dominates, all 1 at γ = 0; bad settings and timesteps are
// refused.
func TestP2Weights(t *testing.T) {
	s := Linear(1000)
	w, err := s.P2Weights([]int{0, 500, 999}, 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	for i, tv := range []int{0, 500, 999} {
		ab := s.AlphasCumprod[tv]
		want := (1 - ab) // 1/(1 + ᾱ/(1−ᾱ)) = 1 − ᾱ
		if !fixtures.Within(math.Abs(float64(w[i])-want), 1e-6) {
			t.Errorf("P2 weight at t=%d = %g, want 1−ᾱ = %g", tv, w[i], want)
		}
	}
	if !(w[0] < 1e-3 && w[1] > 0.9 && w[2] > 0.999) {
		t.Errorf("P2 weights %v: want ≈0 at t=0 and ≈1 at high noise", w)
	}
	flat, err := s.P2Weights([]int{0, 999}, 1, 0)
	if err != nil || flat[0] != 1 || flat[1] != 1 {
		t.Errorf("γ = 0: %v, %v; want all 1", flat, err)
	}
	for _, bad := range []struct {
		t        []int
		k, gamma float64
	}{{[]int{0}, 0, 1}, {[]int{0}, 1, -1}, {[]int{0}, math.NaN(), 1}, {[]int{0}, 1, math.Inf(1)}, {[]int{1000}, 1, 1}, {[]int{-1}, 1, 1}} {
		if _, err := s.P2Weights(bad.t, bad.k, bad.gamma); err == nil {
			t.Errorf("P2Weights(%v, k=%v, γ=%v) = nil error", bad.t, bad.k, bad.gamma)
		}
	}
}

func TestSpaceTimesteps(t *testing.T) {
	cases := []struct {
		spec string
		want string
		err  bool
	}{
		{"4", "[0 333 666 999]", false},
		{"1", "[0]", false},
		{"2,2", "[0 499 500 999]", false},
		{"ddim4", "[0 250 500 750]", false},
		{"ddim3", "[0 334 668]", false},
		{"ddim999", "", true},
		{"0", "", true},
		{"x", "", true},
		{"600,600", "", true},
	}
	for _, c := range cases {
		got, err := SpaceTimesteps(1000, c.spec)
		if (err != nil) != c.err || (!c.err && fmt.Sprint(got) != c.want) {
			t.Errorf("SpaceTimesteps(1000, %q) = %v, %v; want %s (error %v)", c.spec, got, err, c.want, c.err)
		}
	}
}

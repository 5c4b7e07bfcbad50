package ddpm

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/dcdit/dcdit/internal/fixtures"
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

func TestFixtureDiffusion(t *testing.T) {
	fixtures.Run(t, "diffusion", func(t *testing.T, c fixtures.Case) {
		io := c.Open(t, "io.safetensors")
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
		within := func(name string, got, want []float64, tol float64) {
			t.Helper()
			if e := fixtures.RelErr(got, want); e > tol {
				t.Errorf("%s: err %.3g > %.1g", name, e, tol)
			}
		}
		within("raw_betas_linear", LinearBetas(T), io.F64(fmt.Sprintf("raw_betas_linear_%d", T)), 1e-12)
		for prefix, s := range map[string]*Schedule{fmt.Sprintf("t%d", T): train, "t" + sampling: sample} {
			for name, got := range tables(s) {
				within(prefix+"_"+name, got, io.F64(prefix+"_"+name), 1e-12)
			}
			if want := io.Ints(prefix + "_timestep_map"); fmt.Sprint(want) != fmt.Sprint(s.TimestepMap) {
				t.Errorf("%s_timestep_map = %v, want %v", prefix, s.TimestepMap, want)
			}
		}
		for _, key := range []string{"respace_a", "respace_b"} {
			if !io.Has(key + ".count") {
				continue
			}
			s, err := Respaced(T, fmt.Sprint(io.Ints(key + ".count")[0]))
			if err != nil {
				t.Fatal(err)
			}
			within(key+".betas", s.Betas, io.F64(key+".betas"), 1e-12)
			if want := io.Ints(key + ".timestep_map"); fmt.Sprint(want) != fmt.Sprint(s.TimestepMap) {
				t.Errorf("%s.timestep_map = %v, want %v", key, s.TimestepMap, want)
			}
		}

		shp := io.Shape("train_x_start")
		sh := Shape{B: int(shp[0]), C: int(shp[1]), HW: int(shp[2] * shp[3])}
		close32 := func(name string, got []float32) {
			t.Helper()
			if e := fixtures.RelErr(got, io.F32(name)); e > 5e-5 {
				t.Errorf("%s: err %.3g > 5e-5", name, e)
			}
		}

		// Training: q_sample, p_mean_variance and the hybrid loss on the
		// full 1000-step diffusion.
		tt := io.Ints("train_t")
		xt := make([]float32, sh.B*sh.C*sh.HW)
		if err := train.QSample(xt, io.F32("train_x_start"), io.F32("train_noise"), tt, sh); err != nil {
			t.Fatal(err)
		}
		close32("train_x_t", xt)
		mv, err := train.PMeanVariance(io.F32("train_model_out"), xt, tt, sh)
		if err != nil {
			t.Fatal(err)
		}
		close32("train_model_mean", mv.Mean)
		close32("train_model_log_var", mv.LogVariance)
		close32("train_pred_xstart", mv.PredXStart)
		losses, err := train.TrainingLosses(nil, io.F32("train_model_out"), io.F32("train_x_start"), io.F32("train_noise"), tt, sh, 1)
		if err != nil {
			t.Fatal(err)
		}
		close32("train_mse", losses.MSE)
		close32("train_vb", losses.VB)
		close32("train_loss", losses.Loss)
		if mt := io.Ints("train_model_t"); fmt.Sprint(mapped(train, tt)) != fmt.Sprint(mt) {
			t.Errorf("model timesteps %v, want %v", mapped(train, tt), mt)
		}

		// Sampling: one p_sample step of the respaced diffusion.
		st := io.Ints("sample_t")
		out := make([]float32, sh.B*sh.C*sh.HW)
		smv, err := sample.PSample(out, io.F32("sample_model_out"), io.F32("sample_x"), io.F32("sample_noise"), st, sh)
		if err != nil {
			t.Fatal(err)
		}
		close32("sample_out", out)
		close32("sample_mean", smv.Mean)
		close32("sample_log_var", smv.LogVariance)
		close32("sample_pred_xstart", smv.PredXStart)
		if mt := io.Ints("sample_model_t"); fmt.Sprint(mapped(sample, st)) != fmt.Sprint(mt) {
			t.Errorf("model timesteps %v, want %v", mapped(sample, st), mt)
		}

		// q_sample on the respaced diffusion uses its own tables directly.
		q := make([]float32, sh.B*sh.C*sh.HW)
		if err := sample.QSample(q, io.F32("q250_x_start"), io.F32("q250_noise"), io.Ints("q250_t"), sh); err != nil {
			t.Fatal(err)
		}
		close32("q250_x_t", q)
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
// differences of the loss (float64), including t = 0 and both edge bins.
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
	// lossOf returns the batch means of the loss and of its MSE part.
	lossOf := func(o []float64) (loss, mse float64) {
		l, m, v := make([]float64, sh.B), make([]float64, sh.B), make([]float64, sh.B)
		trainingLosses(l, m, v, nil, o, x0, noise, ts, s, n, 1)
		for b := range l {
			loss += l[b] / float64(sh.B)
			mse += m[b] / float64(sh.B)
		}
		return loss, mse
	}
	grad := make([]float64, len(out))
	l, m, v := make([]float64, sh.B), make([]float64, sh.B), make([]float64, sh.B)
	trainingLosses(l, m, v, grad, out, x0, noise, ts, s, n, 1/float64(sh.B))
	for i := range out {
		b, isV := i/(2*n), (i/n)%2 == 1
		// The VB term sees the mean detached, so ε is trained by the MSE
		// alone; v reaches the loss only through the VB term.
		const h = 1e-6
		orig := out[i]
		out[i] = orig + h
		upLoss, upMSE := lossOf(out)
		out[i] = orig - h
		downLoss, downMSE := lossOf(out)
		out[i] = orig
		fd := (upLoss - downLoss) / (2 * h)
		if !isV {
			fd = (upMSE - downMSE) / (2 * h)
		}
		if math.Abs(fd-grad[i]) > 1e-6*math.Max(1, math.Abs(fd)) {
			t.Errorf("∂loss/∂out[%d] (sample %d, t=%d, v=%v) = %.9g, finite differences %.9g", i, b, ts[b], isV, grad[i], fd)
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

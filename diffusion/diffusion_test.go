package diffusion

import (
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/dcdit/dcdit/diffusion/ddpm"
	"github.com/dcdit/dcdit/diffusion/flowmatch"
)

func table(t *testing.T) *flowmatch.Table {
	t.Helper()
	tb, err := flowmatch.DefaultConfig().TrainingTable()
	if err != nil {
		t.Fatal(err)
	}
	return tb
}

// noised draws a batch's noise levels and noise for x0 from rng, as a
// training step does, and returns them with the noisy input and the
// model times.
func noised(t *testing.T, proc Process, x0 []float32, sh Shape, rng *rand.Rand) (*Noise, []float32, []float32) {
	t.Helper()
	nz, err := proc.Draw(rng, sh)
	if err != nil {
		t.Fatal(err)
	}
	xt := make([]float32, len(x0))
	if err := proc.Noisy(xt, x0, nz, sh); err != nil {
		t.Fatal(err)
	}
	ts, err := proc.ModelTimes(nz)
	if err != nil {
		t.Fatal(err)
	}
	return nz, xt, ts
}

func ramp(n int, scale float32) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = scale * float32(i%7-3)
	}
	return v
}

// Routing a caller through the seam must change no number: every step of
// a training iteration equals the process package's own call, bit for bit,
// and the draw consumes the generator in the order the trainer always has.
func TestTrainingMatchesProcessPackages(t *testing.T) {
	sh := Shape{B: 3, C: 2, HW: 4}
	n := sh.C * sh.HW
	sched := ddpm.Linear(1000)
	x0 := ramp(sh.B*n, 0.25)
	cases := []struct {
		name string
		proc Process
		// legacy draws and evaluates one step with the process package
		// directly: levels, noise, input, model times, loss and grad.
		legacy func(rng *rand.Rand, out []float32) ([]int, []float32, []float32, []float32, *Losses, []float32)
	}{
		{"ddpm uniform", &DDPM{Schedule: sched}, ddpmLegacy(t, sched, sh, x0, P2{})},
		{"ddpm p2", &DDPM{Schedule: sched, P2: P2{K: 1, Gamma: 1}}, ddpmLegacy(t, sched, sh, x0, P2{K: 1, Gamma: 1})},
		{"flow matching", &FlowMatch{Table: table(t)}, fmLegacy(t, table(t), sh, x0)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out := ramp(sh.B*c.proc.OutChannels(sh.C)*sh.HW, 0.1)
			nz, xt, ts := noised(t, c.proc, x0, sh, rand.New(rand.NewPCG(1, 2)))
			grad := make([]float32, len(out))
			l, err := c.proc.Loss(grad, out, x0, nz, sh)
			if err != nil {
				t.Fatal(err)
			}
			lv, noise, wantXt, wantTs, wantL, wantGrad := c.legacy(rand.New(rand.NewPCG(1, 2)), out)
			for _, cmp := range []struct {
				what      string
				got, want any
			}{
				{"levels", nz.Levels, lv}, {"noise", nz.Noise, noise}, {"input", xt, wantXt},
				{"model times", ts, wantTs}, {"losses", l, wantL}, {"gradient", grad, wantGrad},
			} {
				if !reflect.DeepEqual(cmp.got, cmp.want) {
					t.Errorf("%s: %v, want %v", cmp.what, cmp.got, cmp.want)
				}
			}
		})
	}
}

func ddpmLegacy(t *testing.T, s *ddpm.Schedule, sh Shape, x0 []float32, p P2) func(*rand.Rand, []float32) ([]int, []float32, []float32, []float32, *Losses, []float32) {
	return func(rng *rand.Rand, out []float32) ([]int, []float32, []float32, []float32, *Losses, []float32) {
		lv := make([]int, sh.B)
		for i := range lv {
			lv[i] = rng.IntN(s.Steps())
		}
		noise := make([]float32, len(x0))
		for i := range noise {
			noise[i] = float32(rng.NormFloat64())
		}
		xt := make([]float32, len(x0))
		if err := s.QSample(xt, x0, noise, lv, ddpm.Shape(sh)); err != nil {
			t.Fatal(err)
		}
		ts := make([]float32, sh.B)
		for i, v := range lv {
			ts[i] = float32(v)
		}
		var w []float32
		if p.Gamma != 0 {
			var err error
			if w, err = s.P2Weights(lv, p.K, p.Gamma); err != nil {
				t.Fatal(err)
			}
		}
		grad := make([]float32, len(out))
		l, err := s.WeightedTrainingLosses(grad, out, x0, noise, lv, ddpm.Shape(sh), 1/float32(sh.B), w)
		if err != nil {
			t.Fatal(err)
		}
		return lv, noise, xt, ts, &Losses{Loss: l.Loss, MSE: l.MSE, VB: l.VB}, grad
	}
}

func fmLegacy(t *testing.T, tb *flowmatch.Table, sh Shape, x0 []float32) func(*rand.Rand, []float32) ([]int, []float32, []float32, []float32, *Losses, []float32) {
	return func(rng *rand.Rand, out []float32) ([]int, []float32, []float32, []float32, *Losses, []float32) {
		lv := make([]int, sh.B)
		for i := range lv {
			k, err := tb.Index(rng.Float32())
			if err != nil {
				t.Fatal(err)
			}
			lv[i] = k
		}
		noise := make([]float32, len(x0))
		for i := range noise {
			noise[i] = float32(rng.NormFloat64())
		}
		sig, steps, err := tb.Lookup(lv)
		if err != nil {
			t.Fatal(err)
		}
		xt := make([]float32, len(x0))
		if err := flowmatch.QSample(xt, x0, noise, sig); err != nil {
			t.Fatal(err)
		}
		ts := make([]float32, sh.B)
		for i, v := range steps {
			ts[i] = flowmatch.ModelTime(v)
		}
		target := make([]float32, len(x0))
		if err := flowmatch.Target(target, x0, noise); err != nil {
			t.Fatal(err)
		}
		grad := make([]float32, len(out))
		l, err := flowmatch.TrainingLoss(grad, out, target, sh.B)
		if err != nil {
			t.Fatal(err)
		}
		return lv, noise, xt, ts, &Losses{Loss: l.PerSample, MSE: l.PerSample}, grad
	}
}

// The samplers behind the seam are the process packages' own: the same
// seed gives the same latents, guided or not, and the model learns which
// half of a guided batch is unconditional from the flag alone.
func TestSampleMatchesProcessPackages(t *testing.T) {
	sh := Shape{B: 2, C: 4, HW: 3}
	respaced, err := ddpm.Respaced(1000, "4")
	if err != nil {
		t.Fatal(err)
	}
	fmSched, err := flowmatch.DefaultConfig().Schedule(flowmatch.Tongyi, 4)
	if err != nil {
		t.Fatal(err)
	}
	// cond is the conditional half's signal; the unconditional half sees 0.
	net := func(x []float32, t []float32, cond []float32, outC int) []float32 {
		B := len(t)
		per := len(x) / B
		out := make([]float32, B*outC*sh.HW)
		for b := range B {
			for i := range outC * sh.HW {
				out[b*outC*sh.HW+i] = 0.1*x[b*per+i%per] + 0.001*t[b] + cond[b]
			}
		}
		return out
	}
	labels := []int{3, 5}
	const null = 9
	signal := func(y int) float32 {
		if y == null {
			return 0
		}
		return float32(y) / 10
	}
	seam := func(outC int) Model {
		return func(x, t []float32, guided bool) ([]float32, error) {
			cond := make([]float32, len(t))
			for b := range sh.B {
				cond[b] = signal(labels[b]) // an unguided batch or the first half
			}
			return net(x, t, cond, outC), nil
		}
	}
	cases := []struct {
		name   string
		proc   Process
		scale  float64
		legacy func() ([]float32, error)
	}{
		{"ddpm unguided", &DDPM{Schedule: respaced}, 1, func() ([]float32, error) {
			return ddpmSample(respaced, sh, labels, null, 1, net)
		}},
		{"ddpm guided", &DDPM{Schedule: respaced}, 4, func() ([]float32, error) {
			return ddpmSample(respaced, sh, labels, null, 4, net)
		}},
		{"flow matching unguided", &FlowMatch{Schedule: fmSched}, 0, func() ([]float32, error) {
			return fmSample(fmSched, sh, labels, 0, net, signal)
		}},
		{"flow matching guided", &FlowMatch{Schedule: fmSched}, 3, func() ([]float32, error) {
			return fmSample(fmSched, sh, labels, 3, net, signal)
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := c.proc.Sample(seam(c.proc.OutChannels(sh.C)), sh, SampleOptions{Guidance: c.scale, Seed: 7})
			if err != nil {
				t.Fatal(err)
			}
			want, err := c.legacy()
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("sample %v, want %v", got, want)
			}
		})
	}
}

func ddpmSample(s *ddpm.Schedule, sh Shape, labels []int, null int, scale float32, net func(x, t, cond []float32, outC int) []float32) ([]float32, error) {
	model := func(x []float32, t []int, y []int) ([]float32, error) {
		ts, cond := make([]float32, len(t)), make([]float32, len(t))
		for i, v := range t {
			ts[i] = float32(v)
			if y[i] != null {
				cond[i] = float32(y[i]) / 10
			}
		}
		return net(x, ts, cond, 2*sh.C), nil
	}
	return s.Sample(model, ddpm.Shape(sh), ddpm.SampleOptions{Classes: labels, Guidance: ddpm.Guidance{Scale: scale, NullClass: null}, Seed: 7})
}

func fmSample(s *flowmatch.Schedule, sh Shape, labels []int, scale float64, net func(x, t, cond []float32, outC int) []float32, signal func(int) float32) ([]float32, error) {
	x := make([]float32, sh.B*sh.C*sh.HW)
	rng := rand.New(rand.NewPCG(7, 7^0x5851f42d4c957f2d))
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	model := func(x, t []float32, guided bool) ([]float32, error) {
		cond := make([]float32, len(t))
		for b := range sh.B {
			cond[b] = signal(labels[b])
		}
		return net(x, t, cond, sh.C), nil
	}
	return s.Sample(model, x, sh.B, flowmatch.SampleOptions{Guidance: flowmatch.Guidance{Scale: scale}})
}

func TestErrors(t *testing.T) {
	sh := Shape{B: 2, C: 1, HW: 2}
	good := &Noise{Levels: []int{1, 2}, Noise: make([]float32, 4)}
	x0, out2 := make([]float32, 4), make([]float32, 8)
	model := func(x, t []float32, guided bool) ([]float32, error) { return make([]float32, 2*len(x)), nil }
	cases := []struct {
		name string
		run  func() error
		want string
	}{
		{"ddpm without schedule", func() error { _, err := (&DDPM{}).Draw(rand.New(rand.NewPCG(1, 1)), sh); return err }, "no schedule"},
		{"flow matching without table", func() error { _, err := (&FlowMatch{}).ModelTimes(good); return err }, "no training table"},
		{"flow matching without schedule", func() error { _, err := (&FlowMatch{}).Sample(model, sh, SampleOptions{}); return err }, "no sampling schedule"},
		{"empty batch", func() error {
			_, err := (&DDPM{Schedule: ddpm.Linear(10)}).Draw(rand.New(rand.NewPCG(1, 1)), Shape{C: 1, HW: 1})
			return err
		}, "positive sizes"},
		{"noise of another batch", func() error {
			return (&DDPM{Schedule: ddpm.Linear(10)}).Noisy(make([]float32, 4), x0, &Noise{Levels: []int{1}, Noise: make([]float32, 4)}, sh)
		}, "1 levels"},
		{"level outside the schedule", func() error {
			_, err := (&DDPM{Schedule: ddpm.Linear(10)}).ModelTimes(&Noise{Levels: []int{10}})
			return err
		}, "outside [0, 10)"},
		{"p2 with k = 0", func() error {
			_, err := (&DDPM{Schedule: ddpm.Linear(10), P2: P2{Gamma: 1}}).Loss(nil, out2, x0, good, sh)
			return err
		}, "P2 weights need k > 0"},
		{"flow matching output of learned sigma", func() error {
			_, err := (&FlowMatch{}).Loss(nil, out2, x0, good, sh)
			return err
		}, "model output has 8 values, want 4"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if err := c.run(); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("err = %v, want it to mention %q", err, c.want)
			}
		})
	}
}

// Clean inverts the noising: an output that holds the exact noise (DDPM's
// ε, flow matching's velocity x0 − noise) gives back the clean latents,
// at the model times the process conditions on (a respaced DDPM's
// original timesteps), and a model time off the schedule is refused.
func TestClean(t *testing.T) {
	sh := Shape{B: 3, C: 2, HW: 4}
	n := sh.C * sh.HW
	x0 := ramp(sh.B*n, 0.25)
	respaced, err := ddpm.Respaced(1000, "10")
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		proc Process
		// exact is the output that predicts noise for x0 exactly.
		exact func(x0, noise []float32) []float32
	}{
		{"ddpm", &DDPM{Schedule: respaced}, func(x0, noise []float32) []float32 {
			out := make([]float32, 2*len(noise))
			for b := range sh.B {
				copy(out[2*b*n:], noise[b*n:(b+1)*n])
			}
			return out
		}},
		{"flow matching", &FlowMatch{Table: table(t)}, func(x0, noise []float32) []float32 {
			out := make([]float32, len(noise))
			for i := range out {
				out[i] = x0[i] - noise[i]
			}
			return out
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			nz, xt, ts := noised(t, c.proc, x0, sh, rand.New(rand.NewPCG(3, 4)))
			got := make([]float32, len(x0))
			if err := c.proc.Clean(got, xt, c.exact(x0, nz.Noise), ts, sh); err != nil {
				t.Fatal(err)
			}
			for i, v := range got {
				if !(math.Abs(float64(v-x0[i])) <= 1e-3*(1+math.Abs(float64(x0[i])))) {
					t.Fatalf("x̂0[%d] = %v, want %v (model time %v)", i, v, x0[i], ts[i/n])
				}
			}
			if err := c.proc.Clean(got[:1], xt, c.exact(x0, nz.Noise), ts, sh); err == nil {
				t.Error("a short estimate buffer accepted")
			}
		})
	}
	d := &DDPM{Schedule: respaced}
	x := make([]float32, n)
	if err := d.Clean(x, x, make([]float32, 2*n), []float32{5}, Shape{B: 1, C: sh.C, HW: sh.HW}); err == nil || !strings.Contains(err.Error(), "none of the schedule's timesteps") {
		t.Errorf("a model time off the schedule: error %v", err)
	}
}

package flowmatch

import (
	"errors"
	"math"
	"math/big"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/dcdit/dcdit/internal/fixtures"
)

// The shift fixes both ends, is the identity at s = 1, and its float32
// path stays within one rounding per operation of the float64 one.
func TestShift(t *testing.T) {
	cases := []struct{ sigma, shift, want float64 }{
		{0, 3, 0}, {1, 3, 1}, {0.5, 3, 0.75}, {0.25, 3, 0.5},
		{0.3, 1, 0.3}, {0.5, 6, 6.0 / 7}, {0.5, 0.5, 1.0 / 3},
	}
	for _, c := range cases {
		if got := Shift(c.sigma, c.shift); !fixtures.Within(math.Abs(got-c.want), 1e-15) {
			t.Errorf("Shift(%v, %v) = %v, want %v", c.sigma, c.shift, got, c.want)
		}
		got32 := float64(Shift32(float32(c.sigma), c.shift))
		if !fixtures.Within(math.Abs(got32-c.want), 4e-7*math.Max(c.want, 1e-30)+1e-30) {
			t.Errorf("Shift32(%v, %v) = %v, want %v within float32 rounding", c.sigma, c.shift, got32, c.want)
		}
	}
}

// Both schedules run from 1 to 0 in N steps, strictly descending, with
// timesteps σ·T and model times 1 − σ; bad settings are refused.
func TestSchedules(t *testing.T) {
	cfg := DefaultConfig()
	for _, p := range []Pipeline{Tongyi, Diffusers} {
		for _, n := range []int{1, 2, 8, 9, 17, 50, 100} {
			s, err := cfg.Schedule(p, n)
			if err != nil {
				t.Fatal(err)
			}
			if s.Steps() != n || len(s.Sigmas) != n+1 || s.Pipeline != p {
				t.Fatalf("%v, %d steps: %d steps, %d sigmas, pipeline %v", p, n, s.Steps(), len(s.Sigmas), s.Pipeline)
			}
			if s.Sigmas[0] != 1 || s.Sigmas[n] != 0 {
				t.Errorf("%v, %d steps: sigmas run from %v to %v, want 1 to 0", p, n, s.Sigmas[0], s.Sigmas[n])
			}
			for i := range n {
				if !(s.Sigmas[i+1] < s.Sigmas[i]) {
					t.Errorf("%v, %d steps: sigma %d = %v not below sigma %d = %v", p, n, i+1, s.Sigmas[i+1], i, s.Sigmas[i])
				}
				if s.Timesteps[i] != s.Sigmas[i]*1000 {
					t.Errorf("%v, %d steps: timestep %d = %v, want 1000·%v", p, n, i, s.Timesteps[i], s.Sigmas[i])
				}
				// 1 − σ up to the rounding of σ·1000 and of the division.
				if tm := s.ModelTimes()[i]; !fixtures.Within(math.Abs(float64(tm)-(1-float64(s.Sigmas[i]))), 2e-7) {
					t.Errorf("%v, %d steps: model time %d = %v, want 1 − %v", p, n, i, tm, s.Sigmas[i])
				}
			}
			// Unshifted levels i/N, shifted in float64: both paths within
			// one float32 ulp of the exact schedule.
			for i := range n {
				want := Shift(1-float64(i)/float64(n), cfg.Shift)
				if !fixtures.Within(math.Abs(float64(s.Sigmas[i])-want), 1.2e-7) {
					t.Errorf("%v, %d steps: sigma %d = %v, want %v within an ulp", p, n, i, s.Sigmas[i], want)
				}
			}
		}
	}
	bad := []struct {
		name string
		cfg  Config
		p    Pipeline
		n    int
	}{
		{"no steps", cfg, Tongyi, 0},
		{"no diffusers steps", cfg, Diffusers, 0},
		{"zero shift", Config{NumTrainTimesteps: 1000, Shift: 0}, Tongyi, 8},
		{"NaN shift", Config{NumTrainTimesteps: 1000, Shift: math.NaN()}, Diffusers, 8},
		{"no train timesteps", Config{Shift: 3}, Tongyi, 8},
		{"unknown pipeline", cfg, Pipeline(7), 8},
	}
	for _, b := range bad {
		if _, err := b.cfg.Schedule(b.p, b.n); err == nil {
			t.Errorf("%s: no error", b.name)
		}
	}
	if _, err := cfg.Diffusers([]float32{1, 1.5}); err == nil || !strings.Contains(err.Error(), "sigma 1") {
		t.Errorf("Diffusers with a sigma above 1: error %v, want one naming sigma 1", err)
	}
}

// DefaultSigmas' ends are exact (PyTorch counts the second half down from
// the end), and every value is within a few ulps of 1 − i·(1 − 1/N)/(N − 1).
func TestDefaultSigmas(t *testing.T) {
	for _, n := range []int{1, 2, 3, 8, 15, 16, 17, 31, 32, 33, 50, 1000} {
		s := DefaultSigmas(n)
		if len(s) != n || s[0] != 1 || s[n-1] != float32(1/float64(n)) {
			t.Fatalf("N=%d: %d values from %v to %v, want %d from 1 to 1/N", n, len(s), s[0], s[len(s)-1], n)
		}
		for i := 1; i < n-1; i++ {
			want := 1 - float64(i)*(1-1/float64(n))/float64(n-1)
			if !fixtures.Within(math.Abs(float64(s[i])-want), 4e-7) {
				t.Errorf("N=%d: value %d = %v, want %v", n, i, s[i], want)
			}
		}
	}
}

// fma32 rounds a·b + c once, as an exact evaluation rounded to float32
// does, including sums that cancel and sums far below an ulp of c.
func TestFMA32(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	type triple struct{ a, b, c float32 }
	cases := []triple{
		{-0.018367346, 3, 1}, {0.1, 10, -1}, {1, 1, 0}, {3, 1.0 / 3, -1},
		{1 + 1.0/(1<<23), 1 - 1.0/(1<<23), -1}, {1.0 / (1 << 30), 1.0 / (1 << 30), 1},
	}
	for range 2000 {
		cases = append(cases, triple{float32(rng.NormFloat64()), float32(rng.NormFloat64() * 1e3), float32(rng.NormFloat64())})
	}
	for _, c := range cases {
		exact := new(big.Float).SetPrec(200).SetFloat64(float64(c.a))
		exact.Mul(exact, new(big.Float).SetPrec(200).SetFloat64(float64(c.b)))
		exact.Add(exact, new(big.Float).SetPrec(200).SetFloat64(float64(c.c)))
		want, _ := exact.Float32()
		if got := fma32(c.a, c.b, c.c); got != want {
			t.Errorf("fma32(%v, %v, %v) = %v, want %v", c.a, c.b, c.c, got, want)
		}
	}
}

// The training table descends from 1, holds σ·T as timesteps, and u maps
// to int(u·T) with u·T rounded to float32 first; u outside [0, 1) and
// indices outside the table are refused.
func TestTrainingTable(t *testing.T) {
	tb, err := DefaultConfig().TrainingTable()
	if err != nil {
		t.Fatal(err)
	}
	if len(tb.Sigmas) != 1000 || tb.Sigmas[0] != 1 || tb.Sigmas[999] != Shift32(0.001, 3) {
		t.Fatalf("table: %d sigmas from %v to %v", len(tb.Sigmas), tb.Sigmas[0], tb.Sigmas[len(tb.Sigmas)-1])
	}
	cases := []struct {
		u    float32
		want int
		err  bool
	}{
		{0, 0, false}, {0.25, 250, false}, {0.0015, 1, false}, {0.999, 999, false},
		{0.99999994, 999, false}, {1, 0, true}, {-0.1, 0, true}, {float32(math.NaN()), 0, true},
	}
	for _, c := range cases {
		got, err := tb.Index(c.u)
		if (err != nil) != c.err || (!c.err && got != c.want) {
			t.Errorf("Index(%v) = %d, %v; want %d (error %v)", c.u, got, err, c.want, c.err)
		}
	}
	sig, ts, err := tb.Lookup([]int{0, 999})
	if err != nil || sig[0] != 1 || ts[0] != 1000 || sig[1] != tb.Sigmas[999] || ts[1] != tb.Timesteps[999] {
		t.Errorf("Lookup: %v %v %v", sig, ts, err)
	}
	if _, _, err := tb.Lookup([]int{1000}); err == nil {
		t.Error("Lookup(1000): no error")
	}
}

// calculate_shift runs through its two anchors.
func TestCalculateShift(t *testing.T) {
	cases := []struct {
		seq  int
		want float64
	}{{256, 0.5}, {4096, 1.15}, {2176, 0.825}, {ImageSeqLen(128, 128), 1.15}}
	for _, c := range cases {
		if got := CalculateShift(c.seq, 256, 4096, 0.5, 1.15); !fixtures.Within(math.Abs(got-c.want), 1e-12) {
			t.Errorf("CalculateShift(%d) = %v, want %v", c.seq, got, c.want)
		}
	}
}

// q_sample and the target meet at the ends: σ = 0 gives x0, σ = 1 the
// noise, and x0 + σ·target is x_σ.
func TestQSampleAndTarget(t *testing.T) {
	x0 := []float32{1, -2, 0.5, 3, 4, -1}
	noise := []float32{0.25, 0.5, -1, 2, -3, 0}
	xt := make([]float32, 6)
	if err := QSample(xt, x0, noise, []float32{0, 1, 0.5}); err != nil {
		t.Fatal(err)
	}
	want := []float32{1, -2, -1, 2, 0.5, -0.5}
	for i := range want {
		if xt[i] != want[i] {
			t.Errorf("x_t[%d] = %v, want %v", i, xt[i], want[i])
		}
	}
	target := make([]float32, 6)
	if err := Target(target, x0, noise); err != nil {
		t.Fatal(err)
	}
	for i := range target {
		if target[i] != noise[i]-x0[i] {
			t.Errorf("target[%d] = %v", i, target[i])
		}
	}
	if err := QSample(xt, x0, noise, []float32{0, 1, 0.5, 0.2}); err == nil {
		t.Error("QSample with 4 sigmas for 6 values: no error")
	}
	if err := QSample(xt[:4], x0, noise, []float32{0, 1, 0.5}); err == nil || !strings.Contains(err.Error(), "dst") {
		t.Errorf("QSample with a short dst: error %v, want one naming dst", err)
	}
}

// The loss gradient with respect to the raw model output matches central
// finite differences of the batch mean (float64), over batch sizes and
// sample sizes, and the loss is zero exactly when −raw is the target.
func TestLossGradient(t *testing.T) {
	cases := []struct {
		name  string
		batch int
		n     int
		seed  uint64
		scale float64
	}{
		{"one sample", 1, 5, 1, 1},
		{"batch of 3", 3, 4, 2, 1},
		{"large outputs", 2, 6, 3, 50},
		{"tiny outputs", 4, 2, 4, 1e-3},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(c.seed, 7))
			raw, target := make([]float64, c.batch*c.n), make([]float64, c.batch*c.n)
			for i := range raw {
				raw[i], target[i] = c.scale*rng.NormFloat64(), c.scale*rng.NormFloat64()
			}
			per := make([]float64, c.batch)
			grad := make([]float64, len(raw))
			trainingLoss(per, grad, raw, target, c.n)
			lossOf := func() float64 { return trainingLoss(make([]float64, c.batch), nil, raw, target, c.n) }
			for i := range raw {
				h := 1e-6 * c.scale
				orig := raw[i]
				raw[i] = orig + h
				up := lossOf()
				raw[i] = orig - h
				down := lossOf()
				raw[i] = orig
				fd := (up - down) / (2 * h)
				if !fixtures.Within(math.Abs(fd-grad[i]), 1e-6*math.Max(1, math.Abs(fd))) {
					t.Errorf("∂loss/∂raw[%d] = %.9g, finite differences %.9g", i, grad[i], fd)
				}
			}
			neg := make([]float64, len(raw))
			for i := range raw {
				neg[i] = -target[i]
			}
			if l := trainingLoss(per, nil, neg, target, c.n); l != 0 {
				t.Errorf("loss of raw = −target is %v, want 0", l)
			}
		})
	}
	// The float32 entry point: per-sample means, their mean, shape errors.
	l, err := TrainingLoss(nil, []float32{1, 1, 0, 0}, []float32{0, 0, 1, 3}, 2)
	if err != nil || l.PerSample[0] != 1 || l.PerSample[1] != 5 || l.Mean != 3 {
		t.Errorf("TrainingLoss = %+v, %v; want per sample [1 5], mean 3", l, err)
	}
	if _, err := TrainingLoss(make([]float32, 3), []float32{1, 1, 0, 0}, []float32{0, 0, 1, 3}, 2); err == nil || !strings.Contains(err.Error(), "grad") {
		t.Errorf("TrainingLoss with a short grad: error %v, want one naming grad", err)
	}
	if _, err := TrainingLoss(nil, []float32{1, 1, 0}, []float32{0, 0, 1}, 2); err == nil {
		t.Error("TrainingLoss with 3 values for 2 samples: no error")
	}
}

// One Euler step moves x by (σ_{i+1} − σ_i)·(−raw); bad indices and
// lengths are refused.
func TestStep(t *testing.T) {
	s := &Schedule{Sigmas: []float32{1, 0.75, 0}, Timesteps: []float32{1000, 750}}
	x, raw := []float32{1, 2}, []float32{4, -8}
	dst := make([]float32, 2)
	if err := s.Step(dst, x, raw, 0); err != nil {
		t.Fatal(err)
	}
	if dst[0] != 2 || dst[1] != 0 {
		t.Errorf("step 0: %v, want [2 0]", dst)
	}
	if err := s.Step(dst, x, raw, 1); err != nil || dst[0] != 4 || dst[1] != -4 {
		t.Errorf("step 1: %v, %v; want [4 -4]", dst, err)
	}
	for _, i := range []int{-1, 2} {
		if err := s.Step(dst, x, raw, i); err == nil {
			t.Errorf("step %d: no error", i)
		}
	}
	if err := s.Step(dst, x, raw[:1], 0); err == nil || !strings.Contains(err.Error(), "raw model output") {
		t.Errorf("short raw output: error %v", err)
	}
}

// linearModel is raw = a·x + c with separate coefficients for the positive
// and the negative half of a guided batch; it records whether each call
// was guided.
type linearModel struct {
	posA, posC, negA, negC float32
	guided                 []bool
}

func (m *linearModel) call(x, t []float32, guided bool) ([]float32, error) {
	m.guided = append(m.guided, guided)
	out := make([]float32, len(x))
	for i := range out {
		a, c := m.posA, m.posC
		if guided && i >= len(x)/2 {
			a, c = m.negA, m.negC
		}
		out[i] = float32(a*x[i]) + c
	}
	return out, nil
}

// referenceLoop is the pipelines' loop written out for the linear model:
// the guided prediction pos + g·(pos − neg) where guided[i], else pos.
func referenceLoop(s *Schedule, m *linearModel, x []float32, g float32, guided []bool) []float32 {
	x = append([]float32(nil), x...)
	for i := range s.Steps() {
		dt := s.Sigmas[i+1] - s.Sigmas[i]
		for j := range x {
			pred := float32(m.posA*x[j]) + m.posC
			if guided[i] {
				neg := float32(m.negA*x[j]) + m.negC
				pred += float32(g * (pred - neg))
			}
			x[j] += float32(dt * -pred)
		}
	}
	return x
}

// Guidance switches on above scale 1 under Tongyi and above 0 under
// diffusers, truncation turns it off at the steps whose model time
// exceeds the setting (a setting above 1 is ignored), and the guided
// trajectory is the pipelines' formula.
func TestGuidance(t *testing.T) {
	cfg := DefaultConfig()
	// Model times of the 8-step shift-3 schedule: 0, 0.045, 0.1, 0.167,
	// 0.25, 0.357, 0.5, 0.7 (0.5 is exact: σ = 3·0.25/1.5).
	all := []bool{true, true, true, true, true, true, true, true}
	none := make([]bool, 8)
	cases := []struct {
		name     string
		p        Pipeline
		g        Guidance
		wantUsed []bool
	}{
		{"tongyi scale 0", Tongyi, Guidance{Scale: 0}, none},
		{"tongyi scale 1 is unguided", Tongyi, Guidance{Scale: 1}, none},
		{"tongyi scale 4", Tongyi, Guidance{Scale: 4}, all},
		{"diffusers scale 0", Diffusers, Guidance{Scale: 0}, none},
		{"diffusers scale 1 is guided", Diffusers, Guidance{Scale: 1}, all},
		{"diffusers scale 0.5 is guided", Diffusers, Guidance{Scale: 0.5}, all},
		{"truncation 0.5 keeps t = 0.5", Tongyi, Guidance{Scale: 4, Truncate: true, Truncation: 0.5}, []bool{true, true, true, true, true, true, true, false}},
		{"truncation 0.2", Diffusers, Guidance{Scale: 4, Truncate: true, Truncation: 0.2}, []bool{true, true, true, true, false, false, false, false}},
		{"truncation 0 guides only pure noise", Tongyi, Guidance{Scale: 4, Truncate: true, Truncation: 0}, []bool{true, false, false, false, false, false, false, false}},
		{"truncation above 1 is ignored", Tongyi, Guidance{Scale: 4, Truncate: true, Truncation: 1.5}, all},
		{"truncation off", Tongyi, Guidance{Scale: 4, Truncation: 0.2}, all},
		{"truncation without guidance", Tongyi, Guidance{Scale: 1, Truncate: true, Truncation: 0.2}, none},
	}
	x := []float32{1, -0.5, 0.25, 2, -1, 0.75}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, err := cfg.Schedule(c.p, 8)
			if err != nil {
				t.Fatal(err)
			}
			m := &linearModel{posA: 0.5, posC: 0.1, negA: -0.25, negC: 0.3}
			var done []int
			got, err := s.Sample(m.call, x, 2, SampleOptions{Guidance: c.g, Progress: func(d, total int) { done = append(done, d) }})
			if err != nil {
				t.Fatal(err)
			}
			for i, used := range c.wantUsed {
				if m.guided[i] != used {
					t.Errorf("step %d (model time %v): guided %v, want %v", i, s.ModelTimes()[i], m.guided[i], used)
				}
			}
			if len(done) != 8 || done[7] != 8 {
				t.Errorf("progress %v, want 1..8", done)
			}
			want := referenceLoop(s, m, x, float32(c.g.Scale), c.wantUsed)
			if e := fixtures.RelErr(got, want); !fixtures.Within(e, 1e-6) {
				t.Errorf("final latents %v, want %v (error %.3g)", got, want, e)
			}
		})
	}
}

// A scale that does not switch guidance on leaves the run identical to
// an unguided one.
func TestScaleOneIsUnguided(t *testing.T) {
	s, err := DefaultConfig().Tongyi(8)
	if err != nil {
		t.Fatal(err)
	}
	x := []float32{1, -0.5, 0.25, 2}
	m := &linearModel{posA: 0.5, posC: 0.1, negA: 3, negC: -2}
	plain, err := s.Sample(m.call, x, 1, SampleOptions{})
	if err != nil {
		t.Fatal(err)
	}
	one, err := s.Sample(m.call, x, 1, SampleOptions{Guidance: Guidance{Scale: 1, Normalization: 0.5}})
	if err != nil {
		t.Fatal(err)
	}
	for i := range plain {
		if plain[i] != one[i] {
			t.Errorf("element %d: scale 1 gives %v, unguided %v", i, one[i], plain[i])
		}
	}
}

// Normalization scales a sample's guided output down to k·‖pos‖ when it
// is longer, keeping its direction, and leaves shorter ones and k = 0
// alone; each sample is judged on its own.
func TestNormalization(t *testing.T) {
	// Batch of 2 samples of 2: positive half, then negative half.
	out := []float32{
		3, 4, // pos of sample 0: norm 5
		0.6, 0.8, // pos of sample 1: norm 1
		0, 0, // neg of sample 0
		0.6, 0.8, // neg of sample 1 = pos: pred = pos
	}
	cases := []struct {
		name string
		k    float64
		want []float32
	}{
		// Sample 0: pred = 3·pos = (9, 12), norm 15 > 2·5 → (6, 8).
		{"clamped", 2, []float32{6, 8, 0.6, 0.8}},
		// k = 4: 15 ≤ 20, unchanged.
		{"within bound", 4, []float32{9, 12, 0.6, 0.8}},
		{"off", 0, []float32{9, 12, 0.6, 0.8}},
		// k = 0.5 also shortens sample 1's pred (norm 1 > 0.5).
		{"both clamped", 0.5, []float32{1.5, 2, 0.3, 0.4}},
	}
	for _, c := range cases {
		g := Guidance{Scale: 2, Normalization: c.k}
		dst := make([]float32, 4)
		g.combine(dst, out, 2, g.Scale)
		if e := fixtures.AbsErr(dst, c.want); !fixtures.Within(e, 1e-6) {
			t.Errorf("%s: %v, want %v", c.name, dst, c.want)
		}
	}
}

// A last step at timestep 0 is skipped under Tongyi's loop and run under
// diffusers'.
func TestFinalZeroTimestep(t *testing.T) {
	for _, c := range []struct {
		p     Pipeline
		calls int
	}{{Tongyi, 2}, {Diffusers, 3}} {
		s := &Schedule{Sigmas: []float32{1, 0.5, 0, 0}, Timesteps: []float32{1000, 500, 0}, Pipeline: c.p}
		m := &linearModel{posA: 1}
		if _, err := s.Sample(m.call, []float32{1, 2}, 1, SampleOptions{}); err != nil {
			t.Fatal(err)
		}
		if len(m.guided) != c.calls {
			t.Errorf("%v: %d model calls, want %d", c.p, len(m.guided), c.calls)
		}
	}
}

// Sampling reports a model's error, an output of the wrong size and a
// non-finite output with the step, and refuses a ragged batch.
func TestSampleErrors(t *testing.T) {
	s, err := DefaultConfig().Tongyi(4)
	if err != nil {
		t.Fatal(err)
	}
	x := []float32{1, 2, 3, 4}
	boom := errors.New("boom")
	cases := []struct {
		name  string
		model Model
		batch int
		want  string
	}{
		{"model error", func(x, t []float32, g bool) ([]float32, error) { return nil, boom }, 2, "boom"},
		{"short output", func(x, t []float32, g bool) ([]float32, error) { return x[:3], nil }, 2, "returned 3 values"},
		{"NaN output", func(x, t []float32, g bool) ([]float32, error) {
			out := append([]float32(nil), x...)
			out[1] = float32(math.NaN())
			return out, nil
		}, 2, "element 1 is NaN"},
		{"ragged batch", func(x, t []float32, g bool) ([]float32, error) { return x, nil }, 3, "whole number"},
	}
	for _, c := range cases {
		_, err := s.Sample(c.model, x, c.batch, SampleOptions{})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one containing %q", c.name, err, c.want)
		}
		if c.name == "model error" && !errors.Is(err, boom) {
			t.Errorf("model error not wrapped: %v", err)
		}
	}
	// The input latents are left alone.
	m := &linearModel{posA: 1}
	if _, err := s.Sample(m.call, x, 2, SampleOptions{}); err != nil || x[0] != 1 || x[3] != 4 {
		t.Errorf("x changed to %v (%v)", x, err)
	}
}

package flowmatch

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/dcdit/dcdit/internal/fixtures"
)

// Tolerances. The Tongyi schedule is float64 NumPy arithmetic rounded
// once, so it is compared exactly. diffusers' levels come from PyTorch's
// CPU linspace, whose rounding depends on the vector width of the machine
// that made the fixture: one float32 ulp (the README's 2e-7) is allowed
// there. Latent updates are float32 arithmetic reproduced operation by
// operation; the bound leaves room for a few ulps. Losses are accumulated
// in float64 here and in float32 by the reference.
const (
	exact     = 0
	ulpTol    = 2e-7
	latentTol = 1e-6
	lossTol   = 1e-6
	ioFile    = "io.safetensors"
)

// flowmatchInputs are the inputs of a flowmatch case's io.safetensors (its
// README's table): random latents, noise and model outputs, and the toy
// model's coefficients. Every other tensor — including the scalars the
// config also states (shift, step counts, indices, u, the direct sigmas) —
// is recomputed or re-derived from config.json and compared.
var flowmatchInputs = []string{
	"direct.noise", "direct.x0",
	"euler.A", "euler.b", "euler.x_init",
	"step*.raw_model_out", "step*.x",
	"train.noise", "train.raw_model_out", "train.x0",
}

// The pipelines' calculate_shift arguments (scheduler config defaults):
// properties of the reference code, not of a fixture case.
const (
	baseImageSeqLen = 256
	maxImageSeqLen  = 4096
	baseShift       = 0.5
	maxShift        = 1.15
)

func cfgFloats(t *testing.T, c fixtures.Case, key string) []float64 {
	t.Helper()
	list, ok := c.Config[key].([]any)
	if !ok {
		t.Fatalf("%s: config.json has no list %q", c.Dir, key)
	}
	out := make([]float64, len(list))
	for i, v := range list {
		f, ok := v.(float64)
		if !ok {
			t.Fatalf("%s: config.json %q[%d] = %v, want a number", c.Dir, key, i, v)
		}
		out[i] = f
	}
	return out
}

func cfgInts(t *testing.T, c fixtures.Case, key string) []int {
	t.Helper()
	fs := cfgFloats(t, c, key)
	out := make([]int, len(fs))
	for i, f := range fs {
		if f != float64(int(f)) {
			t.Fatalf("%s: config.json %q[%d] = %v, want an integer", c.Dir, key, i, f)
		}
		out[i] = int(f)
	}
	return out
}

func f32s(v []float64) []float32 {
	out := make([]float32, len(v))
	for i, x := range v {
		out[i] = float32(x)
	}
	return out
}

// toyModel is the fixture's stand-in transformer, raw = A ⊙ x + b in
// float32; it records the latents and model times it is called with.
type toyModel struct {
	a, b     []float32
	xs, ts   [][]float32
	guidedAt []bool
}

func (m *toyModel) call(x, t []float32, guided bool) ([]float32, error) {
	m.xs = append(m.xs, append([]float32(nil), x...))
	m.ts = append(m.ts, append([]float32(nil), t...))
	m.guidedAt = append(m.guidedAt, guided)
	out := make([]float32, len(x))
	for i := range out {
		j := i % len(m.a)
		out[i] = float32(m.a[j]*x[i]) + m.b[j]
	}
	return out, nil
}

// computeFlowmatch builds the case's schedules, runs its Euler loops,
// single steps and training terms, and records every result the
// reference provides.
func computeFlowmatch(t *testing.T, c fixtures.Case) *fixtures.Got {
	t.Helper()
	io := c.Open(t, "io.safetensors")
	got := fixtures.NewGot()
	if dyn, _ := c.Config["use_dynamic_shifting"].(bool); dyn {
		t.Fatalf("%s: use_dynamic_shifting is on; Z-Image's scheduler and this package run with it off", c.Dir)
	}
	shift, ok := c.Config["shift"].(float64)
	if !ok {
		t.Fatalf("%s: config.json has no number \"shift\"", c.Dir)
	}
	cfg := Config{NumTrainTimesteps: c.PositiveInt(t, "num_train_timesteps"), Shift: shift}
	got.F32("shift", []float32{float32(shift)}, exact)

	// mu as the pipelines compute it from the latent size.
	shape := cfgInts(t, c, "latent_shape")
	if len(shape) != 4 {
		t.Fatalf("%s: latent_shape %v, want [B, C, H, W]", c.Dir, shape)
	}
	seq := ImageSeqLen(shape[2], shape[3])
	if want, ok := c.Int("image_seq_len"); ok && want != seq {
		t.Fatalf("%s: image_seq_len %d, but latents %v give %d", c.Dir, want, shape, seq)
	}
	mu := CalculateShift(seq, baseImageSeqLen, maxImageSeqLen, baseShift, maxShift)
	got.F32("mu_unused", []float32{float32(mu)}, exact)

	// Schedules for every step count, both pipelines.
	for k, n := range cfgInts(t, c, "steps") {
		p := fmt.Sprintf("sched%d.", k)
		got.Ints(p+"num_steps", []int{n})
		ty, err := cfg.Tongyi(n)
		if err != nil {
			t.Fatal(err)
		}
		got.F32(p+"tongyi.sigmas", ty.Sigmas, exact)
		got.F32(p+"tongyi.timesteps", ty.Timesteps, exact)
		got.F32(p+"tongyi.t_model", ty.ModelTimes(), exact)
		in := DefaultSigmas(n)
		got.F32(p+"diffusers.sigmas_in", in, ulpTol)
		df, err := cfg.Diffusers(in)
		if err != nil {
			t.Fatal(err)
		}
		got.F32(p+"diffusers.sigmas", df.Sigmas, ulpTol)
		got.F32(p+"diffusers.timesteps", df.Timesteps, ulpTol)
		got.F32(p+"diffusers.t_model", df.ModelTimes(), ulpTol)
	}

	// The Euler loop with the toy model, through both pipelines.
	N := c.PositiveInt(t, "euler_steps_N")
	sched, err := cfg.Tongyi(N)
	if err != nil {
		t.Fatal(err)
	}
	got.F32("euler.sigmas", sched.Sigmas, exact)
	got.F32("euler.timesteps", sched.Timesteps, exact)
	xInit := io.F32("euler.x_init")
	B := int(io.Shape("euler.x_init")[0])
	m := &toyModel{a: io.F32("euler.A"), b: io.F32("euler.b")}
	final, err := sched.Sample(m.call, xInit, B, SampleOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var traj, tm []float32
	for i := range m.xs {
		traj = append(traj, m.xs[i]...)
		tm = append(tm, m.ts[i]...)
	}
	got.F32("euler.trajectory", append(traj, final...), latentTol)
	got.F32("euler.t_model", tm, exact)
	got.F32("euler.x_final", final, latentTol)
	dsched, err := cfg.Schedule(Diffusers, N)
	if err != nil {
		t.Fatal(err)
	}
	dm := &toyModel{a: m.a, b: m.b}
	dfinal, err := dsched.Sample(dm.call, xInit, B, SampleOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got.F32("euler.x_final_diffusers", dfinal, latentTol)

	// Single Tongyi steps of the Euler loop's schedule.
	for k, i := range cfgInts(t, c, "single_step_indices") {
		p := fmt.Sprintf("step%d.", k)
		got.Ints(p+"index", []int{i})
		x := io.F32(p + "x")
		next := make([]float32, len(x))
		if err := sched.Step(next, x, io.F32(p+"raw_model_out"), i); err != nil {
			t.Fatal(err)
		}
		got.F32(p+"x_next", next, latentTol)
	}

	// Training: table, indices from u, q_sample, target and loss.
	table, err := cfg.TrainingTable()
	if err != nil {
		t.Fatal(err)
	}
	got.F32("train.sigmas_table", table.Sigmas, exact)
	got.F32("train.timesteps_table", table.Timesteps, exact)
	u := f32s(cfgFloats(t, c, "train_u"))
	got.F32("train.u", u, exact)
	idx := make([]int, len(u))
	for i, v := range u {
		if idx[i], err = table.Index(v); err != nil {
			t.Fatal(err)
		}
	}
	got.Ints("train.indices", idx)
	sig, ts, err := table.Lookup(idx)
	if err != nil {
		t.Fatal(err)
	}
	got.F32("train.sigmas", sig, exact)
	got.F32("train.timesteps", ts, exact)
	tModel := make([]float32, len(ts))
	for i, v := range ts {
		tModel[i] = ModelTime(v)
	}
	got.F32("train.t_model", tModel, exact)
	x0, noise := io.F32("train.x0"), io.F32("train.noise")
	xt, target := make([]float32, len(x0)), make([]float32, len(x0))
	if err := QSample(xt, x0, noise, sig); err != nil {
		t.Fatal(err)
	}
	if err := Target(target, x0, noise); err != nil {
		t.Fatal(err)
	}
	got.F32("train.x_t", xt, latentTol)
	got.F32("train.target", target, latentTol)
	loss, err := TrainingLoss(nil, io.F32("train.raw_model_out"), target, len(u))
	if err != nil {
		t.Fatal(err)
	}
	got.F32("train.loss_per_sample", loss.PerSample, lossTol)
	got.F32("train.loss", []float32{loss.Mean}, lossTol)

	// q_sample at given sigmas.
	ds := f32s(cfgFloats(t, c, "sigma_direct"))
	got.F32("direct.sigma", ds, exact)
	dt := make([]float32, len(ds))
	for i, s := range ds {
		dt[i] = 1 - s
	}
	got.F32("direct.t_model", dt, exact)
	dx0, dnoise := io.F32("direct.x0"), io.F32("direct.noise")
	dxt, dtarget := make([]float32, len(dx0)), make([]float32, len(dx0))
	if err := QSample(dxt, dx0, dnoise, ds); err != nil {
		t.Fatal(err)
	}
	if err := Target(dtarget, dx0, dnoise); err != nil {
		t.Fatal(err)
	}
	got.F32("direct.x_t", dxt, latentTol)
	got.F32("direct.target", dtarget, latentTol)
	return got
}

func compareFlowmatch(c fixtures.Case, got *fixtures.Got, logf func(string, ...any)) []error {
	return fixtures.Compare(filepath.Join(c.Dir, ioFile), flowmatchInputs, got, logf)
}

// The schedules of both pipelines, the Euler loops and steps, mu and the
// training terms reproduce the references'.
func TestFixtureFlowmatch(t *testing.T) {
	fixtures.Run(t, "flowmatch", func(t *testing.T, c fixtures.Case) {
		fixtures.Report(t, compareFlowmatch(c, computeFlowmatch(t, c), t.Logf))
	})
}

// A corrupted expected tensor (NaN, or one element 10% off) or a NaN input
// in a copy of the case fails the comparison of TestFixtureFlowmatch.
func TestFixtureFlowmatchMutations(t *testing.T) {
	fixtures.Run(t, "flowmatch", func(t *testing.T, c fixtures.Case) {
		got := computeFlowmatch(t, c)
		fixtures.CheckMutations(t, c, ioFile, flowmatchInputs, func(mc fixtures.Case) []error {
			return compareFlowmatch(mc, got, nil)
		})
	})
}

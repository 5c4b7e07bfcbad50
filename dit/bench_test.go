package dit

import (
	"math/rand/v2"
	"testing"

	"github.com/dcdit/dcdit/diffusion/ddpm"
	"github.com/dcdit/dcdit/loaders/arch"
	"github.com/dcdit/dcdit/optim"
)

// DiT-S/2 on 32×32×4 latents, batch 8: the reference's training workload.
func benchModel(b *testing.B) (*Model, []float32, []float32, []int, []int) {
	cfg := &arch.DiTConfig{Depth: 12, HiddenSize: 384, NumHeads: 6, PatchSize: 2, InChannels: 4, InputSize: 32,
		LearnSigma: true, NumClasses: 1000, MLPRatio: 4, FrequencySize: 256}
	m, err := Init(cfg, 1)
	if err != nil {
		b.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	const B = 8
	x0, noise := make([]float32, B*4*32*32), make([]float32, B*4*32*32)
	for i := range x0 {
		x0[i], noise[i] = float32(rng.NormFloat64()), float32(rng.NormFloat64())
	}
	t, y := make([]int, B), make([]int, B)
	for i := range t {
		t[i], y[i] = rng.IntN(1000), rng.IntN(1000)
	}
	return m, x0, noise, t, y
}

// BenchmarkTrainStepDiTS2 is one full step of DiT's objective: forward,
// hybrid loss, backward, clipping and AdamW; B/op and allocs/op show what
// a steady-state step still allocates.
func BenchmarkTrainStepDiTS2(b *testing.B) {
	m, x0, noise, t, y := benchModel(b)
	sched := ddpm.Linear(1000)
	mask := optim.AllTrainable(m.Params.Len())
	opt, err := optim.NewAdamW(mask, optim.DefaultHyper())
	if err != nil {
		b.Fatal(err)
	}
	clip := optim.NewGradClipper(mask, 1)
	step := func() {
		m.Params.ZeroGrad()
		if _, err := m.DiffusionLoss(sched, x0, noise, t, y, nil); err != nil {
			b.Fatal(err)
		}
		if _, err := clip.Clip(m.Params.Grad); err != nil {
			b.Fatal(err)
		}
		opt.Step(m.Params.Data, m.Params.Grad)
	}
	// The first step fills the buffer pool and the optimiser state; the
	// loop measures the steady state.
	step()
	b.ReportAllocs()
	for b.Loop() {
		step()
	}
}

// BenchmarkForwardDiTS2 is one inference forward without gradients.
func BenchmarkForwardDiTS2(b *testing.B) {
	m, x0, _, t, y := benchModel(b)
	m.Params.SetRequiresGrad(false)
	ts := make([]float32, len(t))
	for i, v := range t {
		ts[i] = float32(v)
	}
	b.ReportAllocs()
	for b.Loop() {
		m.ForwardLatents(x0, ts, y)
	}
}

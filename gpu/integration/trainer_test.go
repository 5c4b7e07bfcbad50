package integration

import (
	"context"
	"errors"
	"math/rand/v2"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/dcdit/dcdit/diffusion"
	"github.com/dcdit/dcdit/diffusion/ddpm"
	"github.com/dcdit/dcdit/distill"
	"github.com/dcdit/dcdit/dit"
	"github.com/dcdit/dcdit/gpu/accel"
	"github.com/dcdit/dcdit/internal/fixtures"
	"github.com/dcdit/dcdit/loaders/arch"
	"github.com/dcdit/dcdit/ops"
	"github.com/dcdit/dcdit/optim"
)

// TestTrainerOnDevice: a distill.Trainer stage run with its parameters,
// moments and EMA on the GPU (device.Optimizer) against the same stage on
// the CPU, from the same weights and data, with everything the optimiser
// handles: a frozen parameter, a learning-rate group, gradient clipping
// that bites, the EMA, warm-up and a decaying schedule, and checkpoints
// mid-run (each pulls the device state to the host). The runs are two
// trajectories whose sums round differently, so the bound is loose: the
// EMA weights (which fold in every step's parameters) within 1e-3 of the
// largest value per tensor after 12 steps. A device run stopped after step
// 9 resumes from its checkpoint at step 8 and must end where the
// uninterrupted device run ends (1e-6).
func TestTrainerOnDevice(t *testing.T) {
	gpu(t)
	cfg := &arch.DiTConfig{Depth: 2, HiddenSize: 64, NumHeads: 4, PatchSize: 2, InChannels: 4, InputSize: 8,
		LearnSigma: true, NumClasses: 3, MLPRatio: 2, FrequencySize: 64}
	rng := rand.New(rand.NewPCG(21, 22))
	n := 16
	x, y := normals(rng, n*4*8*8, 1), make([]int, n)
	for i := range y {
		y[i] = i % 3
	}
	data, err := distill.NewDataset(x, y, 4, 8, 8)
	if err != nil {
		t.Fatal(err)
	}
	// stage runs the stage into dir; stopAt > 0 cancels it once that step
	// is done (its checkpoint is the one before).
	stage := func(t *testing.T, dir string, acc *accel.Accelerator, stopAt int) *dit.Model {
		m, err := dit.Init(cfg, 5)
		if err != nil {
			t.Fatal(err)
		}
		randomize(m.Params, 6)
		tr := &distill.Trainer{
			Config: distill.Config{Stage: "s", Steps: 12, BatchSize: 8, LR: 1e-4, Warmup: 2, Schedule: "cosine", MinLR: 1e-5,
				WeightDecay: 0.01, ClipNorm: 0.5, EMADecay: 0.9, Seed: 7, LabelDropout: 0.1, NullClass: 3, SaveEvery: 4, Keep: 2,
				Frozen: func(name string) bool { return name == "y_embedder.embedding_table.weight" },
				Groups: []distill.LRGroup{{Name: "attn", Match: func(name string) bool { return strings.Contains(name, ".attn.") }, Scale: 10}}},
			Params:      m.Params,
			Objective:   &distill.Diffusion{Model: dit.Teacher{Model: m}, Process: &diffusion.DDPM{Schedule: ddpm.Linear(1000)}},
			Data:        data,
			Dir:         dir,
			Accelerator: acc,
		}
		if stopAt > 0 {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			tr.Context = ctx
			tr.OnStep = func(p distill.Progress) {
				if p.Step == stopAt {
					cancel()
				}
			}
		}
		res, err := tr.Run()
		if stopAt > 0 {
			if err == nil || !errors.Is(err, context.Canceled) {
				t.Fatalf("the run stopped at step %d: %v, want a cancellation", stopAt, err)
			}
			return nil
		}
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: %d steps from %d, last loss %.5g, %.2f s", filepath.Base(dir), res.Steps, res.Resumed, res.Last.Loss, res.Seconds)
		if ema := tr.EMAWeights(); ema != nil {
			copy(m.Params.Data, ema) // compare the averages too: they are what the run keeps
		}
		return m
	}
	acc, err := accel.Open(accel.CUDA, accel.FP32)
	if err != nil {
		t.Fatal(err)
	}
	defer acc.Close()
	root := t.TempDir()
	cpu := stage(t, filepath.Join(root, "cpu"), nil, 0)
	gpuRun := stage(t, filepath.Join(root, "gpu"), acc, 0)
	w := worstParam(cpu.Params, gpuRun.Params.Data, cpu.Params.Data)
	t.Logf("EMA weights after 12 steps, GPU vs CPU: worst %s %.3g", w.At, w.Err)
	if !fixtures.Within(w.Err, 1e-3) {
		t.Errorf("EMA weights after 12 steps: %s differs by %.3g, want ≤ 1e-3", w.At, w.Err)
	}
	// A device run stopped after step 9 resumes from its checkpoint at
	// step 8 (SaveEvery 4).
	dir := filepath.Join(root, "resume")
	stage(t, dir, acc, 9)
	resumed := stage(t, dir, acc, 0)
	w = worstParam(gpuRun.Params, resumed.Params.Data, gpuRun.Params.Data)
	t.Logf("resumed at 8 vs uninterrupted, both on the GPU: worst %s %.3g", w.At, w.Err)
	if !fixtures.Within(w.Err, 1e-6) {
		t.Errorf("resumed run: %s differs by %.3g from the uninterrupted one, want ≤ 1e-6", w.At, w.Err)
	}
}

// TestDiTXLTrainStepTiming times one whole DiT-XL/2 training step on the
// GPU at batch 32 (256 px), FP32 and TF32 GEMMs: forward, MSE loss,
// backward, the gradient norm and clip, and AdamW, with the parameters,
// gradients and moments on the device (device.Optimizer), the mean of 5
// after a warm-up, each waited for. PyTorch eager's figure for the same
// step comes from the reference script run on the same GPU (docs/results.md).
func TestDiTXLTrainStepTiming(t *testing.T) {
	if testing.Short() {
		t.Skip("long")
	}
	gpu(t)
	const B, rounds = 32, 5
	m, in := ditXL(t, B)
	mask := optim.AllTrainable(m.Params.Len())
	for _, prec := range []string{accel.FP32, accel.TF32} {
		acc, err := accel.Open(accel.CUDA, prec)
		if err != nil {
			t.Fatal(err)
		}
		bound, err := acc.Attach(m.Params)
		if err != nil {
			t.Fatal(err)
		}
		opt, err := optim.NewAdamW(mask, optim.Hyper{LR: 1e-4, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8})
		if err != nil {
			t.Fatal(err)
		}
		dopt, err := bound.NewOptimizer(opt, 1, nil)
		if err != nil {
			t.Fatal(err)
		}
		var total time.Duration
		var norm float64
		for round := range rounds + 1 {
			runtime.GC()
			start := time.Now()
			m.Params.ZeroGrad()
			_, loss := ditPass(t, m, in)
			if norm, err = dopt.ClipNorm(); err != nil {
				t.Fatal(err)
			}
			if err := dopt.Step(); err != nil {
				t.Fatal(err)
			}
			if err := acc.Synchronize(); err != nil {
				t.Fatal(err)
			}
			if round > 0 {
				total += time.Since(start)
			}
			ops.Release(loss)
		}
		// The state reaches the host, as a checkpoint takes it.
		if err := dopt.Pull(); err != nil {
			t.Fatal(err)
		}
		t.Logf("DiT-XL/2 train step, batch 32, %s: %.1f ms (mean of %d after a warm-up); last gradient norm %.4g",
			prec, float64(total.Microseconds())/1e3/float64(rounds), rounds, norm)
		if err := errors.Join(dopt.Close(), bound.Close(), acc.Close()); err != nil {
			t.Fatal(err)
		}
		// The next precision starts from the weights this one trained.
	}
}

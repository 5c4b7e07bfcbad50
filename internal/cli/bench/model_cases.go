package bench

import (
	"fmt"

	"github.com/nlpodyssey/spago/mat"

	"github.com/dcdit/dcdit/dit"
	"github.com/dcdit/dcdit/loaders/arch"
	"github.com/dcdit/dcdit/ops"
	"github.com/dcdit/dcdit/optim"
)

// Shapes of the reference's model workloads: DiT-S (width 384, 6 heads,
// 12 blocks) with patch 2 over 32×32×4 latents, batch 8, so 256 tokens per
// sample.
const (
	modelBatch = 8
	blockLen   = 256
)

func ditS2Config(depth int) *arch.DiTConfig {
	return &arch.DiTConfig{Depth: depth, HiddenSize: 384, NumHeads: 6, PatchSize: 2, InChannels: 4, InputSize: 32,
		LearnSigma: true, NumClasses: 1000, MLPRatio: 4, FrequencySize: 256}
}

// newDiTS2 builds a DiT-S/2 of the given depth with DiT's initialisation;
// the values do not change the timing.
func newDiTS2(depth int) *dit.Model {
	m, err := dit.Init(ditS2Config(depth), 1)
	if err != nil {
		panic(err) // a fixed, valid configuration
	}
	return m
}

// blockCase times one DiT-S block on 8 × 256 tokens, the reference's
// blk(xb, cb) with xb requiring a gradient; with backward set, also the
// backward pass of its sum.
func blockCase(backward bool) func() workload {
	return func() workload {
		m := newDiTS2(1)
		D := m.Config.HiddenSize
		n := modelBatch * blockLen
		x := mat.NewDense[float32](mat.WithShape(n, D), mat.WithBacking(randn(9, n*D)))
		x.SetRequiresGrad(true)
		c := mat.NewDense[float32](mat.WithShape(modelBatch, D), mat.WithBacking(randn(10, modelBatch*D)))
		offsets := make([]int, modelBatch+1)
		for s := range offsets {
			offsets[s] = s * blockLen
		}
		return workload{
			run: func() {
				y := m.Block(0, x, c, offsets)
				if backward {
					m.Params.ZeroGrad()
					x.ZeroGrad()
					y = ops.Sum(y)
					if err := ops.Backward(y); err != nil {
						panic(err)
					}
				}
				// As training does: the graph's buffers go back to the
				// pool for the next run.
				ops.Release(y)
			},
			flops: blockFlops(backward),
		}
	}
}

// blockFlops counts a DiT-S block's multiply-adds ×2 on 8 × 256 tokens:
// the matrix products (qkv, proj, fc1, fc2: 12·D² per token) and attention
// (4·L·D per token); backward costs twice the forward.
func blockFlops(backward bool) float64 {
	const D = 384
	n := float64(modelBatch * blockLen)
	f := 2*n*12*D*D + 4*n*blockLen*D
	if backward {
		f *= 3
	}
	return f
}

// forwardCase times the inference forward of DiT-S/2, the reference's
// model(x, t, y) under torch.no_grad().
func forwardCase() workload {
	m := newDiTS2(12)
	m.Params.SetRequiresGrad(false)
	x, t, y := modelInputs(m.Config)
	return workload{run: func() { m.ForwardLatents(x, t, y) }, flops: dit.ForwardFLOPs(m.Config, m.Config.NumTokens()).Total() * modelBatch}
}

// trainStepCase times one DiT-S/2 training step as the reference does: MSE
// of the token outputs against a fixed target, backward, global-norm
// clipping at 1 and AdamW (lr 1e-4, no weight decay) over all parameters.
func trainStepCase() workload {
	m := newDiTS2(12)
	x, t, y := modelInputs(m.Config)
	cfg := m.Config
	outCols := cfg.PatchSize * cfg.PatchSize * cfg.OutChannels()
	rows := modelBatch * cfg.NumTokens()
	target := mat.NewDense[float32](mat.WithShape(rows, outCols), mat.WithBacking(randn(13, rows*outCols)))
	h := optim.DefaultHyper()
	h.LR, h.WeightDecay = 1e-4, 0
	mask := optim.AllTrainable(m.Params.Len())
	opt, err := optim.NewAdamW(mask, h)
	if err != nil {
		panic(err) // fixed, valid hyperparameters
	}
	clip := optim.NewGradClipper(mask, 1)
	return workload{
		run: func() {
			m.Params.ZeroGrad()
			loss := ops.MSE(m.ForwardLatents(x, t, y), target)
			if err := ops.Backward(loss); err != nil {
				panic(err)
			}
			ops.Release(loss)
			if _, err := clip.Clip(m.Params.Grad); err != nil {
				panic(fmt.Sprintf("bench: %v", err))
			}
			opt.Step(m.Params.Data, m.Params.Grad)
		},
		flops: 3 * dit.ForwardFLOPs(cfg, cfg.NumTokens()).Total() * modelBatch,
	}
}

// modelInputs returns the reference's batch: N(0,1) latents, timesteps and
// labels drawn uniformly.
func modelInputs(c *arch.DiTConfig) (x, t []float32, y []int) {
	x = randn(11, modelBatch*c.InChannels*c.InputSize*c.InputSize)
	u := randn(12, 2*modelBatch)
	t, y = make([]float32, modelBatch), make([]int, modelBatch)
	for i := range modelBatch {
		t[i] = float32(int(1000*abs(u[i])) % 1000)
		y[i] = int(1000*abs(u[modelBatch+i])) % c.NumClasses
	}
	return x, t, y
}

func abs(v float32) float32 {
	if v < 0 {
		return -v
	}
	return v
}

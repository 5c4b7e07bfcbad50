package bench

import (
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/nlpodyssey/spago/mat"

	"github.com/dcdit/dcdit/adaln"
	"github.com/dcdit/dcdit/cond"
	// The cases build their models through the families the build has.
	_ "github.com/dcdit/dcdit/families"
	"github.com/dcdit/dcdit/family"
	"github.com/dcdit/dcdit/ops"
	"github.com/dcdit/dcdit/optim"
	"github.com/dcdit/dcdit/params"
)

// Shapes of the reference's model workloads: DiT-S (width 384, 6 heads,
// 12 blocks) with patch 2 over 32×32×4 latents, batch 8, so 256 tokens per
// sample.
const (
	modelBatch = 8
	blockLen   = 256
	// blockWidth, blockHeads and blockHidden size the single-block cases:
	// DiT-S's block, MLP ratio 4.
	blockWidth  = attnHeads * attnHeadDim
	blockHeads  = attnHeads
	blockHidden = 4 * blockWidth
)

// ditPreset is the reference's DiT-S/2, a preset on 32×32 latents.
const ditPreset = "DiT-S/2"

// ditS2 finds ditPreset among the registered families' presets; its
// family also initialises the teacher the DC cases graft.
func ditS2() family.KindPreset {
	for _, p := range family.Presets(0) {
		if p.Name == ditPreset && p.Base != nil {
			return p
		}
	}
	panic(fmt.Sprintf("bench: no registered family has the fixed-patch preset %s (families: %s)", ditPreset, family.KindList()))
}

// initModel initialises a model of family f and config cfg
// (family.Initializer) from seed 1; the values do not change the timing.
func initModel(f family.Costed, cfg any) family.Model {
	fresh, ok := f.(family.Initializer)
	if !ok {
		panic(fmt.Sprintf("bench: the family of %s builds no fresh model", ditPreset))
	}
	m, err := fresh.InitModel(cfg, family.InitOptions{Seed: 1})
	if err != nil {
		panic(err) // a fixed, valid configuration
	}
	return m
}

// newDiTS2 builds DiT-S/2 initialised by its family.
func newDiTS2() family.Model {
	p := ditS2()
	return initModel(p.Family, p.Base.Config)
}

// The single-block cases' tensors are those of block 0 of a stack named
// "blocks.", as DiT names its blocks.
const blockStack, blockPrefix = "blocks.", "blocks.0."

// blockParams holds a DiT-S block's tensors (adaln.BlockShapes) under
// blockPrefix in an arena of their own, started as DiT starts a block:
// Xavier-uniform weights, the adaLN modulation and every bias at zero.
func blockParams() *params.Set {
	shapes := adaln.BlockShapes(blockWidth, blockHidden)
	var specs []params.Spec
	for _, name := range slices.Sorted(maps.Keys(shapes)) {
		sh, cols := shapes[name], 1
		if len(sh) == 2 {
			cols = sh[1]
		}
		specs = append(specs, params.Spec{Name: blockPrefix + name, Rows: sh[0], Cols: cols})
	}
	set, err := params.New(specs)
	if err != nil {
		panic(err) // fixed, valid shapes
	}
	rng := rand.New(rand.NewPCG(1, 0xb10c))
	for _, p := range set.List() {
		rows, cols := p.Shape()[0], p.Shape()[1]
		if cols == 1 || params.InGroup(params.GroupAdaLN, adaln.BlockParamGroups(p.Name, blockStack)) {
			continue
		}
		bound := math.Sqrt(6 / float64(rows+cols))
		v := p.Values()
		for i := range v {
			v[i] = float32(bound * (2*rng.Float64() - 1))
		}
	}
	return set
}

// blockCase times one DiT-S block (adaln.ApplyBlock) on 8 × 256 tokens,
// the reference's blk(xb, cb) with xb requiring a gradient; with backward
// set, also the backward pass of its sum.
func blockCase(backward bool) func() workload {
	return func() workload {
		set := blockParams()
		D := blockWidth
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
				y := adaln.ApplyBlock(set, blockPrefix, blockHeads, x, c, offsets)
				if backward {
					set.ZeroGrad()
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
	const D = blockWidth
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
	m := newDiTS2()
	m.Parameters().SetRequiresGrad(false)
	x, in := modelInputs(m)
	rows, cols := m.Grid()
	return workload{
		run: func() {
			if _, err := m.Predict(x, in, rows, cols); err != nil {
				panic(fmt.Sprintf("bench: %v", err))
			}
		},
		flops: m.ForwardFLOPs(rows, cols) * modelBatch,
	}
}

// trainStepCase times one DiT-S/2 training step as the reference does: MSE
// of the outputs against a fixed target, backward, global-norm clipping at
// 1 and AdamW (lr 1e-4, no weight decay) over all parameters.
func trainStepCase() workload {
	m := newDiTS2()
	x, in := modelInputs(m)
	rows, cols := m.Grid()
	target := randn(13, modelBatch*m.OutChannels()*rows*cols)
	// The MSE's gradient: 2·(out − target) / n.
	mse := func(out, grad []float32) error {
		scale := 2 / float32(len(out))
		for i, o := range out {
			grad[i] = scale * (o - target[i])
		}
		return nil
	}
	set := m.Parameters()
	h := optim.DefaultHyper()
	h.LR, h.WeightDecay = 1e-4, 0
	mask := optim.AllTrainable(set.Len())
	opt, err := optim.NewAdamW(mask, h)
	if err != nil {
		panic(err) // fixed, valid hyperparameters
	}
	clip := optim.NewGradClipper(mask, 1)
	return workload{
		run: func() {
			set.ZeroGrad()
			if err := m.TrainStep(x, in, rows, cols, mse); err != nil {
				panic(fmt.Sprintf("bench: %v", err))
			}
			if _, err := clip.Clip(set.Grad); err != nil {
				panic(fmt.Sprintf("bench: %v", err))
			}
			opt.Step(set.Data, set.Grad)
		},
		flops: 3 * m.ForwardFLOPs(rows, cols) * modelBatch,
	}
}

// modelInputs returns the reference's batch for a teacher: N(0,1)
// latents, timesteps and labels drawn uniformly.
func modelInputs(m family.Teacher) ([]float32, cond.Input) {
	rows, cols := m.Grid()
	x := randn(11, modelBatch*m.InChannels()*rows*cols)
	t, y := drawTimesLabels(modelBatch, m.Conditioning().Classes)
	return x, cond.Input{T: t, Labels: y}
}

// drawTimesLabels draws batch DDPM timesteps (of 1000) and labels (of
// classes) uniformly, the same ones every run.
func drawTimesLabels(batch, classes int) ([]float32, []int) {
	u := randn(12, 2*batch)
	t, y := make([]float32, batch), make([]int, batch)
	for i := range batch {
		t[i] = float32(int(1000*abs(u[i])) % 1000)
		y[i] = int(1000*abs(u[batch+i])) % classes
	}
	return t, y
}

func abs(v float32) float32 {
	if v < 0 {
		return -v
	}
	return v
}

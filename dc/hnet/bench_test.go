package hnet

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/nlpodyssey/spago/mat"

	"github.com/dcdit/dcdit/cond"
	"github.com/dcdit/dcdit/dc"
	"github.com/dcdit/dcdit/ops"
)

// randomModel builds a DC-DiT with random weights (fan-in scaled) at the
// given sizes, for benchmarks.
func randomModel(b *testing.B, grid, E, D, heads, depth int) *dc.Model {
	cfg := &dc.Config{InChannels: 4, OutChannels: 8, GridRows: grid, GridCols: grid, EncDecDim: E, ModelDim: D, CondDim: D,
		RouterDim: D / 4, EncoderBlocks: 2, DecoderBlocks: 2, NormGroups: 32, RouterGroups: 8, Sigma: 1, TargetN: 4}
	nc := &Config{Width: D, Depth: depth, Heads: heads, MLPHidden: 4 * D, FrequencySize: 256, NumClasses: 1000}
	rng := rand.New(rand.NewPCG(1, 2))
	ts := map[string]dc.Tensor{}
	for _, shapes := range []map[string][]int{dc.ScaffoldShapes(cfg), Shapes(nc)} {
		for name, sh := range shapes {
			n, fan := 1, 1
			for i, d := range sh {
				n *= d
				if i > 0 {
					fan *= d
				}
			}
			data := make([]float32, n)
			for i := range data {
				if len(sh) == 1 {
					data[i] = 1 + 0.1*float32(rng.NormFloat64())
				} else {
					data[i] = float32(rng.NormFloat64() / float64(fan))
				}
			}
			ts[name] = dc.Tensor{Shape: sh, Data: data}
		}
	}
	ts["hnet.routing_module.residual_scorer.3.bias"].Data[0] = -1.1
	net, err := New(nc, ts)
	if err != nil {
		b.Fatal(err)
	}
	m, err := dc.New(cfg, ts, net)
	if err != nil {
		b.Fatal(err)
	}
	return m
}

// calibrateRouter shifts the scorer's bias so that about keep of the
// tokens of x are natural boundaries (random weights give an arbitrary
// logit scale).
func calibrateRouter(b *testing.B, m *dc.Model, x []float32, t []float32, y []int, keep float64) {
	c, err := m.Backbone.Condition(cond.Input{T: t, Labels: y})
	if err != nil {
		b.Fatal(err)
	}
	L := m.Config.Tokens()
	res, err := m.Forward(mat.NewDense[float32](mat.WithShape(len(t)*L, m.Config.InChannels), mat.WithBacking(x)), c, nil)
	if err != nil {
		b.Fatal(err)
	}
	logits := append([]float32(nil), mat.Data[float32](res.Routing.Logit.Value())...)
	slices.Sort(logits)
	q := logits[int(float64(len(logits))*(1-keep))]
	m.Params.Get("hnet.routing_module.residual_scorer.3.bias").Values()[0] -= q
}

// BenchmarkDCDiTS: DC-DiT-S sizes (D 384, 6 heads, 12 blocks, E = D/4) on
// 32×32×4 latents, batch 8, forward and forward+backward at several ρ.
func BenchmarkDCDiTS(b *testing.B) {
	m := randomModel(b, 32, 96, 384, 6, 12)
	const B = 8
	L := m.Config.Tokens()
	rng := rand.New(rand.NewPCG(3, 4))
	x := make([]float32, B*L*4)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	t := []float32{10, 200, 400, 500, 600, 700, 800, 999}
	y := []int{1, 2, 3, 4, 5, 6, 7, 8}
	calibrateRouter(b, m, x, t, y, 0.25)
	for _, rho := range []float32{0, 0.3, 0.6} {
		for _, train := range []bool{false, true} {
			name := fmt.Sprintf("rho=%g/forward", rho)
			if train {
				name = fmt.Sprintf("rho=%g/train", rho)
			}
			b.Run(name, func(b *testing.B) {
				m.Params.SetRequiresGrad(train)
				m.Backbone.(*Network).Params.SetRequiresGrad(train)
				var kept []int
				for b.Loop() {
					c, _ := m.Backbone.Condition(cond.Input{T: t, Labels: y})
					res, err := m.Forward(mat.NewDense[float32](mat.WithShape(B*L, 4), mat.WithBacking(x)), c, []float32{rho})
					if err != nil {
						b.Fatal(err)
					}
					kept = res.Chunks.NumKept
					if train {
						if err := ops.Backward(ops.Mean(res.Out)); err != nil {
							b.Fatal(err)
						}
					}
				}
				f := m.ForwardFLOPs(kept)
				b.ReportMetric(f.Total()/1e9, "gflop")
				b.ReportMetric(f.KeptRatio, "kept")
			})
		}
	}
}

package zimage

import (
	"math/rand/v2"
	"testing"

	"github.com/nlpodyssey/spago/mat"

	"github.com/dcdit/dcdit/loaders/arch"
	"github.com/dcdit/dcdit/ops"
)

// smallConfig is a small Z-Image with the real model's proportions (head
// dim 64 split 16/24/24 like Turbo's 32/48/48 halved, FFN int(dim/3·8),
// adaLN min(dim, 256), timestep MLP 1024): the configuration the PyTorch
// reference was timed on (docs/results.md).
func smallConfig() *arch.ZImageConfig {
	return &arch.ZImageConfig{
		Dim: 256, NLayers: 4, NRefinerLayers: 2, NHeads: 4, NKVHeads: 4, InChannels: 16, PatchSize: 2, FPatchSize: 1,
		CapFeatDim: 128, QKNorm: true, NormEps: 1e-5, RopeTheta: 256, TScale: 1000,
		AxesDims: []int64{16, 24, 24}, AxesLens: []int64{1024, 64, 64},
		FFNHidden: 682, AdaLNDim: 256, TMidDim: 1024, FrequencySize: 256,
	}
}

// BenchmarkSmall times a forward pass, and a forward and backward pass, of
// smallConfig on two items of 32×32 latents (256 image tokens each) with
// captions of 64 and 40 tokens.
func BenchmarkSmall(b *testing.B) {
	cfg := smallConfig()
	rng := rand.New(rand.NewPCG(1, 2))
	m := newModel32(b, cfg, rng)
	const H, W = 32, 32
	lats := make([]Latent, 2)
	caps := make([][]float32, 2)
	for i, n := range []int{64, 40} {
		lats[i] = Latent{Data: randF32(rng, cfg.InChannels*H*W, 1), F: 1, H: H, W: W}
		caps[i] = randF32(rng, n*cfg.CapFeatDim, 1)
	}
	t := []float32{0.3, 0.7}
	batch, err := m.Prepare(lats, t, caps)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("forward", func(b *testing.B) {
		m.Params.SetRequiresGrad(false)
		defer m.Params.SetRequiresGrad(true)
		for b.Loop() {
			ops.Release(m.Run(batch))
		}
	})
	b.Run("forward_backward", func(b *testing.B) {
		for b.Loop() {
			y := m.Run(batch)
			g := make([]float32, y.Size())
			for i := range g {
				g[i] = 1
			}
			y.AccGrad(mat.NewDense[float32](mat.WithShape(y.Shape()...), mat.WithBacking(g)))
			if err := ops.Backward(y); err != nil {
				b.Fatal(err)
			}
			ops.Release(y)
			m.Params.ZeroGrad()
		}
	})
}

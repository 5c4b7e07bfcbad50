package testckpt

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/dcdit/dcdit/loaders"
	"github.com/dcdit/dcdit/loaders/arch"
	"github.com/dcdit/dcdit/loaders/dtype"
	"github.com/dcdit/dcdit/loaders/safetensors"
	"github.com/dcdit/dcdit/zimage"
)

// SmallZImageConfig is a Z-Image small enough for unit tests, with every
// part of the full model: refiners, qk-norm, 3-axis RoPE, an adaLN width
// (24) that differs from its dim (32), 2×2 patches of 4 latent channels.
func SmallZImageConfig() *arch.ZImageConfig {
	return &arch.ZImageConfig{Dim: 32, NLayers: 2, NRefinerLayers: 1, NHeads: 2, NKVHeads: 2, InChannels: 4, PatchSize: 2, FPatchSize: 1,
		CapFeatDim: 6, QKNorm: true, NormEps: 1e-5, RopeTheta: 256, TScale: 1000, AxesDims: []int64{4, 6, 6}, AxesLens: []int64{96, 16, 16},
		FFNHidden: 48, AdaLNDim: 24, TMidDim: 16, FrequencySize: 16}
}

// RandomZImage is a SmallZImageConfig model with every weight drawn from
// N(0, 0.2²) by a generator seeded with seed.
func RandomZImage(tb testing.TB, seed uint64) *zimage.Model {
	tb.Helper()
	cfg := SmallZImageConfig()
	rng := rand.New(rand.NewPCG(seed, seed+1))
	exp := arch.ExpectedZImage(cfg, arch.Comfy)
	w := &zimage.Weights{Config: cfg, Params: map[string]*loaders.Dense{}}
	for i, name := range exp.Names() {
		shape, n := []int{}, 1
		for _, d := range exp.Shape(i) {
			shape, n = append(shape, int(d)), n*int(d)
		}
		v := make([]float32, n)
		for j := range v {
			v[j] = float32(0.2 * rng.NormFloat64())
		}
		w.Params[name] = &loaders.Dense{Shape: shape, Data: v}
	}
	m, err := zimage.New(w)
	if err != nil {
		tb.Fatal(err)
	}
	return m
}

// WriteZImageFolder writes a Z-Image of config zc with seeded random
// weights in dtype dt as a diffusers transformer folder in dir: shards of
// about shardBytes, their index and config.json.
func WriteZImageFolder(dir string, zc *arch.ZImageConfig, dt dtype.DType, shardBytes int64, seed uint64) error {
	ts, err := Tensors(arch.ExpectedZImage(zc, arch.Diffusers), dt, seed)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if _, err := safetensors.WriteSharded(dir, "diffusion_pytorch_model", ts, shardBytes, map[string]string{"format": "pt"}); err != nil {
		return err
	}
	return writeJSON(filepath.Join(dir, "config.json"), arch.ZImageDiffusersConfig(zc))
}

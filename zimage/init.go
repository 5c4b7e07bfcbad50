package zimage

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"

	"github.com/dcdit/dcdit/loaders"
	"github.com/dcdit/dcdit/loaders/arch"
)

// Init builds a model of config cfg with fresh weights drawn from seed,
// for training from scratch. Z-Image's own training code is not public,
// so the scheme is DiT's (initialize_weights), which the adaLN blocks
// share: Xavier-uniform linear weights and zero biases, the timestep MLP
// from N(0, 0.02²), every adaLN modulation and the final projection zero
// (each modulated block starts as the identity, its gates tanh(0) = 0,
// and the output as zero), RMSNorm weights one, the pad tokens from
// N(0, 0.02²).
func Init(cfg *arch.ZImageConfig, seed uint64) (*Model, error) {
	if err := CheckConfig(cfg); err != nil {
		return nil, fmt.Errorf("zimage: %w", err)
	}
	rng := rand.New(rand.NewPCG(seed, 0x2170))
	exp := arch.ExpectedZImage(cfg, arch.Comfy)
	w := &Weights{Config: cfg, Params: map[string]*loaders.Dense{}, Source: fmt.Sprintf("initialised from seed %d", seed)}
	for i, name := range exp.Names() {
		shape, n := []int{}, 1
		for _, d := range exp.Shape(i) {
			shape, n = append(shape, int(d)), n*int(d)
		}
		v := make([]float32, n)
		switch {
		case strings.Contains(name, "adaLN_modulation") || strings.HasPrefix(name, "final_layer.linear."):
			// zero
		case strings.HasSuffix(name, "_pad_token") || strings.HasPrefix(name, "t_embedder.") && len(shape) == 2:
			for j := range v {
				v[j] = float32(0.02 * rng.NormFloat64())
			}
		case len(shape) == 1 && isNorm(name):
			for j := range v {
				v[j] = 1
			}
		case len(shape) == 2:
			bound := math.Sqrt(6 / float64(shape[0]+shape[1]))
			for j := range v {
				v[j] = float32(bound * (2*rng.Float64() - 1))
			}
		}
		w.Params[name] = &loaders.Dense{Shape: shape, Data: v}
	}
	return New(w)
}

// isNorm says whether a vector is an RMSNorm weight (the caption
// embedder's first module is one).
func isNorm(name string) bool {
	return strings.Contains(name, "norm") || name == "cap_embedder.0.weight"
}

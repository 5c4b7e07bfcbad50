package dit

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"

	"github.com/dcdit/dcdit/loaders/arch"
	"github.com/dcdit/dcdit/params"
	"github.com/dcdit/dcdit/posembed"
)

// Init builds a freshly initialised model as DiT's initialize_weights does
// (models.py): Xavier-uniform Linear weights (the patch embedding viewed as a
// Linear over patches) with zero biases, N(0, 0.02²) label table and
// timestep MLP weights, and adaLN-Zero: every adaLN modulation and the final
// linear layer start at zero, so each block starts as the identity. The
// position table is the fixed 2-D sin-cos embedding. Values are drawn from
// a PCG stream seeded with seed, so a seed gives the same model everywhere.
func Init(cfg *arch.DiTConfig, seed uint64) (*Model, error) {
	return InitWith(cfg, seed, InitOptions{})
}

// InitOptions change what Init draws; the zero value is DiT's
// initialisation.
type InitOptions struct {
	// ClassStd is the standard deviation of the label table's normal
	// initialisation (0: DiT's 0.02). The label reaches the blocks only as
	// y_emb added to the timestep embedding, whose norm grows to tens in a
	// short run while a 0.02 table stays near 1 (docs/results.md); a
	// table of about unit scale is as loud as the timestep from step 0.
	ClassStd float64
}

// InitWith is Init with options. Every other tensor gets the same values
// as Init's for the same seed.
func InitWith(cfg *arch.DiTConfig, seed uint64, opts InitOptions) (*Model, error) {
	if !(opts.ClassStd >= 0) || math.IsInf(opts.ClassStd, 0) {
		return nil, fmt.Errorf("dit: class table init std %v: want a finite number ≥ 0 (0: DiT's 0.02)", opts.ClassStd)
	}
	classStd := opts.ClassStd
	if classStd == 0 {
		classStd = 0.02
	}
	if err := validConfig(cfg); err != nil {
		return nil, err
	}
	set, err := params.New(paramSpecs(cfg))
	if err != nil {
		return nil, fmt.Errorf("dit: %w", err)
	}
	rng := rand.New(rand.NewPCG(seed, 0xd17))
	for _, p := range set.List() {
		v := p.Values()
		rows, cols := p.Dense.Shape()[0], p.Dense.Shape()[1]
		switch {
		case strings.HasSuffix(p.Name, ".bias"):
			// Zero, as every Linear bias and the patch-embedding bias.
		case strings.Contains(p.Name, "adaLN_modulation") || p.Name == "final_layer.linear.weight":
			// adaLN-Zero.
		case p.Name == "y_embedder.embedding_table.weight":
			for i := range v {
				v[i] = float32(classStd * rng.NormFloat64())
			}
		case strings.HasPrefix(p.Name, "t_embedder.mlp."):
			for i := range v {
				v[i] = float32(0.02 * rng.NormFloat64())
			}
		default:
			// Xavier uniform over [fan_out, fan_in] = [rows, cols].
			bound := math.Sqrt(6 / float64(rows+cols))
			for i := range v {
				v[i] = float32(bound * (2*rng.Float64() - 1))
			}
		}
	}
	g := cfg.InputSize / cfg.PatchSize
	pos := make([]float32, g*g*cfg.HiddenSize)
	posembed.SinCosGrid(pos, g, cfg.HiddenSize)
	return &Model{Config: cfg, Params: set, posEmbed: pos}, nil
}

// validConfig rejects configurations the model cannot be built for.
func validConfig(c *arch.DiTConfig) error {
	switch {
	case c.Depth <= 0 || c.HiddenSize <= 0 || c.NumHeads <= 0 || c.PatchSize <= 0 || c.InChannels <= 0 || c.InputSize <= 0 || c.FrequencySize <= 0 || c.NumClasses <= 0 || c.MLPRatio <= 0:
		return fmt.Errorf("dit: config %+v: every size must be positive", *c)
	case c.HiddenSize%c.NumHeads != 0:
		return fmt.Errorf("dit: hidden size %d is not a multiple of %d heads", c.HiddenSize, c.NumHeads)
	case c.HiddenSize%4 != 0:
		return fmt.Errorf("dit: hidden size %d: the 2-D sin-cos embedding needs a multiple of 4", c.HiddenSize)
	case c.InputSize%c.PatchSize != 0:
		return fmt.Errorf("dit: input size %d is not a multiple of patch size %d", c.InputSize, c.PatchSize)
	}
	return nil
}

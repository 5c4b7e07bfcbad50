package tinydit

import (
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/nlpodyssey/spago/mat"

	"github.com/dcdit/dcdit/cond"
	"github.com/dcdit/dcdit/dc"
	"github.com/dcdit/dcdit/family"
	"github.com/dcdit/dcdit/loaders"
	"github.com/dcdit/dcdit/ops"
	"github.com/dcdit/dcdit/params"
)

// Backbone is TinyDiT's transformer over packed tokens (a dc.Backbone):
//
//	c   = mlp(sincos(t)) + y_embed[label]                    (S, D)
//	h   = x + W_pos·(row, col) + b_pos                       (N, D)
//	per block, with (shift₁, scale₁, shift₂, scale₂) = W_mod·SiLU(c) + b_mod:
//	  h = h + proj(attn(RMSNorm(h)·(1 + scale₁) + shift₁))
//	  h = h + fc2(GELU(fc1(RMSNorm(h)·(1 + scale₂) + shift₂)))
//	out = RMSNorm(h)                                         (N, D)
//
// DiT differs in three places: LayerNorm without weights instead of
// RMSNorm, gated residuals (adaLN-Zero's six chunks, not four), and a
// fixed 2-D sin-cos table instead of a learned linear map of the
// coordinates, which reads any grid position as it is and so needs no
// table rebuilt for a kept token.
//
// Its tensors are named prefix + Config.Shapes' names: "" in a Teacher,
// dc.BackbonePrefix inside a DC model.
type Backbone struct {
	Config *Config
	prefix string
	params *params.Set
}

var _ dc.Backbone = (*Backbone)(nil)

// New builds a backbone from tensors named prefix + Config.Shapes' names
// (other names are ignored), copying their values.
func New(c *Config, ts map[string]loaders.Dense, prefix string) (*Backbone, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	p, err := dc.NewParams(ts, c.Shapes(prefix), "tinydit backbone")
	if err != nil {
		return nil, err
	}
	return &Backbone{Config: c, prefix: prefix, params: p}, nil
}

// Init builds a freshly initialised backbone, as DiT's initialize_weights
// would: Xavier-uniform Linear weights with zero biases, N(0, 0.02²) for
// the label table and the timestep MLP, RMSNorm weights at 1, and the
// modulation at zero, so that each block starts with plain pre-norm
// residuals. The draws come from seed in name order.
func Init(c *Config, prefix string, seed uint64) (*Backbone, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return New(c, initTensors(c.Shapes(prefix), prefix, seed), prefix)
}

// initTensors fills shapes (names under prefix) by the rules Init states.
func initTensors(shapes map[string][]int, prefix string, seed uint64) map[string]loaders.Dense {
	rng := rand.New(rand.NewPCG(seed, 0x7171d17))
	ts := make(map[string]loaders.Dense, len(shapes))
	for _, name := range slices.Sorted(maps.Keys(shapes)) {
		shape := shapes[name]
		n := 1
		for _, d := range shape {
			n *= d
		}
		t := loaders.Dense{Shape: shape, Data: make([]float32, n)}
		ts[name] = t
		local := strings.TrimPrefix(name, prefix)
		switch {
		case strings.HasSuffix(local, ".bias"), strings.Contains(local, "modulation."):
			// Zero.
		case strings.HasSuffix(local, "norm1.weight"), strings.HasSuffix(local, "norm2.weight"),
			strings.HasSuffix(local, "norm.weight"), local == "norm_out.weight":
			for i := range t.Data {
				t.Data[i] = 1
			}
		case strings.HasPrefix(local, "t_embedder."), strings.HasPrefix(local, "y_embedder."):
			for i := range t.Data {
				t.Data[i] = float32(0.02 * rng.NormFloat64())
			}
		default: // a Linear weight [out, in]
			bound := math.Sqrt(6 / float64(shape[0]+shape[1]))
			for i := range t.Data {
				t.Data[i] = float32(bound * (2*rng.Float64() - 1))
			}
		}
	}
	return ts
}

// Tensors returns a copy of the backbone's tensors renamed under prefix
// (New of them under that prefix is a copy of the backbone).
func (b *Backbone) Tensors(prefix string) map[string]loaders.Dense {
	shapes := b.Config.Shapes(b.prefix)
	ts := make(map[string]loaders.Dense, len(shapes))
	for name, shape := range shapes {
		ts[prefix+strings.TrimPrefix(name, b.prefix)] = loaders.Dense{Shape: shape, Data: slices.Clone(b.params.Get(name).Values())}
	}
	return ts
}

func (b *Backbone) get(name string) mat.Tensor { return b.params.Get(b.prefix + name) }

// Width returns D.
func (b *Backbone) Width() int { return b.Config.Width }

// CondWidth returns D: the conditioning is t_embed + y_embed at width D.
func (b *Backbone) CondWidth() int { return b.Config.Width }

// Condition returns c = mlp(sincos(t)) + y_embed[label], [S, D], as a
// cond.Plain: the vector is all the blocks read. in.T are DDPM timesteps.
func (b *Backbone) Condition(in cond.Input) (cond.Value, error) {
	if err := in.CheckLabels(b.Config.NumClasses); err != nil {
		return nil, fmt.Errorf("tinydit: %w", err)
	}
	S, F := in.Samples(), b.Config.FrequencySize
	// DiT's timestep_embedding: cos then sin of t·10000^(−k/half).
	feat := make([]float32, S*F)
	half := F / 2
	for s, t := range in.T {
		for k := range half {
			a := float64(t) * math.Exp(-math.Log(10000)*float64(k)/float64(half))
			feat[s*F+k], feat[s*F+half+k] = float32(math.Cos(a)), float32(math.Sin(a))
		}
	}
	h := ops.SiLU(ops.Linear(constant(S, F, feat), b.get("t_embedder.mlp.0.weight"), b.get("t_embedder.mlp.0.bias"))) // (S, D)
	t := ops.Linear(h, b.get("t_embedder.mlp.2.weight"), b.get("t_embedder.mlp.2.bias"))                              // (S, D)
	y := ops.GatherRows(b.get("y_embedder.embedding_table.weight"), in.Labels)                                        // (S, D)
	return cond.Plain{V: ops.Add(t, y)}, nil
}

// Forward runs the blocks over packed tokens x [N, D]: sample s owns rows
// offsets[s] … offsets[s+1]−1, and token r sits at latent row pos[2r] and
// column pos[2r+1] (real numbers: a patch's centre). Attention stays
// within each sample.
func (b *Backbone) Forward(x mat.Tensor, cv cond.Value, offsets []int, pos []float64) (mat.Tensor, error) {
	c := cv.Vector()
	N, S := x.Shape()[0], c.Shape()[0]
	if err := checkPacked(N, S, offsets, pos); err != nil {
		return nil, fmt.Errorf("tinydit: %w", err)
	}
	cfg := b.Config
	D, G, eps := cfg.Width, float64(cfg.GridSize), cfg.NormEps
	coords := make([]float32, 2*N)
	for i, v := range pos {
		coords[i] = float32((v+0.5)/G - 0.5)
	}
	h := ops.Add(x, ops.Linear(constant(N, 2, coords), b.get("pos_embed.proj.weight"), b.get("pos_embed.proj.bias"))) // (N, D)
	cs := ops.SiLU(c)                                                                                                 // (S, D)
	for i := range cfg.Depth {
		p := fmt.Sprintf("blocks.%d.", i)
		mod := ops.Linear(cs, b.get(p+"modulation.weight"), b.get(p+"modulation.bias")) // (S, 4D)
		shift1, scale1 := ops.SliceCols(mod, 0, D), ops.SliceCols(mod, D, 2*D)
		shift2, scale2 := ops.SliceCols(mod, 2*D, 3*D), ops.SliceCols(mod, 3*D, 4*D)

		a := ops.Modulate(ops.RMSNorm(h, b.get(p+"norm1.weight"), eps), shift1, scale1, offsets)                   // (N, D)
		a = ops.Attention(ops.Linear(a, b.get(p+"attn.qkv.weight"), b.get(p+"attn.qkv.bias")), offsets, cfg.Heads) // (N, D)
		h = ops.Add(h, ops.Linear(a, b.get(p+"attn.proj.weight"), b.get(p+"attn.proj.bias")))

		m := ops.Modulate(ops.RMSNorm(h, b.get(p+"norm2.weight"), eps), shift2, scale2, offsets) // (N, D)
		m = ops.GELU(ops.Linear(m, b.get(p+"mlp.fc1.weight"), b.get(p+"mlp.fc1.bias")))          // (N, MLPHidden)
		h = ops.Add(h, ops.Linear(m, b.get(p+"mlp.fc2.weight"), b.get(p+"mlp.fc2.bias")))        // (N, D)
	}
	return ops.RMSNorm(h, b.get("norm_out.weight"), eps), nil
}

// checkPacked reports why offsets and pos do not describe n packed tokens
// of samples samples, or nil.
func checkPacked(n, samples int, offsets []int, pos []float64) error {
	if len(pos) != 2*n {
		return fmt.Errorf("%d position values for %d tokens, want two per token", len(pos), n)
	}
	if len(offsets) != samples+1 || offsets[0] != 0 || offsets[samples] != n {
		return fmt.Errorf("offsets %v do not describe %d tokens of %d samples", offsets, n, samples)
	}
	for s := 1; s <= samples; s++ {
		if offsets[s] < offsets[s-1] {
			return fmt.Errorf("offsets %v decrease at sample %d", offsets, s)
		}
	}
	return nil
}

// Parameters returns the backbone's arena, under the names it stores.
func (b *Backbone) Parameters() *params.Set { return b.params }

// ParamGroups puts the embedders, the blocks (their modulation as adaLN,
// attention, MLP) and the final norm in the recipe's groups; nil for a
// name that is not the backbone's.
func (b *Backbone) ParamGroups(name string) []string {
	local, ok := strings.CutPrefix(name, b.prefix)
	if !ok {
		return nil
	}
	switch {
	case strings.HasPrefix(local, "t_embedder."):
		return []string{params.GroupEmbedders, params.GroupTimestepEmbedder}
	case strings.HasPrefix(local, "y_embedder."):
		return []string{params.GroupEmbedders, params.GroupClassEmbedder}
	case strings.HasPrefix(local, "pos_embed."):
		return []string{params.GroupEmbedders}
	case local == "norm_out.weight":
		return []string{params.GroupBackboneNorm}
	}
	g := params.BlockGroups(local, "blocks.", "attn.", "mlp.")
	if g != nil && strings.Contains(local, ".modulation.") {
		return []string{params.GroupBackbone, params.GroupAdaLN}
	}
	return g
}

// Spec returns the backbone's description (a copy of its config), which a
// DC checkpoint records and the family rebuilds it from.
func (b *Backbone) Spec() family.Spec {
	c := *b.Config
	return Spec{Config: &c}
}

// FLOPs counts the backbone over packed sequences of the given lengths
// (Config.FLOPs).
func (b *Backbone) FLOPs(lengths []int) float64 { return b.Config.FLOPs(lengths) }

// constant wraps values as a [rows, cols] tensor that takes no gradient.
func constant(rows, cols int, v []float32) mat.Tensor {
	return mat.NewDense[float32](mat.WithShape(rows, cols), mat.WithBacking(v))
}

// Package hnet holds DC-DiT's own main network as a dc.Backbone: the
// innermost Isotropic stage of the reference H-Net (AMD-AGI/DynamicChunkingDiT,
// keys hnet.main_network.main_network.*), a stack of HNetDiTBlocks at width
// D followed by an RMSNorm, with DiT's timestep and label embedders for the
// conditioning and the fixed 2-D sin-cos position embedding added to the
// packed tokens at their original grid positions.
package hnet

import (
	"fmt"
	"regexp"
	"strconv"

	"github.com/nlpodyssey/spago/mat"

	"github.com/dcdit/dcdit/dc"
	"github.com/dcdit/dcdit/dit"
	"github.com/dcdit/dcdit/ops"
	"github.com/dcdit/dcdit/params"
)

// Epsilons of the main network (block.py, isotropic.py).
const (
	layerNormEps = 1e-6 // HNetDiTBlock's affine-free LayerNorms
	rmsNormEps   = 1e-5 // the stage's final RMSNorm
)

// Prefix is the reference name of the main network's blocks and norm.
const Prefix = "hnet.main_network.main_network."

// Config sizes the main network.
type Config struct {
	Width         int `json:"width"`          // D
	Depth         int `json:"depth"`          // HNetDiTBlocks
	Heads         int `json:"heads"`          // attention heads
	MLPHidden     int `json:"mlp_hidden"`     // int(D·mlp_ratio)
	FrequencySize int `json:"frequency_size"` // timestep sinusoid width (256)
	NumClasses    int `json:"num_classes"`    // labels 0..NumClasses−1; NumClasses is the null class
	// PatchSize is the patch size of the grid the position embedding was
	// trained on, relative to the latent grid: 1 for a native DC-DiT (its
	// sin-cos table lives on the latent grid), p for blocks upcycled from
	// a DiT/p, whose table lives on the patch grid. A latent cell (r, c)
	// is embedded at the patch-grid position of its centre,
	// ((r + ½)/p − ½, (c + ½)/p − ½), so the pretrained frequencies keep
	// their meaning. 0 means 1.
	PatchSize int `json:"patch_size,omitempty"`
}

// gridPos maps a latent-grid coordinate to the position embedding's grid.
func (c *Config) gridPos(v float64) float64 {
	if c.PatchSize <= 1 {
		return v
	}
	p := float64(c.PatchSize)
	return (v+0.5)/p - 0.5
}

// Network is the main network with its embedders.
type Network struct {
	Config *Config
	Params *params.Set
}

var _ dc.Backbone = (*Network)(nil)

// Shapes lists every parameter of the network under its reference name.
func Shapes(c *Config) map[string][]int {
	D := c.Width
	s := map[string][]int{
		"t_embedder.mlp.0.weight":           {D, c.FrequencySize},
		"t_embedder.mlp.0.bias":             {D},
		"t_embedder.mlp.2.weight":           {D, D},
		"t_embedder.mlp.2.bias":             {D},
		"y_embedder.embedding_table.weight": {c.NumClasses + 1, D},
		Prefix + "rmsnorm.weight":           {D},
	}
	for i := range c.Depth {
		b := fmt.Sprintf("%slayers.%d.", Prefix, i)
		s[b+"adaLN_modulation.1.weight"] = []int{6 * D, D}
		s[b+"adaLN_modulation.1.bias"] = []int{6 * D}
		s[b+"attn.qkv.weight"] = []int{3 * D, D}
		s[b+"attn.qkv.bias"] = []int{3 * D}
		s[b+"attn.proj.weight"] = []int{D, D}
		s[b+"attn.proj.bias"] = []int{D}
		s[b+"mlp.fc1.weight"] = []int{c.MLPHidden, D}
		s[b+"mlp.fc1.bias"] = []int{c.MLPHidden}
		s[b+"mlp.fc2.weight"] = []int{D, c.MLPHidden}
		s[b+"mlp.fc2.bias"] = []int{D}
	}
	return s
}

var layerKey = regexp.MustCompile(`^` + regexp.QuoteMeta(Prefix) + `layers\.(\d+)\.`)

// InferConfig derives the network's sizes from tensor shapes; the head
// count is not stored in checkpoints and must be given.
func InferConfig(shapes map[string][]int, heads int) (*Config, error) {
	get := func(name string) ([]int, error) {
		sh, ok := shapes[name]
		if !ok || len(sh) != 2 {
			return nil, fmt.Errorf("hnet: infer config: tensor %q missing or not a matrix (shape %v)", name, sh)
		}
		return sh, nil
	}
	t0, err := get("t_embedder.mlp.0.weight")
	if err != nil {
		return nil, err
	}
	tab, err := get("y_embedder.embedding_table.weight")
	if err != nil {
		return nil, err
	}
	fc1, err := get(Prefix + "layers.0.mlp.fc1.weight")
	if err != nil {
		return nil, err
	}
	c := &Config{Width: t0[0], FrequencySize: t0[1], NumClasses: tab[0] - 1, MLPHidden: fc1[0], Heads: heads}
	for name := range shapes {
		if m := layerKey.FindStringSubmatch(name); m != nil {
			i, _ := strconv.Atoi(m[1])
			c.Depth = max(c.Depth, i+1)
		}
	}
	if heads < 1 || c.Width%heads != 0 {
		return nil, fmt.Errorf("hnet: %d heads do not divide the width %d", heads, c.Width)
	}
	return c, nil
}

// New builds the network from named tensors (other names are ignored).
func New(c *Config, ts map[string]dc.Tensor) (*Network, error) {
	if c.Heads < 1 || c.Width%c.Heads != 0 || c.Width%4 != 0 {
		return nil, fmt.Errorf("hnet: width %d with %d heads: want heads dividing the width and a width divisible by 4 (sin-cos embedding)", c.Width, c.Heads)
	}
	p, err := dc.NewParams(ts, Shapes(c), "main network")
	if err != nil {
		return nil, err
	}
	return &Network{Config: c, Params: p}, nil
}

func (n *Network) p(name string) mat.Tensor { return n.Params.Get(name) }

// Width returns D.
func (n *Network) Width() int { return n.Config.Width }

// CondWidth returns D: the conditioning is t_embed + y_embed at width D.
func (n *Network) CondWidth() int { return n.Config.Width }

// Condition returns c = t_embedder(t) + y_embedder(y), [B, D].
func (n *Network) Condition(t []float32, y []int) (mat.Tensor, error) {
	if len(t) != len(y) || len(t) == 0 {
		return nil, fmt.Errorf("hnet: %d timesteps and %d labels, want one of each per sample", len(t), len(y))
	}
	for i, v := range y {
		if v < 0 || v > n.Config.NumClasses {
			return nil, fmt.Errorf("hnet: label %d of sample %d outside [0, %d] (%d is the null class)", v, i, n.Config.NumClasses, n.Config.NumClasses)
		}
	}
	f := n.Config.FrequencySize
	freq := make([]float32, len(t)*f)
	dit.TimestepFrequencies(freq, t, f)
	h := ops.Linear(mat.NewDense[float32](mat.WithShape(len(t), f), mat.WithBacking(freq)), n.p("t_embedder.mlp.0.weight"), n.p("t_embedder.mlp.0.bias"))
	temb := ops.Linear(ops.SiLU(h), n.p("t_embedder.mlp.2.weight"), n.p("t_embedder.mlp.2.bias"))
	return ops.Add(temb, ops.GatherRows(n.p("y_embedder.embedding_table.weight"), y)), nil
}

// Forward adds the 2-D sin-cos embedding of each token's grid position to
// the packed tokens x [N, D] and runs the blocks and the final RMSNorm.
func (n *Network) Forward(x, c mat.Tensor, offsets []int, pos []float64) (mat.Tensor, error) {
	D := n.Config.Width
	N := x.Shape()[0]
	if len(pos) != 2*N {
		return nil, fmt.Errorf("hnet: %d position values for %d tokens, want two per token", len(pos), N)
	}
	if len(offsets) < 2 || offsets[len(offsets)-1] != N || c.Shape()[0] != len(offsets)-1 {
		return nil, fmt.Errorf("hnet: offsets %v do not describe %d tokens of %d samples", offsets, N, c.Shape()[0])
	}
	pe := make([]float32, N*D)
	for r := range N {
		dit.PosEmbed2D(pe[r*D:(r+1)*D], n.Config.gridPos(pos[2*r]), n.Config.gridPos(pos[2*r+1]))
	}
	h := ops.Add(x, mat.NewDense[float32](mat.WithShape(N, D), mat.WithBacking(pe)))
	for i := range n.Config.Depth {
		h = n.block(i, h, c, offsets)
	}
	return ops.RMSNorm(h, n.p(Prefix+"rmsnorm.weight"), rmsNormEps), nil
}

// block is one HNetDiTBlock (adaLN-Zero DiT block) on packed tokens.
func (n *Network) block(i int, x, c mat.Tensor, offsets []int) mat.Tensor {
	D := n.Config.Width
	b := fmt.Sprintf("%slayers.%d.", Prefix, i)
	mod := ops.Linear(ops.SiLU(c), n.p(b+"adaLN_modulation.1.weight"), n.p(b+"adaLN_modulation.1.bias")) // [B, 6D]
	chunk := func(k int) mat.Tensor { return ops.SliceCols(mod, k*D, (k+1)*D) }
	shiftMSA, scaleMSA, gateMSA := chunk(0), chunk(1), chunk(2)
	shiftMLP, scaleMLP, gateMLP := chunk(3), chunk(4), chunk(5)

	h := ops.Modulate(ops.LayerNorm(x, layerNormEps), shiftMSA, scaleMSA, offsets)
	qkv := ops.Linear(h, n.p(b+"attn.qkv.weight"), n.p(b+"attn.qkv.bias")) // [N, 3D]
	a := ops.Attention(qkv, offsets, n.Config.Heads)
	a = ops.Linear(a, n.p(b+"attn.proj.weight"), n.p(b+"attn.proj.bias"))
	x = ops.GatedResidual(x, gateMSA, a, offsets)

	h = ops.Modulate(ops.LayerNorm(x, layerNormEps), shiftMLP, scaleMLP, offsets)
	h = ops.GELU(ops.Linear(h, n.p(b+"mlp.fc1.weight"), n.p(b+"mlp.fc1.bias")))
	h = ops.Linear(h, n.p(b+"mlp.fc2.weight"), n.p(b+"mlp.fc2.bias"))
	return ops.GatedResidual(x, gateMLP, h, offsets)
}

// FLOPs counts the conditioning (timestep MLP) and the blocks over packed
// sequences of the given lengths, in dc.FLOPs' convention: 2 per
// multiply-add, H·Σ L_b²·(4·d_h + 3) for attention.
func (n *Network) FLOPs(lengths []int) float64 {
	c := n.Config
	D, hid := float64(c.Width), float64(c.MLPHidden)
	B := float64(len(lengths))
	var tokens, pairs float64
	for _, l := range lengths {
		tokens += float64(l)
		pairs += float64(l) * float64(l)
	}
	mac := func(m, k, n float64) float64 { return 2 * m * k * n }
	cond := mac(B, float64(c.FrequencySize), D) + mac(B, D, D)
	block := mac(B, D, 6*D) + mac(tokens, D, 3*D) + mac(tokens, D, D) + mac(tokens, D, hid) + mac(tokens, hid, D)
	attn := float64(c.Heads) * pairs * (4*D/float64(c.Heads) + 3)
	return cond + float64(c.Depth)*(block+attn)
}

var _ dc.BackboneFLOPs = (*Network)(nil)

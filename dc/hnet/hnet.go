// Package hnet holds DC-DiT's own main network as a dc.Backbone: the
// innermost Isotropic stage of the reference H-Net (AMD-AGI/DynamicChunkingDiT,
// keys hnet.main_network.main_network.*), a stack of HNetDiTBlocks at width
// D followed by an RMSNorm, with DiT's timestep and label embedders for the
// conditioning and the fixed 2-D sin-cos position embedding added to the
// packed tokens at their original grid positions.
package hnet

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"

	"github.com/nlpodyssey/spago/mat"

	"github.com/dcdit/dcdit/adaln"
	"github.com/dcdit/dcdit/cond"
	"github.com/dcdit/dcdit/dc"
	"github.com/dcdit/dcdit/family"
	"github.com/dcdit/dcdit/ops"
	"github.com/dcdit/dcdit/params"
	"github.com/dcdit/dcdit/posembed"
)

// rmsNormEps is the epsilon of the stage's final RMSNorm (isotropic.py);
// the HNetDiTBlocks are DiT's blocks (adaln.ApplyBlock), LayerNorm eps
// included.
const rmsNormEps = 1e-5

// Kind is the backbone kind of the main network in a DC checkpoint's
// metadata (Network.Spec), also used for DiT blocks upcycled into it.
const Kind = "hnet"

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
	// WidthGates adds DyDiT's timestep-wise width routers to every block
	// (adaln.RouterShapes; as many MLP channel groups as heads), which a
	// finetune with the stage key dydit_lambda trains.
	WidthGates bool `json:"width_gates,omitempty"`
}

// gridPos maps a latent-grid coordinate to the position embedding's grid.
func (c *Config) gridPos(v float64) float64 { return posembed.GridPos(v, c.PatchSize) }

// Network is the main network with its embedders.
type Network struct {
	Config *Config
	Params *params.Set
}

var _ dc.Backbone = (*Network)(nil)

// Shapes lists every parameter of the network under its reference name.
func Shapes(c *Config) map[string][]int {
	s := adaln.EmbedderShapes(c.Width, c.FrequencySize, c.NumClasses)
	s[Prefix+"rmsnorm.weight"] = []int{c.Width}
	block := adaln.BlockShapes(c.Width, c.MLPHidden)
	if c.WidthGates {
		maps.Copy(block, adaln.RouterShapes(c.Width, c.Heads))
	}
	for i := range c.Depth {
		for name, shape := range block {
			s[fmt.Sprintf("%slayers.%d.%s", Prefix, i, name)] = slices.Clone(shape)
		}
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

// Width returns D.
func (n *Network) Width() int { return n.Config.Width }

// CondWidth returns D: the conditioning is t_embed + y_embed at width D.
func (n *Network) CondWidth() int { return n.Config.Width }

// Condition returns c = t_embedder(in.T) + y_embedder(in.Labels), [B, D]
// (cond.Plain), DiT's embedders (adaln.Embedders), which the main network
// stores under DiT's names; it takes no captions.
func (n *Network) Condition(in cond.Input) (cond.Value, error) {
	if err := in.CheckLabels(n.Config.NumClasses); err != nil {
		return nil, fmt.Errorf("hnet: %w", err)
	}
	if n.Config.WidthGates {
		return n.gatedCondition(in), nil
	}
	return cond.Plain{V: adaln.Embedders(n.Params, "", n.Config.FrequencySize, in.T, in.Labels)}, nil
}

// Forward adds the 2-D sin-cos embedding of each token's grid position to
// the packed tokens x [N, D] and runs the blocks (DiT's, adaln.ApplyBlock)
// under the conditioning vector c.Vector() and the final RMSNorm.
func (n *Network) Forward(x mat.Tensor, cv cond.Value, offsets []int, pos []float64) (mat.Tensor, error) {
	h, c, err := n.embed(x, cv, offsets, pos)
	if err != nil {
		return nil, err
	}
	gates, err := n.gates(cv)
	if err != nil {
		return nil, err
	}
	return n.finish(n.blocks(h, c, offsets, gates)), nil
}

// embed checks the packing and adds the position embedding: Forward up to
// the blocks, which run under the returned conditioning vector.
func (n *Network) embed(x mat.Tensor, cv cond.Value, offsets []int, pos []float64) (h, c mat.Tensor, err error) {
	D := n.Config.Width
	N := x.Shape()[0]
	c = cv.Vector()
	if err := family.CheckPacked(N, c.Shape()[0], offsets, pos); err != nil {
		return nil, nil, fmt.Errorf("hnet: %w", err)
	}
	pe := posembed.Packed(pos, D, n.Config.PatchSize)
	return ops.Add(x, mat.NewDense[float32](mat.WithShape(N, D), mat.WithBacking(pe))), c, nil
}

// blocks runs the blocks over h under the per-sample conditioning c and,
// when the network is width-gated, each block's gates.
func (n *Network) blocks(h, c mat.Tensor, offsets []int, gates []adaln.Gates) mat.Tensor {
	for i := range n.Config.Depth {
		var g *adaln.Gates
		if gates != nil {
			g = &gates[i]
		}
		h = adaln.ApplyGatedBlock(n.Params, layerPrefix(i), n.Config.Heads, h, c, offsets, g)
	}
	return h
}

// layerPrefix is the name prefix of block i.
func layerPrefix(i int) string { return fmt.Sprintf("%slayers.%d.", Prefix, i) }

// finish is the final RMSNorm.
func (n *Network) finish(h mat.Tensor) mat.Tensor {
	return ops.RMSNorm(h, n.Params.Get(Prefix+"rmsnorm.weight"), rmsNormEps)
}

// Parameters returns the arena of the main network's tensors, under the
// reference names a DC checkpoint stores.
func (n *Network) Parameters() *params.Set { return n.Params }

// ParamGroups returns the groups of one of the network's parameter names
// (ParamGroups); nil for another name.
func (n *Network) ParamGroups(name string) []string { return ParamGroups(name) }

// ParamGroups returns the groups of a parameter of DC-DiT's main network
// by its name: its blocks' and its embedders' as DiT's (DiT's blocks
// under Prefix+"layers."), and its final RMSNorm's, which DC-DiT adds
// after DiT's blocks (the graft starts it at ones), so that it is in
// params.GroupScaffold beside params.GroupBackboneNorm; nil for another
// name.
func ParamGroups(name string) []string {
	if g := adaln.BlockParamGroups(name, Prefix+"layers."); g != nil {
		return g
	}
	if g := adaln.EmbedderParamGroups(name); g != nil {
		return g
	}
	if name == Prefix+"rmsnorm.weight" {
		return []string{params.GroupScaffold, params.GroupBackboneNorm}
	}
	return nil
}

// Spec returns the network's description (a copy of its config).
func (n *Network) Spec() family.Spec {
	c := *n.Config
	return Spec{Config: &c}
}

// FLOPs counts the conditioning (timestep MLP) and the blocks over packed
// sequences of the given lengths, in dc.FLOPs' convention
// (adaln.PackedFLOPs); the final RMSNorm, like every norm, is not counted.
// A width-gated network is counted with every gate on (GatedFLOPs
// counts a batch as run).
func (n *Network) FLOPs(lengths []int) float64 {
	f := adaln.PackedFLOPs(n.sizes(), lengths)
	if n.Config.WidthGates {
		f += adaln.RouterFLOPs(n.sizes(), len(lengths))
	}
	return f
}

// sizes are the block stack's sizes.
func (n *Network) sizes() adaln.Sizes {
	c := n.Config
	return adaln.Sizes{Width: c.Width, Depth: c.Depth, Heads: c.Heads, MLPHidden: c.MLPHidden, FrequencySize: c.FrequencySize}
}

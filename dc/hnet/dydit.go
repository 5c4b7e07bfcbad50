package hnet

import (
	"errors"
	"fmt"
	"math"

	"github.com/nlpodyssey/spago/mat"

	"github.com/dcdit/dcdit/adaln"
	"github.com/dcdit/dcdit/cond"
	"github.com/dcdit/dcdit/dc"
	"github.com/dcdit/dcdit/family"
	"github.com/dcdit/dcdit/params"
)

var (
	_ family.WidthGated     = (*Network)(nil)
	_ family.HostOnly       = (*Network)(nil)
	_ family.WidthGatedSpec = Spec{}
)

// gatedCond is a width-gated network's conditioning: the vector every
// adaLN reads and each block's gates, computed from the timestep
// embedding alone.
type gatedCond struct {
	v     mat.Tensor
	gates []adaln.Gates
}

// Vector returns t_embed + y_embed.
func (g gatedCond) Vector() mat.Tensor { return g.v }

// gatedCondition is Condition of a width-gated network (labels checked).
func (n *Network) gatedCondition(in cond.Input) gatedCond {
	temb := adaln.TimestepEmbedding(n.Params, "", n.Config.FrequencySize, in.T)
	g := gatedCond{v: adaln.EmbeddersFrom(n.Params, "", temb, in.Labels), gates: make([]adaln.Gates, n.Config.Depth)}
	for i := range g.gates {
		g.gates[i] = adaln.BlockGates(n.Params, layerPrefix(i), temb)
	}
	return g
}

// gates returns the blocks' gates of a conditioning this network made:
// nil for an ungated network, an error for a Value another Condition
// made.
func (n *Network) gates(cv cond.Value) ([]adaln.Gates, error) {
	if !n.Config.WidthGates {
		return nil, nil
	}
	g, ok := cv.(gatedCond)
	if !ok {
		return nil, fmt.Errorf("hnet: a width-gated network's forward takes the conditioning its Condition made (with the blocks' gates), got a %T", cv)
	}
	return g.gates, nil
}

// WidthGates reports whether the network has its width routers.
func (n *Network) WidthGates() bool { return n.Config.WidthGates }

// WithWidthGates returns the network with a width router per block
// (adaln.RouterShapes) at zero weights and bias adaln.RouterInitBias, so
// that every gate is on and it computes what n computes, bit for bit. Its
// arena joins n's parameters (the same *params.Param, moved) and the
// routers'; n's own set is left behind and must not be used.
func (n *Network) WithWidthGates() (family.Backbone, error) {
	if n.Config.WidthGates {
		return n, nil
	}
	c := *n.Config
	c.WidthGates = true
	if err := (Spec{Config: &c}).Validate(); err != nil {
		return nil, fmt.Errorf("hnet: width gates: %w", err)
	}
	shapes := map[string][]int{}
	ts := map[string]dc.Tensor{}
	for i := range c.Depth {
		for name, shape := range adaln.RouterShapes(c.Width, c.Heads) {
			size := 1
			for _, d := range shape {
				size *= d
			}
			full := layerPrefix(i) + name
			shapes[full] = shape
			ts[full] = dc.Tensor{Shape: shape, Data: adaln.RouterInit(name, size)}
		}
	}
	routers, err := dc.NewParams(ts, shapes, "width routers")
	if err != nil {
		return nil, err
	}
	p, err := params.Join(n.Params, routers)
	if err != nil {
		return nil, fmt.Errorf("hnet: width gates: %w", err)
	}
	return &Network{Config: &c, Params: p}, nil
}

// GatedFLOPs counts FLOPs(lengths) as a forward under cv runs: each
// block of each sample at the heads and channel groups its gates left
// on, plus the routers.
func (n *Network) GatedFLOPs(cv cond.Value, lengths []int) (float64, error) {
	gates, err := n.gates(cv)
	if err != nil || gates == nil {
		return n.FLOPs(lengths), err
	}
	heads, groups := make([][]int, len(gates)), make([][]int, len(gates))
	for i := range gates {
		heads[i], groups[i] = gates[i].On()
	}
	f, err := adaln.GatedFLOPs(n.sizes(), lengths, heads, groups)
	if err != nil {
		return 0, fmt.Errorf("hnet: %w", err)
	}
	return f, nil
}

// TimedFLOPs counts a batch whose samples all sit at model time t as a
// forward runs it: at the width the gates choose at t (any label: the
// gates read the timestep alone).
func (n *Network) TimedFLOPs(t float32, lengths []int) float64 {
	if !n.Config.WidthGates {
		return n.FLOPs(lengths)
	}
	ts := make([]float32, len(lengths))
	for i := range ts {
		ts[i] = t
	}
	f, err := n.GatedFLOPs(n.gatedCondition(cond.Input{T: ts, Labels: make([]int, len(ts))}), lengths)
	if err != nil {
		return math.NaN() // the gates are built for these lengths: unreachable
	}
	return f
}

// WidthGates reports whether the described network has width routers.
func (s Spec) WidthGates() bool { return s.Config.WidthGates }

// WithWidthGates describes the network with its width routers.
func (s Spec) WithWidthGates() family.Spec {
	c := *s.Config
	c.WidthGates = true
	return Spec{Config: &c}
}

// WidthRatio is the batch's attention and MLP FLOPs under cv's gates over
// the same with every gate on (adaln.WidthRatio), with the gates'
// gradient.
func (n *Network) WidthRatio(cv cond.Value, lengths []int) (mat.Tensor, error) {
	gates, err := n.gates(cv)
	if err != nil {
		return nil, err
	}
	if gates == nil {
		return nil, errors.New("hnet: the network has no width gates (a stage with dydit_lambda adds them)")
	}
	r, err := adaln.WidthRatio(n.sizes(), lengths, gates)
	if err != nil {
		return nil, fmt.Errorf("hnet: %w", err)
	}
	return r, nil
}

// HostOnly refuses a device for a width-gated network: its gates' ops
// have no GPU kernels yet.
func (n *Network) HostOnly() error {
	if !n.Config.WidthGates {
		return nil
	}
	name := layerPrefix(0) + adaln.RouterPrefix + "head_router.weight"
	return fmt.Errorf("hnet: the model has DyDiT width gates (tensor %q): they run on the CPU only for now (--device cpu)", name)
}

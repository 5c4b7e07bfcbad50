package hnet

import (
	"fmt"
	"strings"

	"github.com/dcdit/dcdit/dc"
	"github.com/dcdit/dcdit/family"
	"github.com/dcdit/dcdit/loaders/arch"
)

var _ family.Adopter = Family{}

// MainNetworkConfig is the config of DC-DiT's main network that a DiT of
// config tc becomes when grafted (Adopt): its blocks and embedders, with
// the position embedding on the DiT's patch grid, so that the pretrained
// frequencies keep their meaning.
func MainNetworkConfig(tc *arch.DiTConfig) *Config {
	return &Config{Width: tc.HiddenSize, Depth: tc.Depth, Heads: tc.NumHeads, MLPHidden: tc.MLPHidden(),
		FrequencySize: tc.FrequencySize, NumClasses: tc.NumClasses, PatchSize: tc.PatchSize}
}

// AdoptSpec describes the main network a DiT teacher (config
// *arch.DiTConfig) becomes; false for another teacher.
func (Family) AdoptSpec(cfg any) (family.Spec, bool) {
	tc, ok := cfg.(*arch.DiTConfig)
	if !ok || tc == nil {
		return nil, false
	}
	return Spec{Config: MainNetworkConfig(tc)}, true
}

// Adopt builds the main network from a DiT teacher's tensors, in the
// official DC-DiT layout: its blocks (DiT's blocks.N become layers.N under
// Prefix) and its timestep and label embedders copied, and the final
// RMSNorm at 1. The teacher's own patch embedding and final layer stay
// out: the scaffold replaces them.
func (f Family) Adopt(t family.Teacher) (family.Backbone, error) {
	c, ok := t.(family.Configured)
	if !ok {
		return nil, fmt.Errorf("hnet: the teacher (%s) states no config to adopt", t.Describe())
	}
	spec, ok := f.AdoptSpec(c.Config())
	if !ok {
		return nil, fmt.Errorf("hnet: a teacher of config %T is not a DiT: DC-DiT's main network adopts DiT blocks only", c.Config())
	}
	cfg := spec.(Spec).Config
	src := t.Parameters()
	ts := map[string]dc.Tensor{}
	for name, shape := range Shapes(cfg) {
		from := f.AdoptedFrom(name)
		n := 1
		for _, d := range shape {
			n *= d
		}
		v := make([]float32, n)
		if from == "" {
			for i := range v {
				v[i] = 1
			}
		} else {
			p, ok := src.Lookup(from)
			if !ok || len(p.Values()) != n {
				return nil, fmt.Errorf("hnet: the teacher lacks %q with %d values for %s", from, n, name)
			}
			copy(v, p.Values())
		}
		ts[name] = dc.Tensor{Shape: shape, Data: v}
	}
	return New(cfg, ts)
}

// AdoptedFrom maps the main network's tensors to a DiT's: its blocks
// (layers.N under Prefix from blocks.N) and its embedders under their own
// names; the final RMSNorm is new.
func (Family) AdoptedFrom(name string) string {
	switch {
	case strings.HasPrefix(name, "t_embedder."), strings.HasPrefix(name, "y_embedder."):
		return name
	case strings.HasPrefix(name, Prefix+"layers."):
		return "blocks." + strings.TrimPrefix(name, Prefix+"layers.")
	}
	return ""
}

var _ family.Summarized = Spec{}

// Summary names the network's sizes for a plan.
func (s Spec) Summary() string {
	c := s.Config
	return fmt.Sprintf("%d blocks × %d, %d heads, MLP %d, positions on the patch-%d grid", c.Depth, c.Width, c.Heads, c.MLPHidden, max(1, c.PatchSize))
}

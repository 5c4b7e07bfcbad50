package recipes

import (
	"slices"
	"testing"

	"github.com/dcdit/dcdit/dc/hnet"
	"github.com/dcdit/dcdit/dit"
	"github.com/dcdit/dcdit/params"
)

// backboneGroups are the groups a backbone answers for its own
// parameters (their ParamGroups); the others belong to the scaffold.
var backboneGroups = []string{
	params.GroupEmbedders, params.GroupTimestepEmbedder, params.GroupClassEmbedder, params.GroupBackbone,
	params.GroupAdaLN, params.GroupAttention, params.GroupMLP, params.GroupLatentEmbedder,
	params.GroupBackboneNorm, params.GroupFinalLayer,
}

// A backbone's ParamGroups agree with the recipe's groups on every one of
// its parameters, so that the recipe can ask the backbone instead of
// matching names.
func TestBackboneParamGroupsMatchRecipes(t *testing.T) {
	for _, g := range backboneGroups {
		if !isGroup(g) {
			t.Fatalf("params.%q is not a recipe group", g)
		}
	}
	cfg := tinyDiT()
	m, err := dit.Init(cfg, 1)
	if err != nil {
		t.Fatal(err)
	}
	net := &hnet.Network{Config: &hnet.Config{Width: cfg.HiddenSize, Depth: cfg.Depth, Heads: cfg.NumHeads,
		MLPHidden: cfg.MLPHidden(), FrequencySize: cfg.FrequencySize, NumClasses: cfg.NumClasses, PatchSize: cfg.PatchSize}}
	var netNames []string
	for name := range hnet.Shapes(net.Config) {
		netNames = append(netNames, name)
	}
	var ditNames []string
	for _, p := range m.Params.List() {
		ditNames = append(ditNames, p.Name)
	}
	tests := []struct {
		name   string
		groups func(string) []string
		names  []string
		dc     bool
	}{
		{"DC-DiT main network", net.ParamGroups, netNames, true},
		{"DiT", m.ParamGroups, ditNames, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, name := range tt.names {
				got := tt.groups(name)
				if len(got) == 0 {
					t.Errorf("%s: no group", name)
				}
				for _, g := range backboneGroups {
					if want := InGroup(g, name, tt.dc); want != slices.Contains(got, g) {
						t.Errorf("%s: ParamGroups %v, but InGroup(%s) = %v", name, got, g, want)
					}
				}
			}
			if g := tt.groups("hnet.encoder.rmsnorm.weight"); g != nil {
				t.Errorf("a scaffold parameter has backbone groups %v", g)
			}
		})
	}
}

// A pretrained backbone kept under "backbone." (a Z-Image's or a DiT's own
// names) falls in its embedder and block groups, never in the scaffold's
// although its patch embedding and final layer share their names.
func TestPretrainedBackboneGroups(t *testing.T) {
	for _, tt := range []struct {
		name string
		in   []string
		out  []string
	}{
		{"backbone.t_embedder.mlp.0.weight", []string{GroupAll, GroupEmbedders, GroupTimestepEmbedder}, []string{GroupBackbone, GroupScaffold}},
		{"backbone.cap_embedder.1.weight", []string{GroupEmbedders}, []string{GroupTimestepEmbedder, GroupClassEmbedder}},
		{"backbone.layers.3.attention.qkv.weight", []string{GroupBackbone, GroupAttention}, []string{GroupMLP, GroupEmbedders}},
		{"backbone.noise_refiner.0.feed_forward.w1.weight", []string{GroupBackbone, GroupMLP}, []string{GroupAttention}},
		{"backbone.blocks.0.adaLN_modulation.1.weight", []string{GroupBackbone, GroupAdaLN}, []string{GroupMLP}},
		{"backbone.x_embedder.weight", []string{GroupAll}, []string{GroupLatentEmbedder, GroupScaffold, GroupEmbedders}},
		{"backbone.final_layer.linear.weight", []string{GroupAll}, []string{GroupFinalLayer, GroupScaffold}},
		{"x_embedder.proj.weight", []string{GroupLatentEmbedder, GroupScaffold}, []string{GroupEmbedders}},
	} {
		for _, g := range tt.in {
			if !InGroup(g, tt.name, true) {
				t.Errorf("%s not in %s", tt.name, g)
			}
		}
		for _, g := range tt.out {
			if InGroup(g, tt.name, true) {
				t.Errorf("%s in %s", tt.name, g)
			}
		}
	}
}

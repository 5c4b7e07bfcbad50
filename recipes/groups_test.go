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

package dc_test

import (
	"slices"
	"testing"

	"github.com/dcdit/dcdit/dc"
	"github.com/dcdit/dcdit/params"
	"github.com/dcdit/dcdit/upcycle"
)

// Every parameter of a scaffold with every option is in the scaffold
// group and in one part's group; a backbone's names are not the
// scaffold's; inside a DC model, a backbone's own patch embedding and
// final layer are in no group.
func TestScaffoldParamGroups(t *testing.T) {
	s := upcycle.DefaultScaffold()
	s.NormGroups, s.RouterGroups, s.WideHead, s.LatentSkip, s.CondNorm, s.TokenEmbedder, s.DroppedContext = 8, 4, true, true, true, true, true
	cfg, err := s.Config(4, 8, 8, 8, 64, 64)
	if err != nil {
		t.Fatal(err)
	}
	parts := map[string]bool{}
	for name := range dc.ScaffoldShapes(cfg) {
		g := dc.ScaffoldParamGroups(name)
		if len(g) != 2 || g[0] != params.GroupScaffold || !params.IsGroup(g[1]) {
			t.Errorf("%s: groups %v, want the scaffold and one part", name, g)
			continue
		}
		parts[g[1]] = true
	}
	for _, want := range []string{params.GroupLatentEmbedder, params.GroupEncoder, params.GroupRouter, params.GroupResidual,
		params.GroupDecoder, params.GroupFinalLayer, params.GroupWideHead, params.GroupLatentSkip, params.GroupCondNorm, params.GroupTokenEmbedder, params.GroupDroppedContext} {
		if !parts[want] {
			t.Errorf("no scaffold parameter in %s", want)
		}
	}

	backbone := func(name string) []string {
		switch name {
		case "backbone.x_embedder.proj.weight":
			return []string{params.GroupEmbedders, params.GroupLatentEmbedder}
		case "backbone.final_layer.linear.weight":
			return []string{params.GroupFinalLayer}
		case "backbone.blocks.0.attn.qkv.weight":
			return []string{params.GroupBackbone, params.GroupAttention}
		}
		return nil
	}
	for _, tt := range []struct {
		name string
		want []string
	}{
		{"x_embedder.proj.weight", []string{params.GroupScaffold, params.GroupLatentEmbedder}},
		{"final_layer.linear.weight", []string{params.GroupScaffold, params.GroupFinalLayer}},
		{"backbone.x_embedder.proj.weight", nil},
		{"backbone.final_layer.linear.weight", nil},
		{"backbone.blocks.0.attn.qkv.weight", []string{params.GroupBackbone, params.GroupAttention}},
		{"hnet.main_network.main_network.layers.0.attn.qkv.weight", nil},
		{"encoder.layers.0.conv1.weight", nil},
	} {
		if got := dc.ParamGroups(tt.name, backbone); !slices.Equal(got, tt.want) {
			t.Errorf("ParamGroups(%q) = %v, want %v", tt.name, got, tt.want)
		}
	}
}

package recipes

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/dcdit/dcdit/dc"
	"github.com/dcdit/dcdit/dc/hnet"
	"github.com/dcdit/dcdit/dit"
	"github.com/dcdit/dcdit/family"
	"github.com/dcdit/dcdit/internal/dctest"
	"github.com/dcdit/dcdit/internal/testckpt"
	"github.com/dcdit/dcdit/internal/zimagetest"
	"github.com/dcdit/dcdit/params"
	"github.com/dcdit/dcdit/upcycle"
	"github.com/dcdit/dcdit/zimage"
)

// patternSelects is the recipes' first selection, before models answered
// their groups (ParamGroups): it matched names against patterns, for a
// DC model (dc true) or a fixed-patch DiT. It is kept here as the oracle
// of TestParamGroupsMatchPatterns, which holds every model's groups to
// it.
func patternSelects(group, name string, dc bool) bool {
	blockRE := regexp.MustCompile(`^(?:` + regexp.QuoteMeta(hnet.Prefix) + `layers|blocks)\.\d+\.(.*)$`)
	inner, pretrained := strings.CutPrefix(name, "backbone.")
	pretrained = pretrained && dc
	re := blockRE
	if pretrained {
		name, re = inner, regexp.MustCompile(`^(?:blocks|layers|noise_refiner|context_refiner)\.\d+\.(.*)$`)
	}
	has := func(prefix string) bool { return strings.HasPrefix(name, prefix) }
	block := re.FindStringSubmatch(name)
	inBlock := func(prefixes ...string) bool {
		return block != nil && slices.ContainsFunc(prefixes, func(p string) bool { return strings.HasPrefix(block[1], p) })
	}
	switch group {
	case params.GroupAll:
		return true
	case params.GroupTimestepEmbedder:
		return has("t_embedder.")
	case params.GroupClassEmbedder:
		return has("y_embedder.")
	case params.GroupEmbedders:
		return has("t_embedder.") || has("y_embedder.") || has("cap_embedder.") || (!dc && has("x_embedder."))
	case params.GroupBackbone:
		return block != nil
	case params.GroupAdaLN:
		return inBlock("adaLN_modulation.")
	case params.GroupAttention:
		return inBlock("attn.", "attention.")
	case params.GroupMLP:
		return inBlock("mlp.", "feed_forward.")
	case params.GroupWidthRouter:
		return inBlock("dydit.")
	}
	if pretrained {
		return false
	}
	switch group {
	case params.GroupLatentEmbedder:
		return has("x_embedder.")
	case params.GroupEncoder:
		return has("hnet.encoder.")
	case params.GroupRouter:
		return has("hnet.routing_module.")
	case params.GroupResidual:
		return has("hnet.residual_proj.")
	case params.GroupDecoder:
		return has("hnet.decoder.")
	case params.GroupBackboneNorm:
		return has(hnet.Prefix + "rmsnorm.")
	case params.GroupFinalLayer:
		return has("final_layer.")
	case params.GroupWideHead:
		return has("wide_head.")
	case params.GroupLatentSkip:
		return has("latent_skip.")
	case params.GroupCondNorm:
		return has("cond_norm.")
	case params.GroupTokenEmbedder:
		return has("token_embedder.")
	case params.GroupDroppedContext:
		return has("dropped_context.")
	case params.GroupScaffold:
		if !dc {
			return false
		}
		for _, g := range []string{params.GroupLatentEmbedder, params.GroupEncoder, params.GroupRouter, params.GroupResidual, params.GroupDecoder,
			params.GroupBackboneNorm, params.GroupFinalLayer, params.GroupWideHead, params.GroupLatentSkip, params.GroupCondNorm, params.GroupTokenEmbedder, params.GroupDroppedContext} {
			if patternSelects(g, name, dc) {
				return true
			}
		}
	}
	return false
}

// groupCase is a model whose every parameter the equivalence test puts in
// every group both ways.
type groupCase struct {
	name   string
	names  []string                      // every parameter
	groups func(string) []string         // the model's ParamGroups
	plan   func(string) []string         // what the planner asks instead (headers only)
	dc     bool                          // the old selection's switch
	differ func(group, name string) bool // a documented difference
}

func paramNames(sets ...*params.Set) []string {
	var out []string
	for _, s := range sets {
		for _, p := range s.List() {
			out = append(out, p.Name)
		}
	}
	return out
}

func dcCase(name string, m *dc.Model) groupCase {
	return groupCase{name: name, names: paramNames(m.Params, m.Backbone.Parameters()), groups: m.ParamGroups,
		plan: func(n string) []string { return dc.ParamGroups(n, m.Backbone.Spec().ParamGroups) }, dc: true}
}

func groupCases(t *testing.T) []groupCase {
	t.Helper()
	var cases []groupCase

	d, err := dit.Init(tinyDiT(), 1)
	if err != nil {
		t.Fatal(err)
	}
	cases = append(cases, groupCase{name: "DiT, fixed patch", names: paramNames(d.Params), groups: d.ParamGroups, plan: dit.ParamGroups})

	// The paper's scaffold, and one with every option (each adds or drops
	// parameters).
	paper := upcycle.DefaultScaffold()
	paper.NormGroups, paper.RouterGroups = 8, 4
	every := paper.StartAsTeacher(tinyDiT().PatchSize)
	every.LatentSkip, every.CondNorm, every.TokenEmbedder, every.DroppedContext = true, true, true, true
	for _, s := range []struct {
		name string
		s    upcycle.Scaffold
	}{
		{"paper's scaffold", paper},
		{"every scaffold option", every},
	} {
		teacher, err := dit.Init(tinyDiT(), 1)
		if err != nil {
			t.Fatal(err)
		}
		m, err := upcycle.Graft(dit.Teacher{Model: teacher}, s.s, teacher.Config.InputSize, teacher.Config.InputSize, 2)
		if err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		cases = append(cases, dcCase("DC-DiT (hnet), grafted, "+s.name, m))
	}

	ref, _ := dctest.Model(t, dctest.Cases(t)[0])
	cases = append(cases, dcCase("DC-DiT (hnet), the reference fixture", ref))
	gated, _ := dctest.Model(t, dctest.Cases(t)[0])
	if gated.Backbone, err = gated.Backbone.(family.WidthGated).WithWidthGates(); err != nil {
		t.Fatal(err)
	}
	cases = append(cases, dcCase("DC-DiT (hnet), width-gated", gated))

	bb, err := dit.Init(tinyDiT(), 3)
	if err != nil {
		t.Fatal(err)
	}
	bb.PrefixNames(dc.BackbonePrefix)
	cfg, err := every.Config(bb.Config.InChannels, bb.Config.InChannels*2, 8, 8, bb.Width(), bb.CondWidth())
	if err != nil {
		t.Fatal(err)
	}
	around, err := dc.New(cfg, upcycle.InitScaffold(cfg, 4), bb)
	if err != nil {
		t.Fatal(err)
	}
	cases = append(cases, dcCase("DC model around a dit-kind DiT", around))

	_, zm := zimagetest.Grafted(t, 5, 8)
	cases = append(cases, dcCase("DC-Z-Image", zm))
	zc := testckpt.RandomZImage(t, 5)
	every.PatchSize, every.WidthFactor = zc.Config.PatchSize, 2
	ze, err := upcycle.GraftTeacher(zimage.Teacher{Model: zc}, every, 8, 8, 6)
	if err != nil {
		t.Fatal(err)
	}
	cases = append(cases, dcCase("DC-Z-Image, every scaffold option", ze))

	// A Z-Image trained from scratch: the old selection knew only DiT's
	// blocks outside a DC model, so its blocks were in no block group
	// (the planner showed them as the backbone all the same); they are
	// now, as inside a DC model.
	z := zimage.NewBackbone(testckpt.RandomZImage(t, 6))
	cases = append(cases, groupCase{name: "Z-Image, fixed patch", names: paramNames(z.Parameters()), groups: z.ParamGroups, plan: zimage.ParamGroups,
		differ: func(group, name string) bool {
			return slices.Contains([]string{params.GroupBackbone, params.GroupAdaLN, params.GroupAttention, params.GroupMLP}, group) &&
				patternSelects(group, dc.BackbonePrefix+name, true)
		}})
	return cases
}

// For every parameter of every kind of model and every group name, the
// model's ParamGroups (and the planner's, from headers) select what the
// name patterns of the recipes' first selection did, but for the
// documented differences.
func TestParamGroupsMatchPatterns(t *testing.T) {
	selected := map[string]bool{} // the groups some case puts a parameter in
	for _, c := range groupCases(t) {
		t.Run(c.name, func(t *testing.T) {
			if len(c.names) == 0 {
				t.Fatal("no parameters")
			}
			for _, name := range c.names {
				got := c.groups(name)
				if p := c.plan(name); !slices.Equal(p, got) {
					t.Errorf("%s: the planner's groups %v, the model's %v", name, p, got)
				}
				for _, g := range params.GroupNames() {
					now, old := params.InGroup(g, got), patternSelects(g, name, c.dc)
					selected[g] = selected[g] || now
					if c.differ != nil && c.differ(g, name) {
						if now == old {
							t.Errorf("%s in %s: %v both ways, want the documented difference", name, g, now)
						}
						continue
					}
					if now != old {
						t.Errorf("%s in %s: %v (ParamGroups %v), the old selection said %v", name, g, now, got, old)
					}
				}
			}
		})
	}
	for _, g := range params.GroupNames() {
		if !selected[g] {
			t.Errorf("no case has a parameter in %s", g)
		}
	}
}

// docs/recipes.md's table of groups is params.Groups, and the README
// lists every group.
func TestGroupsDocumented(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "docs", "recipes.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, rows, _ := strings.Cut(string(doc), "| group | what it holds |\n|---|---|\n")
	rows, _, _ = strings.Cut(rows, "\n\n")
	var table []params.GroupInfo
	for line := range strings.Lines(rows) {
		plain := func(s string) string { return strings.ReplaceAll(strings.Trim(s, "| \n"), "`", "") }
		name, doc, _ := strings.Cut(line, " | ")
		table = append(table, params.GroupInfo{Name: plain(name), Doc: plain(doc)})
	}
	if want := params.Groups(); !slices.Equal(table, want) {
		t.Errorf("docs/recipes.md's group table:\n%v\nwant params.Groups:\n%v", table, want)
	}

	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, list, _ := strings.Cut(string(readme), "take group names (")
	list, _, _ = strings.Cut(list, ";")
	var names []string
	for _, n := range strings.Split(list, ",") {
		names = append(names, strings.Trim(n, " \n`"))
	}
	if want := params.GroupNames(); !slices.Equal(names, want) {
		t.Errorf("README.md lists the groups %v, want %v", names, want)
	}
}

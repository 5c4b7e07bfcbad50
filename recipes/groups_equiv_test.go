package recipes

import (
	"slices"
	"testing"

	"github.com/dcdit/dcdit/dc"
	"github.com/dcdit/dcdit/dit"
	"github.com/dcdit/dcdit/internal/dctest"
	"github.com/dcdit/dcdit/internal/testckpt"
	"github.com/dcdit/dcdit/internal/zimagetest"
	"github.com/dcdit/dcdit/params"
	"github.com/dcdit/dcdit/upcycle"
	"github.com/dcdit/dcdit/zimage"
)

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
	every.LatentSkip, every.CondNorm = true, true
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
		m, err := upcycle.Graft(teacher, s.s, 2)
		if err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		cases = append(cases, dcCase("DC-DiT (hnet), grafted, "+s.name, m))
	}

	ref, _ := dctest.Model(t, dctest.Cases(t)[0])
	cases = append(cases, dcCase("DC-DiT (hnet), the reference fixture", ref))

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
	ze, err := upcycle.GraftZImage(zimage.NewBackbone(zc), every, 8, 8, 6)
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
				InGroup(group, dc.BackbonePrefix+name, true)
		}})
	return cases
}

// For every parameter of every kind of model and every group name, the
// model's ParamGroups (and the planner's, from headers) select what the
// name patterns of the recipes' first selection did, but for the
// documented differences.
func TestParamGroupsMatchOldSelection(t *testing.T) {
	for _, c := range groupCases(t) {
		t.Run(c.name, func(t *testing.T) {
			if len(c.names) == 0 {
				t.Fatal("no parameters")
			}
			seen := map[string]int{}
			for _, name := range c.names {
				got := c.groups(name)
				if p := c.plan(name); !slices.Equal(p, got) {
					t.Errorf("%s: the planner's groups %v, the model's %v", name, p, got)
				}
				for _, g := range params.GroupNames() {
					now, old := params.InGroup(g, got), InGroup(g, name, c.dc)
					if now {
						seen[g]++
					}
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
			t.Logf("%d parameters; per group: %v", len(c.names), seen)
		})
	}
}

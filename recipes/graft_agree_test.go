package recipes

import (
	"reflect"
	"testing"

	"github.com/dcdit/dcdit/dc/hnet"
	"github.com/dcdit/dcdit/dit"
	"github.com/dcdit/dcdit/loaders/arch"
	"github.com/dcdit/dcdit/upcycle"
)

// The plan's DC and main-network configs are the ones the graft builds
// from the same recipe (the planner calls upcycle's derivation): the
// scaffold's widths, its conditioning width (the main network's
// CondWidth), the grid and channels, and the main network's config.
func TestPlanAgreesWithGraft(t *testing.T) {
	tests := []struct {
		name string
		text string
	}{
		{"upcycle, defaults", validRecipe},
		{"upcycle, width and router factors", edit(validRecipe, "norm_groups = 8\n", "norm_groups = 4\nwidth_factor = 2\nsigma = 0.5\ntarget_n = 3\n[scaffold.router]\ndim_factor = 2\ngroups = 4\n", 1)},
		{"from scratch", "name = \"s\"\n[model]\ndepth = 2\nhidden_size = 64\nnum_heads = 2\ninput_size = 8\nnum_classes = 10\n" +
			"[scaffold]\nnorm_groups = 8\n[[stage]]\nkind = \"train\"\nsteps = 10\nrho = [0.0]\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, pl, err := Check(recipeDir(t, tt.text), LoadOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if pl.DC == nil || pl.MainNetwork == nil {
				t.Fatalf("plan has no DC model: %+v", pl.Recipe)
			}
			teacher, err := dit.Init(pl.Backbone.Config.(*arch.DiTConfig), 1)
			if err != nil {
				t.Fatal(err)
			}
			m, err := upcycle.Graft(dit.Teacher{Model: teacher}, r.Scaffold.Upcycle(), teacher.Config.InputSize, teacher.Config.InputSize, 1)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(*m.Config, *pl.DC) {
				t.Errorf("graft's scaffold config %+v, plan's %+v", *m.Config, *pl.DC)
			}
			if m.Config.CondDim != m.Backbone.CondWidth() {
				t.Errorf("cond_dim %d, the backbone's CondWidth %d", m.Config.CondDim, m.Backbone.CondWidth())
			}
			if cfg := m.Backbone.Spec().Settings(); !reflect.DeepEqual(cfg.(*hnet.Config), pl.MainNetwork) {
				t.Errorf("graft's main network %+v, plan's %+v", cfg, pl.MainNetwork)
			}
		})
	}
}

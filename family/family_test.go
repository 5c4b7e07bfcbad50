package family_test

import (
	"strings"
	"testing"

	"github.com/dcdit/dcdit/family"
	"github.com/dcdit/dcdit/loaders/arch"
)

// fake is a family with no backbone, to exercise the registry.
type fake struct{ kind string }

func (f fake) Kind() string                           { return f.kind }
func (f fake) Describe() string                       { return "a test family" }
func (f fake) DecodeSpec([]byte) (family.Spec, error) { return nil, nil }

func TestRegistry(t *testing.T) {
	if !strings.Contains(family.KindList(), "import github.com/dcdit/dcdit/families") {
		t.Errorf("KindList with nothing registered = %q, want the hint to import the built-in families", family.KindList())
	}
	family.Register(fake{"zeta"})
	family.Register(fake{"alpha"})
	if got := strings.Join(family.Kinds(), ","); got != "alpha,zeta" {
		t.Errorf("Kinds() = %s, want alpha,zeta (sorted)", got)
	}
	if f, err := family.Lookup("zeta"); err != nil || f.Kind() != "zeta" {
		t.Errorf("Lookup(zeta) = %v, %v", f, err)
	}
	for _, tt := range []struct{ kind, want string }{
		{"beta", `unknown backbone kind "beta" (this build reads alpha, zeta)`},
		{"", "backbone kind missing (this build reads alpha, zeta)"},
	} {
		if _, err := family.Lookup(tt.kind); err == nil || err.Error() != tt.want {
			t.Errorf("Lookup(%q) error %v, want %q", tt.kind, err, tt.want)
		}
	}
	for _, kind := range []string{"alpha", ""} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Register(%q) did not panic", kind)
				}
			}()
			family.Register(fake{kind})
		}()
	}
}

func TestChecks(t *testing.T) {
	for _, tt := range []struct {
		name string
		err  error
		want string
	}{
		{"bound", family.CheckBounds(family.Bound{Name: "a", V: 2, Max: 2}, family.Bound{Name: "depth", V: 3, Max: 2}), "depth = 3, want at most 2"},
		{"positive", family.CheckPositive(family.Bound{Name: "width", V: 0}), "width = 0, want ≥ 1"},
		{"NaN", family.CheckFinite(1, family.Real{Name: "eps", V: 0.5}, family.Real{Name: "theta", V: nan()}), "theta = NaN, want a finite value of at most 1"},
		{"large", family.CheckFinite(1, family.Real{Name: "eps", V: -2}), "eps = -2, want a finite value of at most 1"},
		{"unknown field", family.DecodeStrict([]byte(`{"a":1,"b":2}`), &struct{ A int }{}), `json: unknown field "b"`},
		{"trailing", family.DecodeStrict([]byte(`{"a":1} {}`), &struct{ A int }{}), "trailing data after the JSON value"},
	} {
		if tt.err == nil || tt.err.Error() != tt.want {
			t.Errorf("%s: error %v, want %q", tt.name, tt.err, tt.want)
		}
	}
	if err := family.CheckBounds(family.Bound{Name: "a", V: 2, Max: 2}); err != nil {
		t.Errorf("a size at its bound: %v", err)
	}
}

func TestPrefixedShapes(t *testing.T) {
	c := &arch.DiTConfig{Depth: 1, HiddenSize: 8, NumHeads: 2, PatchSize: 2, InChannels: 4, InputSize: 4, NumClasses: 3, MLPRatio: 2, FrequencySize: 16}
	exp := arch.ExpectedDiT(c, arch.Original)
	s := family.PrefixedShapes(exp, "backbone.", "pos_embed")
	if len(s) != len(exp)-1 {
		t.Errorf("%d shapes from %d expected tensors, want all but pos_embed", len(s), len(exp))
	}
	for i, name := range exp.Names() {
		got, ok := s["backbone."+name]
		if name == "pos_embed" {
			if ok {
				t.Error("pos_embed was not left out")
			}
			continue
		}
		if !ok || len(got) != len(exp.Shape(i)) {
			t.Errorf("%s: shape %v, want %v under backbone.", name, got, exp.Shape(i))
		}
	}
}

func nan() float64 { var z float64; return z / z }

// costed is a family with one fixed-patch preset and one DC preset, to
// exercise Presets and BaseOf.
type costed struct{ fake }

func (costed) Presets(heads int) []family.Preset {
	return []family.Preset{{Name: "base", Base: &family.Base{Architecture: arch.DiT, Grid: heads}}, {Name: "dc"}}
}
func (costed) Steps() int { return 7 }
func (costed) Base(rep *arch.Report) (family.Base, bool) {
	return family.Base{Architecture: rep.Architecture}, rep.Architecture == arch.DiT
}
func (costed) BaseFLOPs(any, int, int, int) (family.Cost, error) { return family.Cost{}, nil }

// TestCosted runs after TestRegistry, whose families have no presets.
func TestCosted(t *testing.T) {
	family.Register(costed{fake{"costed"}})
	ps := family.Presets(3)
	if len(ps) != 2 || ps[0].Name != "base" || ps[0].Base.Grid != 3 || ps[1].Name != "dc" || ps[1].Family.Steps() != 7 {
		t.Errorf("Presets(3) = %+v, want the costed family's two presets, heads passed on", ps)
	}
	for _, tt := range []struct {
		a    arch.Architecture
		want bool
	}{{arch.DiT, true}, {arch.ZImage, false}} {
		b, c, ok := family.BaseOf(&arch.Report{Architecture: tt.a})
		if ok != tt.want || ok && (c == nil || b.Architecture != tt.a) {
			t.Errorf("BaseOf(%s) = %+v, %v, %v; want found %v", tt.a, b, c, ok, tt.want)
		}
	}
}

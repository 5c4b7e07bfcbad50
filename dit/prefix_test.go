package dit

import (
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/nlpodyssey/spago/mat"

	"github.com/dcdit/dcdit/loaders/arch"
)

// PrefixNames renames the arena (as a DC model stores a DiT backbone)
// without changing what the model computes, what groups its parameters
// belong to, or the names Save writes.
func TestPrefixNames(t *testing.T) {
	cfg := &arch.DiTConfig{Depth: 2, HiddenSize: 32, NumHeads: 2, PatchSize: 2, InChannels: 4, InputSize: 8,
		LearnSigma: true, NumClasses: 5, MLPRatio: 2, FrequencySize: 16}
	m, err := Init(cfg, 1)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range m.Params.Data {
		m.Params.Data[i] = float32(0.1 * rng.NormFloat64())
	}
	x := make([]float32, 2*4*8*8)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	run := func() []float32 {
		return slices.Clone(mat.Data[float32](m.ForwardLatents(x, []float32{3, 700}, []int{0, 5}).Value()))
	}
	want := run()
	var oldNames []string
	groups := map[string][]string{}
	for _, p := range m.Params.List() {
		oldNames = append(oldNames, p.Name)
		groups[p.Name] = m.ParamGroups(p.Name)
	}
	m.PrefixNames("backbone.")
	if got := run(); !slices.Equal(got, want) {
		t.Error("ForwardLatents changed after renaming")
	}
	for i, p := range m.Params.List() {
		if p.Name != "backbone."+oldNames[i] {
			t.Fatalf("parameter %d is %q, want %q", i, p.Name, "backbone."+oldNames[i])
		}
		if g := m.ParamGroups(p.Name); !slices.Equal(g, groups[oldNames[i]]) || len(g) == 0 {
			t.Errorf("ParamGroups(%q) = %v, want %v", p.Name, g, groups[oldNames[i]])
		}
		if g := m.ParamGroups(oldNames[i]); g != nil {
			t.Errorf("ParamGroups(%q) = %v for the old name, want nil", oldNames[i], g)
		}
	}
	path := filepath.Join(t.TempDir(), "dit.safetensors")
	if err := Save(path, m, nil, nil); err != nil {
		t.Fatal(err)
	}
	w, err := Load(path, LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range oldNames {
		p, ok := w.Params[name]
		if !ok || strings.HasPrefix(name, "backbone.") {
			t.Fatalf("saved file lacks %q", name)
		}
		if !slices.Equal(p.Data, m.Params.Get("backbone."+name).Values()) {
			t.Errorf("%s: saved values differ", name)
		}
	}
}

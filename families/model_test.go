package families_test

import (
	"slices"
	"testing"

	_ "github.com/dcdit/dcdit/families"
	"github.com/dcdit/dcdit/family"
	"github.com/dcdit/dcdit/internal/testckpt"
)

// TestInitModel initialises each built-in fixed-patch family twice from
// one seed and once from another: the same seed gives the same weights,
// another seed others, parameters have groups, and a config of
// another type is refused.
func TestInitModel(t *testing.T) {
	cases := []struct {
		kind string
		cfg  any
	}{
		{"dit", testckpt.TinyDiT()},
		{"zimage", testckpt.TinyZImage()},
	}
	for _, c := range cases {
		t.Run(c.kind, func(t *testing.T) {
			f, err := family.Lookup(c.kind)
			if err != nil {
				t.Fatal(err)
			}
			in, ok := f.(family.Initializer)
			if !ok {
				t.Fatalf("family %s is not an Initializer", c.kind)
			}
			a, err := in.InitModel(c.cfg, family.InitOptions{Seed: 1})
			if err != nil {
				t.Fatal(err)
			}
			b, _ := in.InitModel(c.cfg, family.InitOptions{Seed: 1})
			o, _ := in.InitModel(c.cfg, family.InitOptions{Seed: 2})
			if !slices.Equal(a.Parameters().Data, b.Parameters().Data) {
				t.Error("one seed gave two sets of weights")
			}
			if slices.Equal(a.Parameters().Data, o.Parameters().Data) {
				t.Error("seeds 1 and 2 gave the same weights")
			}
			grouped := 0
			for _, p := range a.Parameters().List() {
				if len(a.ParamGroups(p.Name)) > 0 {
					grouped++
				}
			}
			if grouped == 0 {
				t.Error("no parameter is in a group")
			}
			if _, err := in.InitModel(struct{}{}, family.InitOptions{}); err == nil {
				t.Error("a config of another type was accepted")
			}
		})
	}
}

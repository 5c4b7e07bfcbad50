package tinydit_test

import (
	"encoding/json"
	"maps"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/nlpodyssey/spago/mat"

	"github.com/dcdit/dcdit/cond"
	"github.com/dcdit/dcdit/dc"
	"github.com/dcdit/dcdit/dc/checkpoint"
	"github.com/dcdit/dcdit/examples/tinydit"
	"github.com/dcdit/dcdit/family"
	"github.com/dcdit/dcdit/upcycle"
)

// Validate bounds and checks every value a stored config states.
func TestValidate(t *testing.T) {
	cases := []struct {
		name   string
		change func(c *tinydit.Config)
		want   string // in the error; "" for none
	}{
		{"valid", func(*tinydit.Config) {}, ""},
		{"depth above the bound", func(c *tinydit.Config) { c.Depth = family.MaxBlocks + 1 }, "tinydit depth"},
		{"width above the bound", func(c *tinydit.Config) { c.Width = family.MaxWidth + 1 }, "tinydit width"},
		{"mlp above the bound", func(c *tinydit.Config) { c.MLPHidden = family.MaxMLP + 1 }, "tinydit mlp_hidden"},
		{"classes above the bound", func(c *tinydit.Config) { c.NumClasses = family.MaxClasses + 1 }, "tinydit num_classes"},
		{"grid above the bound", func(c *tinydit.Config) { c.GridSize = family.MaxGridSide + 1 }, "tinydit grid_size"},
		{"no heads", func(c *tinydit.Config) { c.Heads = 0 }, "tinydit heads"},
		{"negative depth", func(c *tinydit.Config) { c.Depth = -1 }, "tinydit depth"},
		{"heads not dividing", func(c *tinydit.Config) { c.Heads = c.Width - 1 }, "heads dividing"},
		{"odd frequencies", func(c *tinydit.Config) { c.FrequencySize++ }, "even"},
		{"NaN eps", func(c *tinydit.Config) { c.NormEps = math.NaN() }, "norm_eps"},
		{"zero eps", func(c *tinydit.Config) { c.NormEps = 0 }, "norm_eps"},
		{"infinite eps", func(c *tinydit.Config) { c.NormEps = math.Inf(1) }, "norm_eps"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := teacherConfig().Backbone
			tc.change(&c)
			err := tinydit.Spec{Config: &c}.Validate()
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("error %v, want none", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("error %v, want one naming %q", err, tc.want)
			}
		})
	}
	if err := (tinydit.Spec{}).Validate(); err == nil {
		t.Error("a Spec without a config validates")
	}
}

// DecodeSpec reads what MarshalJSON writes and nothing else.
func TestDecodeSpec(t *testing.T) {
	c := teacherConfig().Backbone
	raw, err := json.Marshal(tinydit.Spec{Config: &c})
	if err != nil {
		t.Fatal(err)
	}
	fam, err := family.Lookup(tinydit.Kind)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		data string
		want string // in the error; "" for none
	}{
		{"written", string(raw), ""},
		{"unknown field", strings.Replace(string(raw), `"width"`, `"widht"`, 1), "unknown field"},
		{"field beside config", `{"config":` + string(raw[len(`{"config":`):len(raw)-1]) + `,"extra":1}`, "unknown field"},
		{"trailing data", string(raw) + "{}", "trailing data"},
		{"no config", `{}`, "no config"},
		{"null config", `{"config":null}`, "no config"},
		{"not an object", `[]`, "cannot unmarshal"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, err := fam.DecodeSpec([]byte(tc.data))
			if tc.want != "" {
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Errorf("error %v, want one naming %q", err, tc.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := s.Settings().(*tinydit.Config); *got != c || s.Kind() != tinydit.Kind {
				t.Errorf("read back %s %+v, want %s %+v", s.Kind(), *got, tinydit.Kind, c)
			}
		})
	}
	if _, err := json.Marshal(tinydit.Spec{}); err == nil {
		t.Error("a Spec without a config encodes")
	}
}

// What the Spec says of a backbone is what the backbone is: its tensors,
// its widths, its blocks and its cost; and Build of its tensors gives the
// same backbone.
func TestSpecDescribesBackbone(t *testing.T) {
	c := teacherConfig().Backbone
	bb, err := tinydit.Init(&c, dc.BackbonePrefix, modelSeed)
	if err != nil {
		t.Fatal(err)
	}
	s := bb.Spec()
	shapes := s.Shapes()
	got := map[string]int{}
	for _, p := range bb.Parameters().List() {
		got[p.Name] = len(p.Values())
	}
	if !slices.Equal(slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(shapes))) {
		t.Errorf("parameters %v, Spec.Shapes %v", slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(shapes)))
	}
	for name, shape := range shapes {
		if n := numel(shape); got[name] != n {
			t.Errorf("%s: %d values, Spec.Shapes %v", name, got[name], shape)
		}
		if len(bb.ParamGroups(name)) == 0 {
			t.Errorf("%s is in no parameter group", name)
		}
	}
	if s.Width() != bb.Width() || s.CondWidth() != bb.CondWidth() || s.Conditioning().Classes != c.NumClasses {
		t.Errorf("Spec widths %d, %d, classes %d; backbone %d, %d, config %d", s.Width(), s.CondWidth(), s.Conditioning().Classes, bb.Width(), bb.CondWidth(), c.NumClasses)
	}
	if b := s.Blocks(); len(b) != 1 || b[0].Count != c.Depth || !strings.HasPrefix(b[0].Prefix, dc.BackbonePrefix) {
		t.Errorf("Blocks %+v for depth %d", b, c.Depth)
	}
	for _, lengths := range [][]int{{1}, {16, 3}, {64, 64, 7}} {
		if got, want := s.FLOPs(lengths), bb.FLOPs(lengths); !(got > 0 && got == want) {
			t.Errorf("lengths %v: Spec.FLOPs %v, Backbone.FLOPs %v", lengths, got, want)
		}
	}
	rebuilt, err := s.Build(bb.Tensors(dc.BackbonePrefix))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range bb.Parameters().List() {
		if !slices.Equal(bitsOf(rebuilt.Parameters().Get(p.Name).Values()), bitsOf(p.Values())) {
			t.Errorf("%s differs after Build", p.Name)
		}
	}
}

// A DC checkpoint's metadata stating a depth beyond the bound is refused
// before anything is sized from it, naming the field.
func TestHostileDepth(t *testing.T) {
	teacher, err := tinydit.NewTeacher(teacherConfig(), modelSeed)
	if err != nil {
		t.Fatal(err)
	}
	m, err := upcycle.GraftTeacher(teacher, scaffold(), teacher.Config.Backbone.GridSize, teacher.Config.Backbone.GridSize, modelSeed)
	if err != nil {
		t.Fatal(err)
	}
	meta, err := checkpoint.MetaOf(m, checkpoint.Info{})
	if err != nil {
		t.Fatal(err)
	}
	meta.Backbone.Config().(*tinydit.Config).Depth = family.MaxBlocks * 100
	raw, err := json.Marshal(meta)
	if err != nil {
		t.Fatal(err)
	}
	_, err = checkpoint.ParseMeta(map[string]string{checkpoint.ConfigKey: string(raw)})
	if err == nil || !strings.Contains(err.Error(), "tinydit depth") {
		t.Errorf("ParseMeta: %v, want an error naming the tinydit depth", err)
	}
}

// Forward over a packed batch equals Forward over each sample alone: no
// token attends across samples, and the conditioning is per sample.
func TestForwardPacking(t *testing.T) {
	c := teacherConfig().Backbone
	bb, err := tinydit.Init(&c, "", modelSeed)
	if err != nil {
		t.Fatal(err)
	}
	bb.Parameters().SetRequiresGrad(false)
	// Two samples of different lengths at scattered grid positions.
	lengths := []int{5, 3}
	D := c.Width
	in := cond.Input{T: []float32{100, 700}, Labels: []int{2, c.NumClasses}}
	var pos []float64
	for s, n := range lengths {
		for r := range n {
			pos = append(pos, float64((r*3+s)%c.GridSize), float64((r*5+2*s)%c.GridSize))
		}
	}
	N := lengths[0] + lengths[1]
	x := make([]float32, N*D)
	for i := range x {
		x[i] = float32(math.Sin(float64(i) * 0.37))
	}
	forward := func(x []float32, in cond.Input, offsets []int, pos []float64) []float32 {
		t.Helper()
		cv, err := bb.Condition(in)
		if err != nil {
			t.Fatal(err)
		}
		h, err := bb.Forward(mat.NewDense[float32](mat.WithShape(len(x)/D, D), mat.WithBacking(x)), cv, offsets, pos)
		if err != nil {
			t.Fatal(err)
		}
		return mat.Data[float32](h.Value())
	}
	packed := forward(x, in, []int{0, lengths[0], N}, pos)
	lo := 0
	for s, n := range lengths {
		one := forward(x[lo*D:(lo+n)*D], cond.Input{T: in.T[s : s+1], Labels: in.Labels[s : s+1]}, []int{0, n}, pos[2*lo:2*(lo+n)])
		for i, v := range one {
			if d := math.Abs(float64(v - packed[lo*D+i])); !(d <= 1e-5) {
				t.Fatalf("sample %d value %d: alone %v, packed %v", s, i, v, packed[lo*D+i])
			}
		}
		lo += n
	}
	// The positions enter: moving a token changes its output.
	moved := slices.Clone(pos)
	moved[0]++
	if slices.Equal(forward(x, in, []int{0, lengths[0], N}, moved)[:D], packed[:D]) {
		t.Error("moving a token left its output unchanged")
	}
	if _, err := bb.Forward(mat.NewDense[float32](mat.WithShape(N, D), mat.WithBacking(x)), cond.Plain{V: mat.NewDense[float32](mat.WithShape(2, D))}, []int{0, N}, pos); err == nil {
		t.Error("offsets for one sample with conditioning for two: no error")
	}
}

func numel(shape []int) int {
	n := 1
	for _, d := range shape {
		n *= d
	}
	return n
}

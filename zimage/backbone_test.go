package zimage

import (
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/nlpodyssey/spago/mat"

	"github.com/dcdit/dcdit/cond"
	"github.com/dcdit/dcdit/internal/fixtures"
	"github.com/dcdit/dcdit/loaders/arch"
	"github.com/dcdit/dcdit/ops"
	"github.com/dcdit/dcdit/params"
)

// newModel32 is a float32 model with newModel64's random parameters, in a
// params arena as New builds it.
func newModel32(t testing.TB, cfg *arch.ZImageConfig, rng *rand.Rand) *Model {
	t.Helper()
	m64 := newModel64(t, cfg, rng)
	set, err := params.New(paramSpecs(cfg))
	if err != nil {
		t.Fatal(err)
	}
	m := newModel(cfg)
	m.Params = set
	for _, p := range set.List() {
		for i, v := range mat.Data[float64](m64.tensors[p.Name].Value()) {
			p.Values()[i] = float32(v)
		}
		m.tensors[p.Name] = p
	}
	return m
}

// patchCentres returns the latent-grid coordinates of the centres of the
// patches of one item's token grid g (F = 1), in raster order: patch
// (i, j) covers latent rows p·i … p·i + p − 1, centre p·i + (p − 1)/2.
func patchCentres(g [3]int, p int) []float64 {
	var pos []float64
	for i := range g[1] {
		for j := range g[2] {
			pos = append(pos, float64(p*i)+float64(p-1)/2, float64(p*j)+float64(p-1)/2)
		}
	}
	return pos
}

// captionsOf turns a batch's per-item caption features into cond captions.
func captionsOf(caps [][]float32, dim int) []cond.Caption {
	out := make([]cond.Caption, len(caps))
	for s, c := range caps {
		out[s] = cond.Caption{Features: c, Len: len(c) / dim}
	}
	return out
}

// The backbone is exact: with every image token kept at its patch's centre
// and the tokens equal to the model's own patch embedding (x_embedder
// output), Forward gives the model's own hidden states before the final
// layer, on a random tiny configuration and on the zimage-tiny fixture.
func TestBackboneMatchesModel(t *testing.T) {
	check := func(t *testing.T, m *Model, lats []Latent, ts []float32, caps [][]float32) {
		t.Helper()
		cfg := m.Config
		b, err := m.Prepare(lats, ts, caps)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := m.hidden(b)

		in := int(m.p("x_embedder.weight").Shape()[1])
		tokens := ops.Linear(m.constant(len(b.Patches)/in, in, b.Patches), m.p("x_embedder.weight"), m.p("x_embedder.bias"))
		var pos []float64
		for _, g := range b.Layout.Grids {
			if g[0] != 1 {
				t.Skipf("an item of %d frames: a DC backbone's positions are 2-D", g[0])
			}
			pos = append(pos, patchCentres(g, cfg.PatchSize)...)
		}
		bb := NewBackbone(m)
		c, err := bb.Condition(cond.Input{T: ts, Captions: captionsOf(caps, cfg.CapFeatDim)})
		if err != nil {
			t.Fatal(err)
		}
		if got, want := values(c.Vector()), values(m.Timestep(ts)); !slices.Equal(got, want) {
			t.Error("the conditioning vector is not the adaLN input")
		}
		got, err := bb.Forward(tokens, c, b.Layout.OutputOffsets(), pos)
		if err != nil {
			t.Fatal(err)
		}
		if e := fixtures.RelErr(values(got), values(want)); !(e <= 1e-6) {
			t.Errorf("Forward differs from the model's hidden states: rel err %g", e)
		} else {
			t.Logf("rel err %g", e)
		}
	}
	t.Run("random tiny, ragged captions", func(t *testing.T) {
		rng := rand.New(rand.NewPCG(3, 5))
		m := newModel32(t, tinyConfig(true), rng)
		c := m.Config
		var lats []Latent
		var caps [][]float32
		for s, g := range [][2]int{{2, 2}, {1, 3}, {4, 5}} {
			H, W := g[0]*c.PatchSize, g[1]*c.PatchSize
			lats = append(lats, Latent{Data: randF32(rng, c.InChannels*H*W, 1), F: 1, H: H, W: W})
			caps = append(caps, randF32(rng, (3+17*s)*c.CapFeatDim, 1.5))
		}
		check(t, m, lats, []float32{0.1, 0.5, 0.9}, caps)
	})
	fixtures.Run(t, "zimage-tiny", func(t *testing.T, fc fixtures.Case) {
		m := fixtureModel(t, fc, filepath.Join(fc.Dir, "weights.safetensors"))
		lats, ts, caps := fixtureBatch(t, fc, fc.Open(t, ioFile))
		check(t, m, lats, ts, caps)
	})
}

// Gradients through Condition and Forward (two samples with ragged
// captions, kept tokens at fractional positions) match central finite
// differences in the tokens and in every parameter that takes part; the
// patch embedding and the final layer, which a DC model replaces, get no
// gradient.
func TestBackboneGradients(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 13))
	m := newModel64(t, tinyConfig(true), rng)
	c := m.Config
	bb := NewBackbone(m)
	offsets := []int{0, 5, 8}
	N := offsets[len(offsets)-1]
	pos := make([]float64, 2*N)
	for i := range pos {
		pos[i] = 7 * rng.Float64()
	}
	xv := make([]float64, N*c.Dim)
	for i := range xv {
		xv[i] = rng.NormFloat64()
	}
	x := mat.NewDense[float64](mat.WithShape(N, c.Dim), mat.WithBacking(xv), mat.WithGrad(true))
	in := cond.Input{T: []float32{0.3, 0.8}, Captions: []cond.Caption{
		{Features: randF32(rng, 3*c.CapFeatDim, 1.5), Len: 3},
		// Padded past its valid rows: the padding must not matter.
		{Features: randF32(rng, 9*c.CapFeatDim, 1.5), Len: 7},
	}}
	build := func() mat.Tensor {
		cv, err := bb.Condition(in)
		if err != nil {
			t.Fatal(err)
		}
		y, err := bb.Forward(x, cv, offsets, pos)
		if err != nil {
			t.Fatal(err)
		}
		return y
	}
	y := build()
	r := make([]float64, y.Size())
	for i := range r {
		r[i] = 2*rng.Float64() - 1
	}
	y.AccGrad(mat.NewDense[float64](mat.WithShape(y.Shape()...), mat.WithBacking(r)))
	if err := ops.Backward(y); err != nil {
		t.Fatal(err)
	}
	loss := func() float64 {
		var s float64
		for i, v := range mat.Data[float64](build().Value()) {
			s += r[i] * v
		}
		return s
	}
	checkFD := func(name string, v, g []float64) {
		for _, i := range rng.Perm(len(v))[:min(3, len(v))] {
			x0 := v[i]
			h := 1e-6 * max(1, math.Abs(x0))
			v[i] = x0 + h
			lp := loss()
			v[i] = x0 - h
			lm := loss()
			v[i] = x0
			fd := (lp - lm) / (2 * h)
			if e := math.Abs(fd-g[i]) / max(1, math.Abs(fd), math.Abs(g[i])); !(e <= 1e-5) {
				t.Errorf("gradient of %s[%d] = %.10g, finite difference %.10g (error %.3g)", name, i, g[i], fd, e)
			}
		}
	}
	checkFD("tokens", xv, mat.Data[float64](x.Grad()))
	for _, spec := range paramSpecs(c) {
		p := m.tensors[spec.Name].(*mat.Dense[float64])
		groups := bb.ParamGroups(spec.Name)
		if slices.Contains(groups, params.GroupLatentEmbedder) || slices.Contains(groups, params.GroupFinalLayer) {
			if p.HasGrad() {
				t.Errorf("%s (groups %v) received a gradient, want none", spec.Name, groups)
			}
			continue
		}
		if !p.HasGrad() {
			t.Errorf("%s received no gradient", spec.Name)
			continue
		}
		checkFD(spec.Name, mat.Data[float64](p), mat.Data[float64](p.Grad()))
	}
}

// Bad arguments are errors that name the problem.
func TestBackboneErrors(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 1))
	m := newModel32(t, tinyConfig(true), rng)
	c := m.Config
	bb := NewBackbone(m)
	caption := func(rows, valid int) cond.Caption {
		return cond.Caption{Features: make([]float32, rows*c.CapFeatDim), Len: valid}
	}
	two := cond.Input{T: []float32{0.5, 0.5}, Captions: []cond.Caption{caption(2, 2), caption(3, 1)}}
	cv, err := bb.Condition(two)
	if err != nil {
		t.Fatal(err)
	}
	other, err := NewBackbone(newModel32(t, tinyConfig(true), rng)).Condition(two)
	if err != nil {
		t.Fatal(err)
	}
	x := mat.NewDense[float32](mat.WithShape(3, c.Dim))
	tests := []struct {
		name    string
		run     func() error
		wantErr string
	}{
		{"labels", func() error { _, err := bb.Condition(cond.Input{T: []float32{1}, Labels: []int{0}}); return err }, "1 labels given to a caption-conditioned backbone"},
		{"captions and timesteps differ", func() error {
			_, err := bb.Condition(cond.Input{T: []float32{1}, Captions: two.Captions})
			return err
		}, "1 timesteps and 2 captions"},
		{"empty caption", func() error {
			_, err := bb.Condition(cond.Input{T: []float32{1}, Captions: []cond.Caption{caption(2, 0)}})
			return err
		}, "caption of sample 0 has 0 valid rows"},
		{"caption of another width", func() error {
			_, err := bb.Condition(cond.Input{T: []float32{1}, Captions: []cond.Caption{{Features: make([]float32, c.CapFeatDim+1), Len: 1}}})
			return err
		}, "not whole rows of width"},
		{"caption shorter than its length", func() error {
			_, err := bb.Condition(cond.Input{T: []float32{1}, Captions: []cond.Caption{caption(2, 3)}})
			return err
		}, "fewer than its 3 valid ones"},
		{"another backbone's conditioning", func() error { _, err := bb.Forward(x, other, []int{0, 1, 3}, make([]float64, 6)); return err }, "not made by this backbone"},
		{"a plain vector", func() error {
			_, err := bb.Forward(x, cond.Plain{V: cv.Vector()}, []int{0, 1, 3}, make([]float64, 6))
			return err
		}, "cond.Plain was not made by this backbone"},
		{"tokens of another width", func() error {
			_, err := bb.Forward(mat.NewDense[float32](mat.WithShape(3, c.Dim+1)), cv, []int{0, 1, 3}, make([]float64, 6))
			return err
		}, "want width 12"},
		{"positions short", func() error { _, err := bb.Forward(x, cv, []int{0, 1, 3}, make([]float64, 4)); return err }, "4 position values for 3 tokens"},
		{"offsets for another batch", func() error { _, err := bb.Forward(x, cv, []int{0, 3}, make([]float64, 6)); return err }, "3 tokens of 2 samples"},
		{"a sample without tokens", func() error { _, err := bb.Forward(x, cv, []int{0, 0, 3}, make([]float64, 6)); return err }, "sample 0 has no image tokens"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.run()
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("error %v, want one mentioning %q", err, tt.wantErr)
			}
		})
	}
}

// Every parameter but the pad tokens has groups, the adaLN, attention and
// feed-forward parts of the blocks by name; the spec is a copy.
func TestBackboneParamGroupsAndSpec(t *testing.T) {
	m := newModel32(t, tinyConfig(true), rand.New(rand.NewPCG(2, 2)))
	bb := NewBackbone(m)
	for _, p := range m.Params.List() {
		pad := p.Name == "x_pad_token" || p.Name == "cap_pad_token"
		if g := bb.ParamGroups(p.Name); (len(g) == 0) != pad {
			t.Errorf("%s has groups %v", p.Name, g)
		}
	}
	tests := []struct {
		name string
		want []string
	}{
		{"t_embedder.mlp.0.weight", []string{params.GroupEmbedders, params.GroupTimestepEmbedder}},
		{"cap_embedder.1.weight", []string{params.GroupEmbedders}},
		{"x_pad_token", nil},
		{"x_embedder.weight", []string{params.GroupEmbedders, params.GroupLatentEmbedder}},
		{"final_layer.linear.weight", []string{params.GroupFinalLayer}},
		{"noise_refiner.0.adaLN_modulation.0.weight", []string{params.GroupBackbone, params.GroupAdaLN}},
		{"context_refiner.0.attention.qkv.weight", []string{params.GroupBackbone, params.GroupAttention}},
		{"layers.1.attention.q_norm.weight", []string{params.GroupBackbone, params.GroupAttention}},
		{"layers.1.feed_forward.w2.weight", []string{params.GroupBackbone, params.GroupMLP}},
		{"layers.0.ffn_norm2.weight", []string{params.GroupBackbone}},
		{"layers.9.ffn_norm2.weight", nil},
		{"y_embedder.embedding_table.weight", nil},
	}
	for _, tt := range tests {
		if got := bb.ParamGroups(tt.name); !slices.Equal(got, tt.want) {
			t.Errorf("ParamGroups(%q) = %v, want %v", tt.name, got, tt.want)
		}
	}
	// Renamed (as inside a DC model), the groups follow the new names.
	m.PrefixNames("backbone.")
	for _, tt := range tests {
		if got := bb.ParamGroups("backbone." + tt.name); !slices.Equal(got, tt.want) {
			t.Errorf("renamed: ParamGroups(%q) = %v, want %v", "backbone."+tt.name, got, tt.want)
		}
		if got := bb.ParamGroups(tt.name); got != nil {
			t.Errorf("renamed: ParamGroups(%q) = %v, want nil (the old name)", tt.name, got)
		}
	}
	kind, spec := bb.Spec().Kind(), bb.Spec().Settings()
	sc := spec.(*arch.ZImageConfig)
	if kind != Kind || sc == m.Config || sc.Dim != m.Config.Dim {
		t.Fatalf("Spec() = %q, %+v: want kind %q and a copy of the config", kind, sc, Kind)
	}
	sc.AxesDims[0] = 99
	if m.Config.AxesDims[0] == 99 {
		t.Error("Spec's config shares axes_dims with the model's")
	}
}

// FLOPs counts ForwardFLOPs' forward per sample without the patch
// embedding and the final layer, at the backbone's caption length.
func TestBackboneFLOPs(t *testing.T) {
	m := newModel32(t, tinyConfig(true), rand.New(rand.NewPCG(4, 4)))
	c := m.Config
	patch := float64(c.FPatchSize * c.PatchSize * c.PatchSize * c.InChannels)
	tests := []struct {
		captionLen, want int // want: the caption length counted
		lengths          []int
	}{
		{0, TypicalCaptionLen, []int{16}},
		{7, 7, []int{3, 40}},
		{33, 33, []int{1, 1, 64}},
	}
	for _, tt := range tests {
		bb := &Backbone{Model: m, CaptionLen: tt.captionLen}
		var want float64
		for _, n := range tt.lengths {
			f := ForwardFLOPs(c, n, tt.want)
			want += f.Total() - f.Final - 2*float64(n)*patch*float64(c.Dim)
		}
		if got := bb.FLOPs(tt.lengths); got != want || !(got > 0) {
			t.Errorf("caption length %d, lengths %v: FLOPs %g, want %g", tt.captionLen, tt.lengths, got, want)
		}
	}
}

// ImageMultiple: padding a sample's kept tokens to 1 pads nothing, so the
// output does not read x_pad_token, where the reference's padding (the
// default) does; a sample already at a multiple is the same either way;
// FLOPs counts the tokens each runs.
func TestBackboneImageMultiple(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 8))
	m := newModel32(t, tinyConfig(true), rng)
	c := m.Config
	mult := c.SeqMultiple()
	in := cond.Input{T: []float32{0.3, 0.7}, Captions: []cond.Caption{
		{Features: randF32(rng, 3*c.CapFeatDim, 1.5), Len: 3},
		{Features: randF32(rng, 5*c.CapFeatDim, 1.5), Len: 5},
	}}
	// Sample 0 keeps a multiple of the padding, sample 1 three fewer.
	offsets := []int{0, mult, 2*mult - 3}
	N := offsets[2]
	pos := make([]float64, 2*N)
	for i := range pos {
		pos[i] = 7 * rng.Float64()
	}
	x := mat.NewDense[float32](mat.WithShape(N, c.Dim), mat.WithBacking(randF32(rng, N*c.Dim, 1)))
	run := func(imageMultiple int) []float32 {
		bb := &Backbone{Model: m, ImageMultiple: imageMultiple}
		cv, err := bb.Condition(in)
		if err != nil {
			t.Fatal(err)
		}
		y, err := bb.Forward(x, cv, offsets, pos)
		if err != nil {
			t.Fatal(err)
		}
		return slices.Clone(values(y))
	}
	padded, unpadded := run(0), run(1)
	pad := mat.Data[float32](m.p("x_pad_token").Value())
	for i := range pad {
		pad[i] += 0.5
	}
	padded2, unpadded2 := run(0), run(1)
	first := mult * c.Dim // sample 0's rows
	if e := fixtures.RelErr(unpadded[:first], padded[:first]); !(e <= 1e-6) {
		t.Errorf("a sample at a multiple of %d: unpadded differs from padded (rel err %g)", mult, e)
	}
	if !slices.Equal(unpadded, unpadded2) {
		t.Error("unpadded: the output changed with x_pad_token")
	}
	if e := fixtures.RelErr(padded2[first:], padded[first:]); !(e > 1e-4) {
		t.Errorf("padded: x_pad_token moved the padded sample's output by rel err %g only, want it to attend", e)
	}
	bb := &Backbone{Model: m, CaptionLen: 5, ImageMultiple: 1}
	n := N - mult
	if got, want := bb.FLOPs([]int{n}), (&Backbone{Model: m, CaptionLen: 5}).FLOPs([]int{mult}); !(got < want) {
		t.Errorf("unpadded FLOPs of %d tokens %g, want fewer than the padded %g", n, got, want)
	}
	f := ForwardFLOPs(c, n, 5)
	f1 := forwardFLOPs(c, n, 5, 1)
	if f1.Embed != f.Embed || f1.Final != f.Final || !(f1.Total() < f.Total()) {
		t.Errorf("unpadded %+v against padded %+v: want the same embedders and final layer, fewer in the blocks", f1, f)
	}
}

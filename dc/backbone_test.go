package dc_test

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/nlpodyssey/spago/mat"

	"github.com/dcdit/dcdit/cond"
	"github.com/dcdit/dcdit/dc"
	"github.com/dcdit/dcdit/dc/hnet"
	"github.com/dcdit/dcdit/dit"
	"github.com/dcdit/dcdit/internal/fixtures"
	"github.com/dcdit/dcdit/internal/testckpt"
	"github.com/dcdit/dcdit/loaders/arch"
	"github.com/dcdit/dcdit/ops"
	"github.com/dcdit/dcdit/params"
	"github.com/dcdit/dcdit/upcycle"
	"github.com/dcdit/dcdit/zimage"
)

// The DiT itself, Z-Image and DC-DiT's main network are backbones.
var (
	_ dc.Backbone = (*dit.Model)(nil)
	_ dc.Backbone = (*zimage.Backbone)(nil)
	_ dc.Backbone = (*hnet.Network)(nil)
)

// randomDiT is a small DiT/p with every weight random (adaLN-Zero too), so
// that every block contributes and a wrong position shows.
func randomDiT(t *testing.T, patch int, seed uint64) *dit.Model {
	t.Helper()
	cfg := &arch.DiTConfig{Depth: 2, HiddenSize: 64, NumHeads: 4, PatchSize: patch, InChannels: 4, InputSize: 8,
		LearnSigma: true, NumClasses: 5, MLPRatio: 2, FrequencySize: 256}
	m, err := dit.Init(cfg, seed)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(seed, 7))
	for i := range m.Params.Data {
		m.Params.Data[i] = float32(0.1 * rng.NormFloat64())
	}
	return m
}

func randn(seed uint64, n int) []float32 {
	rng := rand.New(rand.NewPCG(seed, 11))
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(rng.NormFloat64())
	}
	return v
}

// The DC scaffold runs around a *dit.Model backbone, forward and
// backward: the loss reaches the scaffold, the DiT's blocks and
// embedders, and not the DiT's own patch embedding and final layer,
// which a DC model replaces.
func TestScaffoldAroundDiT(t *testing.T) {
	tests := []struct {
		name  string
		patch int
		frac  []float32
		// cells of the DiT's patch, wide head, relative residual, latent
		// skip, no encoder norm, token embedder, dropped context: what a
		// grafted model that starts as its teacher uses
		patchCells bool
	}{
		{"DiT/1, no drop", 1, nil, false},
		{"DiT/2, no drop", 2, nil, false},
		{"DiT/2, ρ 0.3 and 0.6", 2, []float32{0.3, 0.6}, false},
		{"DiT/2 on patch cells, ρ 0.3 and 0.6", 2, []float32{0.3, 0.6}, true},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			bb := randomDiT(t, tt.patch, uint64(i+1))
			tc := bb.Config
			m := scaffoldAround(t, bb, func(s *upcycle.Scaffold) {
				if tt.patchCells {
					s.PatchSize, s.WideHead, s.RelativeResidual, s.NoEncoderNorm, s.LatentSkip, s.TokenEmbedder, s.DroppedContext = tt.patch, true, true, true, true, true, true
				}
			})
			cfg := m.Config
			// The final layer starts at zero; a random one lets the
			// gradient reach everything before it.
			for _, name := range []string{"final_layer.linear.weight", "final_layer.adaLN_modulation.1.weight", "wide_head.linear.weight", "wide_head.adaLN_modulation.1.weight", "latent_skip.scale.weight", "dropped_context.conv.weight"} {
				if p, ok := m.Params.Lookup(name); ok {
					copy(p.Values(), randn(5, len(p.Values())))
				}
			}
			B := 2
			x := randn(4, B*cfg.InChannels*cfg.Tokens())
			c, err := bb.Condition(cond.Input{T: []float32{10, 600}, Labels: []int{1, tc.NumClasses}})
			if err != nil {
				t.Fatal(err)
			}
			tokens := dc.ToTokens(x, B, cfg.InChannels, cfg.GridRows, cfg.GridCols, cfg.Patch())
			res, err := m.Forward(mat.NewDense[float32](mat.WithShape(B*cfg.Cells(), cfg.CellIn()), mat.WithBacking(tokens)), c, tt.frac)
			if err != nil {
				t.Fatal(err)
			}
			out := mat.Data[float32](res.Out.Value())
			if got, want := len(out), B*cfg.Cells()*cfg.CellOut(); got != want {
				t.Fatalf("output has %d values, want %d", got, want)
			}
			for _, v := range out {
				if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
					t.Fatal("output is not finite")
				}
			}
			if err := ops.Backward(ops.Sum(ops.Mul(res.Out, res.Out))); err != nil {
				t.Fatal(err)
			}
			// Not joined: the DiT's own x_embedder.* and final_layer.* share
			// their names with the scaffold's (BackbonePrefix).
			checkGradients(t, m, "DiT")
		})
	}
}

// randomZImage is a small Z-Image whose adaLN width differs from its dim,
// with every weight random.
func randomZImage(t *testing.T, seed uint64) *zimage.Model { return testckpt.RandomZImage(t, seed) }

// The DC scaffold runs around a Z-Image backbone conditioned on captions
// of different lengths, forward and backward, with the adaLN width as the
// scaffold's conditioning width: the loss reaches the scaffold and every
// Z-Image parameter but its own patch embedding and final layer.
func TestScaffoldAroundZImage(t *testing.T) {
	zm := randomZImage(t, 5)
	bb := zimage.NewBackbone(zm)
	zc := zm.Config
	m := newScaffold(t, bb, zc.InChannels, zc.InChannels, 8, nil)
	cfg := m.Config
	for _, name := range []string{"final_layer.linear.weight", "final_layer.adaLN_modulation.1.weight"} {
		copy(m.Params.Get(name).Values(), randn(5, len(m.Params.Get(name).Values())))
	}
	B := 2
	in := cond.Input{T: []float32{0.2, 0.9}, Captions: []cond.Caption{
		{Features: randn(6, 3*zc.CapFeatDim), Len: 3},
		{Features: randn(7, 40*zc.CapFeatDim), Len: 40},
	}}
	c, err := bb.Condition(in)
	if err != nil {
		t.Fatal(err)
	}
	tokens := dc.ToTokens(randn(4, B*cfg.InChannels*cfg.Tokens()), B, cfg.InChannels, cfg.GridRows, cfg.GridCols, 1)
	res, err := m.Forward(mat.NewDense[float32](mat.WithShape(B*cfg.Tokens(), cfg.InChannels), mat.WithBacking(tokens)), c, []float32{0.5})
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range mat.Data[float32](res.Out.Value()) {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			t.Fatal("output is not finite")
		}
	}
	if err := ops.Backward(ops.Sum(ops.Mul(res.Out, res.Out))); err != nil {
		t.Fatal(err)
	}
	checkGradients(t, m, "Z-Image")
}

// A DiT's Forward at the latent coordinates of its patch centres is its
// own fixed-patch blocks: the real-valued positions land exactly on the
// patch grid of its position table.
func TestDiTForwardAtPatchCentres(t *testing.T) {
	for _, patch := range []int{1, 2} {
		bb := randomDiT(t, patch, 9)
		cfg := bb.Config
		B, p, g := 2, cfg.PatchSize, cfg.InputSize/cfg.PatchSize
		x := randn(3, B*cfg.InChannels*cfg.InputSize*cfg.InputSize)
		ts, ys := []float32{5, 700}, []int{1, cfg.NumClasses}
		c, err := bb.Condition(cond.Input{T: ts, Labels: ys})
		if err != nil {
			t.Fatal(err)
		}
		tokens, offsets := bb.Embed(x, B)
		want := bb.Blocks(tokens, c.Vector(), offsets)

		bare := ops.Linear(mat.NewDense[float32](mat.WithShape(B*g*g, cfg.InChannels*p*p),
			mat.WithBacking(dit.Patchify(x, B, cfg.InChannels, cfg.InputSize, p))), bb.Params.Get("x_embedder.proj.weight"), bb.Params.Get("x_embedder.proj.bias"))
		pos := make([]float64, 0, 2*B*g*g)
		for range B {
			for i := range g {
				for j := range g {
					pos = append(pos, float64(p*i)+float64(p-1)/2, float64(p*j)+float64(p-1)/2)
				}
			}
		}
		got, err := bb.Forward(bare, c, offsets, pos)
		if err != nil {
			t.Fatal(err)
		}
		if e := fixtures.RelErr(mat.Data[float32](got.Value()), mat.Data[float32](want.Value())); !fixtures.Within(e, 5e-6) {
			t.Errorf("DiT/%d: Forward at the patch centres differs from the blocks over Embed: rel err %g", patch, e)
		}
	}
}

// Bad arguments to a DiT backbone are errors that name the problem.
func TestDiTBackboneErrors(t *testing.T) {
	bb := randomDiT(t, 2, 1)
	D := bb.Width()
	c, err := bb.Condition(cond.Input{T: []float32{1, 2}, Labels: []int{0, 1}})
	if err != nil {
		t.Fatal(err)
	}
	c3, err := bb.Condition(cond.Input{T: []float32{1, 2, 3}, Labels: []int{0, 1, 2}})
	if err != nil {
		t.Fatal(err)
	}
	x := mat.NewDense[float32](mat.WithShape(3, D))
	tests := []struct {
		name    string
		run     func() error
		wantErr string
	}{
		{"labels and timesteps differ", func() error { _, err := bb.Condition(cond.Input{T: []float32{1}, Labels: []int{0, 1}}); return err }, "1 timesteps and 2 labels"},
		{"label beyond the null class", func() error { _, err := bb.Condition(cond.Input{T: []float32{1}, Labels: []int{6}}); return err }, "label 6"},
		{"negative label", func() error { _, err := bb.Condition(cond.Input{T: []float32{1}, Labels: []int{-1}}); return err }, "label -1"},
		{"captions", func() error {
			_, err := bb.Condition(cond.Input{T: []float32{1}, Labels: []int{0}, Captions: []cond.Caption{{Features: make([]float32, 4), Len: 1}}})
			return err
		}, "1 captions given to a class-conditional backbone"},
		{"positions short", func() error { _, err := bb.Forward(x, c, []int{0, 1, 3}, make([]float64, 4)); return err }, "4 position values for 3 tokens"},
		{"offsets past the tokens", func() error { _, err := bb.Forward(x, c, []int{0, 1, 4}, make([]float64, 6)); return err }, "do not describe 3 tokens"},
		{"offsets for another batch", func() error { _, err := bb.Forward(x, c, []int{0, 3}, make([]float64, 6)); return err }, "of 2 samples"},
		{"offsets decrease", func() error { _, err := bb.Forward(x, c3, []int{0, 2, 1, 3}, make([]float64, 6)); return err }, "decrease at sample 2"},
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

// Each backbone counts its FLOPs as the scaffold's convention wants, and
// the DiT's and the main network's agree for the same blocks.
func TestBackboneFLOPsAgree(t *testing.T) {
	bb := randomDiT(t, 2, 1)
	tc := bb.Config
	net := &hnet.Network{Config: &hnet.Config{Width: tc.HiddenSize, Depth: tc.Depth, Heads: tc.NumHeads, MLPHidden: tc.MLPHidden(),
		FrequencySize: tc.FrequencySize, NumClasses: tc.NumClasses, PatchSize: tc.PatchSize}}
	for _, lengths := range [][]int{{16}, {3, 40}, {0, 1, 64}} {
		if a, b := bb.FLOPs(lengths), net.FLOPs(lengths); a != b || !(a > 0) {
			t.Errorf("lengths %v: DiT counts %g, main network %g", lengths, a, b)
		}
	}
}

// A non-finite latent reaches the router as NaN; the forward pass names it
// instead of failing later on a sample without tokens.
func TestForwardRefusesNaN(t *testing.T) {
	m := scaffoldAround(t, randomDiT(t, 2, 7), nil)
	x := randn(4, 2*m.Config.InChannels*m.Config.Tokens())
	x[len(x)-5] = float32(math.NaN())
	_, _, err := m.Predict(x, cond.Input{T: []float32{10, 600}, Labels: []int{1, 2}}, nil)
	if err == nil || !strings.Contains(err.Error(), "sample 1") || !strings.Contains(err.Error(), "NaN") {
		t.Fatalf("err = %v, want the NaN named with its sample", err)
	}
}

// scaffoldAround grafts a freshly initialised scaffold (8 GroupNorm groups,
// 4 in the router; edit, if set, changes the rest) around a DiT backbone.
func scaffoldAround(t *testing.T, bb *dit.Model, edit func(*upcycle.Scaffold)) *dc.Model {
	t.Helper()
	tc := bb.Config
	return newScaffold(t, bb, tc.InChannels, tc.OutChannels(), tc.InputSize, edit)
}

// newScaffold is scaffoldAround for any backbone, on a side×side grid of
// in latent channels predicting out.
func newScaffold(t *testing.T, bb dc.Backbone, in, out, side int, edit func(*upcycle.Scaffold)) *dc.Model {
	t.Helper()
	s := upcycle.DefaultScaffold()
	s.NormGroups, s.RouterGroups = 8, 4
	if edit != nil {
		edit(&s)
	}
	cfg, err := s.Config(in, out, side, side, bb.Width(), bb.CondWidth())
	if err != nil {
		t.Fatal(err)
	}
	m, err := dc.New(cfg, upcycle.InitScaffold(cfg, 3), bb)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// checkGradients wants a finite, non-zero gradient on every parameter of
// the scaffold and of its backbone (called owner in messages), except the
// backbone's own patch embedding and final layer, which the scaffold
// replaces and which must get none.
func checkGradients(t *testing.T, m *dc.Model, owner string) {
	t.Helper()
	bb := m.Backbone
	for _, part := range []struct {
		owner string
		ps    []*params.Param
	}{{"scaffold", m.Params.List()}, {owner, bb.Parameters().List()}} {
		for _, p := range part.ps {
			groups := bb.ParamGroups(p.Name)
			unused := part.owner == owner && (slices.Contains(groups, params.GroupLatentEmbedder) || slices.Contains(groups, params.GroupFinalLayer))
			var norm float64
			for _, g := range p.Gradient() {
				norm += float64(g) * float64(g)
			}
			switch {
			case unused && norm != 0:
				t.Errorf("%s %s: gradient norm² %g, want none (the scaffold replaces it)", part.owner, p.Name, norm)
			case !unused && (norm == 0 || math.IsNaN(norm) || math.IsInf(norm, 0)):
				t.Errorf("%s %s: gradient norm² %g, want a finite non-zero one", part.owner, p.Name, norm)
			}
		}
	}
}

// DetachedLogits are the pass's router logits, and a loss on them trains
// the router's weights alone: no gradient reaches the encoder.
func TestDetachedLogits(t *testing.T) {
	m := scaffoldAround(t, randomDiT(t, 2, 7), nil)
	cfg := m.Config
	x := randn(5, 2*cfg.InChannels*cfg.Tokens())
	in := cond.Input{T: []float32{10, 600}, Labels: []int{1, 2}}
	cv, err := m.Backbone.Condition(in)
	if err != nil {
		t.Fatal(err)
	}
	tokens := dc.ToTokens(x, 2, cfg.InChannels, cfg.GridRows, cfg.GridCols, cfg.Patch())
	res, err := m.Forward(mat.NewDense[float32](mat.WithShape(2*cfg.Cells(), cfg.CellIn()), mat.WithBacking(tokens)), cv, nil)
	if err != nil {
		t.Fatal(err)
	}
	logit := m.DetachedLogits(res)
	got, want := mat.Data[float32](logit.Value()), mat.Data[float32](res.Routing.Logit.Value())
	if !slices.Equal(got, want) {
		t.Fatalf("detached logits differ from the pass's: %v against %v", got[:4], want[:4])
	}
	if err := ops.Backward(ops.Sum(logit)); err != nil {
		t.Fatal(err)
	}
	for _, p := range m.Params.List() {
		var norm float64
		for _, g := range p.Gradient() {
			norm += float64(g) * float64(g)
		}
		router := strings.HasPrefix(p.Name, "hnet.routing_module.")
		if router != (norm > 0) {
			t.Errorf("%s: gradient norm² %g (router parameter: %v)", p.Name, norm, router)
		}
	}
}

// ForwardKeptGate predicts what Forward predicts, and its gate's gradient
// differs from Forward's at the boundaries the tail drop removed, with the
// opposite sign, and nowhere else.
func TestForwardKeptGate(t *testing.T) {
	m := scaffoldAround(t, randomDiT(t, 2, 7), nil)
	// The final layer starts at zero, which no gradient passes, and the
	// router with few boundaries: most cells a boundary instead.
	lo, hi, _ := m.Params.Range("final_layer.linear.weight")
	copy(m.Params.Data[lo:hi], randn(8, hi-lo))
	lo, _, _ = m.Params.Range("hnet.routing_module.residual_scorer.3.bias")
	m.Params.Data[lo] = 2
	cfg := m.Config
	x := randn(6, 2*cfg.InChannels*cfg.Tokens())
	in := cond.Input{T: []float32{10, 600}, Labels: []int{1, 2}}
	tokens := dc.ToTokens(x, 2, cfg.InChannels, cfg.GridRows, cfg.GridCols, cfg.Patch())
	w := randn(7, 2*cfg.Cells()*cfg.CellOut()) // a random linear loss on the output
	run := func(forward forwardFunc) (*dc.Result, []float32) { return logitGrad(t, m, in, tokens, w, forward) }
	natural, gn := run(m.Forward)
	kept, gk := run(m.ForwardKeptGate)
	if !slices.Equal(mat.Data[float32](natural.Out.Value()), mat.Data[float32](kept.Out.Value())) {
		t.Fatal("the gate on the kept cells changed the prediction")
	}
	removed := 0
	for i := range gn {
		if natural.Routing.Natural[i] && !natural.Chunks.Kept[i] {
			if gn[i] != 0 {
				removed++
			}
			if gk[i] != -gn[i] {
				t.Errorf("cell %d, removed by the tail drop: gradient %g natural, %g kept; want opposite ones", i, gn[i], gk[i])
			}
		} else if gn[i] != gk[i] {
			t.Errorf("cell %d: gradient %g natural, %g kept; want the same", i, gn[i], gk[i])
		}
	}
	if removed == 0 {
		t.Fatal("no boundary the tail drop removed has a gradient: nothing tested")
	}
}

// ForwardChoosing trains the router on its own choices only: in a sample
// whose cells a Chooser changed its logits take no gradient, in a sample
// the Chooser left alone they take Forward's, and the prediction is the
// one PredictChoosing gives.
func TestForwardChoosingTrainsTheRouterOnItsOwnCells(t *testing.T) {
	m := scaffoldAround(t, randomDiT(t, 2, 7), nil)
	x, in := chooserInputs(m)
	cfg := m.Config
	L := cfg.Cells()
	tokens := dc.ToTokens(x, 2, cfg.InChannels, cfg.GridRows, cfg.GridCols, cfg.Patch())
	w := randn(7, 2*L*cfg.CellOut())
	shift := shiftSecond(L)
	run := func(choose dc.Chooser) (*dc.Result, []float32) {
		return logitGrad(t, m, in, tokens, w, func(x mat.Tensor, cv cond.Value, frac []float32) (*dc.Result, error) {
			return m.ForwardChoosing(x, cv, frac, choose, false)
		})
	}
	router, own := run(nil)
	chosen, g := run(shift)
	if slices.Equal(chosen.Chunks.Kept[L:], router.Chunks.Kept[L:]) {
		t.Fatal("the chooser changed nothing: nothing tested")
	}
	if !slices.Equal(g[:L], own[:L]) {
		t.Errorf("the sample with the router's cells: logit gradient %v, want Forward's %v", g[:4], own[:4])
	}
	if slices.ContainsFunc(own[:L], func(v float32) bool { return v != 0 }) == false {
		t.Error("no logit gradient in the router's own sample: nothing tested")
	}
	if i := slices.IndexFunc(g[L:], func(v float32) bool { return v != 0 }); i >= 0 {
		t.Errorf("the chosen sample's cell %d has logit gradient %g, want none", i, g[L+i])
	}
	want, _, err := m.PredictChoosing(x, in, []float32{0.5}, shift)
	if err != nil {
		t.Fatal(err)
	}
	if got := dc.FromTokens(mat.Data[float32](chosen.Out.Value()), 2, cfg.OutChannels, cfg.GridRows, cfg.GridCols, cfg.Patch()); !slices.Equal(got, want) {
		t.Error("ForwardChoosing predicts other than PredictChoosing")
	}
}

// chooserInputs gives m's final layer random weights, so that what the
// decoder reads shows in its prediction, and returns latents for a batch
// of two grids and their conditioning (a low-noise and a noisy sample):
// the batch shiftSecond chooses for.
func chooserInputs(m *dc.Model) ([]float32, cond.Input) {
	lo, hi, _ := m.Params.Range("final_layer.linear.weight")
	copy(m.Params.Data[lo:hi], randn(8, hi-lo))
	cfg := m.Config
	return randn(6, 2*cfg.InChannels*cfg.Tokens()), cond.Input{T: []float32{10, 600}, Labels: []int{1, 2}}
}

// shiftSecond is a Chooser for a batch of two grids of L cells: sample 1
// keeps the router's cells shifted by one (as many), sample 0 the
// router's own.
func shiftSecond(L int) dc.Chooser {
	return func(kept []bool, batch int) ([]bool, error) {
		out := slices.Clone(kept)
		for l := range L {
			out[L+l] = kept[L+(l+1)%L]
		}
		return out, nil
	}
}

// forwardFunc is one of the model's training forwards.
type forwardFunc func(x mat.Tensor, cv cond.Value, frac []float32) (*dc.Result, error)

// logitGrad runs forward on a batch of two grids of cell-major tokens at
// ρ 0.5 under in, backpropagates the linear loss Σ out·w, and returns the
// result and the router logits' gradient.
func logitGrad(t *testing.T, m *dc.Model, in cond.Input, tokens, w []float32, forward forwardFunc) (*dc.Result, []float32) {
	t.Helper()
	cv, err := m.Backbone.Condition(in)
	if err != nil {
		t.Fatal(err)
	}
	x := mat.NewDense[float32](mat.WithShape(2*m.Config.Cells(), m.Config.CellIn()), mat.WithBacking(slices.Clone(tokens)))
	x.SetRequiresGrad(false)
	res, err := forward(x, cv, []float32{0.5})
	if err != nil {
		t.Fatal(err)
	}
	loss := ops.Sum(ops.Mul(res.Out, mat.NewDense[float32](mat.WithShape(res.Out.Shape()...), mat.WithBacking(w))))
	if err := ops.Backward(loss); err != nil {
		t.Fatal(err)
	}
	return res, slices.Clone(mat.Data[float32](res.Routing.Logit.Value().Grad()))
}

// The chosen embedding tells the decoder whose cells it fills: started at
// zero it changes no prediction; set, it moves the samples whose cells a
// Chooser changed and no other, and it learns from those alone.
func TestChosenEmbedding(t *testing.T) {
	bb := randomDiT(t, 2, 7)
	plain := scaffoldAround(t, bb, nil)
	m := scaffoldAround(t, bb, func(s *upcycle.Scaffold) { s.ChosenEmbedding = true })
	chooserInputs(plain)
	x, in := chooserInputs(m)
	cfg := m.Config
	L := cfg.Cells()
	shift := shiftSecond(L)
	predict := func(mm *dc.Model) []float32 {
		p, _, err := mm.PredictChoosing(x, in, []float32{0.5}, shift)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	if !slices.Equal(predict(m), predict(plain)) {
		t.Fatal("a zero chosen embedding changed the prediction")
	}
	lo, hi, ok := m.Params.Range("hnet.decoder.chosen_embedding")
	if !ok {
		t.Fatal("no hnet.decoder.chosen_embedding")
	}
	before := predict(m)
	copy(m.Params.Data[lo:hi], randn(9, hi-lo))
	after := predict(m)
	half := len(after) / 2
	if !slices.Equal(after[:half], before[:half]) {
		t.Error("the embedding moved the sample on the router's cells")
	}
	if slices.Equal(after[half:], before[half:]) {
		t.Error("the embedding left the chosen sample as it was")
	}

	tokens := dc.ToTokens(x, 2, cfg.InChannels, cfg.GridRows, cfg.GridCols, cfg.Patch())
	w := randn(7, 2*L*cfg.CellOut())
	grad := func(choose dc.Chooser) float64 {
		m.Params.ZeroGrad()
		logitGrad(t, m, in, tokens, w, func(x mat.Tensor, cv cond.Value, frac []float32) (*dc.Result, error) {
			return m.ForwardChoosing(x, cv, frac, choose, false)
		})
		var n float64
		for _, p := range m.Params.List() {
			if p.Name == "hnet.decoder.chosen_embedding" {
				for _, g := range p.Gradient() {
					n += float64(g) * float64(g)
				}
			}
		}
		return n
	}
	if g := grad(nil); g != 0 {
		t.Errorf("the router's cells everywhere: the embedding's gradient norm² %g, want 0", g)
	}
	if g := grad(shift); !(g > 0) || math.IsInf(g, 0) {
		t.Errorf("a chosen sample: the embedding's gradient norm² %g, want a finite non-zero one", g)
	}
}

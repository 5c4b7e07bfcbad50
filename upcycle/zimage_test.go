package upcycle

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/nlpodyssey/spago/mat"

	"github.com/dcdit/dcdit/cond"
	"github.com/dcdit/dcdit/dc"
	"github.com/dcdit/dcdit/internal/fixtures"
	"github.com/dcdit/dcdit/internal/testckpt"
	"github.com/dcdit/dcdit/ops"
	"github.com/dcdit/dcdit/zimage"
)

// A Z-Image graft with the patch prior starts its encoder as Z-Image's
// patch embedding: with cells of the model's patch every cell's encoding
// is its patch's image token, with cells of one latent the encoding at
// each patch's top-left latent is; and the grafted model runs on captions
// of different lengths at a tail-drop fraction.
func TestGraftTeacherZImage(t *testing.T) {
	for _, cell := range []int{1, 2} {
		t.Run(fmt.Sprintf("cells of %d×%d latents", cell, cell), func(t *testing.T) {
			zm := testckpt.RandomZImage(t, 11)
			zc := zm.Config
			p, C, D, S := zc.PatchSize, zc.InChannels, zc.Dim, 8
			w := append([]float32(nil), zm.Params.Get("x_embedder.weight").Values()...)
			b := append([]float32(nil), zm.Params.Get("x_embedder.bias").Values()...)
			s := DefaultScaffold()
			s.NormGroups, s.RouterGroups, s.WidthFactor = 8, 4, 2
			s.PatchSize, s.EncoderInit, s.NoEncoderNorm = cell, "patch", true
			m, err := GraftTeacher(zimage.Teacher{Model: zm}, s, S, S, 3)
			if err != nil {
				t.Fatal(err)
			}
			if _, ok := m.Backbone.Parameters().Lookup(dc.BackbonePrefix + "x_embedder.weight"); !ok {
				t.Fatalf("the backbone's tensors are not under %q", dc.BackbonePrefix)
			}
			x, _, caps := zimageInputs(rand.New(rand.NewPCG(7, 8)), C*S*S, zc.CapFeatDim, 3, 9)
			out, res, err := m.Predict(x, cond.Input{T: []float32{0.3, 0.8}, Captions: caps}, []float32{0.5})
			if err != nil {
				t.Fatal(err)
			}
			if len(out) != len(x) {
				t.Fatalf("prediction of %d values for %d latents", len(out), len(x))
			}
			// The first sample's patches, (dy, dx, c) with c fastest.
			patches := zimage.Patchify(nil, x[:C*S*S], C, 1, S, S, 1, p)
			enc := data(res.Encoded)
			for i := range (S / p) * (S / p) {
				r, c := i/(S/p)*p, i%(S/p)*p // the patch's top-left latent
				want := make([]float32, D)
				for d := range D {
					v := float64(b[d])
					for k := range C * p * p {
						v += float64(w[d*C*p*p+k]) * float64(patches[i*C*p*p+k])
					}
					want[d] = float32(v)
				}
				row := (r/cell)*(S/cell) + c/cell
				if err := fixtures.RelErr(enc[row*D:(row+1)*D], want); !fixtures.Within(err, 1e-5) {
					t.Fatalf("patch at (%d, %d): encoding off the image token by %.2g", r, c, err)
				}
			}
		})
	}
}

func TestGraftTeacherZImageRefuses(t *testing.T) {
	tests := []struct {
		name string
		edit func(*Scaffold)
		want string
	}{
		{"unknown encoder init", func(s *Scaffold) { s.EncoderInit = "teacher" }, `encoder init "teacher"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := DefaultScaffold()
			s.NormGroups, s.RouterGroups = 8, 4
			tt.edit(&s)
			_, err := GraftTeacher(zimage.Teacher{Model: testckpt.RandomZImage(t, 1)}, s, 8, 8, 3)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want it to say %q", err, tt.want)
			}
		})
	}
}

// Cells of the model's patch, the patch encoder prior, no encoder norm,
// the wide head (Z-Image's final layer, whose modulation has no shift)
// and the relative residual: a grafted Z-Image whose router keeps every
// cell predicts what the model itself predicts, on captions of different
// lengths, with or without the conditioning adaptor (whatever it learns),
// and with the token embedder whatever the encoder learns (its columns
// reordered from Z-Image's patch layout to the cell's).
func TestGraftTeacherZImageStartsAsModel(t *testing.T) {
	for _, c := range []struct{ condNorm, tokenEmbedder bool }{{false, false}, {true, false}, {false, true}} {
		condNorm := c.condNorm
		t.Run(fmt.Sprintf("cond_norm %v, token_embedder %v", condNorm, c.tokenEmbedder), func(t *testing.T) {
			const seed, S = 11, 8
			zm := testckpt.RandomZImage(t, seed)
			zc := zm.Config
			s := DefaultScaffold()
			s.NormGroups, s.RouterGroups, s.WidthFactor, s.Sigma = 8, 4, 2, 0.3
			s = s.StartAsTeacher(zc.PatchSize)
			s.CondNorm, s.TokenEmbedder = condNorm, c.tokenEmbedder
			m, err := GraftTeacher(zimage.Teacher{Model: testckpt.RandomZImage(t, seed)}, s, S, S, 3)
			if err != nil {
				t.Fatal(err)
			}
			// What the dropped cells and the adaptor learn must not reach
			// the kept ones.
			names := []string{"hnet.residual_proj.weight"}
			if condNorm {
				names = append(names, "cond_norm.weight", "cond_norm.bias")
			}
			if c.tokenEmbedder {
				names = append(names, "x_embedder.proj.weight", "hnet.encoder.layers.0.conv2.weight")
			}
			move(m, names)
			// Every cell a confident boundary.
			data(m.Params.Get("hnet.routing_module.residual_scorer.3.bias"))[0] = 30
			C := zc.InChannels
			x, feats, caps := zimageInputs(rand.New(rand.NewPCG(7, 8)), C*S*S, zc.CapFeatDim, 3, 9)
			ts := []float32{0.3, 0.8}
			got, res, err := m.Predict(x, cond.Input{T: ts, Captions: caps}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if k := res.Chunks.NumKept; k[0] != m.Config.Cells() || k[1] != m.Config.Cells() {
				t.Fatalf("kept %v of %d cells, want all", k, m.Config.Cells())
			}
			lats := []zimage.Latent{{Data: x[:C*S*S], F: 1, H: S, W: S}, {Data: x[C*S*S:], F: 1, H: S, W: S}}
			imgs, err := zm.Forward(lats, ts, feats)
			if err != nil {
				t.Fatal(err)
			}
			want := append(imgs[0], imgs[1]...)
			if err := fixtures.RelErr(got, want); !fixtures.Within(err, 1e-5) {
				t.Fatalf("grafted model against the model: relative error %.2g", err)
			}
		})
	}
}

// The conditioning adaptor (Scaffold.CondNorm) starts as a plain
// LayerNorm (weight 1, bias 0), is what the encoder's and decoder's blocks
// and the final layer read — the prediction moves with its bias once the
// final layer is trained away from zero — and gets a gradient; the wide
// head reads the backbone's vector as it is.
func TestCondNormAdaptor(t *testing.T) {
	zm := testckpt.RandomZImage(t, 4)
	s := DefaultScaffold()
	s.NormGroups, s.RouterGroups, s.WidthFactor = 8, 4, 2
	s = s.StartAsTeacher(zm.Config.PatchSize)
	s.CondNorm = true
	m, err := GraftTeacher(zimage.Teacher{Model: zm}, s, 8, 8, 3)
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range data(m.Params.Get("cond_norm.weight")) {
		if b := data(m.Params.Get("cond_norm.bias"))[i]; v != 1 || b != 0 {
			t.Fatalf("cond_norm[%d]: weight %g, bias %g, want 1 and 0", i, v, b)
		}
	}
	for i := range data(m.Params.Get("final_layer.linear.weight")) {
		data(m.Params.Get("final_layer.linear.weight"))[i] = float32(0.05 * math.Cos(float64(i)))
	}
	rng := rand.New(rand.NewPCG(1, 1))
	C := zm.Config.InChannels
	x := make([]float32, C*8*8)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	in := cond.Input{T: []float32{0.4}, Captions: []cond.Caption{{Features: make([]float32, 2*zm.Config.CapFeatDim), Len: 2}}}
	before, _, err := m.Predict(x, in, nil)
	if err != nil {
		t.Fatal(err)
	}
	bias := data(m.Params.Get("cond_norm.bias"))
	for i := range bias {
		bias[i] = 0.5
	}
	after, _, err := m.Predict(x, in, nil)
	if err != nil {
		t.Fatal(err)
	}
	if e := fixtures.RelErr(after, before); !(e > 1e-4) {
		t.Errorf("the adaptor's bias moved the prediction by rel err %g, want it read", e)
	}
	cv, err := m.Backbone.Condition(in)
	if err != nil {
		t.Fatal(err)
	}
	tok := dc.ToTokens(x, 1, C, 8, 8, m.Config.Patch())
	res, err := m.Forward(mat.NewDense[float32](mat.WithShape(m.Config.Cells(), m.Config.CellIn()), mat.WithBacking(tok)), cv, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := ops.Backward(ops.Sum(ops.Mul(res.Out, res.Out))); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"cond_norm.weight", "cond_norm.bias"} {
		p := m.Params.Get(name)
		if !p.HasGrad() || !slices.ContainsFunc(mat.Data[float32](p.Grad()), func(v float32) bool { return v != 0 }) {
			t.Errorf("%s received no gradient", name)
		}
	}
}

// On a Z-Image graft the latent skip's prior follows flow matching: the
// map from a cell's input to its data-ward velocity is −1/σ, so the map
// starts as the negative identity and its scale near 1/σ.
func TestLatentSkipPriorZImage(t *testing.T) {
	zm := testckpt.RandomZImage(t, 2)
	zc := zm.Config
	s := DefaultScaffold()
	s.NormGroups, s.RouterGroups, s.WidthFactor = 8, 4, 2
	s = s.StartAsTeacher(zc.PatchSize)
	s.LatentSkip = true
	m, err := GraftTeacher(zimage.Teacher{Model: zm}, s, 8, 8, 3)
	if err != nil {
		t.Fatal(err)
	}
	empty := cond.Caption{Features: make([]float32, zc.CapFeatDim), Len: 1}
	var in cond.Input
	for i := range 100 {
		in.T = append(in.T, float32(i)/100) // σ from 1 to 0.01
		in.Captions = append(in.Captions, empty)
	}
	inv := func(t float32) float64 { return -1 / float64(1-t) }
	if err := LatentSkipPrior(m, []cond.Input{in}, inv); err != nil {
		t.Fatal(err)
	}
	if w := data(m.Params.Get("latent_skip.weight")); w[0] != -1 {
		t.Errorf("the skip's map starts at %g on the diagonal, want −1", w[0])
	}
	for _, tv := range []float32{0, 0.3, 0.5} {
		cv, err := m.Backbone.Condition(cond.Input{T: []float32{tv}, Captions: []cond.Caption{empty}})
		if err != nil {
			t.Fatal(err)
		}
		got := 1 + float64(data(ops.Linear(ops.SiLU(cv.Vector()), m.Params.Get("latent_skip.scale.weight"), m.Params.Get("latent_skip.scale.bias")))[0])
		if want := -inv(tv); !(math.Abs(got-want) <= 0.2*want) {
			t.Errorf("σ %g: scale %.3f, want %.3f", 1-tv, got, want)
		}
	}
}

// PredictDense of a grafted Z-Image is the model's own pass, whatever the
// router marks and the decoder, final layer and residual have learned.
func TestPredictDenseIsTheZImage(t *testing.T) {
	const seed, S = 13, 8
	zm := testckpt.RandomZImage(t, seed)
	zc := zm.Config
	s := DefaultScaffold()
	s.NormGroups, s.RouterGroups, s.WidthFactor, s.Sigma = 8, 4, 2, 0.3
	s = s.StartAsTeacher(zc.PatchSize)
	m, err := GraftTeacher(zimage.Teacher{Model: testckpt.RandomZImage(t, seed)}, s, S, S, 3)
	if err != nil {
		t.Fatal(err)
	}
	move(m, []string{"hnet.residual_proj.weight", "final_layer.linear.weight", "hnet.decoder.layers.0.conv2.weight"})
	data(m.Params.Get("hnet.routing_module.residual_scorer.3.bias"))[0] = -30
	C := zc.InChannels
	x, feats, caps := zimageInputs(rand.New(rand.NewPCG(9, 10)), C*S*S, zc.CapFeatDim, 4, 7)
	ts := []float32{0.2, 0.9}
	got, _, err := m.PredictDense(x, cond.Input{T: ts, Captions: caps})
	if err != nil {
		t.Fatal(err)
	}
	imgs, err := zm.Forward([]zimage.Latent{{Data: x[:C*S*S], F: 1, H: S, W: S}, {Data: x[C*S*S:], F: 1, H: S, W: S}}, ts, feats)
	if err != nil {
		t.Fatal(err)
	}
	if e := fixtures.RelErr(got, append(imgs[0], imgs[1]...)); !fixtures.Within(e, 1e-5) {
		t.Fatalf("the dense path against the model: relative error %.2g", e)
	}
}

// zimageInputs draws from rng one sample of size latent values per caption,
// then each caption's features: tokens[i] tokens of dim features.
func zimageInputs(rng *rand.Rand, size, dim int, tokens ...int) ([]float32, [][]float32, []cond.Caption) {
	x := make([]float32, len(tokens)*size)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	feats := make([][]float32, len(tokens))
	caps := make([]cond.Caption, len(tokens))
	for i, n := range tokens {
		feats[i] = make([]float32, n*dim)
		for j := range feats[i] {
			feats[i][j] = float32(rng.NormFloat64())
		}
		caps[i] = cond.Caption{Features: feats[i], Len: n}
	}
	return x, feats, caps
}

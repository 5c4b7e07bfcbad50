package upcycle

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/nlpodyssey/spago/mat"

	"github.com/dcdit/dcdit/cond"
	"github.com/dcdit/dcdit/dc"
	_ "github.com/dcdit/dcdit/dc/hnet" // adopts the DiT teachers' blocks
	"github.com/dcdit/dcdit/dit"
	"github.com/dcdit/dcdit/internal/fixtures"
	"github.com/dcdit/dcdit/loaders/arch"
	"github.com/dcdit/dcdit/ops"
)

// teacher is a small DiT/2 with every weight random (no adaLN-Zero), so a
// wrong copy or position shows.
func teacher(t *testing.T, seed uint64) *dit.Model {
	t.Helper()
	cfg := &arch.DiTConfig{Depth: 2, HiddenSize: 128, NumHeads: 4, PatchSize: 2, InChannels: 4, InputSize: 8,
		LearnSigma: true, NumClasses: 5, MLPRatio: 2, FrequencySize: 256}
	m, err := dit.Init(cfg, seed)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(seed, 9))
	for i := range m.Params.Data {
		m.Params.Data[i] = float32(0.1 * rng.NormFloat64())
	}
	return m
}

// The grafted main network computes exactly the teacher's blocks: fed the
// teacher's patch tokens at the latent positions of the patch centres, it
// returns RMSNorm(teacher blocks(tokens + pos_embed)), and its conditioning
// is the teacher's.
func TestGraftKeepsTheTeacher(t *testing.T) {
	tm := teacher(t, 1)
	m, err := graftDiT(tm, Scaffold{WidthFactor: 4, EncoderBlocks: 1, DecoderBlocks: 1, Sigma: 1, TargetN: 4, NormGroups: 32, RouterGroups: 8}, 2)
	if err != nil {
		t.Fatal(err)
	}
	cfg := tm.Config
	B, p, g := 2, cfg.PatchSize, cfg.InputSize/cfg.PatchSize
	rng := rand.New(rand.NewPCG(3, 3))
	x := make([]float32, B*cfg.InChannels*cfg.InputSize*cfg.InputSize)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	ts, ys := []float32{5, 700}, []int{1, cfg.NumClasses}

	cWant, err := tm.Condition(cond.Input{T: ts, Labels: ys})
	if err != nil {
		t.Fatal(err)
	}
	cGot, err := m.Backbone.Condition(cond.Input{T: ts, Labels: ys})
	if err != nil {
		t.Fatal(err)
	}
	if e := fixtures.RelErr(data(cGot.Vector()), data(cWant.Vector())); !fixtures.Within(e, 1e-6) {
		t.Fatalf("conditioning differs from the teacher's: %g", e)
	}

	tokens, offsets := tm.Embed(x, B)
	ones := mat.NewDense[float32](mat.WithShape(cfg.HiddenSize, 1), mat.WithBacking(filled(cfg.HiddenSize, 1)))
	want := ops.RMSNorm(tm.Blocks(tokens, cWant.Vector(), offsets), ones, 1e-5)

	// The same patch tokens without their position embedding, placed at
	// the latent coordinates of the patch centres.
	bare := ops.Linear(mat.NewDense[float32](mat.WithShape(B*g*g, cfg.InChannels*p*p),
		mat.WithBacking(dit.Patchify(x, B, cfg.InChannels, cfg.InputSize, p))), tm.Params.Get("x_embedder.proj.weight"), tm.Params.Get("x_embedder.proj.bias"))
	pos := make([]float64, 0, 2*B*g*g)
	for range B {
		for i := range g {
			for j := range g {
				pos = append(pos, float64(p*i)+float64(p-1)/2, float64(p*j)+float64(p-1)/2)
			}
		}
	}
	got, err := m.Backbone.Forward(bare, cGot, offsets, pos)
	if err != nil {
		t.Fatal(err)
	}
	if e := fixtures.RelErr(data(got), data(want)); !fixtures.Within(e, 5e-6) {
		t.Fatalf("grafted main network differs from the teacher's blocks: rel err %g", e)
	}
}

func TestInitScaffold(t *testing.T) {
	tm := teacher(t, 4)
	s := DefaultScaffold()
	cfg, err := s.Config(4, 8, 8, 8, tm.Config.HiddenSize, tm.Config.HiddenSize)
	if err != nil {
		t.Fatal(err)
	}
	a, b := InitScaffold(cfg, 1), InitScaffold(cfg, 1)
	other := InitScaffold(cfg, 2)
	for name, ta := range a {
		if !equal(ta.Data, b[name].Data) {
			t.Fatalf("%s: InitScaffold is not a function of the seed", name)
		}
		mx := 0.0
		for _, v := range ta.Data {
			mx = max(mx, math.Abs(float64(v)))
		}
		switch {
		case strings.HasPrefix(name, "final_layer."):
			if mx != 0 {
				t.Errorf("%s: max |w| %g, want zero", name, mx)
			}
		case name == "hnet.routing_module.residual_scorer.3.bias":
			if got, want := float64(ta.Data[0]), -math.Log(3); !fixtures.Within(math.Abs(got-want), 1e-6) {
				t.Errorf("router bias %g, want −ln 3 = %g", got, want)
			}
		case strings.HasSuffix(name, "norm1.weight") || strings.HasSuffix(name, "rmsnorm.weight"):
			if ta.Data[0] != 1 || mx != 1 {
				t.Errorf("%s: want all ones", name)
			}
		case strings.HasSuffix(name, "conv1.weight"):
			fan := ta.Shape[1] * ta.Shape[2] * ta.Shape[3]
			if mx == 0 || !fixtures.Within(mx, 1/math.Sqrt(float64(fan))) {
				t.Errorf("%s: max |w| %g outside PyTorch's default bound", name, mx)
			}
			if equal(ta.Data, other[name].Data) {
				t.Errorf("%s: the same for two seeds", name)
			}
		}
	}
	// With the final layer at zero, the grafted model predicts zero.
	m, err := graftDiT(tm, s, 1)
	if err != nil {
		t.Fatal(err)
	}
	x := filled(2*4*8*8, 0.5)
	out, res, err := m.Predict(x, cond.Input{T: []float32{10, 500}, Labels: []int{0, 3}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range out {
		if v != 0 {
			t.Fatal("a fresh graft predicts non-zero")
		}
	}
	if res.Chunks.Offsets[len(res.Chunks.Offsets)-1] == 0 {
		t.Fatal("no token kept")
	}
}

func TestScaffoldConfigErrors(t *testing.T) {
	tests := []struct {
		name string
		s    Scaffold
		D    int
		want string
	}{
		{"factor", Scaffold{WidthFactor: 3, NormGroups: 32, RouterGroups: 8, Sigma: 1, TargetN: 4, EncoderBlocks: 1, DecoderBlocks: 1}, 128, "does not divide"},
		{"groups", Scaffold{WidthFactor: 8, NormGroups: 32, RouterGroups: 8, Sigma: 1, TargetN: 4, EncoderBlocks: 1, DecoderBlocks: 1}, 128, "norm_groups"},
		{"N", Scaffold{WidthFactor: 4, NormGroups: 32, RouterGroups: 8, Sigma: 1, TargetN: 1, EncoderBlocks: 1, DecoderBlocks: 1}, 128, "target_n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := tt.s.Config(4, 8, 8, 8, tt.D, tt.D); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want %q", err, tt.want)
			}
		})
	}
}

func data(t mat.Tensor) []float32 { return mat.Data[float32](t.Value()) }

func filled(n int, v float32) []float32 {
	out := make([]float32, n)
	for i := range out {
		out[i] = v
	}
	return out
}

func equal(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// With the predictability prior, a token on a sharp edge starts with a
// higher boundary probability than the tokens of flat regions.
func TestPredictabilityPrior(t *testing.T) {
	tm := teacher(t, 6)
	s := DefaultScaffold()
	s.NormGroups, s.RouterInit = 8, "predictability"
	m, err := graftDiT(tm, s, 1)
	if err != nil {
		t.Fatal(err)
	}
	// Left half one colour, right half another: the edge runs between
	// columns 3 and 4 of the 8×8 grid.
	const C, H, W = 4, 8, 8
	x := make([]float32, C*H*W)
	for c := range C {
		for i := range H {
			for j := range W {
				v := float32(-1)
				if j >= W/2 {
					v = 1
				}
				x[(c*H+i)*W+j] = v * float32(c+1) / 2
			}
		}
	}
	_, res, err := m.Predict(x, cond.Input{T: []float32{50}, Labels: []int{0}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	p := res.Routing.Prob()
	// Compare interior rows only: the grid's border is unpredictable too
	// (zero padding), for any router.
	edge, flat := 0.0, 0.0
	for i := 2; i < H-2; i++ {
		edge += float64(p[i*W+W/2-1]+p[i*W+W/2]) / 2
		flat += float64(p[i*W+1]+p[i*W+W-2]) / 2
	}
	if !(edge > 2*flat) {
		t.Fatalf("mean boundary probability on the edge %.3f, in flat regions %.3f", edge/(H-4), flat/(H-4))
	}
	s.RouterInit = "random"
	if _, err := graftDiT(tm, s, 1); err == nil || !strings.Contains(err.Error(), `router init "random"`) {
		t.Fatalf("err = %v, want the unknown init named", err)
	}
}

// With the patch encoder prior, the encoder's token at every position
// whose coordinates are multiples of p is the teacher's patch embedding of
// the patch there, RMS-normalised to the embedding's expected scale.
func TestPatchEncoderPrior(t *testing.T) {
	for _, blocks := range []int{1, 2} {
		t.Run(fmt.Sprintf("%d encoder blocks", blocks), func(t *testing.T) {
			tm := teacher(t, 3)
			s := DefaultScaffold()
			s.NormGroups, s.EncoderBlocks, s.EncoderInit = 8, blocks, "patch"
			m, err := graftDiT(tm, s, 4)
			if err != nil {
				t.Fatal(err)
			}
			tc := tm.Config
			C, S, p, D := tc.InChannels, tc.InputSize, tc.PatchSize, tc.HiddenSize
			rng := rand.New(rand.NewPCG(5, 6))
			x := make([]float32, C*S*S)
			for i := range x {
				x[i] = float32(rng.NormFloat64())
			}
			_, res, err := m.Predict(x, cond.Input{T: []float32{300}, Labels: []int{1}}, nil)
			if err != nil {
				t.Fatal(err)
			}
			enc := data(res.Encoded) // [S·S, D]
			w, b := tm.Params.Get("x_embedder.proj.weight").Values(), tm.Params.Get("x_embedder.proj.bias").Values()
			scale := float64(m.Params.Get("hnet.encoder.rmsnorm.weight").Values()[0])
			for r := 0; r < S; r += p {
				for c := 0; c < S; c += p {
					e := make([]float64, D)
					var ss float64
					for d := range D {
						v := float64(b[d])
						for ch := range C {
							for dy := range p {
								for dx := range p {
									v += float64(w[((d*C+ch)*p+dy)*p+dx]) * float64(x[(ch*S+r+dy)*S+c+dx])
								}
							}
						}
						e[d], ss = v, ss+v*v
					}
					rms := math.Sqrt(ss/float64(D) + 1e-5) // RMSNorm's ε
					want := make([]float32, D)
					for d := range D {
						want[d] = float32(scale * e[d] / rms)
					}
					got := enc[(r*S+c)*D : (r*S+c+1)*D]
					if err := fixtures.RelErr(got, want); !fixtures.Within(err, 1e-5) {
						t.Fatalf("token (%d, %d): relative error %.2g", r, c, err)
					}
				}
			}
		})
	}
}

func TestPatchEncoderPriorRefuses(t *testing.T) {
	tm := teacher(t, 3)
	s := DefaultScaffold()
	s.NormGroups, s.EncoderInit, s.WidthFactor = 8, "patch", 16 // E = 8 < C·p² = 16
	if _, err := graftDiT(tm, s, 4); err == nil || !strings.Contains(err.Error(), "more than the encoder width") {
		t.Fatalf("err = %v", err)
	}
	s.WidthFactor, s.EncoderInit = 4, "sideways"
	if _, err := graftDiT(tm, s, 4); err == nil || !strings.Contains(err.Error(), "want official or patch") {
		t.Fatalf("err = %v", err)
	}
}

// Config takes the backbone's conditioning width as given (Z-Image's
// adaLN width is not its token width) and derives the rest from D.
func TestConfigCondWidth(t *testing.T) {
	tests := []struct{ D, cond int }{{64, 64}, {32, 24}, {128, 256}}
	for _, tt := range tests {
		s := DefaultScaffold()
		s.NormGroups, s.RouterGroups = 8, 4
		cfg, err := s.Config(4, 4, 8, 8, tt.D, tt.cond)
		if err != nil {
			t.Fatal(err)
		}
		if cfg.ModelDim != tt.D || cfg.CondDim != tt.cond || cfg.EncDecDim != tt.D/4 || cfg.RouterDim != tt.D/4 {
			t.Errorf("D %d, cond %d: config %+v", tt.D, tt.cond, *cfg)
		}
	}
}

// Cells of the teacher's patch, the patch encoder prior, no encoder norm,
// the wide head, the relative residual and the latent skip: a grafted
// model whose router keeps every cell (and whose de-chunk then passes each
// token through) predicts what its teacher predicts, every output channel
// at every latent position.
func TestGraftAtTeacherPatchStartsAsTeacher(t *testing.T) {
	// With the token embedder (dc.Config.TokenEmbedder) the encoder too
	// may learn anything: the blocks read the teacher's patch embedding
	// whatever it does, and the dropped context whatever it learns when
	// nothing is dropped. Without the token embedder a moved encoder
	// moves the prediction, so that the check can fail.
	for _, c := range []struct {
		name                                       string
		tokenEmbedder, droppedContext, moveEncoder bool
		teacher                                    bool // whether the model should still predict as its teacher
	}{
		{"encoder's tokens", false, false, false, true},
		{"token embedder", true, false, false, true},
		{"token embedder, encoder moved", true, false, true, true},
		{"token embedder and dropped context, both moved", true, true, true, true},
		{"encoder's tokens, encoder moved", false, false, true, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			tm := teacher(t, 3)
			m := graftAtPatch(t, tm, c.tokenEmbedder, c.droppedContext)
			// What the dropped cells learn must not reach the kept ones.
			names := []string{"hnet.residual_proj.weight", "latent_skip.weight", "latent_skip.scale.weight"}
			if c.moveEncoder {
				names = append(names, "x_embedder.proj.weight", "hnet.encoder.layers.0.conv2.weight", "hnet.encoder.layers.1.skip_proj.weight")
			}
			if c.droppedContext {
				// Nothing is dropped: the context is zero whatever it learns.
				names = append(names, "dropped_context.conv.weight")
			}
			move(m, names)
			// Every cell a confident boundary.
			data(m.Params.Get("hnet.routing_module.residual_scorer.3.bias"))[0] = 30
			x := latents(tm, 2, 5)
			got, res, err := m.Predict(x, cond.Input{T: []float32{300, 20}, Labels: []int{1, 4}}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if k := res.Chunks.NumKept; k[0] != m.Config.Cells() || k[1] != m.Config.Cells() {
				t.Fatalf("kept %v of %d cells, want all", k, m.Config.Cells())
			}
			againstTeacher(t, tm, x, got, c.teacher, "grafted model")
		})
	}
}

// GraftTeacher around a DiT keeps the DiT as a backbone of its own kind,
// a copy under dc.BackbonePrefix, and leaves the teacher as it was: its
// names and its predictions.
func TestGraftTeacherDiT(t *testing.T) {
	tm := teacher(t, 4)
	x := make([]float32, 2*4*8*8)
	for i := range x {
		x[i] = float32(i%7) / 7
	}
	in := cond.Input{T: []float32{100, 700}, Labels: []int{1, 3}}
	before, err := dit.Teacher{Model: tm}.Predict(x, in, 8, 8)
	if err != nil {
		t.Fatal(err)
	}
	s := DefaultScaffold()
	s.NormGroups, s.RouterGroups = 8, 4
	s.PatchSize, s.EncoderInit, s.WideHead = 2, "patch", true
	m, err := GraftTeacher(dit.Teacher{Model: tm}, s, 8, 8, 5)
	if err != nil {
		t.Fatal(err)
	}
	if kind := m.Backbone.Spec().Kind(); kind != dit.Kind {
		t.Errorf("backbone kind %q, want %q", kind, dit.Kind)
	}
	if _, ok := m.Backbone.Parameters().Lookup(dc.BackbonePrefix + "blocks.0.attn.qkv.weight"); !ok {
		t.Errorf("the backbone's tensors are not under %q", dc.BackbonePrefix)
	}
	if _, ok := tm.Params.Lookup("blocks.0.attn.qkv.weight"); !ok {
		t.Error("the graft renamed the teacher's tensors")
	}
	after, err := dit.Teacher{Model: tm}.Predict(x, in, 8, 8)
	if err != nil {
		t.Fatal(err)
	}
	if e := fixtures.RelErr(after, before); !fixtures.Within(e, 0) {
		t.Errorf("the teacher's predictions moved by %g after the graft", e)
	}
	for _, p := range m.Backbone.Parameters().List() {
		q, ok := tm.Params.Lookup(strings.TrimPrefix(p.Name, dc.BackbonePrefix))
		if !ok || fixtures.RelErr(p.Values(), q.Values()) != 0 {
			t.Fatalf("backbone tensor %s is not the teacher's", p.Name)
		}
		if &p.Values()[0] == &q.Values()[0] {
			t.Fatalf("backbone tensor %s shares the teacher's memory", p.Name)
		}
	}
}

// graftDiT grafts the recipe way (Graft) around a DiT teacher on its own
// grid: its blocks adopted by DC-DiT's main network.
func graftDiT(tm *dit.Model, s Scaffold, seed uint64) (*dc.Model, error) {
	return Graft(dit.Teacher{Model: tm}, s, tm.Config.InputSize, tm.Config.InputSize, seed)
}

// graftAtPatch grafts tm with cells of its patch, the patch encoder
// prior, no encoder norm, the wide head, the relative residual and the
// latent skip: a model that starts as its teacher.
func graftAtPatch(t *testing.T, tm *dit.Model, tokenEmbedder, droppedContext bool) *dc.Model {
	t.Helper()
	s := DefaultScaffold()
	s.NormGroups, s.WidthFactor, s.EncoderInit, s.Sigma = 8, 8, "patch", 0.3
	s.PatchSize, s.WideHead, s.NoEncoderNorm, s.RelativeResidual, s.LatentSkip = tm.Config.PatchSize, true, true, true, true
	s.TokenEmbedder, s.DroppedContext = tokenEmbedder, droppedContext
	m, err := graftDiT(tm, s, 4)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// move adds a sine ripple to every value of the named parameters: what
// they learn, standing in for training.
func move(m *dc.Model, names []string) {
	for _, name := range names {
		for i, v := range data(m.Params.Get(name)) {
			data(m.Params.Get(name))[i] = v + float32(0.1*math.Sin(float64(i)))
		}
	}
}

// latents draws n standard normal latents of tm's input size.
func latents(tm *dit.Model, n int, seed uint64) []float32 {
	tc := tm.Config
	rng := rand.New(rand.NewPCG(seed, seed+1))
	x := make([]float32, n*tc.InChannels*tc.InputSize*tc.InputSize)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	return x
}

// againstTeacher checks got, what, against tm's prediction on x at
// timesteps 300 and 20, labels 1 and 4: within 1e-5 if it should be the
// teacher's, else more than 1e-3 away.
func againstTeacher(t *testing.T, tm *dit.Model, x, got []float32, teacher bool, what string) {
	t.Helper()
	want, err := tm.Denoiser()(x, []int{300, 20}, []int{1, 4})
	if err != nil {
		t.Fatal(err)
	}
	e := fixtures.RelErr(got, want)
	if teacher && !fixtures.Within(e, 1e-5) {
		t.Fatalf("%s against its teacher: relative error %.2g", what, e)
	}
	if !teacher && !(e > 1e-3) {
		t.Fatalf("%s against its teacher: relative error %.2g, want the moved encoder to show", what, e)
	}
}

// PredictDense of a model grafted at the teacher's patch runs the teacher's
// own pass: whatever the router, the decoder, the final layer, the latent
// skip and the residual have learned, and whoever the router marks, its
// prediction is the teacher's, at the cost of the encoder (or token
// embedder), the backbone on every cell and the wide head. A moved
// encoder, which the blocks read without a token embedder, shows.
func TestPredictDenseIsTheTeacher(t *testing.T) {
	for _, c := range []struct {
		name                       string
		tokenEmbedder, moveEncoder bool
		teacher                    bool
	}{
		{"encoder's tokens", false, false, true},
		{"token embedder, encoder moved", true, true, true},
		{"encoder's tokens, encoder moved", false, true, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			tm := teacher(t, 7)
			m := graftAtPatch(t, tm, c.tokenEmbedder, false)
			names := []string{"final_layer.linear.weight", "hnet.decoder.layers.0.conv2.weight", "hnet.residual_proj.weight",
				"latent_skip.weight", "latent_skip.scale.bias"}
			if c.moveEncoder {
				names = append(names, "x_embedder.proj.weight", "hnet.encoder.layers.0.conv2.weight")
			}
			move(m, names)
			// No cell a boundary: the router's choice must not matter.
			data(m.Params.Get("hnet.routing_module.residual_scorer.3.bias"))[0] = -30
			x := latents(tm, 2, 8)
			got, res, err := m.PredictDense(x, cond.Input{T: []float32{300, 20}, Labels: []int{1, 4}})
			if err != nil {
				t.Fatal(err)
			}
			againstTeacher(t, tm, x, got, c.teacher, "the dense path")
			f, err := m.ResultFLOPs(res)
			if err != nil {
				t.Fatal(err)
			}
			full := m.ForwardFLOPs([]int{m.Config.Cells(), m.Config.Cells()})
			if f.Routing != 0 || f.DeChunk != 0 || f.Decoder != 0 || f.Residual != 0 || f.Backbone != full.Backbone || !(f.Total() < full.Total()) {
				t.Errorf("dense path FLOPs %+v, want the backbone's %g and no router, de-chunk, decoder or residual (a full pass: %+v)", f, full.Backbone, full)
			}
		})
	}
	t.Run("no wide head", func(t *testing.T) {
		tm := teacher(t, 7)
		s := DefaultScaffold()
		s.NormGroups, s.WidthFactor, s.PatchSize = 8, 8, tm.Config.PatchSize
		m, err := graftDiT(tm, s, 4)
		if err != nil {
			t.Fatal(err)
		}
		x := make([]float32, tm.Config.InChannels*tm.Config.InputSize*tm.Config.InputSize)
		if _, _, err := m.PredictDense(x, cond.Input{T: []float32{300}, Labels: []int{1}}); err == nil || !strings.Contains(err.Error(), "wide head") {
			t.Errorf("PredictDense without a wide head: err = %v, want one naming the wide head", err)
		}
	})
}

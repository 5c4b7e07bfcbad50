package dit

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/nlpodyssey/spago/mat"

	"github.com/dcdit/dcdit/diffusion/ddpm"
	"github.com/dcdit/dcdit/internal/fixtures"
	"github.com/dcdit/dcdit/loaders/arch"
	"github.com/dcdit/dcdit/optim"
)

func tinyConfig() *arch.DiTConfig {
	return &arch.DiTConfig{Depth: 2, HiddenSize: 32, NumHeads: 2, PatchSize: 2, InChannels: 4, InputSize: 8,
		LearnSigma: true, NumClasses: 10, MLPRatio: 4, FrequencySize: 256}
}

func TestInit(t *testing.T) {
	cfg := tinyConfig()
	m, err := Init(cfg, 7)
	if err != nil {
		t.Fatal(err)
	}
	again, _ := Init(cfg, 7)
	other, _ := Init(cfg, 8)
	if !equal(m.Params.Data, again.Params.Data) || equal(m.Params.Data, other.Params.Data) {
		t.Fatal("Init is not a function of the seed")
	}
	for _, p := range m.Params.List() {
		v := p.Values()
		rows, cols := p.Dense.Shape()[0], p.Dense.Shape()[1]
		maxAbs := 0.0
		for _, x := range v {
			maxAbs = max(maxAbs, math.Abs(float64(x)))
		}
		zero := strings.HasSuffix(p.Name, ".bias") || strings.Contains(p.Name, "adaLN") || p.Name == "final_layer.linear.weight"
		switch {
		case zero && maxAbs != 0:
			t.Errorf("%s: max |w| = %g, want zero (adaLN-Zero)", p.Name, maxAbs)
		case !zero && maxAbs == 0:
			t.Errorf("%s is all zero", p.Name)
		case strings.HasPrefix(p.Name, "blocks.") && !zero && !fixtures.Within(maxAbs, math.Sqrt(6/float64(rows+cols))):
			t.Errorf("%s: max |w| = %g beyond the Xavier bound", p.Name, maxAbs)
		}
	}
	// adaLN-Zero: the untrained model predicts exactly zero.
	rng := rand.New(rand.NewPCG(1, 1))
	x := make([]float32, 2*cfg.InChannels*cfg.InputSize*cfg.InputSize)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	out := mat.Data[float32](m.ForwardLatents(x, []float32{3, 900}, []int{1, 10}).Value())
	for i, v := range out {
		if v != 0 {
			t.Fatalf("out[%d] = %g, want 0 from an adaLN-Zero model", i, v)
		}
	}
}

// InitWith's class-table scale changes that table alone: its standard
// deviation follows the option, every other value is Init's.
func TestInitClassStd(t *testing.T) {
	cfg := tinyConfig()
	base, err := Init(cfg, 7)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ std, want float64 }{{0, 0.02}, {1, 1}, {0.5, 0.5}} {
		m, err := InitWith(cfg, 7, InitOptions{ClassStd: tt.std})
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range m.Params.List() {
			v, ref := p.Values(), base.Params.Get(p.Name).Values()
			if p.Name != "y_embedder.embedding_table.weight" {
				if !equal(v, ref) {
					t.Errorf("std %g: %s differs from Init's", tt.std, p.Name)
				}
				continue
			}
			var ss float64
			for i, x := range v {
				ss += float64(x) * float64(x)
				if tt.std != 0 && !fixtures.Within(math.Abs(float64(x)-tt.std/0.02*float64(ref[i])), 1e-5*tt.std) {
					t.Fatalf("std %g: table[%d] = %g, want Init's draw scaled: %g", tt.std, i, x, tt.std/0.02*float64(ref[i]))
				}
			}
			if got := math.Sqrt(ss / float64(len(v))); !fixtures.Within(math.Abs(got-tt.want), 0.15*tt.want) {
				t.Errorf("std %g: class table std %g, want ≈ %g", tt.std, got, tt.want)
			}
		}
	}
	for _, bad := range []float64{-1, math.NaN(), math.Inf(1)} {
		if _, err := InitWith(cfg, 7, InitOptions{ClassStd: bad}); err == nil {
			t.Errorf("class std %v accepted", bad)
		}
	}
}

func TestInitRejectsBadConfig(t *testing.T) {
	tests := []struct {
		name string
		edit func(c *arch.DiTConfig)
		want string
	}{
		{"heads", func(c *arch.DiTConfig) { c.NumHeads = 3 }, "not a multiple of 3 heads"},
		{"patch", func(c *arch.DiTConfig) { c.PatchSize = 3 }, "not a multiple of patch size 3"},
		{"depth", func(c *arch.DiTConfig) { c.Depth = 0 }, "must be positive"},
		{"width", func(c *arch.DiTConfig) { c.HiddenSize, c.NumHeads = 30, 2 }, "multiple of 4"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := tinyConfig()
			tt.edit(c)
			if _, err := Init(c, 1); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want %q", err, tt.want)
			}
		})
	}
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

// The backward pass of the whole model agrees with central differences of
// S = Σ out·R along a random direction, tensor by tensor, on the fixture
// weights (random, so no gate is zero).
func TestFixtureBackward(t *testing.T) {
	fixtures.Run(t, "dit-tiny", func(t *testing.T, c fixtures.Case) {
		m := loadFixtureModel(t, c, "weights.safetensors")
		io := c.Open(t, "io.safetensors")
		x, ts, y := io.F32("x"), floats(io.Ints("t")), io.Ints("y")
		rng := rand.New(rand.NewPCG(5, 5))
		out := m.ForwardLatents(x, ts, y)
		R := make([]float32, len(mat.Data[float32](out.Value())))
		for i := range R {
			R[i] = float32(rng.NormFloat64())
		}
		S := func() float64 {
			o := mat.Data[float32](m.ForwardLatents(x, ts, y).Value())
			s := 0.0
			for i, v := range o {
				s += float64(v) * float64(R[i])
			}
			return s
		}
		// ∂S/∂out = R in token layout; Backward takes the image layout.
		cfg := m.Config
		img := make([]float32, len(R))
		Unpatchify(img, R, len(ts), cfg.OutChannels(), cfg.InputSize, cfg.PatchSize, false)
		m.Params.ZeroGrad()
		if err := m.Backward(out, img); err != nil {
			t.Fatal(err)
		}
		for _, p := range m.Params.List() {
			grad := append([]float32(nil), p.Gradient()...)
			v := p.Values()
			dir := make([]float32, len(v))
			scale := 0.0
			for i := range v {
				scale = max(scale, math.Abs(float64(v[i])))
			}
			const h = 1e-2
			analytic := 0.0
			for i := range dir {
				dir[i] = float32(rng.NormFloat64() * h * scale)
				analytic += float64(grad[i]) * float64(dir[i])
			}
			orig := append([]float32(nil), v...)
			for i := range v {
				v[i] = orig[i] + dir[i]
			}
			plus := S()
			for i := range v {
				v[i] = orig[i] - dir[i]
			}
			minus := S()
			copy(v, orig)
			numeric := (plus - minus) / 2
			if e := math.Abs(numeric-analytic) / max(math.Abs(numeric), 1e-3); !fixtures.Within(e, 2e-2) {
				t.Errorf("%s: directional derivative %.6g, central difference %.6g (rel err %.3g)", p.Name, analytic, numeric, e)
			}
		}
	})
}

// A few AdamW steps on one batch drive DiT's hybrid loss down: the loss,
// its gradient, the backward pass and the optimiser fit together.
func TestDiffusionLossTrains(t *testing.T) {
	cfg := tinyConfig()
	m, err := Init(cfg, 3)
	if err != nil {
		t.Fatal(err)
	}
	sched := ddpm.Linear(1000)
	rng := rand.New(rand.NewPCG(2, 2))
	B := 4
	n := B * cfg.InChannels * cfg.InputSize * cfg.InputSize
	x0, noise := make([]float32, n), make([]float32, n)
	for i := range x0 {
		x0[i] = float32(0.5 * rng.NormFloat64())
		noise[i] = float32(rng.NormFloat64())
	}
	ts, ys := []int{10, 200, 500, 999}, []int{0, 3, 7, 10}
	h := optim.DefaultHyper()
	h.LR, h.WeightDecay = 3e-3, 0
	opt, err := optim.NewAdamW(optim.AllTrainable(m.Params.Len()), h)
	if err != nil {
		t.Fatal(err)
	}
	var first, last float64
	for step := range 30 {
		m.Params.ZeroGrad()
		l, err := m.DiffusionLoss(sched, x0, noise, ts, ys, nil)
		if err != nil {
			t.Fatal(err)
		}
		mean := 0.0
		for _, v := range l.Loss {
			mean += float64(v) / float64(B)
		}
		if math.IsNaN(mean) || math.IsInf(mean, 0) {
			t.Fatalf("step %d: loss %v", step, mean)
		}
		if step == 0 {
			first = mean
		}
		last = mean
		opt.Step(m.Params.Data, m.Params.Grad)
	}
	if !(last < 0.7*first) {
		t.Fatalf("loss %.4g after 30 steps, from %.4g: not training", last, first)
	}
}

// A saved model loads back identical (head count included) and computes
// the same output.
func TestSaveLoad(t *testing.T) {
	cfg := tinyConfig()
	cfg.NumHeads = 4 // not the inferred default: the file must carry it
	m, err := Init(cfg, 5)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(4, 4))
	for i := range m.Params.Data {
		m.Params.Data[i] = float32(0.1 * rng.NormFloat64())
	}
	path := t.TempDir() + "/m.safetensors"
	if err := Save(path, m, nil, map[string]string{"note": "x"}); err != nil {
		t.Fatal(err)
	}
	w, err := Load(path, LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	back, err := New(w)
	if err != nil {
		t.Fatal(err)
	}
	if back.Config.NumHeads != 4 || !equal(back.Params.Data, m.Params.Data) {
		t.Fatalf("round trip: heads %d, parameters equal %v", back.Config.NumHeads, equal(back.Params.Data, m.Params.Data))
	}
	x := make([]float32, cfg.InChannels*cfg.InputSize*cfg.InputSize)
	a := mat.Data[float32](m.ForwardLatents(x, []float32{3}, []int{1}).Value())
	b := mat.Data[float32](back.ForwardLatents(x, []float32{3}, []int{1}).Value())
	if !equal(a, b) {
		t.Fatal("the loaded model computes something else")
	}
	if err := Save(path, m, make([]float32, 3), nil); err == nil {
		t.Fatal("a values slice of the wrong length was accepted")
	}
}

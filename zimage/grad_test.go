package zimage

import (
	"math"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nlpodyssey/spago/mat"

	"github.com/dcdit/dcdit/internal/fixtures"
	"github.com/dcdit/dcdit/loaders/arch"
	"github.com/dcdit/dcdit/ops"
)

// tinyConfig is a configuration small enough for finite differences over
// every parameter tensor, with every code path of the full model.
func tinyConfig(qkNorm bool) *arch.ZImageConfig {
	return &arch.ZImageConfig{
		Dim: 12, NLayers: 2, NRefinerLayers: 1, NHeads: 2, NKVHeads: 2, InChannels: 2, PatchSize: 2, FPatchSize: 1,
		CapFeatDim: 5, QKNorm: qkNorm, NormEps: 1e-5, RopeTheta: 256, TScale: 1000,
		AxesDims: []int64{2, 2, 2}, AxesLens: []int64{64, 8, 8},
		FFNHidden: 32, AdaLNDim: 12, TMidDim: 16, FrequencySize: 16,
	}
}

// newModel64 builds a float64 model with random parameters of roughly the
// scales of a trained one, all requiring gradients.
func newModel64(t testing.TB, cfg *arch.ZImageConfig, rng *rand.Rand) *Model {
	t.Helper()
	if err := CheckConfig(cfg); err != nil {
		t.Fatal(err)
	}
	m := newModel(cfg)
	m.f64 = true
	for _, s := range paramSpecs(cfg) {
		d := make([]float64, s.Rows*s.Cols)
		for i := range d {
			switch {
			case strings.HasSuffix(s.Name, "norm1.weight"), strings.HasSuffix(s.Name, "norm2.weight"),
				strings.HasSuffix(s.Name, "_norm.weight"), s.Name == "cap_embedder.0.weight":
				d[i] = 1 + 0.2*rng.NormFloat64()
			case s.Cols == 1 || strings.HasSuffix(s.Name, "pad_token"):
				d[i] = 0.3 * rng.NormFloat64()
			default:
				d[i] = rng.NormFloat64() / math.Sqrt(float64(s.Cols))
			}
		}
		m.tensors[s.Name] = mat.NewDense[float64](mat.WithShape(s.Rows, s.Cols), mat.WithBacking(d), mat.WithGrad(true))
	}
	return m
}

func randF32(rng *rand.Rand, n int, scale float64) []float32 {
	out := make([]float32, n)
	for i := range out {
		out[i] = float32(scale * rng.NormFloat64())
	}
	return out
}

// Gradients of L = Σ R∘y through the whole float64 model (or its main
// layers alone, at fractional positions) match central finite
// differences in every parameter tensor that takes part.
func TestGradientsFiniteDifferences(t *testing.T) {
	type gradCase struct {
		name   string
		qkNorm bool
		// run builds the output from a model and the case's rng.
		run func(m *Model, rng *rand.Rand) func() mat.Tensor
		// prefix restricts the checked parameters (all when empty).
		prefix string
	}
	wholeModel := func(grids [][3]int, capLens []int) func(m *Model, rng *rand.Rand) func() mat.Tensor {
		return func(m *Model, rng *rand.Rand) func() mat.Tensor {
			c := m.Config
			var lats []Latent
			var caps [][]float32
			var ts []float32
			for s, g := range grids {
				F, H, W := g[0]*c.FPatchSize, g[1]*c.PatchSize, g[2]*c.PatchSize
				lats = append(lats, Latent{Data: randF32(rng, c.InChannels*F*H*W, 1), F: F, H: H, W: W})
				caps = append(caps, randF32(rng, capLens[s]*c.CapFeatDim, 1.5))
				ts = append(ts, float32(rng.Float64()))
			}
			b, err := m.Prepare(lats, ts, caps)
			if err != nil {
				t.Fatal(err)
			}
			return func() mat.Tensor { return m.Run(b) }
		}
	}
	for _, tc := range []gradCase{
		{name: "two items, ragged captions", qkNorm: true, run: wholeModel([][3]int{{1, 2, 2}, {1, 1, 3}}, []int{3, 7})},
		{name: "two frames, no qk norm", qkNorm: false, run: wholeModel([][3]int{{2, 1, 2}}, []int{2})},
		{
			name: "main layers at fractional positions", qkNorm: true, prefix: "layers.",
			run: func(m *Model, rng *rand.Rand) func() mat.Tensor {
				c := m.Config
				offsets := []int{0, 5, 9}
				N := offsets[len(offsets)-1]
				pos := make([]float64, 3*N)
				for i := range pos {
					pos[i] = 6 * rng.Float64()
				}
				s := m.NewStream(offsets, pos)
				x := m.constant(N, c.Dim, randF32(rng, N*c.Dim, 1))
				adaln := m.constant(len(offsets)-1, c.AdaLNDim, randF32(rng, (len(offsets)-1)*c.AdaLNDim, 1))
				return func() mat.Tensor { return m.Layers(x, adaln, s) }
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(7, uint64(len(tc.name))))
			m := newModel64(t, tinyConfig(tc.qkNorm), rng)
			build := tc.run(m, rng)
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
			checked := 0
			for _, spec := range paramSpecs(m.Config) {
				if !strings.HasPrefix(spec.Name, tc.prefix) {
					continue
				}
				p := m.tensors[spec.Name].(*mat.Dense[float64])
				if !p.HasGrad() {
					t.Errorf("%s received no gradient", spec.Name)
					continue
				}
				g := mat.Data[float64](p.Grad())
				v := mat.Data[float64](p)
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
						t.Errorf("gradient of %s[%d] = %.10g, finite difference %.10g (error %.3g)", spec.Name, i, g[i], fd, e)
					}
				}
				checked++
			}
			if checked == 0 {
				t.Fatalf("no parameter under %q was checked", tc.prefix)
			}
		})
	}
}

// The float32 backward pass through the fixture's model (its weights and
// inputs) gives every parameter the gradient the float64 pass gives, to
// float32 accuracy: the fixture provides no reference gradients, so the
// float64 model, itself checked by finite differences, is the reference.
func TestFixtureGradientsFloat32(t *testing.T) {
	const tol = 5e-5 // normwise relative, per tensor
	fixtures.Run(t, "zimage-tiny", func(t *testing.T, c fixtures.Case) {
		path := filepath.Join(c.Dir, "weights.safetensors")
		w, err := Load(path, LoadOptions{Config: c.Config})
		if err != nil {
			t.Fatal(err)
		}
		m32, err := New(w)
		if err != nil {
			t.Fatal(err)
		}
		m64 := newModel(w.Config)
		m64.f64 = true
		for name, p := range w.Params {
			d := make([]float64, len(p.Data))
			for i, v := range p.Data {
				d[i] = float64(v)
			}
			m64.tensors[name] = mat.NewDense[float64](mat.WithShape(m32.tensors[name].Shape()...), mat.WithBacking(d), mat.WithGrad(true))
		}
		lats, ts, caps := fixtureBatch(t, c, c.Open(t, ioFile))
		b, err := m32.Prepare(lats, ts, caps)
		if err != nil {
			t.Fatal(err)
		}
		rng := rand.New(rand.NewPCG(1, 2))
		y32, y64 := m32.Run(b), m64.Run(b)
		r64 := make([]float64, y64.Size())
		r32 := make([]float32, len(r64))
		for i := range r64 {
			r64[i] = 2*rng.Float64() - 1
			r32[i] = float32(r64[i])
		}
		y32.AccGrad(mat.NewDense[float32](mat.WithShape(y32.Shape()...), mat.WithBacking(r32)))
		y64.AccGrad(mat.NewDense[float64](mat.WithShape(y64.Shape()...), mat.WithBacking(r64)))
		if err := ops.Backward(y32); err != nil {
			t.Fatal(err)
		}
		if err := ops.Backward(y64); err != nil {
			t.Fatal(err)
		}
		worst := 0.0
		for _, p := range m32.Params.List() {
			if !p.HasGrad() {
				t.Errorf("%s received no gradient", p.Name)
				continue
			}
			want := mat.Data[float64](m64.tensors[p.Name].Grad())
			got := make([]float64, len(want))
			for i, v := range p.Gradient() {
				got[i] = float64(v)
			}
			e := fixtures.RelErr(got, want)
			if !fixtures.Within(e, tol) {
				t.Errorf("gradient of %s: relative error %.3g > %g against float64", p.Name, e, tol)
			}
			worst = max(worst, e)
		}
		t.Logf("worst per-tensor gradient error, float32 vs float64: %.3g", worst)
	})
}

package optim

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/dcdit/dcdit/internal/fixtures"
)

// ref64 is PyTorch's AdamW formula in float64, one element at a time.
func ref64(p, g, m, v float64, h Hyper, step int) (np, nm, nv float64) {
	p *= 1 - h.LR*h.WeightDecay
	m = h.Beta1*m + (1-h.Beta1)*g
	v = h.Beta2*v + (1-h.Beta2)*g*g
	bc1 := 1 - math.Pow(h.Beta1, float64(step))
	bc2 := 1 - math.Pow(h.Beta2, float64(step))
	denom := math.Sqrt(v)/math.Sqrt(bc2) + h.Eps
	return p - h.LR/bc1*m/denom, m, v
}

// Every step, from the same float32 state, the float32 update must land
// within a few roundings of the float64 formula: each of p, m and v within
// a few units of float32 roundoff of the magnitudes of the terms summed.
func TestAdamWAgainstFloat64Reference(t *testing.T) {
	const n = 1000 // vector bodies and a tail
	noDecay := Range{100, 300}
	frozenR := []Range{{50, 60}, {290, 310}, {997, 1000}}
	cases := []struct {
		name   string
		base   Hyper
		groups []Group
		frozen []Range
	}{
		{"defaults", DefaultHyper(), nil, nil},
		{"no weight decay", Hyper{LR: 1e-4, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8}, nil, nil},
		{"large lr and decay", Hyper{LR: 0.1, Beta1: 0.5, Beta2: 0.9, Eps: 1e-3, WeightDecay: 0.5}, nil, nil},
		{"groups and frozen", DefaultHyper(),
			[]Group{{Name: "no decay", Ranges: []Range{noDecay}, Hyper: Hyper{LR: 3e-3, Beta1: 0.8, Beta2: 0.99, Eps: 1e-6}}},
			frozenR},
	}
	eachKernels(t, func(t *testing.T) {
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				r := rand.New(rand.NewPCG(3, 4))
				mask, err := FreezeMask(n, c.frozen...)
				if err != nil {
					t.Fatal(err)
				}
				o, err := NewAdamW(mask, c.base, c.groups...)
				if err != nil {
					t.Fatal(err)
				}
				hyperOf := func(i int) Hyper {
					for _, g := range c.groups {
						if inRanges(i, g.Ranges) {
							return g.Hyper
						}
					}
					return c.base
				}
				p := randn(r, n, 1)
				p0 := append([]float32(nil), p...)
				for step := 1; step <= 5; step++ {
					g := randn(r, n, 0.01)
					g[7] = 0 // v tiny: eps matters
					before := append([]float32(nil), p...)
					st := o.State()
					m0, v0 := append([]float32(nil), st.M...), append([]float32(nil), st.V...)
					o.Step(p, g)
					k := 0
					for i := range n {
						if mask.IsFrozen(i) {
							if math.Float32bits(p[i]) != math.Float32bits(p0[i]) {
								t.Fatalf("step %d: frozen p[%d] changed from %v to %v", step, i, p0[i], p[i])
							}
							continue
						}
						h := hyperOf(i)
						wp, wm, wv := ref64(float64(before[i]), float64(g[i]), float64(m0[k]), float64(v0[k]), h, step)
						decayed := math.Abs(float64(before[i]) * (1 - h.LR*h.WeightDecay))
						tolP := 3*unitRoundoff*decayed + 12*unitRoundoff*math.Abs(wp-float64(before[i])*(1-h.LR*h.WeightDecay))
						tolM := 3 * unitRoundoff * (math.Abs(h.Beta1*float64(m0[k])) + math.Abs((1-h.Beta1)*float64(g[i])))
						tolV := 3 * unitRoundoff * (h.Beta2*float64(v0[k]) + (1-h.Beta2)*float64(g[i])*float64(g[i]))
						if d := math.Abs(float64(p[i]) - wp); !fixtures.Within(d, tolP) {
							t.Fatalf("step %d: p[%d] = %.9g, float64 reference %.9g (|diff| %.3g > %.3g)", step, i, p[i], wp, d, tolP)
						}
						if d := math.Abs(float64(st.M[k]) - wm); !fixtures.Within(d, tolM) {
							t.Fatalf("step %d: m[%d] = %.9g, float64 reference %.9g (|diff| %.3g > %.3g)", step, i, st.M[k], wm, d, tolM)
						}
						if d := math.Abs(float64(st.V[k]) - wv); !fixtures.Within(d, tolV) {
							t.Fatalf("step %d: v[%d] = %.9g, float64 reference %.9g (|diff| %.3g > %.3g)", step, i, st.V[k], wv, d, tolV)
						}
						k++
					}
				}
				if o.State().Step != 5 {
					t.Errorf("Step = %d after 5 steps", o.State().Step)
				}
			})
		}
	})
}

// Over several steps the float32 trajectory stays close to a trajectory
// computed entirely in float64.
func TestAdamWTrajectory(t *testing.T) {
	const n, steps = 257, 20
	h := DefaultHyper()
	r := rand.New(rand.NewPCG(5, 6))
	p := randn(r, n, 1)
	p64, m64, v64 := make([]float64, n), make([]float64, n), make([]float64, n)
	for i := range p {
		p64[i] = float64(p[i])
	}
	o, err := NewAdamW(AllTrainable(n), h)
	if err != nil {
		t.Fatal(err)
	}
	for s := 1; s <= steps; s++ {
		g := randn(r, n, 0.1)
		o.Step(p, g)
		for i := range p64 {
			p64[i], m64[i], v64[i] = ref64(p64[i], float64(g[i]), m64[i], v64[i], h, s)
		}
	}
	for i := range p {
		// Each step moves p by about lr; errors of a few roundings of |p|
		// per step may accumulate.
		if d := math.Abs(float64(p[i]) - p64[i]); !fixtures.Within(d, 4*steps*unitRoundoff*math.Max(1, math.Abs(p64[i]))) {
			t.Errorf("p[%d] = %.9g after %d steps, float64 trajectory %.9g", i, p[i], steps, p64[i])
		}
	}
}

// A case small enough to work out by hand: with a constant gradient, m̂ = g
// and v̂ = g², so every step moves p by lr·g/(|g|+eps) ≈ lr·sign(g), after
// the weight decay p·(1 − lr·wd).
func TestAdamWKnownValues(t *testing.T) {
	cases := []struct {
		name         string
		hyper        Hyper
		p, g         float32
		wantP        []float32 // after each step
		wantM, wantV []float32
	}{
		{"decay", Hyper{LR: 0.1, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.1}, 1, 0.5,
			[]float32{0.99 - 0.1, 0.89*0.99 - 0.1, 0.7811*0.99 - 0.1}, []float32{0.05, 0.095, 0.1355}, []float32{0.00025, 0.00049975, 0.00074925025}},
		{"no decay, negative gradient", Hyper{LR: 0.01, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8}, 2, -4,
			[]float32{2.01, 2.02, 2.03}, []float32{-0.4, -0.76, -1.084}, []float32{0.016, 0.031984, 0.047952016}},
		{"eps dominates", Hyper{LR: 1, Beta1: 0.9, Beta2: 0.999, Eps: 1}, 0, 1,
			[]float32{-0.5, -1, -1.5}, []float32{0.1, 0.19, 0.271}, []float32{0.001, 0.001999, 0.002997001}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			// A frozen neighbour on each side must not move.
			mask, _ := FreezeMask(3, Range{0, 1}, Range{2, 3})
			o, err := NewAdamW(mask, c.hyper)
			if err != nil {
				t.Fatal(err)
			}
			p := []float32{7, c.p, 9}
			for s := range c.wantP {
				o.Step(p, []float32{100, c.g, 100})
				st := o.State()
				if !near(p[1], c.wantP[s]) || !near(st.M[0], c.wantM[s]) || !near(st.V[0], c.wantV[s]) {
					t.Errorf("step %d: p, m, v = %v, %v, %v; want %v, %v, %v", s+1, p[1], st.M[0], st.V[0], c.wantP[s], c.wantM[s], c.wantV[s])
				}
				if p[0] != 7 || p[2] != 9 {
					t.Fatalf("frozen neighbours changed: %v", p)
				}
			}
		})
	}
}

func near(a, b float32) bool {
	return math.Abs(float64(a)-float64(b)) <= 1e-6*math.Max(1, math.Abs(float64(b)))
}

// torchGolden is testdata/adamw_torch.json, written by adamw_torch.py.
type torchGolden struct {
	N          int
	Frozen     [2]int
	Group      [2]int
	Base       map[string]float64
	GroupHyper map[string]float64 `json:"group_hyper"`
	Init       []float32
	Grads      [][]float32
	Params     []float32
	M, V       []float32
}

func hyperFrom(m map[string]float64) Hyper {
	return Hyper{LR: m["lr"], Beta1: m["beta1"], Beta2: m["beta2"], Eps: m["eps"], WeightDecay: m["weight_decay"]}
}

// The optimiser reproduces torch.optim.AdamW itself, with a param group and
// a frozen range, to within a few float32 roundings.
func TestAdamWMatchesTorch(t *testing.T) {
	raw, err := os.ReadFile("testdata/adamw_torch.json")
	if err != nil {
		t.Fatal(err)
	}
	var gold torchGolden
	if err := json.Unmarshal(raw, &gold); err != nil {
		t.Fatal(err)
	}
	eachKernels(t, func(t *testing.T) {
		mask, err := FreezeMask(gold.N, Range{gold.Frozen[0], gold.Frozen[1]})
		if err != nil {
			t.Fatal(err)
		}
		o, err := NewAdamW(mask, hyperFrom(gold.Base), Group{Name: "nodecay", Ranges: []Range{{gold.Group[0], gold.Group[1]}}, Hyper: hyperFrom(gold.GroupHyper)})
		if err != nil {
			t.Fatal(err)
		}
		p := append([]float32(nil), gold.Init...)
		for _, g := range gold.Grads {
			o.Step(p, g)
		}
		m, v := make([]float32, gold.N), make([]float32, gold.N)
		copy(m, gold.Init)
		copy(v, gold.Init)
		mask.Scatter(m, o.State().M)
		mask.Scatter(v, o.State().V)
		// m and v are sums of terms of either sign, so rounding errors are
		// measured against the size of the terms (the largest gradient),
		// not of a result that cancellation may have made small.
		var gmax float64
		for _, g := range gold.Grads {
			for _, x := range g {
				gmax = math.Max(gmax, math.Abs(float64(x)))
			}
		}
		for i := range gold.N {
			for _, x := range []struct {
				name      string
				got, want float32
				scale     float64
			}{
				{"p", p[i], gold.Params[i], math.Abs(float64(gold.Params[i])) + 0.01},
				{"m", m[i], gold.M[i], gmax},
				{"v", v[i], gold.V[i], gmax * gmax},
			} {
				if d := math.Abs(float64(x.got) - float64(x.want)); !fixtures.Within(d, 8*unitRoundoff*x.scale) {
					t.Errorf("%s[%d] = %.9g, torch %.9g (|diff| %.3g > %.3g)", x.name, i, x.got, x.want, d, 8*unitRoundoff*x.scale)
				}
			}
		}
	})
}

func TestAdamWFrozenUntouched(t *testing.T) {
	const n = 300_000 // several blocks, so the workers split the work
	frozen := []Range{{0, 17}, {65_530, 65_600}, {131_000, 200_001}, {299_999, 300_000}}
	mask, err := FreezeMask(n, frozen...)
	if err != nil {
		t.Fatal(err)
	}
	eachKernels(t, func(t *testing.T) {
		o, err := NewAdamW(mask, DefaultHyper(), Group{Name: "g", Ranges: []Range{{10, 70_000}}, Hyper: Hyper{LR: 1, Beta1: 0.5, Beta2: 0.5}})
		if err != nil {
			t.Fatal(err)
		}
		r := rand.New(rand.NewPCG(7, 8))
		p := randn(r, n, 1)
		p0 := append([]float32(nil), p...)
		moved := 0
		for step := range 3 {
			g := randn(r, n, 1)
			for _, fr := range frozen {
				for i := fr.Lo; i < fr.Hi; i++ {
					g[i] = float32(math.NaN()) // must never be read
				}
			}
			before := append([]float32(nil), p...)
			o.Step(p, g)
			for i := range p {
				if step == 0 && p[i] != before[i] {
					moved++
				}
			}
		}
		for i := range p {
			if mask.IsFrozen(i) {
				if math.Float32bits(p[i]) != math.Float32bits(p0[i]) {
					t.Fatalf("frozen p[%d] changed: %v → %v", i, p0[i], p[i])
				}
			}
			if math.IsNaN(float64(p[i])) {
				t.Fatalf("p[%d] is NaN: a frozen gradient leaked", i)
			}
		}
		if moved != mask.NumTrainable() {
			t.Errorf("%d trainable elements moved in the first step, want all %d", moved, mask.NumTrainable())
		}
	})
}

func TestAdamWStateRoundTrip(t *testing.T) {
	const n = 5000
	mask, _ := FreezeMask(n, Range{100, 200})
	r := rand.New(rand.NewPCG(9, 10))
	grads := make([][]float32, 6)
	for i := range grads {
		grads[i] = randn(r, n, 0.1)
	}
	p := randn(r, n, 1)
	a, _ := NewAdamW(mask, DefaultHyper())
	for _, g := range grads[:3] {
		a.Step(p, g)
	}
	saved := State{Step: a.State().Step, M: append([]float32(nil), a.State().M...), V: append([]float32(nil), a.State().V...)}
	pSaved := append([]float32(nil), p...)
	for _, g := range grads[3:] {
		a.Step(p, g)
	}

	b, _ := NewAdamW(mask, DefaultHyper())
	if err := b.SetState(saved); err != nil {
		t.Fatal(err)
	}
	for _, g := range grads[3:] {
		b.Step(pSaved, g)
	}
	if i := sameBits(p, pSaved); i >= 0 {
		t.Fatalf("resumed run differs at p[%d]: %v vs %v", i, pSaved[i], p[i])
	}
	if i := sameBits(a.State().M, b.State().M); i >= 0 || a.State().Step != b.State().Step {
		t.Fatalf("resumed state differs (m[%d], steps %d vs %d)", i, a.State().Step, b.State().Step)
	}
	if err := b.SetState(State{M: saved.M[:10], V: saved.V}); err == nil || !strings.Contains(err.Error(), "one per trainable element") {
		t.Errorf("SetState with short M: err = %v", err)
	}
}

func TestNewAdamWErrors(t *testing.T) {
	mask := AllTrainable(100)
	bad := DefaultHyper()
	bad.Beta2 = 1
	cases := []struct {
		name    string
		base    Hyper
		groups  []Group
		wantErr string
	}{
		{"negative lr", Hyper{LR: -1}, nil, "learning rate -1"},
		{"beta2 = 1", bad, nil, "beta2 1"},
		{"NaN eps", Hyper{LR: 1, Eps: math.NaN()}, nil, "eps NaN"},
		{"bad group", DefaultHyper(), []Group{{Name: "x", Ranges: []Range{{0, 10}}, Hyper: bad}}, `group 1 "x": beta2 1`},
		{"group out of range", DefaultHyper(), []Group{{Name: "x", Ranges: []Range{{90, 101}}, Hyper: DefaultHyper()}}, "not within a buffer of 100"},
		{"overlap", DefaultHyper(), []Group{
			{Name: "a", Ranges: []Range{{0, 10}, {20, 30}}, Hyper: DefaultHyper()},
			{Name: "b", Ranges: []Range{{25, 40}}, Hyper: DefaultHyper()}}, `groups "a" and "b" both hold [25,30)`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := NewAdamW(mask, c.base, c.groups...)
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("err = %v, want one containing %q", err, c.wantErr)
			}
		})
	}
	if _, err := NewAdamW(nil, DefaultHyper()); err == nil {
		t.Error("nil mask accepted")
	}
}

// Groups cut the trainable ranges into segments; each element must get its
// own group's hyperparameters whatever the cuts.
func TestAdamWSegments(t *testing.T) {
	mask, _ := FreezeMask(40, Range{5, 8}, Range{30, 32})
	o, err := NewAdamW(mask, DefaultHyper(),
		Group{Name: "a", Ranges: []Range{{0, 3}, {6, 12}}, Hyper: DefaultHyper()},
		Group{Name: "b", Ranges: []Range{{12, 13}, {29, 35}}, Hyper: DefaultHyper()})
	if err != nil {
		t.Fatal(err)
	}
	var got []segment
	for _, s := range o.plan.segs {
		got = append(got, segment{lo: s.lo, n: s.n, group: s.group})
	}
	want := []segment{{0, 3, 0, 1}, {3, 2, 0, 0}, {8, 4, 0, 1}, {12, 1, 0, 2}, {13, 16, 0, 0}, {29, 1, 0, 2}, {32, 3, 0, 2}, {35, 5, 0, 0}}
	if len(got) != len(want) {
		t.Fatalf("segments %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("segments %v, want %v", got, want)
		}
	}
	if o.plan.total != mask.NumTrainable() {
		t.Errorf("plan covers %d elements, mask trains %d", o.plan.total, mask.NumTrainable())
	}
}

func TestAdamWSetLR(t *testing.T) {
	o, _ := NewAdamW(AllTrainable(1), Hyper{LR: 1, Beta1: 0.9, Beta2: 0.999})
	if err := o.SetLR(0, 0.5); err != nil || o.Hyper(0).LR != 0.5 {
		t.Fatalf("SetLR(0, 0.5): err %v, LR %v", err, o.Hyper(0).LR)
	}
	p := []float32{0}
	o.Step(p, []float32{1})
	if !near(p[0], -0.5) {
		t.Errorf("after a step at lr 0.5, p = %v, want -0.5", p[0])
	}
	if err := o.SetLR(0, math.NaN()); err == nil {
		t.Error("SetLR(NaN) accepted")
	}
}

func TestStepsDoNotAllocate(t *testing.T) {
	const n = 400_000 // more than two blocks: the parallel path runs
	mask, _ := FreezeMask(n, Range{1000, 2000})
	r := rand.New(rand.NewPCG(11, 12))
	p, g := randn(r, n, 1), randn(r, n, 0.1)
	o, _ := NewAdamW(mask, DefaultHyper(), Group{Name: "g", Ranges: []Range{{0, 500}}, Hyper: DefaultHyper()})
	c := NewGradClipper(mask, 1e9)
	e, _ := NewEMA(mask, p, 0.9999)
	for name, f := range map[string]func(){
		"AdamW.Step": func() { o.Step(p, g) },
		"Clip":       func() { _, _ = c.Clip(g) },
		"EMA.Update": func() { e.Update(p) },
	} {
		if a := testing.AllocsPerRun(20, f); a != 0 {
			t.Errorf("%s: %v allocations per call, want 0", name, a)
		}
	}
}

// Segments cover every trainable element once, in buffer order, each in
// the group that owns it, with State's compact offsets.
func TestSegments(t *testing.T) {
	mask, err := FreezeMask(20, Range{3, 5}, Range{12, 14})
	if err != nil {
		t.Fatal(err)
	}
	h := DefaultHyper()
	o, err := NewAdamW(mask, h, Group{Name: "g", Ranges: []Range{{4, 8}, {15, 17}}, Hyper: h})
	if err != nil {
		t.Fatal(err)
	}
	want := []Segment{{0, 3, 0, 0}, {5, 3, 3, 1}, {8, 4, 6, 0}, {14, 1, 10, 0}, {15, 2, 11, 1}, {17, 3, 13, 0}}
	if got := o.Segments(); !slices.Equal(got, want) {
		t.Errorf("Segments() = %v, want %v", got, want)
	}
}

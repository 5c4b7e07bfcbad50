package sample

import (
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/dcdit/dcdit/dc"
	"github.com/dcdit/dcdit/diffusion"
	"github.com/dcdit/dcdit/diffusion/ddpm"
	"github.com/dcdit/dcdit/dit"
	"github.com/dcdit/dcdit/family"
	"github.com/dcdit/dcdit/internal/testckpt"
	"github.com/dcdit/dcdit/loaders/arch"
)

// randomDiT is a frozen random DiT teacher (testckpt.RandomDiT).
func randomDiT(t *testing.T) dit.Teacher {
	t.Helper()
	m := testckpt.RandomDiT(t, &arch.DiTConfig{Depth: 2, HiddenSize: 32, NumHeads: 2, PatchSize: 2, InChannels: 4, InputSize: 8,
		LearnSigma: true, NumClasses: 10, MLPRatio: 2, FrequencySize: 256})
	m.Params.SetRequiresGrad(false)
	return dit.Teacher{Model: m}
}

// ddpmRun samples model with DiT's process over steps respaced steps,
// guided at scale.
func ddpmRun(t *testing.T, model diffusion.Model, steps, n, C, hw int, scale float64) []float32 {
	t.Helper()
	sched, err := ddpm.Respaced(1000, strconv.Itoa(steps))
	if err != nil {
		t.Fatal(err)
	}
	x, err := (&diffusion.DDPM{Schedule: sched}).Sample(model, diffusion.Shape{B: n, C: C, HW: hw}, diffusion.SampleOptions{Guidance: scale, Seed: 9})
	if err != nil {
		t.Fatal(err)
	}
	return x
}

// testPoly is a rescaling that keeps a change as it is.
var testPoly = Poly{0, 0, 0, 1, 0}

// A teacher's run under a cache at threshold 0 is the uncached run bit
// for bit; a large threshold skips the middle steps of both branches and
// costs less.
func TestTeaCacheTeacher(t *testing.T) {
	teacher := randomDiT(t)
	c := Conditions{Labels: []int{1, 7}, Null: 10}
	const steps, hw = 8, 64
	for _, scale := range []float64{1, 4} {
		want := ddpmRun(t, Teacher(teacher, c, 8, 8), steps, 2, 4, hw, scale)
		tc, err := NewTeaCache(0, testPoly, steps)
		if err != nil {
			t.Fatal(err)
		}
		if got := ddpmRun(t, tc.Teacher(teacher, c, 8, 8), steps, 2, 4, hw, scale); !slices.Equal(got, want) {
			t.Errorf("cfg %v: threshold 0 differs from the uncached run", scale)
		}
		if s, n := tc.Skipped(); s != 0 || n == 0 {
			t.Errorf("cfg %v: threshold 0 skipped %d of %d branch steps", scale, s, n)
		}
		full := tc.TeacherFLOPs(teacher.ForwardFLOPs(8, 8), teacher.StepFLOPs(8, 8), 2)

		big, err := NewTeaCache(1e9, testPoly, steps)
		if err != nil {
			t.Fatal(err)
		}
		got := ddpmRun(t, big.Teacher(teacher, c, 8, 8), steps, 2, 4, hw, scale)
		s, n := big.Skipped()
		if s != n-2*len(big.Skips[0]) {
			t.Errorf("cfg %v: a huge threshold skipped %d of %d branch steps, want all but the first and last", scale, s, n)
		}
		if f := big.TeacherFLOPs(teacher.ForwardFLOPs(8, 8), teacher.StepFLOPs(8, 8), 2); !(f < full/2) {
			t.Errorf("cfg %v: %v FLOPs skipping, %v computing every step", scale, f, full)
		}
		if slices.Equal(got, want) || slices.ContainsFunc(got, func(v float32) bool { return v != v }) {
			t.Errorf("cfg %v: skipping every middle step gave the uncached samples, or NaN", scale)
		}
	}
}

// The rule against a hand-computed sequence: with changes 0.3, 0.3, 0.5
// and a threshold of 0.5 under p(x) = x, step 1 skips (0.3), step 2
// computes (0.6), step 3 skips (0.5 < 0.5 is false: computes) — and the
// last always computes.
func TestTeaCacheRule(t *testing.T) {
	tc, err := NewTeaCache(0.5, Poly{1, 0}, 5)
	if err != nil {
		t.Fatal(err)
	}
	// Modulated inputs whose relative changes are 0.3, 0.3, 0.5, 0.1.
	mods := [][]float32{{1}, {1.3}, {1.69}, {2.535}, {2.7885}}
	want := []bool{true, false, true, true, true}
	for i, m := range mods {
		compute := tc.decide(0, m)
		if compute != want[i] {
			t.Errorf("step %d: compute %v, want %v (accumulated %v)", i, compute, want[i], tc.branch(0).acc)
		}
		tc.branch(0).prev, tc.branch(0).residual = m, []float32{0}
		tc.step++
	}
}

// The guidance branches decide together: the conditional branch's change
// reaches the threshold at the second step while the unconditional one's
// does not, and both compute, both sums emptied; at the third step both
// stay under it and both skip.
func TestTeaCacheBranchesTogether(t *testing.T) {
	tc, err := NewTeaCache(0.5, Poly{1, 0}, 5)
	if err != nil {
		t.Fatal(err)
	}
	offsets := []int{0, 1, 2} // two samples of one token, one per branch
	mods := [][]float32{{1, 1}, {1.6, 1.1}, {1.92, 1.21}}
	want := []bool{true, true, false} // for both branches
	for i, m := range mods {
		compute := tc.decideAll(offsets, 1, m, 2)
		if compute != want[i] {
			t.Errorf("step %d: compute %v, want %v", i, compute, want[i])
		}
		for b := range 2 {
			br := tc.branch(b)
			if compute && br.acc != 0 {
				t.Errorf("step %d: branch %d computed with %v accumulated, want an empty sum", i, b, br.acc)
			}
			br.prev, br.residual = m[b:b+1], []float32{0}
		}
		tc.step++
	}
}

// cachedDCRun returns a sampler of two labels by d's model under a step
// cache (nil: none), guided at scale 3 and recording its stats; d gives
// the model and its fractions.
func cachedDCRun(t *testing.T, d *DC, nullClass, steps int) func(*TeaCache) ([]float32, *Stats) {
	m, cfg := d.Model, d.Model.Config
	m.Params.SetRequiresGrad(false)
	m.Backbone.Parameters().SetRequiresGrad(false)
	c := Conditions{Labels: []int{3, 0}, Null: nullClass}
	return func(cache *TeaCache) ([]float32, *Stats) {
		run := *d
		run.Rule, run.Scale, run.Stats, run.Cache = liteRule(cfg.OutChannels), 3, &Stats{}, cache
		return ddpmRun(t, run.Denoiser(c), steps, 2, cfg.InChannels, cfg.Tokens(), 0), run.Stats
	}
}

// A DC model that runs dense at every step (its kept cells never change)
// under a cache at threshold 0 samples as without it, bit for bit, and
// costs only the signal's modulation more: the blocks run on the stages
// the signal was measured on, not on a second run of them.
func TestTeaCacheDCDense(t *testing.T) {
	forEachModel(t, func(t *testing.T, m *dc.Model, nullClass int) {
		cfg := m.Config
		const steps = 4
		run := cachedDCRun(t, &DC{Model: m, Rho: 0.3, DenseBelow: 1e9}, nullClass, steps)
		want, ws := run(nil)
		zero, err := NewTeaCache(0, testPoly, steps)
		if err != nil {
			t.Fatal(err)
		}
		got, gs := run(zero)
		if !slices.Equal(got, want) {
			t.Fatal("threshold 0 differs from the uncached run")
		}
		lengths := slices.Repeat([]int{cfg.Cells()}, 4) // two samples, two branches
		modulation := m.Backbone.(family.StagedBackbone).StepFLOPs(lengths).Modulation
		for i := range ws.FLOPs {
			if extra := gs.FLOPs[i] - ws.FLOPs[i]; !(math.Abs(extra-modulation) <= 1e-9*ws.FLOPs[i]) {
				t.Errorf("step %d: %v FLOPs more than uncached, want the modulation's %v", i, extra, modulation)
			}
		}
	})
}

// A DC model under a cache at threshold 0 samples as without it, bit for
// bit, with the same kept tokens and FLOPs but the cache's modulation; a
// large threshold skips, keeps the cells of the computed step, and costs
// less.
func TestTeaCacheDC(t *testing.T) {
	forEachModel(t, func(t *testing.T, m *dc.Model, nullClass int) {
		const steps = 6
		run := cachedDCRun(t, &DC{Model: m, Rho: 0.3, RhoUncond: 0.6}, nullClass, steps)
		want, ws := run(nil)
		zero, err := NewTeaCache(0, testPoly, steps)
		if err != nil {
			t.Fatal(err)
		}
		got, gs := run(zero)
		if !slices.Equal(got, want) || !slices.Equal(gs.Kept, ws.Kept) || !slices.Equal(gs.KeptUncond, ws.KeptUncond) {
			t.Errorf("threshold 0 differs from the uncached run (kept %v, want %v)", gs.Kept, ws.Kept)
		}
		if !(gs.TotalFLOPs() > ws.TotalFLOPs()) {
			t.Errorf("threshold 0: %v FLOPs, the uncached run %v: the signal's modulation is not counted", gs.TotalFLOPs(), ws.TotalFLOPs())
		}
		big, err := NewTeaCache(1e9, testPoly, steps)
		if err != nil {
			t.Fatal(err)
		}
		got, bs := run(big)
		if s, n := big.Skipped(); s != n-4 {
			t.Errorf("a huge threshold skipped %d of %d branch steps, want all but the first and last", s, n)
		}
		for i := 1; i < steps-1; i++ {
			if bs.Kept[i] != bs.Kept[0] || bs.KeptUncond[i] != bs.KeptUncond[0] {
				t.Errorf("step %d kept %v / %v, the computed step %v / %v", i, bs.Kept[i], bs.KeptUncond[i], bs.Kept[0], bs.KeptUncond[0])
			}
		}
		if !(bs.TotalFLOPs() < ws.TotalFLOPs()) || slices.ContainsFunc(got, func(v float32) bool { return v != v }) {
			t.Errorf("skipping: %v FLOPs against %v, or NaN samples", bs.TotalFLOPs(), ws.TotalFLOPs())
		}
	})
}

// Under a cache that would skip every step it may, a DC model sampled
// dense below a timestep computes the first dense step (and runs it, and
// every dense step after it, on every cell): a skip there would run the
// step on the routed step's cells.
func TestTeaCacheDCComputesTheFirstDenseStep(t *testing.T) {
	forEachModel(t, func(t *testing.T, m *dc.Model, nullClass int) {
		const steps = 6
		run := cachedDCRun(t, &DC{Model: m, Rho: 0.6, DenseBelow: 500}, nullClass, steps)
		_, ws := run(nil)
		big, err := NewTeaCache(1e9, testPoly, steps)
		if err != nil {
			t.Fatal(err)
		}
		_, bs := run(big)
		L := float64(m.Config.Cells())
		firstDense := slices.Index(ws.Kept, L)
		if firstDense < 1 || firstDense >= steps-1 {
			t.Fatalf("the uncached run keeps %v of %v cells: want routed steps, then dense ones before the last", ws.Kept, L)
		}
		if s, n := big.Skipped(); s != n-6 {
			t.Errorf("skipped %d of %d branch steps, want all but the first, the first dense and the last (6)", s, n)
		}
		for i := firstDense; i < steps; i++ {
			if bs.Kept[i] != L || bs.KeptUncond[i] != L {
				t.Errorf("step %d kept %v / %v of %v cells, want every cell (dense)", i, bs.Kept[i], bs.KeptUncond[i], L)
			}
		}
	})
}

func TestFitPoly(t *testing.T) {
	want := Poly{-3, 2.5, -0.7, 1.2, 0.01}
	rng := rand.New(rand.NewPCG(4, 5))
	var x, y []float64
	for range 40 {
		v := rng.Float64() * 0.6
		x, y = append(x, v), append(y, want.Eval(v))
	}
	got, err := FitPoly(x, y, 4)
	if err != nil {
		t.Fatal(err)
	}
	for i := range want {
		if !(math.Abs(got[i]-want[i]) <= 1e-6*max(1, math.Abs(want[i]))) {
			t.Errorf("coefficient %d: %v, want %v", i, got[i], want[i])
		}
	}
	tests := []struct {
		name string
		x, y []float64
	}{
		{"NaN input", append(slices.Clone(x[:9]), math.NaN()), y[:10]},
		{"Inf output", x[:10], append(slices.Clone(y[:9]), math.Inf(1))},
		{"too few pairs", x[:4], y[:4]},
		{"one input value", []float64{1, 1, 1, 1, 1, 1}, []float64{1, 2, 3, 4, 5, 6}},
		{"lengths differ", x[:6], y[:5]},
	}
	for _, tt := range tests {
		if p, err := FitPoly(tt.x, tt.y, 4); err == nil {
			t.Errorf("%s: fitted %v, want an error", tt.name, p)
		}
	}
}

func TestTeaCacheSidecar(t *testing.T) {
	model := filepath.Join(t.TempDir(), "model.safetensors")
	if _, err := ReadTeaCacheFit(model); err == nil || !strings.Contains(err.Error(), "dcdit teacache fit") {
		t.Errorf("no sidecar: %v, want an error telling to run the fit", err)
	}
	fit := &TeaCacheFit{Coefficients: Poly{1.5, -2, 0.25, 3, 0.001}, Pairs: 70, Samples: 8, Steps: 10, CFG: 4, Rho: 0.6, Residual: 0.01}
	if err := WriteTeaCacheFit(model, fit); err != nil {
		t.Fatal(err)
	}
	got, err := ReadTeaCacheFit(model)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, fit) {
		t.Errorf("read back %+v, wrote %+v", got, fit)
	}
	path := TeaCacheSidecar(model)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range [][]byte{data[:len(data)/2], []byte(`{"coefficients":[1,2],"extra":1}`), []byte(`{"coefficients":[]}`)} {
		if err := os.WriteFile(path, bad, 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := ReadTeaCacheFit(model); err == nil || !strings.Contains(err.Error(), path) && !strings.Contains(err.Error(), "coefficients") {
			t.Errorf("%q: %v, want an error naming %s", bad, err, path)
		}
	}
}

// A family whose forward does not split is refused by kind.
func TestStagedRefusesByKind(t *testing.T) {
	if _, err := Staged(&recorder{}, "tinydit"); err == nil || !strings.Contains(err.Error(), "tinydit") {
		t.Errorf("a teacher without the split: %v, want an error naming its kind", err)
	}
	if _, err := Staged(randomDiT(t), "dit"); err != nil {
		t.Errorf("DiT: %v", err)
	}
}

// A skipped step adds the computed step's residual to its own stream: on
// the same input as the computed step it gives the computed output (to
// rounding), in both guidance branches.
func TestTeaCacheResidual(t *testing.T) {
	teacher := randomDiT(t)
	c := Conditions{Labels: []int{1, 7}, Null: 10}
	tc, err := NewTeaCache(1e9, testPoly, 3)
	if err != nil {
		t.Fatal(err)
	}
	model := tc.Teacher(teacher, c, 8, 8)
	x := normal(rand.New(rand.NewPCG(8, 9)), 4*4*64)
	tm := []float32{500, 500, 500, 500}
	first, err := model(x, tm, true)
	if err != nil {
		t.Fatal(err)
	}
	second, err := model(x, tm, true)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(tc.Skips[1], []bool{true, true}) {
		t.Fatalf("skips %v, want both branches skipped at the second step", tc.Skips)
	}
	var num, den float64
	for i := range first {
		d := float64(first[i]) - float64(second[i])
		num, den = num+d*d, den+float64(first[i])*float64(first[i])
	}
	if !(num <= 1e-10*den) {
		t.Errorf("the skipped step's output differs from the computed one's by %v (relative, squared)", num/den)
	}
}

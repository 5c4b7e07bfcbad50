package sample

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/dcdit/dcdit/cond"
	"github.com/dcdit/dcdit/dc"
	"github.com/dcdit/dcdit/dc/hnet"
	"github.com/dcdit/dcdit/diffusion"
	"github.com/dcdit/dcdit/diffusion/ddpm"
	"github.com/dcdit/dcdit/family"
	"github.com/dcdit/dcdit/internal/dctest"
)

// Guidance through ddpm.Guided around the DC denoiser (as the DDPM
// process samples it) is the reference's Lite-CFG: the same numbers as
// dc.Model.LiteCFG on [x; x] with labels [y; null] at (ρ_cond, ρ_uncond),
// and the same kept counts.
// forEachModel runs f on the model of every dcdit-tiny case, with the
// class its guidance's null condition takes.
func forEachModel(t *testing.T, f func(t *testing.T, m *dc.Model, nullClass int)) {
	for _, c := range dctest.Cases(t) {
		t.Run(c.Name, func(t *testing.T) {
			m, _ := dctest.Model(t, c)
			nullClass := 10
			if v, ok := c.Int("num_classes"); ok {
				nullClass = v
			}
			f(t, m, nullClass)
		})
	}
}

// normal draws n standard normal values.
func normal(rng *rand.Rand, n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	return x
}

func TestDenoiserIsLiteCFG(t *testing.T) {
	forEachModel(t, func(t *testing.T, m *dc.Model, nullClass int) {
		cfg := m.Config
		n, C, HW := 2, cfg.InChannels, cfg.Tokens()
		x := normal(rand.New(rand.NewPCG(3, 4)), n*C*HW)
		ts, ys := []int{999, 500}, []int{1, 7}
		const scale = 4
		for _, rho := range [][2]float32{{0, 0}, {0.3, 0.9}, {0.6, 0}} {
			stats := &Stats{}
			guide := ddpm.Guidance{Scale: scale, NullClass: nullClass}
			d := &DC{Model: m, Rho: rho[0], RhoUncond: rho[1], Stats: stats}
			model := d.Denoiser(Conditions{Labels: ys, Null: nullClass})
			denoise := func(x []float32, t []int, _ []int) ([]float32, error) {
				tf := make([]float32, len(t))
				for i, v := range t {
					tf[i] = float32(v)
				}
				return model(x, tf, true)
			}
			got, err := guide.Guided(denoise, ddpm.Shape{B: n, C: C, HW: HW})(x, ts, ys)
			if err != nil {
				t.Fatal(err)
			}
			x2 := append(slices.Clone(x), x...)
			tf := []float32{999, 500, 999, 500}
			want, res, err := hnet.LiteCFG(m, x2, cond.Input{T: tf, Labels: append(slices.Clone(ys), nullClass, nullClass)}, scale, rho[0], rho[1])
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, want[:len(got)]) {
				t.Errorf("ρ %v: guided denoiser output differs from LiteCFG", rho)
			}
			k := res.Chunks.NumKept
			if stats.Kept[0] != float64(k[0]+k[1])/2 || stats.KeptUncond[0] != float64(k[2]+k[3])/2 {
				t.Errorf("ρ %v: recorded kept %v / %v, LiteCFG kept %v", rho, stats.Kept, stats.KeptUncond, k)
			}
			if want := m.ForwardFLOPs(k).Total(); stats.TotalFLOPs() != want {
				t.Errorf("ρ %v: %v FLOPs recorded, want %v", rho, stats.TotalFLOPs(), want)
			}
		}
	})
}

// liteRule is the reference's Lite-CFG combination (dc.Model.LiteCFG):
// uncond + s·(cond − uncond) on the first three channels, into both.
func liteRule(outChannels int) func(c, u []float32, hw int, s float32) {
	return func(c, u []float32, hw int, s float32) {
		for i := range min(3, outChannels) * hw {
			v := u[i] + s*(c[i]-u[i])
			c[i], u[i] = v, v
		}
	}
}

// A DC model guiding itself (a Rule), and the denoiser guided by
// SelfGuided, give the reference's Lite-CFG with per-row fractions bit
// for bit, samples below DenseBelow running dense; the statistics count
// the conditional samples, and the masks are their kept cells.
func TestSelfGuidedIsLiteCFG(t *testing.T) {
	forEachModel(t, func(t *testing.T, m *dc.Model, nullClass int) {
		cfg := m.Config
		n, C, HW := 2, cfg.InChannels, cfg.Tokens()
		x := normal(rand.New(rand.NewPCG(5, 6)), n*C*HW)
		ts, ys := []float32{999, 500}, []int{3, 0}
		conds := Conditions{Labels: ys, Null: nullClass}
		const scale, denseBelow = 3, 600
		rule := liteRule(cfg.OutChannels)
		for _, rho := range [][2]float32{{0, 0}, {0.4, 0.8}} {
			stats := &Stats{RecordMasks: true}
			d := &DC{Model: m, Rho: rho[0], RhoUncond: rho[1], DenseBelow: denseBelow, Rule: rule, Scale: scale, Stats: stats}
			got, res, err := d.Forward(x, ts, conds, false)
			if err != nil {
				t.Fatal(err)
			}
			x2 := append(slices.Clone(x), x...)
			in := cond.Input{T: slices.Concat(ts, ts), Labels: append(slices.Clone(ys), nullClass, nullClass)}
			// The second sample's timestep lies below DenseBelow.
			want, wres, err := hnet.LiteCFGFracs(m, x2, in, scale, []float32{rho[0], dc.Dense, rho[1], dc.Dense})
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, want) || !slices.Equal(res.Chunks.NumKept, wres.Chunks.NumKept) {
				t.Errorf("ρ %v: self-guided forward differs from LiteCFGFracs (kept %v, want %v)", rho, res.Chunks.NumKept, wres.Chunks.NumKept)
			}
			if k := res.Chunks.NumKept; k[1] != cfg.Cells() || k[3] != cfg.Cells() {
				t.Errorf("ρ %v: kept %v, want every one of %d cells below DenseBelow", rho, k, cfg.Cells())
			}
			k := res.Chunks.NumKept
			if stats.Kept[0] != float64(k[0]+k[1])/2 || stats.KeptUncond[0] != float64(k[2]+k[3])/2 {
				t.Errorf("ρ %v: recorded kept %v / %v, forward kept %v", rho, stats.Kept, stats.KeptUncond, k)
			}
			if mask := cfg.LatentMask(res.Chunks.Kept[:n*cfg.Cells()]); !slices.Equal(stats.Masks[0], mask) {
				t.Errorf("ρ %v: recorded mask differs from the conditional samples' kept cells", rho)
			}

			plain := &DC{Model: m, Rho: rho[0], RhoUncond: rho[1], DenseBelow: denseBelow}
			for name, model := range map[string]func([]float32, []float32, bool) ([]float32, error){
				"Denoiser with a Rule": d.Denoiser(conds),
				"SelfGuided(Denoiser)": SelfGuided(plain.Denoiser(conds), rule, scale, HW),
			} {
				out, err := model(x, ts, false)
				if err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(out, want[:len(want)/2]) {
					t.Errorf("ρ %v: %s differs from LiteCFGFracs' guided half", rho, name)
				}
			}
		}
	})
}

// Samples at or above CoarseFrom drop the larger of their branch's ρ and
// CoarseRho when that ρ is a budget (> 0), those below DenseBelow run
// dense, the rest at their branch's ρ: the forward is the reference's
// Lite-CFG at those fractions.
func TestCoarseSteps(t *testing.T) {
	forEachModel(t, func(t *testing.T, m *dc.Model, nullClass int) {
		cfg := m.Config
		n, C, HW := 3, cfg.InChannels, cfg.Tokens()
		x := normal(rand.New(rand.NewPCG(7, 8)), n*C*HW)
		ts, ys := []float32{999, 700, 500}, []int{3, 0, 1}
		conds := Conditions{Labels: ys, Null: nullClass}
		const scale = 3
		for _, tt := range []struct {
			rho, rhoUncond float32
			fracs          []float32
		}{
			{0.3, 0.5, []float32{0.8, 0.3, dc.Dense, 0.8, 0.5, dc.Dense}},
			{0, 0.9, []float32{0, 0, dc.Dense, 0.9, 0.9, dc.Dense}},
		} {
			d := &DC{Model: m, Rho: tt.rho, RhoUncond: tt.rhoUncond, DenseBelow: 600, CoarseFrom: 900, CoarseRho: 0.8,
				Rule: liteRule(cfg.OutChannels), Scale: scale}
			got, res, err := d.Forward(x, ts, conds, false)
			if err != nil {
				t.Fatal(err)
			}
			x2 := append(slices.Clone(x), x...)
			in := cond.Input{T: slices.Concat(ts, ts), Labels: append(slices.Clone(ys), nullClass, nullClass, nullClass)}
			want, wres, err := hnet.LiteCFGFracs(m, x2, in, scale, tt.fracs)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, want) || !slices.Equal(res.Chunks.NumKept, wres.Chunks.NumKept) {
				t.Errorf("ρ %v/%v: forward differs from LiteCFGFracs at %v (kept %v, want %v)", tt.rho, tt.rhoUncond, tt.fracs, res.Chunks.NumKept, wres.Chunks.NumKept)
			}
		}
	})
}

// The random router keeps, at every forward of a run and in every sample
// of both guidance branches, as many cells as the router kept on the same
// input, other cells than the router's and other cells for another seed;
// a sample below DenseBelow keeps every cell and comes out as the learned
// router's, bit for bit.
func TestRandomRouterKeepsTheCount(t *testing.T) {
	forEachModel(t, func(t *testing.T, m *dc.Model, nullClass int) {
		cfg := m.Config
		n, C, HW := 2, cfg.InChannels, cfg.Tokens()
		conds := Conditions{Labels: []int{3, 0}, Null: nullClass}
		const denseBelow = 600
		setting := func(choose dc.Chooser) *DC {
			return &DC{Model: m, Rho: 0.6, RhoUncond: 0.8, DenseBelow: denseBelow, Rule: liteRule(cfg.OutChannels), Scale: 3, Choose: choose}
		}
		random := func(seed uint64) *DC { return setting(dc.RandomKeep(rand.New(rand.NewPCG(seed, 0)))) }
		learned, r1, r2 := setting(nil), random(1), random(2)
		rng := rand.New(rand.NewPCG(7, 8))
		differ, differSeed := false, false
		// Three steps of a run, the second sample dense at each.
		for step, ts := range [][]float32{{999, 500}, {800, 300}, {650, 100}} {
			x := normal(rng, n*C*HW)
			want, wres, err := learned.Forward(x, ts, conds, false)
			if err != nil {
				t.Fatal(err)
			}
			got, res, err := r1.Forward(x, ts, conds, false)
			if err != nil {
				t.Fatal(err)
			}
			_, res2, err := r2.Forward(x, ts, conds, false)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(res.Chunks.NumKept, wres.Chunks.NumKept) || !slices.Equal(res2.Chunks.NumKept, wres.Chunks.NumKept) {
				t.Errorf("step %d: random routers kept %v and %v cells, the router %v", step, res.Chunks.NumKept, res2.Chunks.NumKept, wres.Chunks.NumKept)
			}
			differ = differ || !slices.Equal(res.Chunks.Kept, wres.Chunks.Kept)
			differSeed = differSeed || !slices.Equal(res.Chunks.Kept, res2.Chunks.Kept)
			per := cfg.OutChannels * HW
			if !slices.Equal(got[per:2*per], want[per:2*per]) {
				t.Errorf("step %d: the dense sample differs under the random router", step)
			}
		}
		if !differ {
			t.Error("the random router kept the router's cells at every step")
		}
		if !differSeed {
			t.Error("seeds 1 and 2 kept the same cells at every step")
		}
	})
}

func TestFlowMatchingTimestep(t *testing.T) {
	tests := []struct {
		steps     int
		modelTime float32
		want      float32
	}{
		{1000, 0, 1000}, // pure noise, σ = 1
		{1000, 1, 0},    // clean, σ = 0
		{1000, 0.25, 750},
		{500, 0.5, 250},
	}
	for _, tt := range tests {
		if got := FlowMatchingTimestep(tt.steps)(tt.modelTime); got != tt.want {
			t.Errorf("%d steps, model time %v: timestep %v, want %v", tt.steps, tt.modelTime, got, tt.want)
		}
	}
}

// A DC model whose main network was given width routers, every gate on,
// samples as before, bit for bit, with the same kept tokens and FLOPs
// but the routers'; with gates off it skips heads and channel groups and
// records fewer FLOPs at every step.
func TestWidthGatedSampling(t *testing.T) {
	forEachModel(t, func(t *testing.T, m *dc.Model, nullClass int) {
		cfg := m.Config
		c := Conditions{Labels: []int{3, 0}, Null: nullClass}
		const steps = 5
		run := func() ([]float32, *Stats) {
			m.Params.SetRequiresGrad(false)
			m.Backbone.Parameters().SetRequiresGrad(false)
			stats := &Stats{}
			d := &DC{Model: m, Rho: 0.3, RhoUncond: 0.6, Rule: liteRule(cfg.OutChannels), Scale: 3, Stats: stats}
			return ddpmRun(t, d.Denoiser(c), steps, 2, cfg.InChannels, cfg.Tokens(), 0), stats
		}
		want, ws := run()
		g, ok := m.Backbone.(family.WidthGated)
		if !ok {
			t.Fatal("the main network takes no width gates")
		}
		bb, err := g.WithWidthGates()
		if err != nil {
			t.Fatal(err)
		}
		m.Backbone = bb
		got, gs := run()
		if !slices.Equal(got, want) || !slices.Equal(gs.Kept, ws.Kept) || !slices.Equal(gs.KeptUncond, ws.KeptUncond) {
			t.Fatal("every gate on: the samples or kept tokens differ from the ungated model's")
		}
		for i, f := range gs.FLOPs {
			if !(f > ws.FLOPs[i]) || !(f < 1.01*ws.FLOPs[i]) {
				t.Errorf("step %d: %v FLOPs every gate on, %v ungated: want the routers' few more", i, f, ws.FLOPs[i])
			}
		}
		for _, p := range bb.Parameters().List() {
			if strings.HasSuffix(p.Name, "_router.bias") {
				for j := range p.Values() {
					p.Values()[j] = -5 // head 0 and group 0 alone
				}
			}
		}
		off, os := run()
		if slices.Equal(off, want) {
			t.Error("gates off: the samples did not change")
		}
		for i, f := range os.FLOPs {
			if !(f < ws.FLOPs[i]) {
				t.Errorf("step %d: %v FLOPs with gates off, %v ungated", i, f, ws.FLOPs[i])
			}
		}
	})
}

// A model whose config asks for the spread drop samples with it: at every
// forward each sample keeps as many cells as the reference tail drop,
// only cells the router marked, and elsewhere than the tail drop at least
// once; a sample below DenseBelow comes out bit for bit as the tail
// drop's.
func TestSpreadDropSampling(t *testing.T) {
	forEachModel(t, func(t *testing.T, m *dc.Model, nullClass int) {
		cfg := m.Config
		spread := *m
		sc := *cfg
		sc.SpreadDrop = true
		spread.Config = &sc
		n, C, HW := 2, cfg.InChannels, cfg.Tokens()
		conds := Conditions{Labels: []int{3, 0}, Null: nullClass}
		setting := func(m *dc.Model) *DC {
			return &DC{Model: m, Rho: 0.6, RhoUncond: 0.8, DenseBelow: 600, Rule: liteRule(cfg.OutChannels), Scale: 3}
		}
		lowest, spreadDC := setting(m), setting(&spread)
		rng := rand.New(rand.NewPCG(9, 10))
		differ := false
		for step, ts := range [][]float32{{999, 500}, {800, 300}, {650, 100}} {
			x := normal(rng, n*C*HW)
			want, wres, err := lowest.Forward(x, ts, conds, false)
			if err != nil {
				t.Fatal(err)
			}
			got, res, err := spreadDC.Forward(x, ts, conds, false)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(res.Chunks.NumKept, wres.Chunks.NumKept) {
				t.Errorf("step %d: the spread drop kept %v cells, the tail drop %v", step, res.Chunks.NumKept, wres.Chunks.NumKept)
			}
			L := cfg.Cells()
			for i, k := range res.Chunks.Kept {
				dense := (i/L)%n == 1 // the second sample of each branch runs dense
				if k && !dense && !res.Routing.Natural[i] {
					t.Errorf("step %d: cell %d kept, which the router did not mark", step, i)
				}
			}
			differ = differ || !slices.Equal(res.Chunks.Kept, wres.Chunks.Kept)
			per := cfg.OutChannels * HW
			if !slices.Equal(got[per:2*per], want[per:2*per]) {
				t.Errorf("step %d: the dense sample differs under the spread drop", step)
			}
		}
		if !differ {
			t.Error("the spread drop kept the tail drop's cells at every step")
		}
	})
}

// Lookback keeps the router's cells at a run's first step and, at the
// next, as many cells as the router keeps, those dc.ChangeKeep picks on
// the first step's clean estimate of the guided samples, in the branches
// with a budget (ρ > 0); it refuses a chooser beside it.
func TestLookbackSampling(t *testing.T) {
	forEachModel(t, func(t *testing.T, m *dc.Model, nullClass int) {
		cfg := m.Config
		n, C, HW := 2, cfg.InChannels, cfg.Tokens()
		conds := Conditions{Labels: []int{3, 0}, Null: nullClass}
		proc := &diffusion.DDPM{Schedule: ddpm.Linear(1000)}
		setting := func(lb *Lookback) *DC {
			return &DC{Model: m, Rho: 0.6, RhoUncond: 0.6, Rule: liteRule(cfg.OutChannels), Scale: 3, Lookback: lb}
		}
		learned, looking := setting(nil), setting(&Lookback{Clean: proc.Clean})
		rng := rand.New(rand.NewPCG(5, 6))
		x := normal(rng, n*C*HW)
		ts := []float32{999, 900}
		want, _, err := learned.Forward(x, ts, conds, false)
		if err != nil {
			t.Fatal(err)
		}
		got, _, err := looking.Forward(x, ts, conds, false)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, want) {
			t.Fatal("the first step differs from the router's")
		}
		prev := make([]float32, n*C*HW)
		if err := proc.Clean(prev, x, want[:n*cfg.OutChannels*HW], ts, diffusion.Shape{B: n, C: C, HW: HW}); err != nil {
			t.Fatal(err)
		}
		choose, err := dc.ChangeKeep(prev, n, C, cfg.CellRows(), cfg.CellCols(), cfg.Patch())
		if err != nil {
			t.Fatal(err)
		}
		x = normal(rng, n*C*HW)
		ts = []float32{800, 700}
		_, wres, err := learned.Forward(x, ts, conds, false)
		if err != nil {
			t.Fatal(err)
		}
		_, res, err := looking.Forward(x, ts, conds, false)
		if err != nil {
			t.Fatal(err)
		}
		wantKept, err := choose(wres.Chunks.Kept, 2*n)
		if err != nil {
			t.Fatal(err)
		}
		if slices.Equal(wantKept, wres.Chunks.Kept) {
			t.Fatal("the estimate's cells are the router's: the case cannot tell them apart")
		}
		if !slices.Equal(res.Chunks.NumKept, wres.Chunks.NumKept) {
			t.Errorf("kept %v cells, the router %v", res.Chunks.NumKept, wres.Chunks.NumKept)
		}
		if !slices.Equal(res.Chunks.Kept, wantKept) {
			t.Error("the second step did not keep the cells the first step's estimate changes most in")
		}
		// ρ 0 is no budget: its samples keep the router's cells, and the
		// other branch the estimate's.
		x0, t0 := normal(rand.New(rand.NewPCG(5, 6)), n*C*HW), []float32{999, 900}
		lite := func(lb *Lookback) *DC {
			d := setting(lb)
			d.Rho = 0
			return d
		}
		plain, mixed := lite(nil), lite(&Lookback{Clean: proc.Clean})
		first, _, err := mixed.Forward(x0, t0, conds, false)
		if err != nil {
			t.Fatal(err)
		}
		if err := proc.Clean(prev, x0, first[:n*cfg.OutChannels*HW], t0, diffusion.Shape{B: n, C: C, HW: HW}); err != nil {
			t.Fatal(err)
		}
		if choose, err = dc.ChangeKeep(prev, n, C, cfg.CellRows(), cfg.CellCols(), cfg.Patch()); err != nil {
			t.Fatal(err)
		}
		_, pres, err := plain.Forward(x, ts, conds, false)
		if err != nil {
			t.Fatal(err)
		}
		_, mres, err := mixed.Forward(x, ts, conds, false)
		if err != nil {
			t.Fatal(err)
		}
		lookedAt, err := choose(pres.Chunks.Kept, 2*n)
		if err != nil {
			t.Fatal(err)
		}
		half := n * cfg.Cells()
		if !slices.Equal(mres.Chunks.Kept[:half], pres.Chunks.Kept[:half]) || !slices.Equal(mres.Chunks.Kept[half:], lookedAt[half:]) {
			t.Error("Lite-CFG at ρ 0 / 0.6: want the router's cells in the ρ 0 branch and the estimate's in the other")
		}

		both := setting(&Lookback{Clean: proc.Clean})
		both.Choose = dc.RandomKeep(rand.New(rand.NewPCG(1, 0)))
		if _, _, err := both.Forward(x, ts, conds, false); err == nil || !strings.Contains(err.Error(), "does not combine") {
			t.Errorf("lookback beside a chooser: error %v", err)
		}
	})
}

// DenseTeacher takes dc.Model.PredictDense at a step whose every sample is
// dense and leaves any other step alone; the dcdit-tiny models have no
// wide head, so a dense step says so.
func TestDenseTeacherSteps(t *testing.T) {
	forEachModel(t, func(t *testing.T, m *dc.Model, nullClass int) {
		cfg := m.Config
		n := 2
		x := normal(rand.New(rand.NewPCG(3, 4)), n*cfg.InChannels*cfg.Tokens())
		conds := Conditions{Labels: []int{1, 2}, Null: nullClass}
		for _, tt := range []struct {
			name string
			ts   []float32
			err  string
		}{
			{"one sample routed", []float32{900, 100}, ""},
			{"every sample dense", []float32{200, 100}, "wide head"},
		} {
			plain := &DC{Model: m, Rho: 0.4, DenseBelow: 500}
			teacher := &DC{Model: m, Rho: 0.4, DenseBelow: 500, DenseTeacher: true}
			want, _, err := plain.Forward(x, tt.ts, conds, false)
			if err != nil {
				t.Fatal(err)
			}
			got, _, err := teacher.Forward(x, tt.ts, conds, false)
			switch {
			case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
				t.Errorf("%s: err = %v, want one naming the %s", tt.name, err, tt.err)
			case tt.err == "" && err != nil:
				t.Errorf("%s: %v", tt.name, err)
			case tt.err == "" && !slices.Equal(got, want):
				t.Errorf("%s: the forward changed with DenseTeacher", tt.name)
			}
		}
		cached := &DC{Model: m, DenseBelow: 500, DenseTeacher: true, Cache: &TeaCache{}}
		if _, _, err := cached.Forward(x, []float32{200, 100}, conds, false); err == nil || !strings.Contains(err.Error(), "step cache") {
			t.Errorf("DenseTeacher with a step cache: err = %v, want a refusal", err)
		}
	})
}

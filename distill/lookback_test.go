package distill

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/dcdit/dcdit/dc"
	"github.com/dcdit/dcdit/diffusion/ddpm"
)

// A budget's fractions follow sampling's schedule: dense below
// DenseBelow, at least CoarseRho from CoarseFrom in a sample with a
// budget, the step's ρ between — and ρ 0 is never coarse.
func TestBudgetFracs(t *testing.T) {
	ts := []float32{100, 600, 850, 999}
	tests := []struct {
		name   string
		budget Budget
		rho    float64
		want   []float32
	}{
		{"no schedule: one fraction", Budget{}, 0.4, []float32{0.4}},
		{"dense below", Budget{DenseBelow: 520}, 0.4, []float32{dc.Dense, 0.4, 0.4, 0.4}},
		{"coarse", Budget{DenseBelow: 520, CoarseFrom: 830, CoarseRho: 0.95}, 0.4, []float32{dc.Dense, 0.4, 0.95, 0.95}},
		{"a budget above the coarse one", Budget{DenseBelow: 520, CoarseFrom: 830, CoarseRho: 0.5}, 0.8, []float32{dc.Dense, 0.8, 0.8, 0.8}},
		{"ρ 0 is never coarse", Budget{DenseBelow: 520, CoarseFrom: 830, CoarseRho: 0.95}, 0, []float32{dc.Dense, 0, 0, 0}},
		{"coarse without dense steps", Budget{CoarseFrom: 830, CoarseRho: 0.9}, 0.2, []float32{0.2, 0.2, 0.9, 0.9}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.budget.fracs(tt.rho, ts); !slices.Equal(got, tt.want) {
				t.Fatalf("fracs(%g) = %v, want %v", tt.rho, got, tt.want)
			}
		})
	}
}

// Lookback's cells are dc.LookbackKeep's on the teacher's clean estimate
// x̂0 = (x − √(1−ᾱ)·ε̂)/√ᾱ in every sample with a budget — ChangeKeep's,
// whose order the affine map it ranks on keeps, or at a spacing
// CoverKeep's, on x̂0 itself — and the router's at ρ 0; a dense sample
// keeps every cell.
func TestLookbackChoosesOnTheTeachersEstimate(t *testing.T) {
	for _, spacing := range []float64{0, 4} {
		t.Run(fmt.Sprintf("spacing %g", spacing), func(t *testing.T) { testLookbackEstimate(t, spacing) })
	}
}

func testLookbackEstimate(t *testing.T, spacing float64) {
	cfg := &dc.Config{InChannels: 4, OutChannels: 8, GridRows: 8, GridCols: 8, PatchSize: 2}
	o := &DCObjective{Model: &dc.Model{Config: cfg}, Schedule: ddpm.Linear(1000), LookbackSpacing: spacing}
	B, L, k, stride := 3, cfg.Cells(), cfg.CellIn(), cfg.CellOut()
	rng := rand.New(rand.NewPCG(3, 4))
	pred, tokens := make([]float32, B*L*stride), make([]float32, B*L*k)
	for i := range pred {
		pred[i] = float32(rng.NormFloat64())
	}
	// A square on a flat ground in each sample's input, so that the
	// ranking has edges to find.
	for b := range B {
		for l := range L {
			r, c := l/cfg.CellCols(), l%cfg.CellCols()
			v := 0.1 * rng.NormFloat64()
			if r >= 1+b && r < 3+b && c >= 1 && c < 3 {
				v += 2
			}
			for j := range k {
				tokens[(b*L+l)*k+j] = float32(v)
			}
		}
	}
	levels := []int{700, 300, 100}
	fracs := []float32{0, 0.5, dc.Dense}
	choose, err := o.lookback(nil, pred, tokens, levels, fracs, B)
	if err != nil {
		t.Fatal(err)
	}
	// The router's mask: 6 cells per sample, all of them in the dense one.
	kept := make([]bool, B*L)
	for b := range 2 {
		for _, l := range []int{0, 5, 6, 7, 9, L - 1} {
			kept[b*L+l] = true
		}
	}
	for l := range L {
		kept[2*L+l] = true
	}
	got, err := choose(kept, B)
	if err != nil {
		t.Fatal(err)
	}

	s := o.Schedule
	x0 := make([]float32, B*L*k)
	for b, v := range levels {
		a, sig := s.SqrtAlphasCumprod[v], s.SqrtOneMinusAlphasCumprod[v]
		for l := range L {
			for j := range k {
				r := b*L + l
				x0[r*k+j] = float32((float64(tokens[r*k+j]) - sig*float64(pred[r*stride+j])) / a)
			}
		}
	}
	ideal, err := dc.LookbackKeep(dc.FromTokens(x0, B, cfg.InChannels, cfg.GridRows, cfg.GridCols, cfg.Patch()), B, cfg.InChannels, cfg.CellRows(), cfg.CellCols(), cfg.Patch(), spacing)
	if err != nil {
		t.Fatal(err)
	}
	want, err := ideal(kept, B)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got[L:2*L], want[L:2*L]) {
		t.Errorf("the budget's cells %v, want LookbackKeep's on the clean estimate %v", cells(got[L:2*L]), cells(want[L:2*L]))
	}
	if slices.Equal(got[L:2*L], kept[L:2*L]) {
		t.Errorf("the budget kept the router's cells %v", cells(got[L:2*L]))
	}
	if !slices.Equal(got[:L], kept[:L]) {
		t.Errorf("ρ 0 kept %v, want the router's %v", cells(got[:L]), cells(kept[:L]))
	}
	if slices.Contains(got[2*L:], false) {
		t.Errorf("the dense sample dropped cells: kept %v", cells(got[2*L:]))
	}
	if math.IsNaN(float64(x0[0])) {
		t.Fatal("NaN clean estimate")
	}
}

// cells lists the kept indices of a mask.
func cells(mask []bool) []int {
	var c []int
	for i, k := range mask {
		if k {
			c = append(c, i)
		}
	}
	return c
}

// Lookback's share picks budgets only: ρ 0 and dense samples are left
// alone, a share of 1 takes every budget without drawing, and a share
// between takes some budgets and leaves the others to the router.
func TestLookbackShare(t *testing.T) {
	fracs := make([]float32, 400)
	for i := range fracs {
		fracs[i] = []float32{0, 0.4, dc.Dense, 0.8}[i%4]
	}
	for _, share := range []float64{1, 0.5} {
		o := &DCObjective{Lookback: share}
		rng := rand.New(rand.NewPCG(1, 1))
		got := o.lookbackFracs(fracs, len(fracs), rng)
		taken := 0
		for i, f := range got {
			budget := i%4 == 1 || i%4 == 3
			switch {
			case !budget && f != fracs[i]:
				t.Fatalf("share %g: sample %d at %g became %g", share, i, fracs[i], f)
			case budget && f != 0 && f != fracs[i]:
				t.Fatalf("share %g: budget %g became %g, want itself or 0", share, fracs[i], f)
			case budget && f != 0:
				taken++
			}
		}
		budgets := len(fracs) / 2
		if share == 1 && (taken != budgets || rng.Uint64() != rand.New(rand.NewPCG(1, 1)).Uint64()) {
			t.Fatalf("share 1: %d of %d budgets taken, or the stream drawn from", taken, budgets)
		}
		if share != 1 && !(taken > budgets/3 && taken < 2*budgets/3) {
			t.Fatalf("share %g: %d of %d budgets taken", share, taken, budgets)
		}
	}
	if got := (&DCObjective{Lookback: 1}).lookbackFracs([]float32{0.3}, 3, nil); !slices.Equal(got, []float32{0.3, 0.3, 0.3}) {
		t.Fatalf("one fraction for the batch: %v, want one per sample", got)
	}
}

// LookbackTwins appends a twin of every sample lookback takes, copies of
// its rows, and leaves every first sample on the router's cells (lookback
// fraction 0), so that the router keeps learning from each budget; guided
// distillation, which pairs the batch too, is refused.
func TestLookbackTwins(t *testing.T) {
	rows := func(n, width int) []float32 {
		s := make([]float32, n*width)
		for i := range s {
			s[i] = float32(i)
		}
		return s
	}
	tests := []struct {
		name      string
		fracs, lf []float32
		caps      [][]int
		twinOf    []int // the samples the twins copy, in order
		wantFracs []float32
	}{
		{"budgets twinned, ρ 0 and dense not", []float32{0, 0.4, dc.Dense, 0.95}, []float32{0, 0.4, dc.Dense, 0.95}, nil,
			[]int{1, 3}, []float32{0, 0.4, dc.Dense, 0.95, 0.4, 0.95}},
		{"a share left some budgets to the router", []float32{0.4, 0.4, 0.4}, []float32{0, 0.4, 0}, [][]int{{1}, {2, 3}, {4}},
			[]int{1}, []float32{0.4, 0.4, 0.4, 0.4}},
		{"one fraction for the batch", []float32{0.6}, []float32{0.6, 0.6}, nil,
			[]int{0, 1}, []float32{0.6, 0.6, 0.6, 0.6}},
		{"no budget: nothing twinned", []float32{0, 0}, []float32{0, 0}, nil, nil, []float32{0, 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			B, width, out := len(tt.lf), 6, 4
			in := twinBatch{xt: rows(B, width), ts: rows(B, 1), t: []int{900, 800, 700, 600}[:B], y: []int{5, 6, 7, 8}[:B],
				caps: tt.caps, target: rows(B, out), fracs: tt.fracs}
			got, err := (&DCObjective{}).twins(in, tt.lf)
			if err != nil {
				t.Fatal(err)
			}
			n := B + len(tt.twinOf)
			if len(got.y) != n || len(got.t) != n || len(got.ts) != n || len(got.xt) != n*width || len(got.target) != n*out {
				t.Fatalf("%d labels, %d levels, %d times, %d input values, %d target values for %d samples", len(got.y), len(got.t), len(got.ts), len(got.xt), len(got.target), n)
			}
			for j, i := range tt.twinOf {
				tw := B + j
				if got.y[tw] != in.y[i] || got.t[tw] != in.t[i] || got.ts[tw] != in.ts[i] ||
					!slices.Equal(got.xt[tw*width:(tw+1)*width], in.xt[i*width:(i+1)*width]) ||
					!slices.Equal(got.target[tw*out:(tw+1)*out], in.target[i*out:(i+1)*out]) {
					t.Fatalf("twin %d is not a copy of sample %d", tw, i)
				}
				if tt.caps != nil && !slices.Equal(got.caps[tw], tt.caps[i]) {
					t.Fatalf("twin %d's caption %v, want sample %d's %v", tw, got.caps[tw], i, tt.caps[i])
				}
				if got.lf[tw] != tt.lf[i] {
					t.Fatalf("twin %d's lookback fraction %g, want %g", tw, got.lf[tw], tt.lf[i])
				}
			}
			if !slices.Equal(got.lf[:B], make([]float32, B)) {
				t.Fatalf("the first samples' lookback fractions %v, want 0: the router's cells", got.lf[:B])
			}
			if !slices.Equal(got.fracs, tt.wantFracs) {
				t.Fatalf("drop fractions %v, want %v", got.fracs, tt.wantFracs)
			}
			if (tt.caps == nil) != (got.caps == nil) {
				t.Fatalf("captions %v from %v", got.caps, tt.caps)
			}
		})
	}
	in := twinBatch{xt: rows(1, 2), ts: rows(1, 1), t: []int{1}, y: []int{1}, target: rows(1, 2), fracs: []float32{0.5}}
	if _, err := (&DCObjective{GuidedScale: 4}).twins(in, []float32{0.5}); err == nil {
		t.Fatal("twins with guided distillation: no error")
	}
}

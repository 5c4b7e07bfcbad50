package distill_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/dcdit/dcdit/dc"
	_ "github.com/dcdit/dcdit/dc/hnet" // adopts the teachers' blocks
	"github.com/dcdit/dcdit/diffusion/ddpm"
	"github.com/dcdit/dcdit/distill"
	"github.com/dcdit/dcdit/dit"
	"github.com/dcdit/dcdit/family"
	"github.com/dcdit/dcdit/loaders/arch"
	"github.com/dcdit/dcdit/params"
	"github.com/dcdit/dcdit/upcycle"
)

// randomTeacher is a frozen DiT of cfg with small random weights (every
// parameter, adaLN-Zero layers included, so it predicts something), and
// the stream that drew them, for whatever else a test draws after.
func randomTeacher(t *testing.T, cfg *arch.DiTConfig) (*dit.Model, *rand.Rand) {
	t.Helper()
	teacher, err := dit.Init(cfg, 1)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range teacher.Params.Data {
		teacher.Params.Data[i] = float32(0.05 * rng.NormFloat64())
	}
	teacher.Params.SetRequiresGrad(false)
	return teacher, rng
}

func graftPair(t *testing.T) (*dit.Model, *upcycle.Grafted) {
	t.Helper()
	teacher, _ := randomTeacher(t, &arch.DiTConfig{Depth: 1, HiddenSize: 128, NumHeads: 4, PatchSize: 2, InChannels: 4, InputSize: 8,
		LearnSigma: true, NumClasses: 3, MLPRatio: 2, FrequencySize: 64})
	s := upcycle.DefaultScaffold()
	s.EncoderBlocks, s.DecoderBlocks = 1, 1
	g, err := upcycle.NewGrafted(dit.Teacher{Model: teacher}, s, teacher.Config.InputSize, teacher.Config.InputSize, 3)
	if err != nil {
		t.Fatal(err)
	}
	return teacher, g
}

// Each DC objective trains: distillation pulls the student towards the
// teacher, the hybrid loss runs with the ratio loss and multi-budget ρ,
// and a budget with dense steps keeps every cell on some of them.
func TestDCObjectives(t *testing.T) {
	tests := []struct {
		name   string
		loss   distill.DCLoss
		budget distill.Budget
		guided float64
		router float64 // RouterTargetWeight
		// lookback trains the budgets on the teacher's clean estimate's
		// cells (DCObjective.Lookback).
		lookback float64
		twins    bool // LookbackTwins
	}{
		{"l2", distill.DistillL2, distill.Budget{}, 0, 0, 0, false},
		{"l1", distill.DistillL1, distill.Budget{}, 0, 0, 0, false},
		{"hybrid", distill.Hybrid, distill.Budget{Rhos: []float64{0, 0.5}, Warmup: 2}, 0, 0, 0, false},
		{"l1 with dense steps", distill.DistillL1, distill.Budget{Rhos: []float64{0, 0.5}, Warmup: 2, Dense: 0.4}, 0, 0, 0, false},
		// Every timestep of the schedule is below 1000: no sample drops.
		{"l1 dense below every timestep", distill.DistillL1, distill.Budget{Rhos: []float64{0, 0.5}, DenseBelow: 1000}, 0, 0, 0, false},
		{"l1 guided", distill.DistillL1, distill.Budget{Rhos: []float64{0, 0.5}}, 4, 0, 0, false},
		{"l1 with router targets", distill.DistillL1, distill.Budget{Rhos: []float64{0, 0.5}, DenseBelow: 500}, 0, 1, 0, false},
		{"l1 coarse, with lookback", distill.DistillL1, distill.Budget{Rhos: []float64{0, 0.5}, DenseBelow: 300, CoarseFrom: 700, CoarseRho: 0.9}, 0, 0, 1, false},
		{"l1 guided, half with lookback", distill.DistillL1, distill.Budget{Rhos: []float64{0, 0.5}}, 4, 0, 0.5, false},
		{"l1 half with lookback, twinned", distill.DistillL1, distill.Budget{Rhos: []float64{0.5}, DenseBelow: 300}, 0, 0, 0.5, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			teacher, g := graftPair(t)
			obj := &distill.DCObjective{Model: g.Model, Teacher: dit.Teacher{Model: teacher}, NullClass: teacher.Config.NumClasses, Schedule: ddpm.Linear(1000), Loss: tt.loss,
				Budget: tt.budget, RatioWeight: 0.03, GuidedScale: tt.guided, RouterTargetWeight: tt.router, Lookback: tt.lookback, LookbackTwins: tt.twins}
			rng := rand.New(rand.NewPCG(5, 5))
			B := 4
			x0 := make([]float32, B*4*8*8)
			for i := range x0 {
				x0[i] = float32(rng.NormFloat64())
			}
			y := []int{0, 1, 2, 3}
			tr := &distill.Trainer{
				Config: distill.Config{Stage: "distill", Steps: 12, BatchSize: B, LR: 2e-3, Seed: 1, NullClass: 3, Keep: 1},
				Params: g.Params, Objective: obj, Dir: t.TempDir(),
			}
			var err error
			if tr.Data, err = distill.NewDataset(x0, y, 4, 8, 8); err != nil {
				t.Fatal(err)
			}
			var losses, routerCE []float64
			rhos := map[float64]bool{}
			tr.OnStep = func(p distill.Progress) {
				// The distance alone: the router's cross-entropy has its own check.
				losses = append(losses, p.Metrics.Loss-tt.router*p.Metrics.Router)
				routerCE = append(routerCE, p.Metrics.Router)
				rhos[p.Metrics.Rho] = true
				if !(p.Metrics.Kept > 0 && p.Metrics.Kept <= 1) || (tt.loss == distill.Hybrid && !(p.Metrics.Ratio > 0)) {
					t.Errorf("step %d: kept %g, ratio %g", p.Step, p.Metrics.Kept, p.Metrics.Ratio)
				}
				if (p.Metrics.Guided > 0) != (tt.guided > 0) {
					t.Errorf("step %d: guided distance %g with guided scale %g", p.Step, p.Metrics.Guided, tt.guided)
				}
				if (p.Metrics.Router > 0) != (tt.router > 0) || math.IsNaN(p.Metrics.Router) {
					t.Errorf("step %d: router cross-entropy %g with weight %g", p.Step, p.Metrics.Router, tt.router)
				}
				dense := p.Metrics.Rho == float64(dc.Dense) || tt.budget.DenseBelow >= 1000
				if dense && p.Metrics.Kept != 1 {
					t.Errorf("step %d: a dense step kept %g of the cells, want all", p.Step, p.Metrics.Kept)
				}
			}
			if _, err := tr.Run(); err != nil {
				t.Fatal(err)
			}
			for _, l := range losses {
				if math.IsNaN(l) {
					t.Fatal("NaN loss")
				}
			}
			first := (losses[0] + losses[1] + losses[2]) / 3
			last := (losses[len(losses)-1] + losses[len(losses)-2] + losses[len(losses)-3]) / 3
			if tt.loss != distill.Hybrid && !(last < 0.85*first) {
				t.Fatalf("distillation loss %.4g → %.4g over %d steps: not learning", first, last, len(losses))
			}
			learns := tt.router > 0 // the router has a target to learn
			if n := len(routerCE); learns && !(routerCE[n-1]+routerCE[n-2] < routerCE[0]+routerCE[1]) {
				t.Fatalf("router cross-entropy %.4g → %.4g: the router does not learn its targets", routerCE[0], routerCE[n-1])
			}
			if len(tt.budget.Rhos) > 1 && len(rhos) < 2 {
				t.Fatalf("multi-budget drew only %v", rhos)
			}
			if dense := rhos[float64(dc.Dense)]; dense != (tt.budget.Dense > 0) {
				t.Fatalf("dense steps drawn: %v, want %v (budget %+v)", dense, tt.budget.Dense > 0, tt.budget)
			}
		})
	}
}

// DyDiT's penalty trains the width routers: from every gate on (ratio 1)
// the routers turn gates off toward the target, and the objective's
// settings record the target and weight.
func TestWidthPenaltyTurnsGatesOff(t *testing.T) {
	teacher, g := graftPair(t)
	bb, err := g.Model.Backbone.(family.WidthGated).WithWidthGates()
	if err != nil {
		t.Fatal(err)
	}
	g.Model.Backbone = bb
	joint, err := upcycle.JoinParams(g.Model)
	if err != nil {
		t.Fatal(err)
	}
	obj := &distill.DCObjective{Model: g.Model, Teacher: dit.Teacher{Model: teacher}, NullClass: teacher.Config.NumClasses, Schedule: ddpm.Linear(1000),
		Loss: distill.DistillL1, WidthTarget: 0.5, WidthWeight: 1}
	if s := obj.Settings(); s["dydit_lambda"] != "0.5" || s["dydit_weight"] != "1" {
		t.Errorf("settings %v: want dydit_lambda and dydit_weight", s)
	}
	rng := rand.New(rand.NewPCG(6, 6))
	B := 4
	x0 := make([]float32, B*4*8*8)
	for i := range x0 {
		x0[i] = float32(rng.NormFloat64())
	}
	router := func(name string) bool { return params.InGroup(params.GroupWidthRouter, g.Model.ParamGroups(name)) }
	tr := &distill.Trainer{
		Config: distill.Config{Stage: "dydit", Steps: 30, BatchSize: B, LR: 2e-3, Seed: 1, NullClass: 3, Keep: 1,
			Groups: []distill.LRGroup{{Name: params.GroupWidthRouter, Scale: 100, Match: router}}},
		Params: joint, Objective: obj, Dir: t.TempDir(),
	}
	if tr.Data, err = distill.NewDataset(x0, []int{0, 1, 2, 0}, 4, 8, 8); err != nil {
		t.Fatal(err)
	}
	var widths []float64
	tr.OnStep = func(p distill.Progress) { widths = append(widths, p.Metrics.Width) }
	if _, err := tr.Run(); err != nil {
		t.Fatal(err)
	}
	if widths[0] != 1 || !(widths[len(widths)-1] < 1) {
		t.Errorf("FLOPs ratio %v → %v over %d steps: want 1, then lower", widths[0], widths[len(widths)-1], len(widths))
	}
}

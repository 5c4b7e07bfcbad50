package distill_test

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/dcdit/dcdit/diffusion"
	"github.com/dcdit/dcdit/distill"
	"github.com/dcdit/dcdit/internal/zimagetest"
	"github.com/dcdit/dcdit/upcycle"
	"github.com/dcdit/dcdit/zimage/flowmatch"
)

// A DC model grafted onto a Z-Image trains on captioned data with flow
// matching: distillation onto the Z-Image teacher pulls it towards the
// teacher at the drawn budgets, flow matching's own loss finetunes it,
// dense_below reads flow matching's timesteps σ·T, and the options that
// read DDPM's schedule are refused.
func TestDCObjectiveZImage(t *testing.T) {
	table, err := flowmatch.DefaultConfig().TrainingTable()
	if err != nil {
		t.Fatal(err)
	}
	proc := &diffusion.FlowMatch{Table: table}
	tests := []struct {
		name string
		loss distill.DCLoss
		edit func(*distill.DCObjective)
		want string // the refusal, if any
	}{
		{"l1", distill.DistillL1, nil, ""},
		{"flow matching", distill.Hybrid, nil, ""},
		{"weight cap", distill.DistillL1, func(o *distill.DCObjective) { o.WeightCap = 5 }, "timestep_weight_cap reads DDPM's"},
		{"dense below every timestep", distill.DistillL1, func(o *distill.DCObjective) { o.Budget.DenseBelow = 1001 }, ""},
		{"p2", distill.Hybrid, func(o *distill.DCObjective) { o.P2.Gamma = 1 }, "p2_gamma reads DDPM's"},
		{"guided pairs", distill.DistillL1, func(o *distill.DCObjective) { o.GuidedScale = 4 }, "the batch has captions"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			const seed, S, B = 5, 8, 4
			teacher, m := zimagetest.Grafted(t, seed, S)
			zc := teacher.Config
			ps, err := upcycle.JoinParams(m)
			if err != nil {
				t.Fatal(err)
			}
			rng := rand.New(rand.NewPCG(5, 5))
			x0 := make([]float32, 6*zc.InChannels*S*S)
			for i := range x0 {
				x0[i] = float32(rng.NormFloat64())
			}
			data, err := distill.NewDataset(x0, []int{0, 1, 2, 0, 1, 2}, zc.InChannels, S, S)
			if err != nil {
				t.Fatal(err)
			}
			if err := data.WithCaptions([][]int{{0}, {1, 2}, {3}, {0, 1, 2, 3}, {2}, {1}}, 4); err != nil {
				t.Fatal(err)
			}
			captions := make([]float32, 4*zc.CapFeatDim)
			for i := range captions {
				captions[i] = float32(rng.NormFloat64())
			}
			obj := &distill.DCObjective{Model: m, Teacher: distill.ZImageTeacher{Model: teacher}, Process: proc,
				CaptionTable: captions, CaptionDim: zc.CapFeatDim, Loss: tt.loss,
				Budget: distill.Budget{Rhos: []float64{0, 0.5}, Warmup: 2}, RatioWeight: 0.03}
			if tt.edit != nil {
				tt.edit(obj)
			}
			tr := &distill.Trainer{
				Config: distill.Config{Stage: "distill", Steps: 20, BatchSize: B, LR: 3e-3, Seed: 1, LabelDropout: 0.25, Keep: 1},
				Params: ps, Objective: obj, Data: data, Dir: t.TempDir(),
			}
			var losses []float64
			rhos := map[float64]bool{}
			tr.OnStep = func(p distill.Progress) {
				losses = append(losses, p.Metrics.Loss)
				rhos[p.Metrics.Rho] = true
				// σ·T < 1001 always: every sample keeps every cell.
				if obj.Budget.DenseBelow > 1000 && p.Metrics.Kept != 1 {
					t.Errorf("step %d: kept %g of the cells below every timestep, want all", p.Step, p.Metrics.Kept)
				}
			}
			_, err = tr.Run()
			if tt.want != "" {
				if err == nil || !strings.Contains(err.Error(), tt.want) {
					t.Fatalf("err = %v, want one saying %q", err, tt.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, l := range losses {
				if !(l > 0) || math.IsInf(l, 0) {
					t.Fatalf("losses %v: want positive and finite", losses)
				}
			}
			first := (losses[0] + losses[1] + losses[2]) / 3
			last := (losses[len(losses)-1] + losses[len(losses)-2] + losses[len(losses)-3]) / 3
			if tt.loss != distill.Hybrid && !(last < 0.85*first) {
				t.Fatalf("distillation loss %.4g → %.4g over %d steps: not learning", first, last, len(losses))
			}
			if len(rhos) < 2 {
				t.Fatalf("multi-budget drew only %v", rhos)
			}
		})
	}
}

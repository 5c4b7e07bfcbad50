package distill_test

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/dcdit/dcdit/cond"
	"github.com/dcdit/dcdit/diffusion"
	"github.com/dcdit/dcdit/diffusion/flowmatch"
	"github.com/dcdit/dcdit/distill"
	"github.com/dcdit/dcdit/internal/zimagetest"
	"github.com/dcdit/dcdit/upcycle"
	"github.com/dcdit/dcdit/zimage"
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
		{"guided pairs", distill.DistillL1, func(o *distill.DCObjective) { o.GuidedScale = 4 }, ""},
		{"router targets", distill.DistillL1, func(o *distill.DCObjective) { o.RouterTargetWeight = 0.1 }, ""},
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
			obj := &distill.DCObjective{Model: m, Teacher: zimage.Teacher{Model: teacher}, Process: proc,
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
				dense := obj.Budget.DenseBelow > 1000
				if dense && p.Metrics.Kept != 1 {
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

// recordingTeacher remembers the conditioning it was last asked to predict
// under.
type recordingTeacher struct {
	distill.Teacher
	in cond.Input
}

func (r *recordingTeacher) Predict(xt []float32, in cond.Input, h, w int) ([]float32, error) {
	r.in = in
	return r.Teacher.Predict(xt, in, h, w)
}

// TestGuidedPairsEmptyPrompt: guided distillation on a captioned batch
// pairs each caption with the empty prompt (one zero row) at the same
// noisy input and time, and a graft that keeps every cell is its teacher
// there, so the guided distance (Z-Image's c + s·(c − u)) is zero; with
// the router dropping cells it is not.
func TestGuidedPairsEmptyPrompt(t *testing.T) {
	const seed, S, B = 3, 8, 4
	teacher, m := zimagetest.Grafted(t, seed, S)
	zc := teacher.Config
	table, err := flowmatch.DefaultConfig().TrainingTable()
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	x0 := make([]float32, B*zc.InChannels*S*S)
	for i := range x0 {
		x0[i] = float32(rng.NormFloat64())
	}
	captions := make([]float32, 4*zc.CapFeatDim)
	for i := range captions {
		captions[i] = float32(rng.NormFloat64())
	}
	batch := &distill.Batch{X0: x0, C: zc.InChannels, H: S, W: S, Labels: []int{0, 1, 2, 0}, Captions: [][]int{{0, 1}, {2}, {3, 1, 2}, {1}}}
	for _, keepAll := range []bool{true, false} {
		rho := 0.5
		if keepAll {
			zimagetest.KeepAll(m)
			rho = 0
		} else {
			_, m = zimagetest.Grafted(t, seed, S)
		}
		rec := &recordingTeacher{Teacher: zimage.Teacher{Model: teacher}}
		obj := &distill.DCObjective{Model: m, Teacher: rec, Process: &diffusion.FlowMatch{Table: table},
			CaptionTable: captions, CaptionDim: zc.CapFeatDim, Loss: distill.DistillL1,
			Budget: distill.Budget{Rhos: []float64{rho}, DenseBelow: 500}, GuidedScale: 4}
		met, err := obj.Step(100, batch, rand.New(rand.NewPCG(3, 4)))
		if err != nil {
			t.Fatal(err)
		}
		in := rec.in
		if len(in.Captions) != B || len(in.T) != B {
			t.Fatalf("teacher saw %d captions at %d times, want %d: the first half of the batch and its twins", len(in.Captions), len(in.T), B)
		}
		for i := range B / 2 {
			if got := in.Captions[i].Len; got != len(batch.Captions[i]) {
				t.Errorf("sample %d: caption of %d tokens, want %d", i, got, len(batch.Captions[i]))
			}
			twin := in.Captions[B/2+i]
			if twin.Len != 1 || slices.ContainsFunc(twin.Features[:zc.CapFeatDim], func(v float32) bool { return v != 0 }) {
				t.Errorf("twin %d: caption of %d tokens %v, want the empty prompt (one zero row)", i, twin.Len, twin.Features[:4])
			}
			if in.T[i] != in.T[B/2+i] {
				t.Errorf("pair %d at times %g and %g, want one", i, in.T[i], in.T[B/2+i])
			}
		}
		if keepAll && !(met.Guided < 1e-5) {
			t.Errorf("a graft keeping every cell: guided distance %g, want 0", met.Guided)
		}
		if !keepAll && !(met.Guided > 1e-3) {
			t.Errorf("a graft dropping cells: guided distance %g, want > 0", met.Guided)
		}
	}
}

package bench

import (
	"math"
	"slices"
	"testing"

	"github.com/dcdit/dcdit/dc"
)

// tinyDC is a DC-DiT small enough for a test (the smallest width whose
// enc/dec width D/4 suits 32 GroupNorm groups), run like the DC-DiT-S
// cases.
func tinyDC() dcSpec {
	return dcSpec{preset: dc.Preset{Name: "tiny", Depth: 1, Width: 128, Heads: 2}, side: 8, batch: 2}
}

// The router keeps about dcKeep of the tokens; the cases' FLOPs are the
// forward's with the tokens actually kept, fall with ρ, triple for a
// training step; a training step moves the parameters.
func TestDCCases(t *testing.T) {
	s := tinyDC()
	d := newDCModel(s)
	res := d.forward(nil)
	natural := 0
	for _, n := range res.Routing.NumNatural {
		natural += n
	}
	L := d.m.Config.Tokens()
	if r := float64(natural) / float64(s.batch*L); !(math.Abs(r-dcKeep) <= 0.05) {
		t.Errorf("router keeps %.3f of the tokens, want about %v", r, dcKeep)
	}
	prev := math.Inf(1)
	for _, r := range dcRhos {
		fw := dcCase(s, r.rho, false)()
		kept := d.forward([]float32{r.rho}).Chunks.NumKept
		if want := d.m.ForwardFLOPs(kept).Total(); fw.flops != want {
			t.Errorf("ρ %v: forward case counts %v FLOPs, the forward with kept %v runs %v", r.rho, fw.flops, kept, want)
		}
		if !(fw.flops < prev) {
			t.Errorf("ρ %v: %v FLOPs, not below %v", r.rho, fw.flops, prev)
		}
		prev = fw.flops
		fw.run()

		tr := dcCase(s, r.rho, true)()
		if tr.flops != 3*fw.flops {
			t.Errorf("ρ %v: train step counts %v FLOPs, want 3 × %v", r.rho, tr.flops, fw.flops)
		}
	}
	// One training step changes the weights (lr 1e-4 moves every trained
	// value with a gradient).
	w, dm := dcWorkload(s, 0.3, true)
	before := slices.Clone(dm.params.Data)
	w.run()
	if slices.Equal(before, dm.params.Data) {
		t.Error("a training step left the parameters unchanged")
	}
	// reset restores them, so every timed run routes (and works) alike.
	w.reset()
	if !slices.Equal(before, dm.params.Data) {
		t.Error("reset did not restore the weights")
	}
}

// measure resets a workload before the warm-up and before each timed run.
func TestMeasureResets(t *testing.T) {
	resets, runs := 0, 0
	c := benchCase{name: "x", setup: func() workload {
		return workload{run: func() {
			if resets != runs+1 {
				t.Errorf("run %d after %d resets", runs+1, resets)
			}
			runs++
		}, reset: func() { resets++ }}
	}}
	measure(c, 4)
	if resets != 5 || runs != 5 {
		t.Errorf("%d resets, %d runs; want 5 of each", resets, runs)
	}
}

// The suite's DC-DiT-S cases are shared/bench/README.md's, each timed at max(2, base/2)
// repetitions like the other whole-model cases.
func TestDCCaseNames(t *testing.T) {
	var names []string
	for _, c := range dcCases() {
		names = append(names, c.name)
		if c.reps == nil || c.reps(7) != 3 {
			t.Errorf("%s: not timed like the other whole-model cases", c.name)
		}
	}
	want := []string{"dcdit_s_forward_rho0", "dcdit_s_forward_rho0.3", "dcdit_s_forward_rho0.6",
		"dcdit_s_train_step_rho0", "dcdit_s_train_step_rho0.3", "dcdit_s_train_step_rho0.6"}
	if !slices.Equal(names, want) {
		t.Errorf("cases %v, want %v", names, want)
	}
}

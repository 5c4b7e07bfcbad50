package bench

import (
	"math"
	"testing"

	"github.com/dcdit/dcdit/adaln"
	"github.com/dcdit/dcdit/family"
	"github.com/dcdit/dcdit/internal/fixtures"
	"github.com/dcdit/dcdit/params"
)

// The DiT-S/2 cases run the dit family's preset on the reference's
// latents: their FLOPs are its BaseFLOPs for the batch, three times that
// for a training step. The block case runs on the arena it builds.
func TestDiTCases(t *testing.T) {
	p := ditS2()
	costed, ok := p.Family.(family.BaseCosted)
	if !ok || p.Base == nil {
		t.Fatal("DiT-S/2 is not a fixed-patch preset of a BaseCosted family")
	}
	cost, err := costed.BaseFLOPs(p.Base.Config, 32, 32, 0)
	if err != nil {
		t.Fatal(err)
	}
	fw := forwardCase()
	if want := modelBatch * cost.Forward; fw.flops != want {
		t.Errorf("forward case counts %v FLOPs, the family %v", fw.flops, want)
	}
	if tr := trainStepCase(); tr.flops != 3*fw.flops {
		t.Errorf("train step counts %v FLOPs, want 3 × %v", tr.flops, fw.flops)
	}
	blockCase(true)().run()
}

// A block case's tensors start as DiT starts a block: the adaLN
// modulation and the biases at zero, the other weights drawn within the
// Xavier bound.
func TestBlockParams(t *testing.T) {
	set := blockParams()
	if want := len(adaln.BlockShapes(blockWidth, blockHidden)); len(set.List()) != want {
		t.Fatalf("%d tensors, want the block's %d", len(set.List()), want)
	}
	for _, p := range set.List() {
		rows, cols := p.Shape()[0], p.Shape()[1]
		zero := cols == 1 || params.InGroup(params.GroupAdaLN, adaln.BlockParamGroups(p.Name, blockStack))
		bound := math.Sqrt(6 / float64(rows+cols))
		var maxAbs float64
		for _, v := range p.Values() {
			maxAbs = max(maxAbs, math.Abs(float64(v)))
		}
		switch {
		case zero && maxAbs != 0:
			t.Errorf("%s: max |w| = %g, want zero", p.Name, maxAbs)
		case !zero && (maxAbs == 0 || !fixtures.Within(maxAbs, bound)):
			t.Errorf("%s: max |w| = %g, want a draw within the Xavier bound %g", p.Name, maxAbs, bound)
		}
	}
}

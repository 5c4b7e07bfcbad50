package hnet

import (
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/nlpodyssey/spago/mat"

	"github.com/dcdit/dcdit/adaln"
	"github.com/dcdit/dcdit/cond"
	"github.com/dcdit/dcdit/dc"
	"github.com/dcdit/dcdit/dc/checkpoint"
	"github.com/dcdit/dcdit/internal/fixtures"
	"github.com/dcdit/dcdit/ops"
)

// gated gives the fixture model's main network its width routers, every
// gate on.
func gated(t *testing.T, m *dc.Model) *Network {
	t.Helper()
	bb, err := m.Backbone.(*Network).WithWidthGates()
	if err != nil {
		t.Fatal(err)
	}
	m.Backbone = bb
	return bb.(*Network)
}

// setRouterBias sets every block's head and channel router biases to v.
func setRouterBias(n *Network, v float32) {
	for i := range n.Config.Depth {
		for _, name := range []string{"head_router.bias", "channel_router.bias"} {
			b := n.Params.Get(layerPrefix(i) + adaln.RouterPrefix + name).Values()
			for j := range b {
				b[j] = v
			}
		}
	}
}

// randomInput is a batch of latents at two timesteps.
func randomInput(m *dc.Model) ([]float32, cond.Input) {
	cfg := m.Config
	rng := rand.New(rand.NewPCG(4, 4))
	x := make([]float32, 2*cfg.InChannels*cfg.Tokens())
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	return x, cond.Input{T: []float32{900, 100}, Labels: []int{1, 3}}
}

// A network given width routers starts as it was, bit for bit, in
// training (masked gates) and in inference (skipping), and saves and
// loads with them.
func TestWidthGatesStartAsTheModel(t *testing.T) {
	fixtures.Run(t, "dcdit-tiny", func(t *testing.T, c fixtures.Case) {
		m := loadFixture(t, c)
		x, in := randomInput(m)
		frac := []float32{0.3}
		predict := func() []float32 {
			out, _, err := m.Predict(x, in, frac)
			if err != nil {
				t.Fatal(err)
			}
			return out
		}
		train, infer := predict(), []float32(nil)
		m.Backbone.Parameters().SetRequiresGrad(false)
		m.Params.SetRequiresGrad(false)
		infer = predict()

		n := gated(t, m)
		if !n.WidthGates() || !(Spec{Config: n.Config}).WidthGates() {
			t.Fatal("WithWidthGates gave a network without gates")
		}
		n.Params.SetRequiresGrad(true)
		m.Params.SetRequiresGrad(true)
		if got := predict(); !slices.Equal(got, train) {
			t.Error("with gradients: the gated model differs from the model")
		}
		n.Params.SetRequiresGrad(false)
		m.Params.SetRequiresGrad(false)
		if got := predict(); !slices.Equal(got, infer) {
			t.Error("inference: the gated model differs from the model")
		}

		path := filepath.Join(t.TempDir(), "gated.safetensors")
		if err := checkpoint.Save(path, m, checkpoint.Info{}); err != nil {
			t.Fatal(err)
		}
		back, meta, err := checkpoint.Load(path)
		if err != nil {
			t.Fatal(err)
		}
		if !meta.Backbone.Spec.(Spec).Config.WidthGates {
			t.Error("the file does not record the width gates")
		}
		if _, ok := back.Backbone.Parameters().Lookup(layerPrefix(0) + adaln.RouterPrefix + "head_router.weight"); !ok {
			t.Error("the file has no router tensors")
		}
		back.Params.SetRequiresGrad(false)
		back.Backbone.Parameters().SetRequiresGrad(false)
		if got, _, err := back.Predict(x, in, frac); err != nil || !slices.Equal(got, infer) {
			t.Errorf("the loaded gated model differs from the model (%v)", err)
		}
	})
}

// With gates off the forward costs what adaln.GatedFLOPs counts for the
// heads and groups left on (head 0 and group 0 only), at every timestep.
func TestWidthGatesFLOPsAsRun(t *testing.T) {
	fixtures.Run(t, "dcdit-tiny", func(t *testing.T, c fixtures.Case) {
		m := loadFixture(t, c)
		n := gated(t, m)
		setRouterBias(n, -5)
		m.Params.SetRequiresGrad(false)
		n.Params.SetRequiresGrad(false)
		x, in := randomInput(m)
		_, res, err := m.Predict(x, in, []float32{0.5})
		if err != nil {
			t.Fatal(err)
		}
		got, err := m.ResultFLOPs(res)
		if err != nil {
			t.Fatal(err)
		}
		kept := res.Chunks.NumKept
		ones := make([][]int, n.Config.Depth)
		for i := range ones {
			ones[i] = []int{1, 1}
		}
		want, err := adaln.GatedFLOPs(n.sizes(), kept, ones, ones)
		if err != nil {
			t.Fatal(err)
		}
		if got.Backbone != want {
			t.Errorf("backbone FLOPs as run %g, want %g (one head, one group)", got.Backbone, want)
		}
		if full := m.ForwardFLOPs(kept); !(got.Total() < full.Total()) || got.Encoder != full.Encoder {
			t.Errorf("gated forward %g FLOPs, all gates on %g", got.Total(), full.Total())
		}
		for _, l := range kept {
			timed := n.TimedFLOPs(500, []int{l})
			if w, _ := adaln.GatedFLOPs(n.sizes(), []int{l}, column(ones), column(ones)); timed != w {
				t.Errorf("TimedFLOPs over %d tokens %g, want %g", l, timed, w)
			}
		}
	})
}

// column is each block's first sample's counts.
func column(on [][]int) [][]int {
	out := make([][]int, len(on))
	for i, v := range on {
		out[i] = v[:1]
	}
	return out
}

// The FLOPs ratio's gradient reaches every router but head 0's and group
// 0's rows, whose gates are constants.
func TestWidthRatioGradient(t *testing.T) {
	fixtures.Run(t, "dcdit-tiny", func(t *testing.T, c fixtures.Case) {
		m := loadFixture(t, c)
		n := gated(t, m)
		_, in := randomInput(m)
		cv, err := n.Condition(in)
		if err != nil {
			t.Fatal(err)
		}
		r, err := n.WidthRatio(cv, []int{7, 12})
		if err != nil {
			t.Fatal(err)
		}
		if v := mat.Data[float32](r.Value())[0]; v != 1 {
			t.Errorf("ratio with every gate on %g, want 1", v)
		}
		if err := ops.Backward(r); err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{"head_router.bias", "channel_router.bias"} {
			g := n.Params.Get(layerPrefix(0) + adaln.RouterPrefix + name).Gradient()
			if g[0] != 0 {
				t.Errorf("%s: gradient %g at the always-on row 0", name, g[0])
			}
			for j, v := range g[1:] {
				if !(v > 0) || math.IsInf(float64(v), 0) {
					t.Errorf("%s: gradient %g at row %d, want a positive one (turning a gate off lowers the ratio)", name, v, j+1)
				}
			}
		}
	})
}

// What a gated network refuses, each saying why: another conditioning,
// the step cache, the GPU.
func TestWidthGatesRefusals(t *testing.T) {
	fixtures.Run(t, "dcdit-tiny", func(t *testing.T, c fixtures.Case) {
		m := loadFixture(t, c)
		if err := m.Backbone.(*Network).HostOnly(); err != nil {
			t.Errorf("an ungated network refuses the device: %v", err)
		}
		n := gated(t, m)
		D := n.Config.Width
		x := mat.NewDense[float32](mat.WithShape(2, D))
		plain := cond.Plain{V: mat.NewDense[float32](mat.WithShape(1, D))}
		if _, err := n.Forward(x, plain, []int{0, 2}, []float64{0, 0, 0, 1}); err == nil || !strings.Contains(err.Error(), "width-gated") {
			t.Errorf("forward under a plain conditioning: %v", err)
		}
		if _, err := n.ForwardStages(x, plain, []int{0, 2}, []float64{0, 0, 0, 1}); err == nil || !strings.Contains(err.Error(), "step cache") {
			t.Errorf("step cache: %v", err)
		}
		if err := n.HostOnly(); err == nil || !strings.Contains(err.Error(), "dydit.head_router.weight") {
			t.Errorf("device: %v, want the router tensor named", err)
		}
	})
}

package distill

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/dcdit/dcdit/diffusion"
	"github.com/dcdit/dcdit/diffusion/flowmatch"
	"github.com/dcdit/dcdit/internal/testckpt"
	"github.com/dcdit/dcdit/zimage"
)

// flowMatch is Z-Image's training process.
func flowMatch(t *testing.T) *diffusion.FlowMatch {
	t.Helper()
	table, err := flowmatch.DefaultConfig().TrainingTable()
	if err != nil {
		t.Fatal(err)
	}
	return &diffusion.FlowMatch{Table: table}
}

// The objective's gradient is the derivative of its loss: central
// differences of the loss in single parameter elements against the
// back-propagated gradient. The final layer's bias reaches every output
// patch component, so a wrong order of the gradient's patches shows
// there; a main-layer weight checks the path through the stream.
func TestZImageDiffusionGradient(t *testing.T) {
	m := testckpt.RandomZImage(t, 3)
	c := m.Config
	rng := rand.New(rand.NewPCG(1, 2))
	const B, H, W = 3, 4, 6
	b := &Batch{X0: make([]float32, B*c.InChannels*H*W), C: c.InChannels, H: H, W: W, Labels: make([]int, B),
		Captions: [][]int{{0, 3, 1}, {}, {2}}}
	for i := range b.X0 {
		b.X0[i] = float32(rng.NormFloat64())
	}
	table := make([]float32, 4*c.CapFeatDim)
	for i := range table {
		table[i] = float32(rng.NormFloat64())
	}
	o := &Diffusion{Model: zimage.Teacher{Model: m}, Process: flowMatch(t), Table: table}
	loss := func() float64 {
		met, err := o.Step(0, b, rand.New(rand.NewPCG(7, 8)))
		if err != nil {
			t.Fatal(err)
		}
		if math.IsNaN(met.Loss) {
			t.Fatal("NaN loss")
		}
		return met.Loss
	}
	m.Params.ZeroGrad()
	loss()
	grads := slices.Clone(m.Params.Grad)
	probes := []struct {
		name string
		at   []int
	}{
		{"final_layer.linear.bias", []int{0, 3, 7, 15}},
		{"layers.1.feed_forward.w2.weight", []int{0, 100}},
	}
	for _, p := range probes {
		lo, _, ok := m.Params.Range(p.name)
		if !ok {
			t.Fatalf("no parameter %s", p.name)
		}
		v := m.Params.Get(p.name).Values()
		for _, k := range p.at {
			const h = 1e-2
			orig := v[k]
			v[k] = orig + h
			up := loss()
			v[k] = orig - h
			down := loss()
			v[k] = orig
			fd, g := (up-down)/(2*h), float64(grads[lo+k])
			if !(math.Abs(fd-g) <= 2e-2*math.Abs(fd)+1e-4) {
				t.Errorf("%s[%d]: back-propagated %.6g, central difference %.6g", p.name, k, g, fd)
			}
		}
	}
}

// A stage of a Z-Image on captioned data through the trainer: the loss
// stays finite with half the captions dropped, and the objective refuses
// data without captions.
func TestZImageDiffusionTrains(t *testing.T) {
	m := testckpt.RandomZImage(t, 4)
	c := m.Config
	data := randomData(t, 6, c.InChannels, 4)
	if err := data.WithCaptions([][]int{{0}, {1, 2}, {3}, {0, 1, 2, 3}, {2}, {1}}, 4); err != nil {
		t.Fatal(err)
	}
	table := make([]float32, 4*c.CapFeatDim)
	for i := range table {
		table[i] = float32(i%7) / 7
	}
	tr := &Trainer{
		Config:    Config{Stage: "flow", Steps: 3, BatchSize: 4, LR: 1e-3, LabelDropout: 0.5, NullClass: 0},
		Params:    m.Params,
		Objective: &Diffusion{Model: zimage.Teacher{Model: m}, Process: flowMatch(t), Table: table},
		Data:      data,
		Dir:       t.TempDir(),
	}
	res, err := tr.Run()
	if err != nil {
		t.Fatal(err)
	}
	if !finite(res.Last.Loss) || !(res.Last.Loss > 0) {
		t.Errorf("last loss %v, want positive and finite", res.Last.Loss)
	}
	plain := randomData(t, 6, c.InChannels, 4)
	b := &Batch{X0: make([]float32, 2*c.InChannels*16), C: c.InChannels, H: 4, W: 4, Labels: make([]int, 2)}
	plain.Batch(b, 1, 0)
	if _, err := tr.Objective.Step(0, b, rand.New(rand.NewPCG(1, 1))); err == nil || !strings.Contains(err.Error(), "data set has none") {
		t.Errorf("a batch without captions: %v, want a refusal", err)
	}
}

package dit

import (
	"fmt"
	"strings"

	"github.com/nlpodyssey/spago/mat"

	"github.com/dcdit/dcdit/cond"
	"github.com/dcdit/dcdit/family"
	"github.com/dcdit/dcdit/ops"
	"github.com/dcdit/dcdit/params"
)

// Teacher is a class-conditional DiT as a family.Teacher: model times are
// DDPM timesteps, labels condition (NumClasses is the null class), and
// guidance is DiT's forward_with_cfg: u + s·(c − u) on the first three
// channels.
type Teacher struct{ Model *Model }

var _ family.Teacher = Teacher{}

// Predict runs the model on NCHW latents at the inputs' timesteps and
// labels.
func (t Teacher) Predict(xt []float32, in cond.Input, h, w int) ([]float32, error) {
	c := t.Model.Config
	if err := in.CheckLabels(c.NumClasses); err != nil {
		return nil, fmt.Errorf("dit: teacher: %w", err)
	}
	if h != c.InputSize || w != c.InputSize {
		return nil, fmt.Errorf("dit: the teacher takes %d×%d latents, got %d×%d", c.InputSize, c.InputSize, h, w)
	}
	return t.Model.Predict(xt, in.T, in.Labels)
}

// InChannels is the config's.
func (t Teacher) InChannels() int { return t.Model.Config.InChannels }

// OutChannels is 2C with a learned σ, else C.
func (t Teacher) OutChannels() int { return t.Model.Config.OutChannels() }

// Grid is the fixed input size.
func (t Teacher) Grid() (int, int) { return t.Model.Config.InputSize, t.Model.Config.InputSize }

// Conditioning is class labels.
func (t Teacher) Conditioning() family.Conditioning {
	return family.Conditioning{Classes: t.Model.Config.NumClasses}
}

// Process is DDPM.
func (t Teacher) Process() string { return family.ProcessDDPM }

// Guidance guides the first three channels by s.
func (t Teacher) Guidance(s float64) (int, float64) {
	return min(3, t.Model.Config.OutChannels()), s
}

// Guide writes u + s·(c − u) into the first three channels of both.
func (t Teacher) Guide(c, u []float32, hw int, s float32) {
	guided := min(3, t.Model.Config.OutChannels()) * hw
	for i := range guided {
		v := u[i] + s*(c[i]-u[i])
		c[i], u[i] = v, v
	}
}

// Tokens is the patch grid's size.
func (t Teacher) Tokens(rows, cols int) int {
	p := t.Model.Config.PatchSize
	return (rows / p) * (cols / p)
}

// ForwardFLOPs counts one forward over the patch grid.
func (t Teacher) ForwardFLOPs(rows, cols int) float64 {
	return ForwardFLOPs(t.Model.Config, t.Tokens(rows, cols)).Total()
}

// Parameters are the model's.
func (t Teacher) Parameters() *params.Set { return t.Model.Params }

// Describe is the config as run folders have always recorded it.
func (t Teacher) Describe() string { return fmt.Sprintf("%+v", *t.Model.Config) }

var _ family.Trainee = Teacher{}

// TrainStep runs the model with a graph and back-propagates loss's
// gradient (family.Trainee): DiT trained on its own objective.
func (t Teacher) TrainStep(xt []float32, in cond.Input, h, w int, loss func(out, grad []float32) error) error {
	c := t.Model.Config
	if err := in.CheckLabels(c.NumClasses); err != nil {
		return fmt.Errorf("dit: %w", err)
	}
	if h != c.InputSize || w != c.InputSize {
		return fmt.Errorf("dit: the model takes %d×%d latents, got %d×%d", c.InputSize, c.InputSize, h, w)
	}
	out := t.Model.ForwardLatents(xt, in.T, in.Labels)
	B := len(in.T)
	img := make([]float32, B*c.OutChannels()*h*w)
	Unpatchify(img, mat.Data[float32](out.Value()), B, c.OutChannels(), c.InputSize, c.PatchSize, false)
	grad := make([]float32, len(img))
	err := loss(img, grad)
	if err == nil {
		err = t.Model.Backward(out, grad)
	}
	// The graph is done with: its buffers serve the next step.
	ops.Release(out)
	return err
}

var _ family.Graftable = Teacher{}

// GraftBackbone returns a copy of the model as a DC backbone (kind "dit")
// under arch.DCBackbonePrefix. Its positions are sin-cos values computed
// at each token's place, so any grid its patch size divides will do.
func (t Teacher) GraftBackbone(rows, cols int) (family.Backbone, error) {
	// The stored names and shapes of a "dit" DC backbone; Build makes
	// the copy (pos_embed recomputed, as a DC checkpoint does).
	spec, err := Family{}.GraftSpec(t.Model.Config, rows, cols, 0)
	if err != nil {
		return nil, err
	}
	ts, err := family.CopyTensors(spec.Shapes(), t.Model.Params, t.Model.names)
	if err != nil {
		return nil, fmt.Errorf("dit: graft: %w", err)
	}
	return spec.Build(ts)
}

// PatchEmbedding is x_embedder.proj, a convolution: weights [D, C, p, p].
func (t Teacher) PatchEmbedding() (family.PatchEmbedding, bool) {
	p := t.Model.Config.PatchSize
	w, okW := t.Model.Params.Lookup(t.Model.names + "x_embedder.proj.weight")
	b, okB := t.Model.Params.Lookup(t.Model.names + "x_embedder.proj.bias")
	if !okW || !okB {
		return family.PatchEmbedding{}, false
	}
	return family.PatchEmbedding{Patch: p, Weight: w.Values(), Bias: b.Values(),
		Index: func(c, dy, dx int) int { return (c*p+dy)*p + dx }}, true
}

// FinalLayer is DiT's final layer: shift and scale modulation, a Linear
// to p·p·OutChannels values.
func (t Teacher) FinalLayer() (family.FinalLayer, bool) {
	c := t.Model.Config
	return family.FinalLayer{Patch: c.PatchSize, Out: c.OutChannels(), Width: c.HiddenSize, Tensor: func(name string) ([]float32, bool) {
		p, ok := t.Model.Params.Lookup(t.Model.names + "final_layer." + name)
		if !ok {
			return nil, false
		}
		return p.Values(), true
	}}, true
}

var _ family.Configured = Teacher{}

// Config is the *arch.DiTConfig, by which DC-DiT's main network adopts
// the teacher's blocks (family.Adopter).
func (t Teacher) Config() any { return t.Model.Config }

// Summary names the config and the latent grid, as run fingerprints have
// always recorded a DiT base.
func (t Teacher) Summary() string {
	c := t.Model.Config
	return fmt.Sprintf("DiT depth %d, width %d, %d heads, patch %d, %d×%d×%d latents, %d classes",
		c.Depth, c.HiddenSize, c.NumHeads, c.PatchSize, c.InChannels, c.InputSize, c.InputSize, c.NumClasses)
}

var _ family.Finetunable = Teacher{}

// TrainableCopy returns a copy of the model in an arena of its own, whose
// gradients are on: a fixed-patch finetune trains it while the teacher
// stays frozen.
func (t Teacher) TrainableCopy() (family.Model, error) {
	m := t.Model
	w := &Weights{Config: m.Config, Params: map[string]*Param{"pos_embed": {Data: m.posEmbed}}}
	for _, p := range m.Params.List() {
		w.Params[strings.TrimPrefix(p.Name, m.names)] = &Param{Data: p.Values()}
	}
	c, err := New(w)
	if err != nil {
		return nil, err
	}
	return trainee{Teacher{Model: c}}, nil
}

package dit

import (
	"fmt"

	"github.com/nlpodyssey/spago/mat"

	"github.com/dcdit/dcdit/diffusion/ddpm"
	"github.com/dcdit/dcdit/ops"
)

// Backward back-propagates an upstream gradient of the model output through
// the graph that produced out (a ForwardLatents result), accumulating parameter
// gradients into m.Params.Grad. gradImg is ∂L/∂output in image layout
// [B, C_out, H, W], as ddpm computes it.
func (m *Model) Backward(out mat.Tensor, gradImg []float32) error {
	c := m.Config
	rows := out.Shape()[0]
	B := rows / c.NumTokens()
	if want := B * c.OutChannels() * c.InputSize * c.InputSize; len(gradImg) != want {
		return fmt.Errorf("dit: backward: gradient has %d values, want %d ([%d %d %d %d])", len(gradImg), want, B, c.OutChannels(), c.InputSize, c.InputSize)
	}
	g := make([]float32, len(gradImg))
	Unpatchify(g, gradImg, B, c.OutChannels(), c.InputSize, c.PatchSize, true)
	return ops.BackwardFrom(out, g)
}

// DiffusionLoss runs one training forward and backward pass of DiT's
// objective: x_t = q_sample(x0, t, noise), the model's prediction at
// (x_t, t, y), the hybrid loss (ε-MSE plus the variational bound with the
// mean detached), and its gradient for the batch mean, accumulated into
// m.Params.Grad. mseWeight, if not nil, weighs each sample's ε term
// (ddpm.WeightedTrainingLosses). It returns the per-sample losses.
func (m *Model) DiffusionLoss(s *ddpm.Schedule, x0, noise []float32, t, y []int, mseWeight []float32) (*ddpm.Losses, error) {
	c := m.Config
	B := len(t)
	sh := ddpm.Shape{B: B, C: c.InChannels, HW: c.InputSize * c.InputSize}
	if len(y) != B {
		return nil, fmt.Errorf("dit: %d labels for %d timesteps", len(y), B)
	}
	xt := make([]float32, len(x0))
	if err := s.QSample(xt, x0, noise, t, sh); err != nil {
		return nil, err
	}
	ts := make([]float32, B)
	for i, v := range t {
		ts[i] = float32(v)
	}
	out := m.ForwardLatents(xt, ts, y)
	img := make([]float32, B*c.OutChannels()*c.InputSize*c.InputSize)
	Unpatchify(img, mat.Data[float32](out.Value()), B, c.OutChannels(), c.InputSize, c.PatchSize, false)
	grad := make([]float32, len(img))
	losses, err := s.WeightedTrainingLosses(grad, img, x0, noise, t, sh, 1/float32(B), mseWeight)
	if err != nil {
		return nil, err
	}
	err = m.Backward(out, grad)
	// The graph is done with: its buffers serve the next step.
	ops.Release(out)
	if err != nil {
		return nil, err
	}
	return losses, nil
}

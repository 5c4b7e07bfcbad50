package dc

import (
	"errors"
	"fmt"
	"slices"

	"github.com/nlpodyssey/spago/mat"

	"github.com/dcdit/dcdit/cond"
	"github.com/dcdit/dcdit/ops"
)

// PredictDense is Predict at a step that keeps every cell, run as the
// model's teacher would: each cell's encoder token through the backbone
// and the wide head, without the router, the de-chunk, the decoder, the
// final layer or the latent skip. With the encoder as grafted
// (encoder_init = "patch", untrained: its conv blocks idle) and the
// backbone and wide head frozen, that is the teacher's own forward pass,
// the distillation target itself, at the teacher's cost. It needs the wide
// head (Config.WideHead).
func (m *Model) PredictDense(x []float32, in cond.Input) ([]float32, *Result, error) {
	if !m.Config.WideHead {
		return nil, nil, errors.New("dc: the dense path runs the wide head, and this model has none (scaffold.head = \"wide\")")
	}
	return m.run(x, in, m.forwardDense)
}

// forwardDense is PredictDense's pass on cell-major latents x under cv.
func (m *Model) forwardDense(x mat.Tensor, cv cond.Value) (*Result, error) {
	cfg := m.Config
	L := cfg.Cells()
	g := grid{batch: x.Shape()[0] / L, rows: cfg.CellRows(), cols: cfg.CellCols(), patch: cfg.Patch()}
	res := &Result{batch: g.batch, cond: cv, dense: true}
	// The backbone's tokens: the token embedder's where there is one (the
	// dropped context is zero with nothing dropped), else the encoder's.
	var tokens mat.Tensor
	if cfg.TokenEmbedder {
		tokens = ops.Linear(x, m.p("token_embedder.weight"), m.p("token_embedder.bias"))
	} else {
		tokens = m.encode(x, m.scaffoldCond(cv.Vector(), g.batch), g, res, true)
	}
	var err error
	if res.Chunks, err = chunk(slices.Repeat([]bool{true}, g.batch*L), g); err != nil {
		return nil, err
	}
	if res.Main, err = m.Backbone.Forward(tokens, cv, res.Chunks.Offsets, res.Chunks.Pos); err != nil {
		return nil, fmt.Errorf("dc: backbone: %w", err)
	}
	res.Out = finalLayer(m.Params, "wide_head.", res.Main, cv.Vector(), g)
	return res, nil
}

// denseFLOPs counts PredictDense over a batch of B grids with the conv
// blocks' residual branches idle where idle[i] says so: the token embedder
// or the latent embedder and the encoder, the backbone on every cell, the
// wide head.
func (m *Model) denseFLOPs(B int, idle []bool) FLOPs {
	c := m.Config
	N, D := float64(B*c.Cells()), float64(c.ModelDim)
	f := FLOPs{
		Backbone:  m.Backbone.FLOPs(slices.Repeat([]int{c.Cells()}, B)),
		Final:     mac(float64(B), float64(c.CondDim), 2*D) + mac(N, D, float64(c.CellOut())),
		KeptRatio: 1,
	}
	if c.TokenEmbedder {
		f.Embed = mac(N, float64(c.CellIn()), D)
	} else {
		f.Embed, f.Encoder, _ = m.convFLOPs(B, idle)
	}
	return f
}

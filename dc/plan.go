package dc

import (
	"fmt"

	"github.com/nlpodyssey/spago/mat"

	"github.com/dcdit/dcdit/cond"
)

// Planner replaces the cells a forward keeps after the router (and any
// Chooser) has chosen: given the mask kept [B·L] for a batch of B grids,
// it returns the mask to keep instead, in any count per sample (at least
// one). tokens gives the tokens [len(cells), D] the backbone would read
// for cells (rows of the batch's grids): the encoder's output there, or
// the token embedder's (Config.TokenEmbedder). Each kept cell's
// de-chunk weight is the router's probability at that cell in this
// forward. A step cache (TeaCache, package sample) plans: a sample whose
// backbone step it skips keeps the cells of the step it last computed,
// over which its cached residual lies, and it measures that step's
// change on those cells' tokens before it decides.
type Planner func(tokens Tokens, kept []bool, batch int) ([]bool, error)

// Tokens returns the tokens [len(cells), D] a forward's backbone reads for
// the given cells (rows of the batch's grids).
type Tokens func(cells []int) mat.Tensor

// PredictPlanning is Predict with the kept cells replaced by plan.
func (m *Model) PredictPlanning(x []float32, in cond.Input, frac []float32, plan Planner) ([]float32, *Result, error) {
	return m.predict(x, in, frac, nil, plan)
}

// Pack lays out the cells kept [B·L] marks for the backbone, as a forward
// packs them: the rows of the encoder output they take (Index), the
// samples' offsets and the cells' latent-grid positions.
func (c *Config) Pack(kept []bool, batch int) (*Chunks, error) {
	if batch < 1 || len(kept) != batch*c.Cells() {
		return nil, fmt.Errorf("dc: pack: a mask of %d cells for %d grids of %d", len(kept), batch, c.Cells())
	}
	return chunk(kept, grid{batch: batch, rows: c.CellRows(), cols: c.CellCols(), patch: c.Patch()})
}

package dc

import (
	"fmt"

	"github.com/dcdit/dcdit/family"
)

// FLOPs is the cost of one DC-DiT forward pass over a batch, in
// floating-point operations, split by part. The convention is the DC-DiT
// reference counter's (flop_counter.py): 2 FLOPs per multiply-add of every
// matrix product and convolution, H·Σ_b M_b²·(4·d_h + 3) for the packed
// attention (counted by the backbone), and nothing for norms, activations,
// gathers and other elementwise work. Counts follow what runs: the
// backbone and the de-chunk smoothing see each sample's kept tokens M_b
// (packed, no padding), everything else the full grid.
type FLOPs struct {
	Embed     float64 `json:"embed"`      // latent embedder conv 3×3 (and the token embedder on the kept cells)
	Encoder   float64 `json:"encoder"`    // encoder conv blocks (convs, skip, cond_proj; an idle residual branch, none) and the dropped context
	Residual  float64 `json:"residual"`   // residual_proj (relative: on the dropped cells)
	Routing   float64 `json:"routing"`    // router convs
	Backbone  float64 `json:"backbone"`   // conditioning and main network (BackboneFLOPs)
	DeChunk   float64 `json:"dechunk"`    // Σ_b M_b²·D of the Gaussian smoothing product
	Decoder   float64 `json:"decoder"`    // decoder conv blocks
	Final     float64 `json:"final"`      // final layer (and wide head, latent skip) adaLN and projection
	KeptRatio float64 `json:"kept_ratio"` // ΣM_b / (B·L), for reporting
}

// Total is the sum of the parts.
func (f FLOPs) Total() float64 {
	return f.Embed + f.Encoder + f.Residual + f.Routing + f.Backbone + f.DeChunk + f.Decoder + f.Final
}

// BackboneFLOPs counts a backbone's cost: the conditioning plus the
// transformer over packed sequences of the given lengths (one per sample),
// in the convention of FLOPs. Every Backbone is one; a config alone can be
// one too (ConfigFLOPs), so that a recipe is costed without weights.
type BackboneFLOPs interface {
	FLOPs(lengths []int) float64
}

// ForwardFLOPs counts one forward pass of a batch whose samples keep
// numKept tokens each (len(numKept) = B) as inference runs it, every conv
// block's residual branch run (ResultFLOPs counts the idle ones out).
func (m *Model) ForwardFLOPs(numKept []int) FLOPs {
	return m.forwardFLOPs(numKept, nil, -1)
}

// forwardFLOPs is ForwardFLOPs with the residual branch of conv block i
// (encoder then decoder) left out where idle[i], and the relative
// residual over residualRows rows (< 0: the dropped cells).
func (m *Model) forwardFLOPs(numKept []int, idle []bool, residualRows int) FLOPs {
	c := m.Config
	B, L := float64(len(numKept)), float64(c.Cells())
	N := B * L
	var f FLOPs
	f.Embed, f.Encoder, f.Decoder = m.convFLOPs(len(numKept), idle)
	D, R := float64(c.ModelDim), float64(c.RouterDim)
	f.Routing = mac(N, D, R) + 2*mac(N, R*9, R) + mac(N, R, 1)
	var kept float64
	for _, mb := range numKept {
		f.DeChunk += mac(float64(mb), float64(mb), D)
		kept += float64(mb)
	}
	f.Residual = mac(N, D, D)
	if c.RelativeResidual {
		rows := N - kept // a kept cell's difference is zero and does not run
		if residualRows >= 0 {
			rows = float64(residualRows)
		}
		f.Residual = mac(rows, D, D)
	}
	f.Backbone = m.Backbone.FLOPs(numKept)
	if c.DroppedContext {
		E := float64(c.EncDecDim)
		f.Encoder += mac(N, D, E) + mac(N, E*9, D)
	}
	if c.TokenEmbedder {
		f.Embed += mac(kept, float64(c.CellIn()), D)
	}
	E := float64(c.EncDecDim)
	f.Final = mac(B, float64(c.CondDim), 2*E) + mac(N, E, float64(c.CellOut()))
	if c.WideHead {
		f.Final += mac(B, float64(c.CondDim), 2*D) + mac(N, D, float64(c.CellOut()))
	}
	if c.LatentSkip {
		f.Final += mac(B, float64(c.CondDim), float64(c.CellOut())) + mac(N, float64(c.CellIn()), float64(c.CellOut()))
	}
	if N > 0 {
		f.KeptRatio = kept / N
	}
	return f
}

// mac is the FLOPs of an [m, k] × [k, n] product: a multiply and an add
// per term.
func mac(m, k, n float64) float64 { return 2 * m * k * n }

// convFLOPs counts the latent embedder and the encoder's and the
// decoder's conv blocks over B grids, the residual branch of block i
// (encoder then decoder) left out where idle[i].
func (m *Model) convFLOPs(B int, idle []bool) (embed, encoder, decoder float64) {
	c := m.Config
	N := float64(B * c.Cells())
	embed = mac(N, float64(c.CellIn())*9, float64(c.EncDecDim))
	for i, w := range c.ConvWidths() {
		in, out := float64(w[0]), float64(w[1])
		inner := min(in, out)
		var cost float64
		if i >= len(idle) || !idle[i] {
			cost = mac(N, in*9, inner) + mac(float64(B), float64(c.CondDim), inner) + mac(N, inner*9, out)
		}
		if w[0] != w[1] {
			cost += mac(N, in, out)
		}
		if i < c.EncoderBlocks {
			encoder += cost
		} else {
			decoder += cost
		}
	}
	return embed, encoder, decoder
}

// ResultFLOPs counts the forward that made res as it ran: ForwardFLOPs of
// the tokens it kept (of PredictDense: the encoder, the backbone on every
// cell and the wide head), less the conv blocks' idle residual branches, with
// the relative residual over the rows it ran (a training pass runs every
// cell's) and a width-gated backbone (family.WidthGated) at the width its
// gates chose for each sample.
func (m *Model) ResultFLOPs(res *Result) (FLOPs, error) {
	rows := -1
	if m.Config.RelativeResidual {
		rows = res.residualRows
	}
	var f FLOPs
	if res.dense {
		f = m.denseFLOPs(res.batch, res.idle)
	} else {
		f = m.forwardFLOPs(res.Chunks.NumKept, res.idle, rows)
	}
	if g, ok := family.GatedWidth(m.Backbone); ok {
		b, err := g.GatedFLOPs(res.cond, res.Chunks.NumKept)
		if err != nil {
			return FLOPs{}, fmt.Errorf("dc: FLOPs as run: %w", err)
		}
		f.Backbone = b
	}
	return f, nil
}

package optim

import "fmt"

// EMA keeps an exponential moving average of the parameters, as DiT's
// update_ema does after every step: ema = decay·ema + (1−decay)·p. Frozen
// elements are skipped: they never change, so their average stays the copy
// taken by NewEMA.
type EMA struct {
	// Decay is the weight of the old average, in [0, 1]; DiT uses 0.9999
	// (and 0 once at the start, which copies the parameters).
	Decay float64

	mask    *Mask
	plan    plan
	weights []float32

	params      []float32
	decay, rest float32
	kern        *kernelSet
	body        func(lo, hi int)
}

// NewEMA starts an average at a copy of params, which mask (not nil)
// describes.
func NewEMA(mask *Mask, params []float32, decay float64) (*EMA, error) {
	if len(params) != mask.n {
		return nil, fmt.Errorf("optim: NewEMA: %d params, want %d", len(params), mask.n)
	}
	if !(decay >= 0 && decay <= 1) {
		return nil, fmt.Errorf("optim: NewEMA: decay %v, want 0 ≤ decay ≤ 1", decay)
	}
	segs := make([]segment, len(mask.trainable))
	for i, r := range mask.trainable {
		segs[i] = segment{lo: r.Lo, n: r.Len()}
	}
	e := &EMA{Decay: decay, mask: mask, plan: newPlan(segs), weights: append([]float32(nil), params...)}
	e.body = e.updateBlocks
	return e, nil
}

// Weights returns the averaged parameters, the whole buffer (frozen
// elements included). It is the live buffer: saving a checkpoint reads it,
// restoring one copies into it.
func (e *EMA) Weights() []float32 { return e.weights }

// Update folds params into the average.
func (e *EMA) Update(params []float32) {
	if len(params) != e.mask.n {
		panic(fmt.Sprintf("optim: EMA.Update: %d params, want %d", len(params), e.mask.n))
	}
	// PyTorch's mul_(decay).add_(p, alpha=1-decay) rounds decay and the
	// double 1-decay to float32 separately.
	e.params, e.decay, e.rest, e.kern = params, float32(e.Decay), float32(1-e.Decay), active
	e.plan.run(e.body)
	e.params = nil
}

func (e *EMA) updateBlocks(bl, bh int) {
	a, b := e.plan.blockRange(bl, bh)
	e.plan.visit(a, b, func(_ *segment, pa, _, n int) {
		e.kern.ema(e.weights[pa:pa+n], e.params[pa:pa+n], e.decay, e.rest)
	})
}

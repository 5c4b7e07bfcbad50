package dc

import (
	"github.com/nlpodyssey/spago/mat"

	"github.com/dcdit/dcdit/ops"
	"github.com/dcdit/dcdit/params"
)

// Routing is the router's decision for a batch of grids, before any tail
// dropping.
type Routing struct {
	// Logit is the scorer's output before the sigmoid, [B·L, 1].
	Logit mat.Tensor
	// P is the boundary probability [B·L, 1] with the first and last token
	// of every sample forced to 1 (they receive no gradient).
	P mat.Tensor
	// Natural marks the natural boundaries p > 0.5 (argmax of [1−p, p],
	// ties going to "not a boundary"), [B·L].
	Natural []bool
	// NumNatural counts them per sample.
	NumNatural []int
	// Confidence is the router's confidence in its own decision, c = p at
	// a natural boundary and 1 − p elsewhere, [B·L, 1]: the straight-through
	// multiplier's input (selected_probs).
	Confidence mat.Tensor
}

// Prob returns P's values (a view, not a copy).
func (r *Routing) Prob() []float32 { return mat.Data[float32](r.P.Value()) }

// route runs DC-DiT's spatial-predictability router on the encoder output
// enc [B·L, D]:
//
//	z = Conv1x1(D → R)(enc);  res = z − Conv3x3(R → R)(z)
//	logit = Conv1x1(R → 1)(SiLU(GroupNorm(Conv3x3(R → R)(res))))
//	p = sigmoid(logit), p[first] = p[last] = 1
func route(p *params.Set, enc mat.Tensor, g grid, routerGroups int) *Routing {
	w := func(name string) mat.Tensor { return p.Get("hnet.routing_module." + name) }
	z := ops.Conv1x1(enc, w("proj.weight"), w("proj.bias"))
	res := ops.Sub(z, g.conv3x3(z, w("context_predictor.weight"), w("context_predictor.bias")))
	h := g.conv3x3(res, w("residual_scorer.0.weight"), w("residual_scorer.0.bias"))
	h = ops.GroupNormSiLU(h, w("residual_scorer.1.weight"), w("residual_scorer.1.bias"), g.batch, routerGroups, GroupNormEps)
	logit := ops.Conv1x1(h, w("residual_scorer.3.weight"), w("residual_scorer.3.bias")) // [B·L, 1]
	sig := ops.Sigmoid(logit)

	// Forcing: p·keep + force, with keep = 0 and force = 1 at the first and
	// last token of each sample (constants, so no gradient reaches there).
	N, L := g.batch*g.tokens(), g.tokens()
	keep, force := make([]float32, N), make([]float32, N)
	for i := range keep {
		keep[i] = 1
	}
	for b := range g.batch {
		for _, l := range []int{b * L, b*L + L - 1} {
			keep[l], force[l] = 0, 1
		}
	}
	prob := ops.Add(ops.Mul(sig, constant(N, 1, keep)), constant(N, 1, force))

	r := &Routing{Logit: logit, P: prob, Natural: make([]bool, N), NumNatural: make([]int, g.batch)}
	for i, v := range r.Prob() {
		if v > 0.5 {
			r.Natural[i] = true
			r.NumNatural[i/L]++
		}
	}
	r.Confidence = confidence(prob, r.Natural)
	return r
}

// confidence is the router's confidence in a decision marked [B·L]: p
// where a cell is marked a token, 1 − p elsewhere, [B·L, 1].
func confidence(prob mat.Tensor, marked []bool) mat.Tensor {
	N := len(marked)
	sign, offset := make([]float32, N), make([]float32, N)
	for i, m := range marked {
		if m {
			sign[i] = 1
		} else {
			sign[i], offset[i] = -1, 1
		}
	}
	return ops.Add(ops.Mul(prob, constant(N, 1, sign)), constant(N, 1, offset))
}

// constant wraps data as a matrix that takes no gradient.
func constant(rows, cols int, data []float32) mat.Tensor {
	return mat.NewDense[float32](mat.WithShape(rows, cols), mat.WithBacking(data))
}

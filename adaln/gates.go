package adaln

import (
	"fmt"
	"slices"

	"github.com/nlpodyssey/spago/mat"

	"github.com/dcdit/dcdit/ops"
	"github.com/dcdit/dcdit/params"
)

// DyDiT's timestep-wise dynamic width (Zhao et al. 2024, "Dynamic
// Diffusion Transformer", TDW): per block, two routers read the timestep
// embedding and gate the block's attention heads and its MLP's channel
// groups (as many groups as heads, contiguous hidden units), head 0 and
// group 0 always on. The gates depend on the timestep alone, so at
// sampling every sample of a step shares them and the block skips what
// is off.

// RouterPrefix is where a block's width routers sit, under the block's
// own prefix: RouterPrefix + "head_router.weight" and so on
// (RouterShapes).
const RouterPrefix = "dydit."

// RouterInitBias is the bias the routers start from, with zero weights:
// σ(2) ≈ 0.88, every gate on, so that a model given routers computes what
// it computed without them, bit for bit, while their gradients (through
// the sigmoid's slope at 2) can start turning gates off.
const RouterInitBias = 2

// AlwaysOn is how many leading heads and channel groups no gate turns off.
const AlwaysOn = 1

// RouterShapes lists the width routers' tensors of a block of width D with
// heads attention heads, by their names inside the block: the head router
// Linear(D → H) and the channel router Linear(D → G), G = H.
func RouterShapes(D, heads int) map[string][]int {
	return map[string][]int{
		RouterPrefix + "head_router.weight":    {heads, D},
		RouterPrefix + "head_router.bias":      {heads},
		RouterPrefix + "channel_router.weight": {heads, D},
		RouterPrefix + "channel_router.bias":   {heads},
	}
}

// RouterInit returns a router tensor's starting values by its name inside
// the block (RouterShapes) and its element count: RouterInitBias for a
// bias, 0 for a weight.
func RouterInit(name string, n int) []float32 {
	v := make([]float32, n)
	if name == RouterPrefix+"head_router.bias" || name == RouterPrefix+"channel_router.bias" {
		for i := range v {
			v[i] = RouterInitBias
		}
	}
	return v
}

// Gates are one block's width gates for a batch of S samples, each
// exactly 0 or 1: Heads [S, H] on the attention heads, Groups [S, G] on
// the MLP's channel groups.
type Gates struct {
	Heads, Groups mat.Tensor
}

// BlockGates computes the gates of the block named prefix from the
// timestep embedding temb [S, D] (TimestepEmbedding): the hard gates
// (ops.HardGate, straight-through) of its routers' logits.
func BlockGates(set *params.Set, prefix string, temb mat.Tensor) Gates {
	p := func(name string) mat.Tensor { return set.Get(prefix + RouterPrefix + name) }
	return Gates{
		Heads:  ops.HardGate(ops.Linear(temb, p("head_router.weight"), p("head_router.bias")), AlwaysOn),
		Groups: ops.HardGate(ops.Linear(temb, p("channel_router.weight"), p("channel_router.bias")), AlwaysOn),
	}
}

// On returns, per sample, how many heads and channel groups the gates
// leave on.
func (g *Gates) On() (heads, groups []int) { return countOn(g.Heads), countOn(g.Groups) }

// countOn counts each row's ones.
func countOn(t mat.Tensor) []int {
	sh := t.Shape()
	v := mat.Data[float32](t.Value())
	n := make([]int, sh[0])
	for s := range n {
		for _, x := range v[s*sh[1] : (s+1)*sh[1]] {
			if x != 0 {
				n[s]++
			}
		}
	}
	return n
}

// blockWeights are the block's weights that the gates select rows or
// columns of.
type blockWeights struct {
	qkv, qkvBias, proj, fc1, fc1Bias, fc2 mat.Tensor
}

// weightsOf reads the block named prefix's weights from set.
func weightsOf(set *params.Set, prefix string) blockWeights {
	p := func(name string) mat.Tensor { return set.Get(prefix + name) }
	return blockWeights{p("attn.qkv.weight"), p("attn.qkv.bias"), p("attn.proj.weight"), p("mlp.fc1.weight"), p("mlp.fc1.bias"), p("mlp.fc2.weight")}
}

// constant reports whether the off heads and groups can be left out:
// nothing asks a gradient of the gates or of the weights.
func (g *Gates) constant(w blockWeights) bool {
	for _, t := range []mat.Tensor{g.Heads, g.Groups, w.qkv, w.qkvBias, w.proj, w.fc1, w.fc1Bias, w.fc2} {
		if t.RequiresGrad() {
			return false
		}
	}
	return true
}

// runs splits the samples into runs of consecutive ones with the same
// gates: the boundaries 0 = b₀ < b₁ < … < S (two entries when every
// sample has the same gates).
func (g *Gates) runs() []int {
	h, q := mat.Data[float32](g.Heads.Value()), mat.Data[float32](g.Groups.Value())
	H, G := g.Heads.Shape()[1], g.Groups.Shape()[1]
	S := g.Heads.Shape()[0]
	b := []int{0}
	for s := 1; s < S; s++ {
		if !slices.Equal(h[s*H:(s+1)*H], h[(s-1)*H:s*H]) || !slices.Equal(q[s*G:(s+1)*G], q[(s-1)*G:s*G]) {
			b = append(b, s)
		}
	}
	return append(b, S)
}

// applyRuns runs the block over each run of samples with the same gates
// (runs: their boundaries) on its own, skipping what its gates leave off,
// and stacks the runs' rows back in order.
func (g *Gates) applyRuns(set *params.Set, prefix string, heads int, x, c mat.Tensor, offsets, runs []int) mat.Tensor {
	outs := make([]mat.Tensor, 0, len(runs)-1)
	for i := 0; i+1 < len(runs); i++ {
		lo, hi := runs[i], runs[i+1]
		r0, r1 := offsets[lo], offsets[hi]
		rows := make([]int, r1-r0)
		for j := range rows {
			rows[j] = r0 + j
		}
		off := make([]int, hi-lo+1)
		for j := range off {
			off[j] = offsets[lo+j] - r0
		}
		sub := Gates{Heads: SampleRows(g.Heads, lo, hi), Groups: SampleRows(g.Groups, lo, hi)}
		outs = append(outs, ApplyGatedBlock(set, prefix, heads, ops.GatherRows(x, rows), SampleRows(c, lo, hi), off, &sub))
	}
	return ops.ConcatRows(outs...)
}

// onIndex lists the columns of the first row of t that are on.
func onIndex(t mat.Tensor) []int {
	var on []int
	for i, x := range mat.Data[float32](t.Value())[:t.Shape()[1]] {
		if x != 0 {
			on = append(on, i)
		}
	}
	return on
}

// slice returns the weights of the heads and groups the (shared) gates
// leave on, and the heads that run: qkv's and fc1's rows, proj's and
// fc2's columns. With every gate on it returns w itself, so that the
// block is the ungated one.
func (g *Gates) slice(w blockWeights, heads int) (blockWeights, int) {
	hs, gs := onIndex(g.Heads), onIndex(g.Groups)
	if len(hs) == heads && len(gs) == g.Groups.Shape()[1] {
		return w, heads
	}
	D := w.proj.Shape()[0]
	dh := D / heads
	var qkvRows []int
	for part := range 3 {
		qkvRows = append(qkvRows, spans(hs, part*D, dh)...)
	}
	headCols := spans(hs, 0, dh)
	hidden := w.fc1.Shape()[0]
	groupRows := spans(gs, 0, hidden/g.Groups.Shape()[1])
	return blockWeights{
		qkv: rows(w.qkv, qkvRows), qkvBias: rows(w.qkvBias, qkvRows), proj: cols(w.proj, headCols),
		fc1: rows(w.fc1, groupRows), fc1Bias: rows(w.fc1Bias, groupRows), fc2: cols(w.fc2, groupRows),
	}, len(hs)
}

// spans lists the indices base + i·width … base + (i+1)·width − 1 of
// every i in on, in order.
func spans(on []int, base, width int) []int {
	out := make([]int, 0, len(on)*width)
	for _, i := range on {
		for j := range width {
			out = append(out, base+i*width+j)
		}
	}
	return out
}

// rows copies the given rows of a weight matrix, or elements of a bias
// vector (stored [n, 1] or [1, n]), into a new constant.
func rows(t mat.Tensor, idx []int) mat.Tensor {
	sh := t.Shape()
	v := mat.Data[float32](t.Value())
	if sh[0] == 1 || sh[1] == 1 { // a vector
		out := make([]float32, len(idx))
		for i, j := range idx {
			out[i] = v[j]
		}
		return mat.NewDense[float32](mat.WithShape(len(idx), 1), mat.WithBacking(out))
	}
	n := sh[1]
	out := make([]float32, 0, len(idx)*n)
	for _, r := range idx {
		out = append(out, v[r*n:(r+1)*n]...)
	}
	return mat.NewDense[float32](mat.WithShape(len(idx), n), mat.WithBacking(out))
}

// cols copies the given columns of a weight matrix into a new constant.
func cols(t mat.Tensor, idx []int) mat.Tensor {
	sh := t.Shape()
	v := mat.Data[float32](t.Value())
	out := make([]float32, 0, sh[0]*len(idx))
	for r := range sh[0] {
		row := v[r*sh[1] : (r+1)*sh[1]]
		for _, c := range idx {
			out = append(out, row[c])
		}
	}
	return mat.NewDense[float32](mat.WithShape(sh[0], len(idx)), mat.WithBacking(out))
}

// widthCosts are what one sample of L tokens spends in a block's
// attention (qkv, scores, proj) and MLP, all heads and groups on, in the
// convention of PackedFLOPs.
func widthCosts(s Sizes, L float64) (attn, mlp float64) {
	D, hid := float64(s.Width), float64(s.MLPHidden)
	attn = mac(L, D, 3*D) + mac(L, D, D) + float64(s.Heads)*L*L*(4*D/float64(s.Heads)+3)
	return attn, mac(L, D, hid) + mac(L, hid, D)
}

// GatedFLOPs counts what PackedFLOPs counts for blocks run under width
// gates: block b's sample s at heads[b][s] of s.Heads heads and
// groups[b][s] of s.Heads channel groups (Gates.On), plus the routers
// (two Linear(D → H) per block and sample). With every gate on it is
// PackedFLOPs plus the routers.
func GatedFLOPs(s Sizes, lengths []int, heads, groups [][]int) (float64, error) {
	if len(heads) != s.Depth || len(groups) != s.Depth {
		return 0, fmt.Errorf("adaln: gated FLOPs: gates of %d and %d blocks, want %d", len(heads), len(groups), s.Depth)
	}
	D, H := float64(s.Width), float64(s.Heads)
	B := float64(len(lengths))
	total := mac(B, float64(s.FrequencySize), D) + mac(B, D, D)
	for b := range s.Depth {
		if len(heads[b]) != len(lengths) || len(groups[b]) != len(lengths) {
			return 0, fmt.Errorf("adaln: gated FLOPs: block %d has gates of %d and %d samples, want %d", b, len(heads[b]), len(groups[b]), len(lengths))
		}
		total += mac(B, D, 6*D)
		for i, l := range lengths {
			attn, mlp := widthCosts(s, float64(l))
			total += attn*float64(heads[b][i])/H + mlp*float64(groups[b][i])/H
		}
	}
	return total + RouterFLOPs(s, len(lengths)), nil
}

// RouterFLOPs is what the width routers of a stack of s.Depth blocks
// cost for a batch of samples: two Linear(D → H) per block and sample.
func RouterFLOPs(s Sizes, samples int) float64 {
	return float64(s.Depth) * 2 * float64(samples) * float64(s.Width) * 2 * float64(s.Heads)
}

// WidthRatio is DyDiT's FLOPs ratio of a batch: the gated blocks'
// attention and MLP FLOPs as the gates run them (sample i over lengths[i]
// tokens), over the same with every gate on, [1, 1]; its gradient reaches
// the routers through the gates' straight-through estimator.
func WidthRatio(s Sizes, lengths []int, gates []Gates) (mat.Tensor, error) {
	if len(gates) != s.Depth || s.Depth == 0 {
		return nil, fmt.Errorf("adaln: width ratio: gates of %d blocks, want %d", len(gates), s.Depth)
	}
	S, H := len(lengths), s.Heads
	var static float64
	attn, mlp := make([]float64, S), make([]float64, S)
	for i, l := range lengths {
		attn[i], mlp[i] = widthCosts(s, float64(l))
		static += float64(s.Depth) * (attn[i] + mlp[i])
	}
	if !(static > 0) {
		return nil, fmt.Errorf("adaln: width ratio: %d samples of %v tokens cost nothing", S, lengths)
	}
	// Each gate's share of the static FLOPs, per sample and column.
	weights := func(cost []float64) mat.Tensor {
		w := make([]float32, S*H)
		for i := range S {
			for h := range H {
				w[i*H+h] = float32(cost[i] / float64(H) / static)
			}
		}
		return mat.NewDense[float32](mat.WithShape(S, H), mat.WithBacking(w))
	}
	wa, wm := weights(attn), weights(mlp)
	var ratio mat.Tensor
	for b, g := range gates {
		for _, t := range []mat.Tensor{g.Heads, g.Groups} {
			if sh := t.Shape(); sh[0] != S || sh[1] != H {
				return nil, fmt.Errorf("adaln: width ratio: block %d has gates [%d %d], want [%d %d]", b, sh[0], sh[1], S, H)
			}
		}
		term := ops.Add(ops.Sum(ops.Mul(g.Heads, wa)), ops.Sum(ops.Mul(g.Groups, wm)))
		if ratio == nil {
			ratio = term
		} else {
			ratio = ops.Add(ratio, term)
		}
	}
	return ratio, nil
}

// Package adaln is DiT's transformer block and conditioning (Peebles &
// Xie, models.py) over packed tokens, below the backbones that are built
// of them: the adaLN-Zero block, the timestep and label embedders, their
// tensors, their parameter groups and their FLOPs. A fixed-patch DiT
// (package dit) and DC-DiT's main network (package dc/hnet) both run
// these, each under its own tensor names, so that there is one derivation
// of the block for both.
package adaln

import (
	"github.com/nlpodyssey/spago/mat"

	"github.com/dcdit/dcdit/ops"
	"github.com/dcdit/dcdit/params"
	"github.com/dcdit/dcdit/posembed"
)

// NormEps is the epsilon of DiT's LayerNorms (models.py): the blocks' and
// the final layer's, every one affine-free.
const NormEps = 1e-6

// ApplyBlock is the adaLN-Zero block of DiT's models.py on packed tokens
// x [N, D] (sample s owning rows offsets[s]..offsets[s+1]) under the
// per-sample conditioning c [S, D], with heads attention heads. Its
// parameters are those of set named prefix + the names BlockShapes lists:
// DiT stores them under "blocks.i.", DC-DiT's main network under its own
// prefix.
func ApplyBlock(set *params.Set, prefix string, heads int, x, c mat.Tensor, offsets []int) mat.Tensor {
	return ApplyGatedBlock(set, prefix, heads, x, c, offsets, nil)
}

// ApplyGatedBlock is ApplyBlock under DyDiT's width gates g (nil: none,
// which is ApplyBlock): each sample's attention output multiplied head by
// head by its head gates before attn.proj, and its MLP's hidden units
// group by group by its channel gates after the GELU. When no gradient is
// asked of the gates or of the block's weights (inference), the heads and
// groups that are off are not computed at all: the weights' rows and
// columns of those on are taken, for each run of consecutive samples with
// the same gates (sampling: every sample of a step). With every gate on
// the block is ApplyBlock, bit for bit.
func ApplyGatedBlock(set *params.Set, prefix string, heads int, x, c mat.Tensor, offsets []int, g *Gates) mat.Tensor {
	w := weightsOf(set, prefix)
	mask := g
	if g != nil && g.constant(w) {
		if runs := g.runs(); len(runs) > 2 {
			return g.applyRuns(set, prefix, heads, x, c, offsets, runs)
		}
		w, heads = g.slice(w, heads)
		mask = nil
	}
	D := x.Shape()[1]
	p := func(name string) mat.Tensor { return set.Get(prefix + name) }
	mod := ops.Linear(ops.SiLU(c), p("adaLN_modulation.1.weight"), p("adaLN_modulation.1.bias")) // [S, 6D]
	chunk := func(k int) mat.Tensor { return ops.SliceCols(mod, k*D, (k+1)*D) }
	shiftMSA, scaleMSA, gateMSA := chunk(0), chunk(1), chunk(2)
	shiftMLP, scaleMLP, gateMLP := chunk(3), chunk(4), chunk(5)

	h := ops.Modulate(ops.LayerNorm(x, NormEps), shiftMSA, scaleMSA, offsets)
	qkv := ops.Linear(h, w.qkv, w.qkvBias)  // [N, 3D]
	a := ops.Attention(qkv, offsets, heads) // [N, D]
	if mask != nil {
		a = ops.GateGroups(a, mask.Heads, offsets)
	}
	a = ops.Linear(a, w.proj, p("attn.proj.bias"))
	x = ops.GatedResidual(x, gateMSA, a, offsets)

	h = ops.Modulate(ops.LayerNorm(x, NormEps), shiftMLP, scaleMLP, offsets)
	h = ops.GELU(ops.Linear(h, w.fc1, w.fc1Bias)) // [N, hidden]
	if mask != nil {
		h = ops.GateGroups(h, mask.Groups, offsets)
	}
	h = ops.Linear(h, w.fc2, p("mlp.fc2.bias"))
	return ops.GatedResidual(x, gateMLP, h, offsets)
}

// BlockShapes lists the tensors ApplyBlock reads, by their names inside
// the block, for width D and an MLP of mlpHidden units.
func BlockShapes(D, mlpHidden int) map[string][]int {
	return map[string][]int{
		"adaLN_modulation.1.weight": {6 * D, D},
		"adaLN_modulation.1.bias":   {6 * D},
		"attn.qkv.weight":           {3 * D, D},
		"attn.qkv.bias":             {3 * D},
		"attn.proj.weight":          {D, D},
		"attn.proj.bias":            {D},
		"mlp.fc1.weight":            {mlpHidden, D},
		"mlp.fc1.bias":              {mlpHidden},
		"mlp.fc2.weight":            {D, mlpHidden},
		"mlp.fc2.bias":              {D},
	}
}

// Embedders computes DiT's conditioning c = t_embedder(t) + y_embedder(y),
// [B, D], from the tensors of set named prefix + the names EmbedderShapes
// lists: every adaLN reads it. t are the (float) diffusion timesteps,
// frequencySize the width of their sinusoidal features, y the labels; a
// label outside the table panics in the ops.
func Embedders(set *params.Set, prefix string, frequencySize int, t []float32, y []int) mat.Tensor {
	return EmbeddersFrom(set, prefix, TimestepEmbedding(set, prefix, frequencySize, t), y)
}

// TimestepEmbedding is t_embedder(t), [B, D], the timestep's part of
// Embedders (DyDiT's width routers read it alone).
func TimestepEmbedding(set *params.Set, prefix string, frequencySize int, t []float32) mat.Tensor {
	f := frequencySize
	freq := make([]float32, len(t)*f)
	posembed.TimestepFrequencies(freq, t, f)
	p := func(name string) mat.Tensor { return set.Get(prefix + name) }
	features := mat.NewDense[float32](mat.WithShape(len(t), f), mat.WithBacking(freq))
	h := ops.Linear(features, p("t_embedder.mlp.0.weight"), p("t_embedder.mlp.0.bias"))
	return ops.Linear(ops.SiLU(h), p("t_embedder.mlp.2.weight"), p("t_embedder.mlp.2.bias"))
}

// EmbeddersFrom is Embedders from the timestep embedding temb
// (TimestepEmbedding) already computed: temb + y_embedder(y).
func EmbeddersFrom(set *params.Set, prefix string, temb mat.Tensor, y []int) mat.Tensor {
	return ops.Add(temb, ops.GatherRows(set.Get(prefix+"y_embedder.embedding_table.weight"), y))
}

// EmbedderShapes lists the tensors Embedders reads, for width D, timestep
// features of frequencySize and labels 0 … numClasses−1; the label table
// has a row more, the null class of classifier-free guidance.
func EmbedderShapes(D, frequencySize, numClasses int) map[string][]int {
	return map[string][]int{
		"t_embedder.mlp.0.weight":           {D, frequencySize},
		"t_embedder.mlp.0.bias":             {D},
		"t_embedder.mlp.2.weight":           {D, D},
		"t_embedder.mlp.2.bias":             {D},
		"y_embedder.embedding_table.weight": {numClasses + 1, D},
	}
}

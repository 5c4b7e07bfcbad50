package dc

import (
	"fmt"
	"slices"

	"github.com/nlpodyssey/spago/mat"

	"github.com/dcdit/dcdit/cond"
	"github.com/dcdit/dcdit/ops"
	"github.com/dcdit/dcdit/params"
)

// Model is a DC-DiT: the scaffold (latent embedder, conv encoder, router,
// chunker, de-chunker, conv decoder, final layer) around a Backbone.
type Model struct {
	Config   *Config
	Params   *params.Set // the scaffold's parameters, under reference names
	Backbone Backbone
}

// New builds the scaffold from named tensors (reference names; other names
// in ts are ignored) around a backbone whose widths must match the config.
func New(cfg *Config, ts map[string]Tensor, bb Backbone) (*Model, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if bb.Width() != cfg.ModelDim || bb.CondWidth() != cfg.CondDim {
		return nil, fmt.Errorf("dc: backbone widths (tokens %d, conditioning %d) differ from the scaffold's model_dim %d and cond_dim %d",
			bb.Width(), bb.CondWidth(), cfg.ModelDim, cfg.CondDim)
	}
	p, err := NewParams(ts, ScaffoldShapes(cfg), "scaffold")
	if err != nil {
		return nil, err
	}
	return &Model{Config: cfg, Params: p, Backbone: bb}, nil
}

func (m *Model) p(name string) mat.Tensor { return m.Params.Get(name) }

// Result holds a forward pass's output and everything the scaffold decided
// on the way.
type Result struct {
	// Out is the prediction, cell-major [B·L, OutChannels·p²] (FromTokens
	// turns it into [B, OutChannels, H, W]).
	Out mat.Tensor
	// Encoded is the encoder output (after its RMSNorm, if any), [B·L, D].
	Encoded mat.Tensor
	// Routing is the router's (pre-drop) decision.
	Routing *Routing
	// Chunks are the kept tokens after tail dropping, packed.
	Chunks *Chunks
	// Main is the backbone's output on the packed tokens, [ΣM_b, D].
	Main mat.Tensor
	// DeChunked is the de-chunk smoothing of Main before plug-back,
	// [ΣM_b, D].
	DeChunked mat.Tensor

	batch int
	cond  cond.Value // what the backbone ran under
	idle  []bool     // per conv block, encoder then decoder: its residual branch was idle (idleBranch)
	// residualRows are the rows the relative residual ran (relativeResidual).
	residualRows int
	dense        bool // PredictDense made it
}

// Forward runs the model on cell-major latents x [B·L, InChannels·p²] (see
// ToTokens) under the backbone's conditioning cv (Backbone.Condition; the
// scaffold reads its vector c [B, CondDim]), dropping the tail fraction
// frac of each sample's boundaries (one value, one per sample, or none for
// ρ = 0). Gradients flow to x, c and every parameter.
func (m *Model) Forward(x mat.Tensor, cv cond.Value, frac []float32) (*Result, error) {
	return m.forward(x, cv, frac, nil, nil, false, false)
}

// ForwardKeptGate is Forward with the straight-through gate on the
// router's decision after tail dropping: p at a boundary it kept, 1 − p
// at every other cell, where Forward gates on its natural decision (H-Net's, which
// knows no tail dropping). The prediction is the same — the gate's value
// is 1 either way — but not what its gradient tells the router about a
// boundary the tail drop removed: on the natural decision, that keeping
// it sure would help whenever its copied features serve, which raises the
// logits tail dropping ranks lowest and flattens the router's order; on
// the kept decision, that dropping it sure would, which lowers them and
// keeps the order.
func (m *Model) ForwardKeptGate(x mat.Tensor, cv cond.Value, frac []float32) (*Result, error) {
	return m.forward(x, cv, frac, nil, nil, true, false)
}

// ForwardChoosing is Forward, or ForwardKeptGate when keptGate is set,
// with the kept cells chosen by choose in place of the router's (Chooser;
// nil: the router's), so that training sees the cells a sampler that
// chooses them keeps (sample.Lookback). Gradients flow as in Forward,
// except to the router from a sample whose cells choose changed: that
// choice was not the router's to learn from.
func (m *Model) ForwardChoosing(x mat.Tensor, cv cond.Value, frac []float32, choose Chooser, keptGate bool) (*Result, error) {
	return m.forward(x, cv, frac, choose, nil, keptGate, false)
}

// forward is Forward with the kept cells, when choose is set, chosen by
// choose instead of the router (Chooser), and then, when plan is set,
// replaced by plan's (Planner), and with the gate on the kept cells when
// keptGate is set (ForwardKeptGate); inference says no gradient will be
// asked of the pass (Predict), which lets idle conv blocks (idleBranch)
// that are set to train be left out too.
func (m *Model) forward(x mat.Tensor, cv cond.Value, frac []float32, choose Chooser, plan Planner, keptGate, inference bool) (*Result, error) {
	cfg := m.Config
	L := cfg.Cells()
	xs := x.Shape()
	if xs[1] != cfg.CellIn() || xs[0]%L != 0 || xs[0] == 0 {
		return nil, fmt.Errorf("dc: forward: latents are [%d %d], want [B·%d, %d]", xs[0], xs[1], L, cfg.CellIn())
	}
	g := grid{batch: xs[0] / L, rows: cfg.CellRows(), cols: cfg.CellCols(), patch: cfg.Patch()}
	c := cv.Vector()
	if cs := c.Shape(); cs[0] != g.batch || cs[1] != cfg.CondDim {
		return nil, fmt.Errorf("dc: forward: conditioning is [%d %d], want [%d %d]", cs[0], cs[1], g.batch, cfg.CondDim)
	}
	res := &Result{batch: g.batch, cond: cv}
	cScaffold := m.scaffoldCond(c, g.batch)

	enc := m.encode(x, cScaffold, g, res, inference)
	var residual mat.Tensor
	if !cfg.RelativeResidual {
		residual = ops.Linear(enc, m.p("hnet.residual_proj.weight"), m.p("hnet.residual_proj.bias"))
	}

	// Routing, tail dropping, packing.
	res.Routing = route(m.Params, enc, g, cfg.RouterGroups)
	for i, v := range res.Routing.Prob() {
		if v != v { // NaN: no boundary, no token; say why
			return nil, fmt.Errorf("dc: forward: sample %d: the router's probability at cell %d is NaN (non-finite latents or weights)", i/g.tokens(), i%g.tokens())
		}
	}
	drop := TailDrop
	if cfg.SpreadDrop {
		drop = func(prob []float32, natural []bool, batch int, frac []float32) ([]bool, error) {
			return SpreadDrop(prob, natural, batch, g.rows, g.cols, frac)
		}
	}
	kept, err := drop(res.Routing.Prob(), res.Routing.Natural, g.batch, frac)
	if err != nil {
		return nil, err
	}
	var probRows []int    // the rows of Routing.P the de-chunk reads: the kept cells' own without a Chooser
	prob := res.Routing.P // what the de-chunk and the gate read
	var changed []bool    // per sample: a Chooser changed its cells
	if choose != nil {
		routerKept := kept
		if kept, probRows, err = choose.apply(kept, g.batch); err != nil {
			return nil, err
		}
		changed = changedSamples(routerKept, kept, g.batch)
		prob = ownedOnly(prob, changed)
	}
	tokens := func(cells []int) mat.Tensor { return ops.GatherRows(enc, cells) }
	if cfg.TokenEmbedder {
		tokens = func(cells []int) mat.Tensor {
			return ops.Linear(ops.GatherRows(x, cells), m.p("token_embedder.weight"), m.p("token_embedder.bias"))
		}
	}
	if cfg.DroppedContext {
		own := tokens
		down := ops.Linear(enc, m.p("dropped_context.proj.weight"), nil) // [B·L, E]
		tokens = func(cells []int) mat.Tensor {
			dropped := slices.Repeat([]float32{1}, xs[0])
			for _, c := range cells {
				dropped[c] = 0
			}
			ctx := g.conv3x3(ops.ScaleRows(down, constant(xs[0], 1, dropped)), m.p("dropped_context.conv.weight"), nil)
			return ops.Add(own(cells), ops.GatherRows(ctx, cells))
		}
	}
	if plan != nil {
		if kept, err = plan(tokens, kept, g.batch); err != nil {
			return nil, fmt.Errorf("dc: planning the kept cells: %w", err)
		}
		probRows = nil
	}
	if res.Chunks, err = chunk(kept, g); err != nil {
		return nil, err
	}
	ch := res.Chunks
	if probRows == nil {
		probRows = ch.Index
	}
	packed := tokens(ch.Index) // [ΣM, D]
	main, err := m.Backbone.Forward(packed, cv, ch.Offsets, ch.Pos)
	if err != nil {
		return nil, fmt.Errorf("dc: backbone: %w", err)
	}
	res.Main = main

	// De-chunk: smoothing over the kept tokens, plug-back onto the grid,
	// straight-through confidence gate, residual.
	pKept := ops.GatherRows(prob, probRows)
	res.DeChunked = ops.DeChunk(main, pKept, ch.Offsets, ch.Pos, cfg.Sigma, ProbClamp)
	back := ops.GatherRows(res.DeChunked, ch.plugBackRows()) // [B·L, D]
	// Each cell's kept cell, for the paths relative to it.
	var tokenCell []int
	if cfg.RelativeResidual || cfg.LatentSkip {
		tokenCell = ch.plugBackCells()
	}
	if cfg.RelativeResidual {
		residual, res.residualRows = relativeResidual(enc, m.p("hnet.residual_proj.weight"), tokenCell, inference)
	}
	gate := res.Routing.Confidence
	if prob != res.Routing.P {
		gate = confidence(prob, res.Routing.Natural)
	}
	if keptGate {
		// The router's decision after tail dropping: a boundary it kept.
		// A cell kept only because its sample runs dense stays the
		// router's non-boundary.
		marked := make([]bool, len(kept))
		for i, k := range kept {
			marked[i] = k && res.Routing.Natural[i]
		}
		gate = confidence(prob, marked)
	}
	h := ops.ScaleRows(back, ops.STE(gate))
	if residual != nil {
		h = ops.Add(h, residual)
	}
	var wide mat.Tensor
	if cfg.WideHead {
		wide = finalLayer(m.Params, "wide_head.", h, c, g)
	}

	// Decoder and final layer.
	cDecoder := cScaffold
	if cfg.ChosenEmbedding && slices.Contains(changed, true) {
		flag := make([]float32, g.batch)
		for b, c := range changed {
			if c {
				flag[b] = 1
			}
		}
		zero := constant(g.batch, cfg.CondDim, make([]float32, g.batch*cfg.CondDim))
		chosen := ops.ScaleRows(ops.AddRowVector(zero, m.p("hnet.decoder.chosen_embedding")), constant(g.batch, 1, flag))
		cDecoder = ops.Add(cScaffold, chosen)
	}
	for i := range cfg.DecoderBlocks {
		h = m.block(cfg.EncoderBlocks+i, fmt.Sprintf("hnet.decoder.layers.%d.", i), h, cDecoder, g, res, inference)
	}
	h = ops.RMSNorm(h, m.p("hnet.decoder.rmsnorm.weight"), RMSNormEps)
	res.Out = finalLayer(m.Params, "final_layer.", h, cDecoder, g)
	if wide != nil {
		res.Out = ops.Add(res.Out, wide)
	}
	if cfg.LatentSkip {
		diff := ops.Sub(x, ops.GatherRows(x, tokenCell))
		scale := ops.Linear(ops.SiLU(c), m.p("latent_skip.scale.weight"), m.p("latent_skip.scale.bias"))
		zero := constant(g.batch, cfg.CellOut(), make([]float32, g.batch*cfg.CellOut()))
		res.Out = ops.Add(res.Out, ops.Modulate(ops.Linear(diff, m.p("latent_skip.weight"), nil), zero, scale, g.offsets()))
	}
	return res, nil
}

// scaffoldCond is the vector the scaffold's own blocks read of the
// backbone's c [batch, CondDim]: through the adaptor when there is one (a
// [B, CondDim] tensor is B groups of one row).
func (m *Model) scaffoldCond(c mat.Tensor, batch int) mat.Tensor {
	if !m.Config.CondNorm {
		return c
	}
	return ops.GroupNorm(c, m.p("cond_norm.weight"), m.p("cond_norm.bias"), batch, 1, CondNormEps)
}

// encode runs the encoder on x [B·L, InChannels·p²] under the scaffold's
// vector c: latent embedder, conv blocks, RMSNorm → [B·L, D], recorded in
// res.Encoded.
func (m *Model) encode(x, c mat.Tensor, g grid, res *Result, inference bool) mat.Tensor {
	cfg := m.Config
	res.idle = make([]bool, cfg.EncoderBlocks+cfg.DecoderBlocks)
	h := g.conv3x3(x, m.p("x_embedder.proj.weight"), m.p("x_embedder.proj.bias")) // [B·L, E]
	for i := range cfg.EncoderBlocks {
		h = m.block(i, fmt.Sprintf("hnet.encoder.layers.%d.", i), h, c, g, res, inference)
	}
	if !cfg.NoEncoderNorm {
		h = ops.RMSNorm(h, m.p("hnet.encoder.rmsnorm.weight"), RMSNormEps)
	}
	res.Encoded = h
	return h
}

// block runs conv block i of all (the encoder's, then the decoder's) and
// records in res whether its residual branch was idle.
func (m *Model) block(i int, prefix string, h, c mat.Tensor, g grid, res *Result, inference bool) mat.Tensor {
	res.idle[i] = idleBranch(m.Params, prefix, inference)
	return convBlock(m.Params, prefix, h, c, g, m.Config.NormGroups, res.idle[i])
}

// relativeResidual is residual_proj of each cell's encoding less that of
// the kept cell it takes its features from (tokenCell), without a bias,
// which would cancel: [B·L, D]. It also returns the rows it ran. A kept
// cell's difference is exactly zero, so inference runs the dropped cells
// only (nil when every cell is kept). Training runs every cell: the same
// gradients, summed in the order they always were, so that a training
// run's trajectory, which rounding alone can move (docs/results.md,
// 2026-11-29), stays the one its recipe always gave.
func relativeResidual(enc, w mat.Tensor, tokenCell []int, inference bool) (mat.Tensor, int) {
	if !inference {
		return ops.Linear(ops.Sub(enc, ops.GatherRows(enc, tokenCell)), w, nil), len(tokenCell)
	}
	var dropped, from []int
	for i, j := range tokenCell {
		if i != j {
			dropped, from = append(dropped, i), append(from, j)
		}
	}
	if len(dropped) == 0 {
		return nil, 0
	}
	diff := ops.Sub(ops.GatherRows(enc, dropped), ops.GatherRows(enc, from))
	return ops.ScatterRows(ops.Linear(diff, w, nil), dropped, len(tokenCell)), len(dropped)
}

// changedSamples reports, per sample of a batch, whether a Chooser's
// mask chosen differs from the router's kept.
func changedSamples(kept, chosen []bool, batch int) []bool {
	L := len(kept) / batch
	out := make([]bool, batch)
	for b := range batch {
		out[b] = !slices.Equal(kept[b*L:(b+1)*L], chosen[b*L:(b+1)*L])
	}
	return out
}

// ownedOnly is the router's probabilities prob [B·L, 1] with the rows of
// every sample whose cells a Chooser changed (changedSamples) read as
// constants: the router learns nothing from a choice that was not its
// own. Trained through them, it was told to raise or lower cells it did
// not keep by the tokens of other cells. The values are prob's; prob
// itself when no sample changed.
func ownedOnly(prob mat.Tensor, changed []bool) mat.Tensor {
	if !slices.Contains(changed, true) {
		return prob
	}
	N := prob.Shape()[0]
	L := N / len(changed)
	own, other := make([]float32, N), make([]float32, N)
	for i := range N {
		if changed[i/L] {
			other[i] = 1
		} else {
			own[i] = 1
		}
	}
	fixed := constant(N, 1, append([]float32(nil), mat.Data[float32](prob.Value())...))
	return ops.Add(ops.Mul(prob, constant(N, 1, own)), ops.Mul(fixed, constant(N, 1, other)))
}

// DetachedLogits runs the router again on a copy of this pass's encoder
// output that carries no gradient, and returns its logits [B·L, 1]: a
// loss on them trains the router's own weights and leaves the encoder,
// whose features the backbone reads, to the prediction's loss.
func (m *Model) DetachedLogits(r *Result) mat.Tensor {
	enc := mat.Data[float32](r.Encoded.Value())
	sh := r.Encoded.Shape()
	c := constant(sh[0], sh[1], append([]float32(nil), enc...))
	g := grid{batch: r.batch, rows: m.Config.CellRows(), cols: m.Config.CellCols(), patch: m.Config.Patch()}
	return route(m.Params, c, g, m.Config.RouterGroups).Logit
}

// finalLayer is DiT's output layer on every cell of h [B·L, width]: an
// affine-free LayerNorm, shift and scale from c, a Linear.
func finalLayer(p *params.Set, prefix string, h, c mat.Tensor, g grid) mat.Tensor {
	w := h.Shape()[1]
	mod := ops.Linear(ops.SiLU(c), p.Get(prefix+"adaLN_modulation.1.weight"), p.Get(prefix+"adaLN_modulation.1.bias")) // [B, 2w]
	h = ops.Modulate(ops.LayerNorm(h, FinalNormEps), ops.SliceCols(mod, 0, w), ops.SliceCols(mod, w, 2*w), g.offsets())
	return ops.Linear(h, p.Get(prefix+"linear.weight"), p.Get(prefix+"linear.bias"))
}

// Predict runs the whole model without keeping gradients' inputs: latents
// x [B, C, H, W] and the conditioning in (one timestep and one label or
// caption per sample) give the prediction [B, OutChannels, H, W] and the
// forward's result (for the masks and kept counts).
func (m *Model) Predict(x []float32, in cond.Input, frac []float32) ([]float32, *Result, error) {
	return m.PredictChoosing(x, in, frac, nil)
}

// PredictChoosing is Predict with the kept cells of every sample chosen by
// choose (nil: the router's, as Predict).
func (m *Model) PredictChoosing(x []float32, in cond.Input, frac []float32, choose Chooser) ([]float32, *Result, error) {
	return m.predict(x, in, frac, choose, nil)
}

// predict is Predict with the kept cells chosen by choose and planned by
// plan (each nil: not at all).
func (m *Model) predict(x []float32, in cond.Input, frac []float32, choose Chooser, plan Planner) ([]float32, *Result, error) {
	return m.run(x, in, func(x mat.Tensor, c cond.Value) (*Result, error) {
		return m.forward(x, c, frac, choose, plan, false, true)
	})
}

// run is a prediction on latents x [B, C, H, W] under the conditioning in
// by forward, given them as cells and the backbone's conditioning.
func (m *Model) run(x []float32, in cond.Input, forward func(mat.Tensor, cond.Value) (*Result, error)) ([]float32, *Result, error) {
	cfg := m.Config
	B := in.Samples()
	if len(x) != B*cfg.InChannels*cfg.Tokens() {
		return nil, nil, fmt.Errorf("dc: predict: %d latent values for %d timesteps, want [%d, %d, %d, %d] latents",
			len(x), B, B, cfg.InChannels, cfg.GridRows, cfg.GridCols)
	}
	c, err := m.Backbone.Condition(in)
	if err != nil {
		return nil, nil, fmt.Errorf("dc: backbone conditioning: %w", err)
	}
	tokens := ToTokens(x, B, cfg.InChannels, cfg.GridRows, cfg.GridCols, cfg.Patch())
	res, err := forward(constant(B*cfg.Cells(), cfg.CellIn(), tokens), c)
	if err != nil {
		return nil, nil, err
	}
	out := FromTokens(mat.Data[float32](res.Out.Value()), B, cfg.OutChannels, cfg.GridRows, cfg.GridCols, cfg.Patch())
	return out, res, nil
}

// RatioLoss returns H-Net's ratio (load-balancing) loss of a forward pass,
// as a 1×1 matrix that carries gradients to the router: per group of
// groupSize samples (0: the whole batch), F = the fraction of natural
// (pre-drop) boundaries and G = the mean boundary probability (forced
// tokens included), loss = N/(N−1)·((N−1)·F·G + (1−F)·(1−G)), averaged over
// groups. The batch must divide into whole groups.
func (r *Result) RatioLoss(targetN float64, groupSize int) (mat.Tensor, error) {
	if !(targetN > 1) {
		return nil, fmt.Errorf("dc: ratio loss: N = %v, want > 1", targetN)
	}
	if groupSize == 0 {
		groupSize = r.batch
	}
	if groupSize < 0 || r.batch%groupSize != 0 {
		return nil, fmt.Errorf("dc: ratio loss: a batch of %d does not split into groups of %d", r.batch, groupSize)
	}
	groups := r.batch / groupSize
	N := len(r.Routing.Natural)
	per := N / groups
	off := make([]int, groups+1)
	a, b := make([]float32, groups), 0.0
	for g := range groups {
		off[g+1] = (g + 1) * per
		nat := 0
		for _, v := range r.Routing.Natural[g*per : (g+1)*per] {
			if v {
				nat++
			}
		}
		F := float64(nat) / float64(per)
		// loss_g = k·((N−1)·F − (1−F))·G + k·(1−F), k = N/(N−1).
		k := targetN / (targetN - 1)
		a[g] = float32(k * ((targetN-1)*F - (1 - F)) / float64(groups))
		b += k * (1 - F) / float64(groups)
	}
	G := ops.MeanRows(r.Routing.P, off) // [groups, 1]
	loss := ops.Sum(ops.Mul(G, constant(groups, 1, a)))
	return ops.Add(loss, constant(1, 1, []float32{float32(b)})), nil
}

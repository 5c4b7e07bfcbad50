package zimage

import (
	"fmt"

	"github.com/nlpodyssey/spago/mat"

	"github.com/dcdit/dcdit/cond"
	"github.com/dcdit/dcdit/loaders/arch"
	"github.com/dcdit/dcdit/ops"
	"github.com/dcdit/dcdit/params"
	"github.com/dcdit/dcdit/posembed"
)

// finalEps is the eps of the final layer's affine-free LayerNorm
// (hard-coded 1e-6 in the reference, unlike norm_eps).
const finalEps = 1e-6

// Model is a Z-Image transformer whose parameters live in one flat arena
// (package params), computed with dcdit's ops over packed token streams.
type Model struct {
	Config *arch.ZImageConfig
	// Params holds every trainable tensor under its internal name (see
	// Weights), in the order of arch.ExpectedZImage with arch.Comfy.
	Params *params.Set
	// Rope is the 3-axis rotary embedding of the config.
	Rope Rope

	// tensors maps names to the matrices the ops read: Params' entries,
	// or float64 matrices in gradient checks (f64).
	tensors map[string]mat.Tensor
	// bf16 holds the Linear weights kept as bfloat16 outside Params
	// (LoadOptions.KeepBF16); nil otherwise.
	bf16 map[string]*ops.BF16Matrix
	f64  bool
	// names is the prefix of every name in Params (not in tensors): ""
	// but for a model stored inside a DC model (PrefixNames).
	names string
}

// PrefixNames renames every parameter in Params prefix + its name, in
// place (params.Set.AddPrefix: nothing is copied, which matters at 6 B
// parameters); the model computes as before. A DC model stores a Z-Image
// backbone's tensors under such a prefix (dc.BackbonePrefix), so that its
// patch embedding and final layer, which the scaffold replaces, do not
// clash with the scaffold's own x_embedder and final_layer. Rename before
// joining the arena with another (params.Join).
func (m *Model) PrefixNames(prefix string) {
	m.Params.AddPrefix(prefix)
	m.names = prefix + m.names
}

// paramSpecs lists the tensors of a config as matrices, in the
// expected-key order: vectors as [n, 1], x_pad_token and cap_pad_token
// as the [1, D] rows they are.
func paramSpecs(cfg *arch.ZImageConfig) []params.Spec {
	exp := arch.ExpectedZImage(cfg, arch.Comfy)
	specs := make([]params.Spec, len(exp))
	for i, name := range exp.Names() {
		shape := exp.Shape(i)
		rows, cols := int(shape[0]), 1
		if len(shape) == 2 {
			cols = int(shape[1])
		}
		specs[i] = params.Spec{Name: name, Rows: rows, Cols: cols}
	}
	return specs
}

// New builds a model from loaded weights, copying them into the arena.
func New(w *Weights) (*Model, error) {
	if err := CheckConfig(w.Config); err != nil {
		return nil, fmt.Errorf("zimage: %w", err)
	}
	set, err := params.New(paramSpecs(w.Config))
	if err != nil {
		return nil, fmt.Errorf("zimage: %w", err)
	}
	m := newModel(w.Config)
	m.Params = set
	for _, p := range set.List() {
		src, ok := w.Params[p.Name]
		if !ok {
			return nil, fmt.Errorf("zimage: weights lack %q", p.Name)
		}
		if n := len(p.Values()); len(src.Data) != n {
			return nil, fmt.Errorf("zimage: %q has %d values, want %d", p.Name, len(src.Data), n)
		}
		copy(p.Values(), src.Data)
		m.tensors[p.Name] = p
	}
	return m, nil
}

func newModel(cfg *arch.ZImageConfig) *Model {
	axes := make([]int, len(cfg.AxesDims))
	for i, d := range cfg.AxesDims {
		axes[i] = int(d)
	}
	return &Model{Config: cfg, Rope: Rope{AxesDims: axes, Theta: cfg.RopeTheta}, tensors: map[string]mat.Tensor{}}
}

// p returns a named parameter; the names are the model code's own, so an
// unknown one is a bug.
func (m *Model) p(name string) mat.Tensor {
	t, ok := m.tensors[name]
	if !ok {
		panic(fmt.Sprintf("zimage: no parameter %q", name))
	}
	return t
}

// linear is ops.Linear with the named weight, read as bfloat16 by
// ops.LinearBF16 where the model keeps it so.
func (m *Model) linear(x mat.Tensor, weight string, b mat.Tensor) mat.Tensor {
	if w, ok := m.bf16[weight]; ok {
		return ops.LinearBF16(x, w, b)
	}
	return ops.Linear(x, m.p(weight), b)
}

// constant wraps host-computed data as a matrix of the model's element
// type that takes no gradient.
func (m *Model) constant(rows, cols int, v []float32) mat.Tensor {
	if m.f64 {
		d := make([]float64, len(v))
		for i, x := range v {
			d[i] = float64(x)
		}
		return mat.NewDense[float64](mat.WithShape(rows, cols), mat.WithBacking(d))
	}
	return mat.NewDense[float32](mat.WithShape(rows, cols), mat.WithBacking(v))
}

// Stream is one packed token stream: sample s owns rows offsets[s] ≤ r <
// offsets[s+1], and Freqs [N, head width] holds each row's rotary factors.
type Stream struct {
	Offsets []int
	Freqs   mat.Tensor
}

// NewStream makes the stream of tokens at positions pos (three real
// numbers per row) packed by offsets.
func (m *Model) NewStream(offsets []int, pos []float64) Stream {
	hd := m.Rope.HeadDim()
	n := len(pos) / 3
	f := make([]float32, n*hd)
	m.Rope.Freqs(f, pos)
	return Stream{Offsets: offsets, Freqs: m.constant(n, hd, f)}
}

// TimestepFrequencies returns the sinusoidal features of the model times t
// (in [0, 1], 0 at pure noise), [len(t), frequency size]: the reference
// scales by t_scale in float32, then embeds as DiT does.
func (m *Model) TimestepFrequencies(t []float32) []float32 {
	c := m.Config
	ts := make([]float32, len(t))
	for i, v := range t {
		ts[i] = v * float32(c.TScale)
	}
	freq := make([]float32, len(t)*c.FrequencySize)
	posembed.TimestepFrequencies(freq, ts, c.FrequencySize)
	return freq
}

// Timestep returns adaln_input = t_embedder(t·t_scale) [B, adaLN width]:
// Linear → SiLU → Linear, with no activation after it (blocks read it
// directly; the final layer applies SiLU itself).
func (m *Model) Timestep(t []float32) mat.Tensor {
	freq := m.TimestepFrequencies(t)
	h := m.linear(m.constant(len(t), m.Config.FrequencySize, freq), "t_embedder.mlp.0.weight", m.p("t_embedder.mlp.0.bias"))
	return m.linear(ops.SiLU(h), "t_embedder.mlp.2.weight", m.p("t_embedder.mlp.2.bias"))
}

// EmbedImage embeds the real image tokens patches [n, pF·pH·pW·C] (all
// items' Patchify output, concatenated) and lays them out as the image
// stream of l, pad rows taking x_pad_token: [image stream rows, D].
func (m *Model) EmbedImage(patches []float32, l *Layout) mat.Tensor {
	c := m.Config
	in := c.FPatchSize * c.PatchSize * c.PatchSize * c.InChannels
	x := m.linear(m.constant(len(patches)/in, in, patches), "x_embedder.weight", m.p("x_embedder.bias"))
	return ops.GatherRows(ops.ConcatRows(x, m.p("x_pad_token")), l.ImageRows)
}

// EmbedCaption embeds the real caption features feats [n, cap_feat_dim]
// (all items' rows, concatenated) with RMSNorm then Linear, and lays them
// out as the caption stream of l, pad rows taking cap_pad_token.
func (m *Model) EmbedCaption(feats []float32, l *Layout) mat.Tensor {
	in := m.Config.CapFeatDim
	h := ops.RMSNorm(m.constant(len(feats)/in, in, feats), m.p("cap_embedder.0.weight"), m.Config.NormEps)
	x := m.linear(h, "cap_embedder.1.weight", m.p("cap_embedder.1.bias"))
	return ops.GatherRows(ops.ConcatRows(x, m.p("cap_pad_token")), l.CaptionRows)
}

// attend is Z-Image's attention between the fused projection qkv
// [N, 3·D] and the output projection: per-head RMSNorm of q and k, then
// RoPE, then softmax attention within each sample of s.
func (m *Model) attend(prefix string, qkv mat.Tensor, s Stream) mat.Tensor {
	D, H := m.Config.Dim, m.Config.NHeads
	q, k, v := ops.SliceCols(qkv, 0, D), ops.SliceCols(qkv, D, 2*D), ops.SliceCols(qkv, 2*D, 3*D)
	if m.Config.QKNorm {
		q = ops.RMSNormHeads(q, m.p(prefix+"attention.q_norm.weight"), H, m.Config.NormEps)
		k = ops.RMSNormHeads(k, m.p(prefix+"attention.k_norm.weight"), H, m.Config.NormEps)
	}
	q, k = ops.RoPE(q, s.Freqs, H), ops.RoPE(k, s.Freqs, H)
	return ops.Attention(ops.ConcatCols(q, k, v), s.Offsets, H) // [N, D]
}

// Block applies the transformer block named by prefix (e.g. "layers.3.")
// to the stream s with rows x [N, D]. With adaln ([S, adaLN width]) the
// block is modulated (noise_refiner, layers); with nil it is not
// (context_refiner).
func (m *Model) Block(prefix string, x, adaln mat.Tensor, s Stream) mat.Tensor {
	return m.blockWith(prefix, x, adaln, s.Offsets, func(qkv mat.Tensor) mat.Tensor { return m.attend(prefix, qkv, s) })
}

// blockWith is Block with the attention core (from the fused projection to
// the heads' output, before attention.out) supplied by the caller: the
// reference's batch-padding rows, which attend but are never attended,
// are computed with it in tests.
func (m *Model) blockWith(prefix string, x, adaln mat.Tensor, offsets []int, attend func(qkv mat.Tensor) mat.Tensor) mat.Tensor {
	D, eps := m.Config.Dim, m.Config.NormEps
	w := func(name string) mat.Tensor { return m.p(prefix + name) }
	linear := func(x mat.Tensor, name string) mat.Tensor { return m.linear(x, prefix+name, nil) }
	// Scale-only modulation and tanh gates: Linear(adaln) splits into
	// scale_msa, gate_msa, scale_mlp, gate_mlp (no shift, no SiLU before).
	var scaleMSA, gateMSA, scaleMLP, gateMLP, noShift mat.Tensor
	if adaln != nil {
		mod := m.linear(adaln, prefix+"adaLN_modulation.0.weight", w("adaLN_modulation.0.bias")) // [S, 4D]
		chunk := func(k int) mat.Tensor { return ops.SliceCols(mod, k*D, (k+1)*D) }
		scaleMSA, gateMSA, scaleMLP, gateMLP = chunk(0), ops.Tanh(chunk(1)), chunk(2), ops.Tanh(chunk(3))
		S := len(offsets) - 1
		noShift = m.constant(S, D, make([]float32, S*D))
	}
	modulate := func(h, scale mat.Tensor) mat.Tensor {
		if adaln == nil {
			return h
		}
		return ops.Modulate(h, noShift, scale, offsets) // h·(1 + scale)
	}
	residual := func(x, h, gate mat.Tensor) mat.Tensor {
		if adaln == nil {
			return ops.Add(x, h)
		}
		return ops.GatedResidual(x, gate, h, offsets)
	}

	h := modulate(ops.RMSNorm(x, w("attention_norm1.weight"), eps), scaleMSA)
	a := attend(linear(h, "attention.qkv.weight")) // [N, D]
	a = ops.RMSNorm(linear(a, "attention.out.weight"), w("attention_norm2.weight"), eps)
	x = residual(x, a, gateMSA)

	h = modulate(ops.RMSNorm(x, w("ffn_norm1.weight"), eps), scaleMLP)
	// SwiGLU: w2(SiLU(w1·h) ∘ w3·h).
	f := ops.Mul(ops.SiLU(linear(h, "feed_forward.w1.weight")), linear(h, "feed_forward.w3.weight"))
	f = ops.RMSNorm(linear(f, "feed_forward.w2.weight"), w("ffn_norm2.weight"), eps)
	return residual(x, f, gateMLP)
}

// NoiseRefiner applies the noise_refiner blocks (modulated) to the image
// stream.
func (m *Model) NoiseRefiner(x, adaln mat.Tensor, s Stream) mat.Tensor {
	for i := range m.Config.NRefinerLayers {
		x = m.Block(fmt.Sprintf("noise_refiner.%d.", i), x, adaln, s)
	}
	return x
}

// ContextRefiner applies the context_refiner blocks (not modulated) to
// the caption stream.
func (m *Model) ContextRefiner(x mat.Tensor, s Stream) mat.Tensor {
	for i := range m.Config.NRefinerLayers {
		x = m.Block(fmt.Sprintf("context_refiner.%d.", i), x, nil, s)
	}
	return x
}

// Layers applies the main layers (modulated) to the unified stream.
func (m *Model) Layers(x, adaln mat.Tensor, s Stream) mat.Tensor {
	for i := range m.Config.NLayers {
		x = m.Block(fmt.Sprintf("layers.%d.", i), x, adaln, s)
	}
	return x
}

// Unify joins the image stream img and the caption stream txt into the
// unified stream of l ([image sequence ; caption sequence] per item).
func (m *Model) Unify(img, txt mat.Tensor, l *Layout) mat.Tensor {
	return ops.GatherRows(ops.ConcatRows(img, txt), l.UnifiedRows)
}

// FinalLayer maps rows x [N, D] packed by offsets to patch outputs
// [N, pF·pH·pW·C]: affine-free LayerNorm (eps 1e-6) scaled by
// 1 + Linear(SiLU(adaln)) (no shift), then Linear.
func (m *Model) FinalLayer(x, adaln mat.Tensor, offsets []int) mat.Tensor {
	D := m.Config.Dim
	scale := m.linear(ops.SiLU(adaln), "final_layer.adaLN_modulation.1.weight", m.p("final_layer.adaLN_modulation.1.bias"))
	S := len(offsets) - 1
	h := ops.Modulate(ops.LayerNorm(x, finalEps), m.constant(S, D, make([]float32, S*D)), scale, offsets)
	return m.linear(h, "final_layer.linear.weight", m.p("final_layer.linear.bias"))
}

// Batch is a prepared forward input: the layout and the host-side data.
type Batch struct {
	Layout *Layout
	// Patches are the real image tokens of all items, concatenated
	// ([Σ ImageLen, pF·pH·pW·C]); Captions the real caption rows.
	Patches, Captions []float32
	T                 []float32
	latents           []Latent
}

// Prepare validates a batch (latents x, model times t, caption features
// caps, each [L_i, cap_feat_dim]) and lays it out.
func (m *Model) Prepare(x []Latent, t []float32, caps [][]float32) (*Batch, error) {
	c := m.Config
	if len(x) != len(t) || len(x) != len(caps) || len(x) == 0 {
		return nil, fmt.Errorf("zimage: %d latents, %d times and %d captions, want the same positive number", len(x), len(t), len(caps))
	}
	b := &Batch{T: append([]float32(nil), t...), latents: x}
	grids := make([][3]int, len(x))
	lens := make([]int, len(x))
	for s, lat := range x {
		g, err := Grid(c, lat.F, lat.H, lat.W)
		if err != nil {
			return nil, fmt.Errorf("%w (item %d)", err, s)
		}
		if want := c.InChannels * lat.F * lat.H * lat.W; len(lat.Data) != want {
			return nil, fmt.Errorf("zimage: item %d has %d latent values, want %d (C×F×H×W = %d×%d×%d×%d)", s, len(lat.Data), want, c.InChannels, lat.F, lat.H, lat.W)
		}
		if len(caps[s])%c.CapFeatDim != 0 {
			return nil, fmt.Errorf("zimage: item %d has %d caption values, not a multiple of cap_feat_dim %d", s, len(caps[s]), c.CapFeatDim)
		}
		grids[s], lens[s] = g, len(caps[s])/c.CapFeatDim
		b.Patches = Patchify(b.Patches, lat.Data, c.InChannels, lat.F, lat.H, lat.W, c.FPatchSize, c.PatchSize)
		b.Captions = append(b.Captions, caps[s]...)
	}
	l, err := NewLayout(grids, lens, m.Config.SeqMultiple())
	if err != nil {
		return nil, err
	}
	b.Layout = l
	return b, nil
}

// Run is the whole forward pass of a prepared batch: patch outputs of the
// real image tokens [Σ ImageLen, pF·pH·pW·C], item after item
// (Unpatchify each item's rows into its latent shape).
func (m *Model) Run(b *Batch) mat.Tensor {
	x, adaln := m.hidden(b)
	return m.FinalLayer(x, adaln, b.Layout.OutputOffsets())
}

// hidden is Run before the final layer: the real image tokens' hidden
// states after the main layers [Σ ImageLen, D], item after item, and the
// adaLN input. The final layer is per row, so only the rows that become
// the output are kept.
func (m *Model) hidden(b *Batch) (x, adaln mat.Tensor) {
	l := b.Layout
	u, adaln, s := m.unified(b)
	x = m.Layers(u, adaln, s)
	return ops.GatherRows(x, l.OutputRows), adaln
}

// unified is hidden before the main layers: the unified stream of the
// refined image and caption tokens, the adaLN input and the stream's
// layout.
func (m *Model) unified(b *Batch) (u, adaln mat.Tensor, s Stream) {
	l := b.Layout
	adaln = m.Timestep(b.T)
	img := m.NoiseRefiner(m.EmbedImage(b.Patches, l), adaln, m.NewStream(l.ImageOffsets, l.ImagePos))
	txt := m.ContextRefiner(m.EmbedCaption(b.Captions, l), m.NewStream(l.CaptionOffsets, l.CaptionPos))
	return m.Unify(img, txt, l), adaln, m.NewStream(l.UnifiedOffsets, l.UnifiedPos())
}

// Images rearranges Run's output into each item's latent shape
// [C, F, H, W] (the reference model's output list).
func (m *Model) Images(out mat.Tensor, b *Batch) [][]float32 {
	c := m.Config
	v := mat.Data[float32](out.Value())
	per := c.FPatchSize * c.PatchSize * c.PatchSize * c.InChannels
	imgs := make([][]float32, len(b.latents))
	row := 0
	for s, lat := range b.latents {
		imgs[s] = make([]float32, c.InChannels*lat.F*lat.H*lat.W)
		n := b.Layout.ImageLen[s]
		Unpatchify(imgs[s], v[row*per:(row+n)*per], c.InChannels, lat.F, lat.H, lat.W, c.FPatchSize, c.PatchSize)
		row += n
	}
	return imgs
}

// Forward runs the model on latents x at model times t (1 − σ, in [0, 1])
// with caption features caps, returning each item's output [C, F, H, W]
// (the reference's velocity x0 − ε). It keeps no graph.
func (m *Model) Forward(x []Latent, t []float32, caps [][]float32) ([][]float32, error) {
	b, err := m.Prepare(x, t, caps)
	if err != nil {
		return nil, err
	}
	if m.Params != nil && m.Params.RequiresGrad() {
		m.Params.SetRequiresGrad(false)
		defer m.Params.SetRequiresGrad(true)
	}
	return m.Images(m.Run(b), b), nil
}

// Predict runs the model on a batch of single-frame latents x [B, C, H, W]
// under in (one model time and one caption per sample, in.Captions'
// valid rows read), returning the outputs [B, C, H, W] in one slice: a
// sampler's or a distillation teacher's call. It keeps no graph.
func (m *Model) Predict(x []float32, in cond.Input, h, w int) ([]float32, error) {
	lats, caps, err := m.items(x, in, h, w)
	if err != nil {
		return nil, err
	}
	imgs, err := m.Forward(lats, in.T, caps)
	if err != nil {
		return nil, err
	}
	return concat(imgs, len(x)), nil
}

// items are a batch of single-frame latents x [B, C, H, W] and in's
// captions as Forward takes them.
func (m *Model) items(x []float32, in cond.Input, h, w int) ([]Latent, [][]float32, error) {
	c := m.Config
	if err := in.CheckCaptions(c.CapFeatDim); err != nil {
		return nil, nil, fmt.Errorf("zimage: %w", err)
	}
	per := c.InChannels * h * w
	if len(x) != len(in.T)*per {
		return nil, nil, fmt.Errorf("zimage: %d latent values for %d samples of [%d %d %d]", len(x), len(in.T), c.InChannels, h, w)
	}
	lats := make([]Latent, len(in.T))
	caps := make([][]float32, len(in.T))
	for i := range lats {
		lats[i] = Latent{Data: x[i*per : (i+1)*per], F: 1, H: h, W: w}
		caps[i] = in.Captions[i].Features[:in.Captions[i].Len*c.CapFeatDim]
	}
	return lats, caps, nil
}

// concat joins the items' outputs into one slice of n values.
func concat(imgs [][]float32, n int) []float32 {
	out := make([]float32, 0, n)
	for _, v := range imgs {
		out = append(out, v...)
	}
	return out
}

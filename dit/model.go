package dit

import (
	"fmt"

	"github.com/nlpodyssey/spago/mat"

	"github.com/dcdit/dcdit/adaln"
	"github.com/dcdit/dcdit/loaders/arch"
	"github.com/dcdit/dcdit/ops"
	"github.com/dcdit/dcdit/params"
)

// Model is a DiT whose parameters live in one flat arena (package params),
// computed with dcdit's ops. Its blocks run on packed tokens (several
// samples' token rows concatenated, sample s owning rows
// offsets[s]..offsets[s+1]), so the same model serves fixed-patch DiT and
// the DC scaffold's kept tokens.
type Model struct {
	Config *arch.DiTConfig
	// Params holds every trainable tensor under its original name, in the
	// order of arch.ExpectedDiT; pos_embed is fixed and not among them.
	Params *params.Set
	// posEmbed is the fixed [T, D] table at the native grid.
	posEmbed []float32
	// names is the prefix of every name in Params: "" but for a model
	// stored inside a DC model (PrefixNames).
	names string
}

// PrefixNames renames every parameter prefix + its name, in place
// (params.Set.AddPrefix: nothing is copied); the model computes as
// before, and Save still writes DiT's own names. A DC model stores a DiT
// backbone's tensors under such a prefix (dc.BackbonePrefix), so that its
// patch embedding and final layer, which the scaffold replaces, do not
// clash with the scaffold's own x_embedder and final_layer. Rename before
// joining the arena with another (params.Join).
func (m *Model) PrefixNames(prefix string) {
	m.Params.AddPrefix(prefix)
	m.names = prefix + m.names
}

// paramSpecs lists the trainable tensors of a config as matrices, in the
// expected-key order.
func paramSpecs(cfg *arch.DiTConfig) []params.Spec {
	exp := arch.ExpectedDiT(cfg, arch.Original)
	var specs []params.Spec
	for i, name := range exp.Names() {
		if name == "pos_embed" {
			continue
		}
		rows, cols := matrixShape(exp.Shape(i))
		specs = append(specs, params.Spec{Name: name, Rows: rows, Cols: cols})
	}
	return specs
}

// New builds a model from loaded weights, copying them into the arena.
func New(w *Weights) (*Model, error) {
	set, err := params.New(paramSpecs(w.Config))
	if err != nil {
		return nil, fmt.Errorf("dit: %w", err)
	}
	m := &Model{Config: w.Config, Params: set}
	for _, p := range set.List() {
		src, ok := w.Params[p.Name]
		if !ok {
			return nil, fmt.Errorf("dit: weights lack %q", p.Name)
		}
		if n := len(p.Values()); len(src.Data) != n {
			return nil, fmt.Errorf("dit: %q has %d values, want %d", p.Name, len(src.Data), n)
		}
		copy(p.Values(), src.Data)
	}
	pos, ok := w.Params["pos_embed"]
	if !ok {
		return nil, fmt.Errorf("dit: weights lack %q", "pos_embed")
	}
	m.posEmbed = pos.Data
	return m, nil
}

// matrixShape views a tensor as a matrix: vectors as [n, 1], higher ranks
// flattened after the first dimension (a conv weight [D, C, p, p] becomes
// [D, C·p·p], the Linear over channel-major patches).
func matrixShape(shape []int64) (rows, cols int) {
	if len(shape) == 1 {
		return int(shape[0]), 1
	}
	cols = 1
	for _, d := range shape[1:] {
		cols *= int(d)
	}
	return int(shape[0]), cols
}

func (m *Model) p(name string) *params.Param { return m.Params.Get(m.names + name) }

// constant wraps data as a matrix that takes no gradient.
func constant(rows, cols int, data []float32) mat.Tensor {
	return mat.NewDense[float32](mat.WithShape(rows, cols), mat.WithBacking(data))
}

// condition returns c = t_embedder(t) + y_embedder(y), [B, D]
// (adaln.Embedders; see Condition); a label outside the table panics in
// the ops.
func (m *Model) condition(t []float32, y []int) mat.Tensor {
	return adaln.Embedders(m.Params, m.names, m.Config.FrequencySize, t, y)
}

// Block applies transformer block i to packed tokens x [N, D] under the
// per-sample conditioning c [S, D] (adaln.ApplyBlock: adaLN-Zero, DiT's
// math exactly).
func (m *Model) Block(i int, x, c mat.Tensor, offsets []int) mat.Tensor {
	return adaln.ApplyBlock(m.Params, fmt.Sprintf("%sblocks.%d.", m.names, i), m.Config.NumHeads, x, c, offsets)
}

// Blocks applies every block in turn.
func (m *Model) Blocks(x, c mat.Tensor, offsets []int) mat.Tensor {
	for i := range m.Config.Depth {
		x = m.Block(i, x, c, offsets)
	}
	return x
}

// FinalLayer maps packed tokens to patch outputs [N, p·p·C_out]
// (feature index (pi·p + pj)·C_out + channel).
func (m *Model) FinalLayer(x, c mat.Tensor, offsets []int) mat.Tensor {
	D := m.Config.HiddenSize
	mod := ops.Linear(ops.SiLU(c), m.p("final_layer.adaLN_modulation.1.weight"), m.p("final_layer.adaLN_modulation.1.bias"))
	shift, scale := ops.SliceCols(mod, 0, D), ops.SliceCols(mod, D, 2*D) // shift first
	h := ops.Modulate(ops.LayerNorm(x, adaln.NormEps), shift, scale, offsets)
	return ops.Linear(h, m.p("final_layer.linear.weight"), m.p("final_layer.linear.bias"))
}

// Embed patchifies latents x ([B, C, H, W] with H = W = InputSize) and
// returns the tokens x_embedder(x) + pos_embed, [B·T, D], and the offsets
// of the B samples.
func (m *Model) Embed(x []float32, batch int) (mat.Tensor, []int) {
	c := m.Config
	g := c.InputSize / c.PatchSize
	T := g * g
	patches := Patchify(x, batch, c.InChannels, c.InputSize, c.PatchSize)
	tokens := ops.Linear(constant(batch*T, c.InChannels*c.PatchSize*c.PatchSize, patches), m.p("x_embedder.proj.weight"), m.p("x_embedder.proj.bias"))
	pos := make([]float32, batch*T*c.HiddenSize)
	for b := range batch {
		copy(pos[b*T*c.HiddenSize:], m.posEmbed)
	}
	offsets := make([]int, batch+1)
	for b := range offsets {
		offsets[b] = b * T
	}
	return ops.Add(tokens, constant(batch*T, c.HiddenSize, pos)), offsets
}

// ForwardLatents runs the whole fixed-patch model: latents x
// [B, C, H, W] at timesteps t with labels y give the patch outputs
// [B·T, p·p·C_out] (Unpatchify turns them into [B, C_out, H, W]). Forward
// is the model as a dc.Backbone, over packed tokens.
func (m *Model) ForwardLatents(x []float32, t []float32, y []int) mat.Tensor {
	B := len(t)
	tokens, offsets := m.Embed(x, B)
	c := m.condition(t, y)
	return m.FinalLayer(m.Blocks(tokens, c, offsets), c, offsets)
}

// Patchify rearranges latents [B, C, S, S] into per-token patches
// [B·(S/p)², C·p·p] in the patch-embedding convolution's channel-major
// order (c, pi, pj), tokens in row-major grid order.
func Patchify(x []float32, batch, channels, size, p int) []float32 {
	g := size / p
	k := channels * p * p
	out := make([]float32, batch*g*g*k)
	for b := range batch {
		for i := range g {
			for j := range g {
				row := out[((b*g+i)*g+j)*k:]
				for ch := range channels {
					for pi := range p {
						for pj := range p {
							row[(ch*p+pi)*p+pj] = x[((b*channels+ch)*size+i*p+pi)*size+j*p+pj]
						}
					}
				}
			}
		}
	}
	return out
}

// Unpatchify rearranges patch outputs [B·(S/p)², p·p·C] (feature
// (pi·p + pj)·C + c) into images [B, C, S, S], as DiT's unpatchify does.
// With grad set it performs the inverse, mapping an image-shaped gradient
// back to the token layout.
func Unpatchify(dst, src []float32, batch, channels, size, p int, grad bool) {
	g := size / p
	k := p * p * channels
	for b := range batch {
		for i := range g {
			for j := range g {
				row := ((b*g+i)*g + j) * k
				for pi := range p {
					for pj := range p {
						for ch := range channels {
							tok := row + (pi*p+pj)*channels + ch
							img := ((b*channels+ch)*size+i*p+pi)*size + j*p + pj
							if grad {
								dst[tok] = src[img]
							} else {
								dst[img] = src[tok]
							}
						}
					}
				}
			}
		}
	}
}

// Denoiser adapts the model to ddpm's sampling interface: NCHW latents in,
// NCHW [B, 2C, H, W] outputs out (learned sigma), no gradients kept. The
// integer timesteps are the model times Predict takes.
func (m *Model) Denoiser() func(x []float32, t []int, y []int) ([]float32, error) {
	return func(x []float32, t []int, y []int) ([]float32, error) {
		ts := make([]float32, len(t))
		for i, v := range t {
			ts[i] = float32(v)
		}
		return m.Predict(x, ts, y)
	}
}

// Predict runs the fixed-patch model on NCHW latents x [B, C, H, W] at
// model times t (DDPM timesteps as floats) with labels y and returns the
// NCHW output [B, OutChannels, H, W], keeping no gradients: a sampler's
// call (diffusion.LabelModel).
func (m *Model) Predict(x, t []float32, y []int) ([]float32, error) {
	c := m.Config
	B := len(t)
	if len(x) != B*c.InChannels*c.InputSize*c.InputSize || len(y) != B {
		return nil, fmt.Errorf("dit: denoiser got %d latent values and %d labels for a batch of %d", len(x), len(y), B)
	}
	// Sampling keeps no graph: without gradients every op runs eagerly
	// and frees its intermediates.
	if m.Params.RequiresGrad() {
		m.Params.SetRequiresGrad(false)
		defer m.Params.SetRequiresGrad(true)
	}
	out := m.ForwardLatents(x, t, y)
	img := make([]float32, B*c.OutChannels()*c.InputSize*c.InputSize)
	Unpatchify(img, mat.Data[float32](out.Value()), B, c.OutChannels(), c.InputSize, c.PatchSize, false)
	return img, nil
}

package upcycle_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"

	"github.com/nlpodyssey/spago/mat"

	"github.com/dcdit/dcdit/cond"
	"github.com/dcdit/dcdit/dc"
	"github.com/dcdit/dcdit/family"
	"github.com/dcdit/dcdit/ops"
	"github.com/dcdit/dcdit/optim"
	"github.com/dcdit/dcdit/params"
	"github.com/dcdit/dcdit/upcycle"
)

// tinyConfig sizes tinyNet, a class-conditional transformer small enough
// to train in an example. It is JSON-encodable because Spec hands it to
// the DC checkpoint's metadata.
type tinyConfig struct {
	Width      int `json:"width"`       // D, the token and conditioning width
	Depth      int `json:"depth"`       // number of blocks
	Heads      int `json:"heads"`       // attention heads (divide Width)
	MLPHidden  int `json:"mlp_hidden"`  // hidden width of each block's MLP
	Freqs      int `json:"freqs"`       // sinusoidal timestep features (even)
	NumClasses int `json:"num_classes"` // labels 0…NumClasses−1, NumClasses is the null class
}

// tinyNet is a stand-in for "your own DiT-like model": a label and
// timestep embedding, a learned linear position encoding, and pre-norm
// blocks of packed attention and a GELU MLP, each with residuals and a
// per-sample conditioning shift. It implements every method of
// dc.Backbone and nothing else; the scaffold needs no more.
type tinyNet struct {
	cfg tinyConfig
	p   *params.Set
}

// tinyPrefix keeps the backbone's names apart from the scaffold's
// (x_embedder.*, hnet.*, final_layer.*), so that upcycle.JoinParams can
// put both in one arena.
const tinyPrefix = "tiny."

// tinyShapes lists the backbone's tensors as (rows, cols); a checkpoint
// loader would map a file's keys onto these names.
func tinyShapes(c tinyConfig) []params.Spec {
	D := c.Width
	s := []params.Spec{
		{Name: tinyPrefix + "t_embed.weight", Rows: D, Cols: c.Freqs},
		{Name: tinyPrefix + "t_embed.bias", Rows: 1, Cols: D},
		{Name: tinyPrefix + "y_embed.weight", Rows: c.NumClasses + 1, Cols: D},
		{Name: tinyPrefix + "pos_embed.weight", Rows: D, Cols: 2},
	}
	for i := range c.Depth {
		b := fmt.Sprintf("%sblocks.%d.", tinyPrefix, i)
		s = append(s,
			params.Spec{Name: b + "adaLN_modulation.weight", Rows: D, Cols: D},
			params.Spec{Name: b + "adaLN_modulation.bias", Rows: 1, Cols: D},
			params.Spec{Name: b + "attn.qkv.weight", Rows: 3 * D, Cols: D},
			params.Spec{Name: b + "attn.qkv.bias", Rows: 1, Cols: 3 * D},
			params.Spec{Name: b + "attn.proj.weight", Rows: D, Cols: D},
			params.Spec{Name: b + "attn.proj.bias", Rows: 1, Cols: D},
			params.Spec{Name: b + "mlp.fc1.weight", Rows: c.MLPHidden, Cols: D},
			params.Spec{Name: b + "mlp.fc1.bias", Rows: 1, Cols: c.MLPHidden},
			params.Spec{Name: b + "mlp.fc2.weight", Rows: D, Cols: c.MLPHidden},
			params.Spec{Name: b + "mlp.fc2.bias", Rows: 1, Cols: D},
		)
	}
	return s
}

// newTinyNet allocates the backbone's arena and fills the weights from a
// seeded generator (biases stay zero). An upcycled model would copy its
// pretrained tensors in here instead.
func newTinyNet(c tinyConfig, seed uint64) (*tinyNet, error) {
	p, err := params.New(tinyShapes(c))
	if err != nil {
		return nil, err
	}
	rng := rand.New(rand.NewPCG(seed, 1))
	for _, q := range p.List() {
		if strings.HasSuffix(q.Name, ".bias") {
			continue
		}
		std := 0.02
		if cols := q.Shape()[1]; cols > 2 {
			std = 1 / math.Sqrt(float64(cols))
		}
		for i := range q.Values() {
			q.Values()[i] = float32(std * rng.NormFloat64())
		}
	}
	return &tinyNet{cfg: c, p: p}, nil
}

func (n *tinyNet) get(name string) mat.Tensor { return n.p.Get(tinyPrefix + name) }

// Width returns D, the width of the tokens the scaffold hands in.
func (n *tinyNet) Width() int { return n.cfg.Width }

// CondWidth returns D: the conditioning vector is as wide as the tokens.
func (n *tinyNet) CondWidth() int { return n.cfg.Width }

// Condition returns c = SiLU(W_t·sincos(t) + b_t) + y_embed[label], one row
// per sample, as a cond.Plain: a class-conditional backbone needs nothing
// but the vector.
func (n *tinyNet) Condition(in cond.Input) (cond.Value, error) {
	if err := in.CheckLabels(n.cfg.NumClasses); err != nil {
		return nil, fmt.Errorf("tiny: %w", err)
	}
	B, F := in.Samples(), n.cfg.Freqs
	feat := make([]float32, B*F)
	for b, t := range in.T {
		for k := range F / 2 {
			w := math.Exp(-math.Log(1000) * float64(k) / float64(F/2))
			feat[b*F+k] = float32(math.Cos(1000 * float64(t) * w))
			feat[b*F+F/2+k] = float32(math.Sin(1000 * float64(t) * w))
		}
	}
	tEmb := ops.SiLU(ops.Linear(constant(B, F, feat), n.get("t_embed.weight"), n.get("t_embed.bias")))
	return cond.Plain{V: ops.Add(tEmb, ops.GatherRows(n.get("y_embed.weight"), in.Labels))}, nil
}

// Forward runs the blocks over the packed kept tokens x [N, D]. Attention
// stays within each sample because ops.Attention takes the same offsets;
// positions enter through a learned linear map of (row, col), so a token
// keeps its place on the grid whatever the router dropped around it.
func (n *tinyNet) Forward(x mat.Tensor, cv cond.Value, offsets []int, pos []float64) (mat.Tensor, error) {
	N := x.Shape()[0]
	c := cv.Vector()
	if len(pos) != 2*N || len(offsets) != c.Shape()[0]+1 || offsets[len(offsets)-1] != N {
		return nil, fmt.Errorf("tiny: %d tokens, %d positions, %d offsets for %d samples", N, len(pos), len(offsets), c.Shape()[0])
	}
	p := make([]float32, len(pos))
	for i, v := range pos {
		p[i] = float32(v)
	}
	h := ops.Add(x, ops.Linear(constant(N, 2, p), n.get("pos_embed.weight"), nil))
	cs := ops.SiLU(c)
	for i := range n.cfg.Depth {
		b := fmt.Sprintf("blocks.%d.", i)
		// Each sample's conditioning shifts its normalised tokens.
		shift := ops.Linear(cs, n.get(b+"adaLN_modulation.weight"), n.get(b+"adaLN_modulation.bias"))
		a := ops.AddPerSample(ops.LayerNorm(h, 1e-6), shift, offsets)
		a = ops.Attention(ops.Linear(a, n.get(b+"attn.qkv.weight"), n.get(b+"attn.qkv.bias")), offsets, n.cfg.Heads)
		h = ops.Add(h, ops.Linear(a, n.get(b+"attn.proj.weight"), n.get(b+"attn.proj.bias")))
		m := ops.GELU(ops.Linear(ops.LayerNorm(h, 1e-6), n.get(b+"mlp.fc1.weight"), n.get(b+"mlp.fc1.bias")))
		h = ops.Add(h, ops.Linear(m, n.get(b+"mlp.fc2.weight"), n.get(b+"mlp.fc2.bias")))
	}
	return h, nil
}

// Parameters returns the backbone's arena.
func (n *tinyNet) Parameters() *params.Set { return n.p }

// ParamGroups puts the embedders and the blocks in the recipe's groups,
// so that a stage can freeze the pretrained blocks and train the rest.
func (n *tinyNet) ParamGroups(name string) []string {
	switch {
	case strings.HasPrefix(name, tinyPrefix+"t_embed."):
		return []string{params.GroupEmbedders, params.GroupTimestepEmbedder}
	case strings.HasPrefix(name, tinyPrefix+"y_embed."):
		return []string{params.GroupEmbedders, params.GroupClassEmbedder}
	case strings.HasPrefix(name, tinyPrefix+"pos_embed."):
		return []string{params.GroupEmbedders}
	}
	return params.BlockGroups(name, tinyPrefix+"blocks.", "attn.", "mlp.")
}

// Spec returns nil: the example's backbone is trained and run, not
// saved, so it registers no family (a saved one would, see package
// family).
func (n *tinyNet) Spec() family.Spec { return nil }

// FLOPs counts the conditioning and the blocks over packed sequences of
// the given lengths, in dc.FLOPs' convention (2 per multiply-add; packed
// attention H·ΣM²·(4·d_h + 3); norms and activations free).
func (n *tinyNet) FLOPs(lengths []int) float64 {
	c := n.cfg
	D, H, B := float64(c.Width), float64(c.Heads), float64(len(lengths))
	var N, sq float64
	for _, m := range lengths {
		N += float64(m)
		sq += float64(m) * float64(m)
	}
	f := 2*B*float64(c.Freqs)*D + 2*N*2*D // timestep MLP, positions
	perBlock := 2*B*D*D + 2*N*D*3*D + 2*N*D*D + 2*2*N*D*float64(c.MLPHidden) + H*sq*(4*D/H+3)
	return f + float64(c.Depth)*perBlock
}

// constant wraps values as a [rows, cols] tensor that takes no gradient.
func constant(rows, cols int, v []float32) mat.Tensor {
	return mat.NewDense[float32](mat.WithShape(rows, cols), mat.WithBacking(v))
}

func randn(rng *rand.Rand, n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(rng.NormFloat64())
	}
	return v
}

// Example_customBackbone upcycles a backbone of one's own: build it, wrap
// the DC scaffold around it (upcycle.InitScaffold, dc.New), join both
// parameter arenas for one optimiser (upcycle.JoinParams), train a few
// AdamW steps of ε-prediction plus the ratio loss, and sample at two
// tail-drop fractions ρ.
func Example_customBackbone() {
	bb, err := newTinyNet(tinyConfig{Width: 32, Depth: 2, Heads: 2, MLPHidden: 64, Freqs: 16, NumClasses: 4}, 1)
	if err != nil {
		panic(err)
	}

	// The scaffold's config follows from the backbone's widths: an 8×8
	// latent grid of 4 channels, predicting ε (4 output channels). The
	// group counts are lowered because E = D/4 = 8 is tiny.
	s := upcycle.DefaultScaffold()
	s.NormGroups, s.RouterGroups = 4, 4
	cfg, err := s.Config(4, 4, 8, 8, bb.Width(), bb.CondWidth())
	if err != nil {
		panic(err)
	}
	// The official init starts the router at random, keeping almost
	// nothing until it has learned; the predictability prior starts it
	// keeping about 1/N of the tokens, the hard-to-predict ones.
	scaffold := upcycle.InitScaffold(cfg, 2)
	upcycle.PredictabilityPrior(cfg, scaffold)
	m, err := dc.New(cfg, scaffold, bb)
	if err != nil {
		panic(err)
	}
	joint, err := upcycle.JoinParams(m)
	if err != nil {
		panic(err)
	}
	opt, err := optim.NewAdamW(optim.AllTrainable(joint.Len()), optim.Hyper{LR: 3e-3, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8})
	if err != nil {
		panic(err)
	}

	// One fixed batch, noised with a cosine schedule
	// x_t = cos(πt/2)·x₀ + sin(πt/2)·ε, so that a few steps show the loss
	// falling.
	rng := rand.New(rand.NewPCG(3, 4))
	B, C, L := 2, cfg.InChannels, cfg.Tokens()
	x0, eps := randn(rng, B*C*L), randn(rng, B*C*L)
	ts, labels := []float32{0.3, 0.7}, []int{1, 3}
	xt := make([]float32, len(x0))
	for b, t := range ts {
		a, sn := float32(math.Cos(math.Pi*float64(t)/2)), float32(math.Sin(math.Pi*float64(t)/2))
		for i := b * C * L; i < (b+1)*C*L; i++ {
			xt[i] = a*x0[i] + sn*eps[i]
		}
	}
	in := cond.Input{T: ts, Labels: labels}
	target := constant(B*L, C, dc.ToTokens(eps, B, C, cfg.GridRows, cfg.GridCols, 1))

	var losses []float64
	for range 5 {
		cv, err := bb.Condition(in)
		if err != nil {
			panic(err)
		}
		x := constant(B*L, C, dc.ToTokens(xt, B, C, cfg.GridRows, cfg.GridCols, 1))
		res, err := m.Forward(x, cv, nil)
		if err != nil {
			panic(err)
		}
		ratio, err := res.RatioLoss(cfg.TargetN, cfg.RatioBatchSize)
		if err != nil {
			panic(err)
		}
		loss := ops.Add(ops.MSE(res.Out, target), ops.Scale(ratio, cfg.RatioLossWeight))
		losses = append(losses, float64(mat.Data[float32](loss.Value())[0]))
		if err := ops.Backward(loss); err != nil {
			panic(err)
		}
		// The graph's buffers go back to the pool for the next step.
		ops.Release(loss)
		opt.Step(joint.Data, joint.Grad)
		joint.ZeroGrad()
	}
	fmt.Printf("parameters: %d scaffold + %d backbone in one arena of %d\n",
		len(m.Params.Data), len(bb.Parameters().Data), joint.Len())
	fmt.Println("loss went down:", losses[len(losses)-1] < losses[0])

	// Inference keeps no graph for a backward pass.
	joint.SetRequiresGrad(false)
	fmt.Printf("backbone alone on the full grid: %.2f MFLOPs\n", bb.FLOPs([]int{L, L})/1e6)
	for _, rho := range []float32{0, 0.5} {
		_, res, err := m.Predict(xt, in, []float32{rho})
		if err != nil {
			panic(err)
		}
		// The backbone runs only on the kept tokens: that is the saving.
		fmt.Printf("ρ = %.1f: kept %v of %d tokens per sample, backbone %.2f MFLOPs\n",
			rho, res.Chunks.NumKept, L, m.ForwardFLOPs(res.Chunks.NumKept).Backbone/1e6)
	}
	// Output:
	// parameters: 13349 scaffold + 19712 backbone in one arena of 33061
	// loss went down: true
	// backbone alone on the full grid: 6.42 MFLOPs
	// ρ = 0.0: kept [17 16] of 64 tokens per sample, backbone 1.24 MFLOPs
	// ρ = 0.5: kept [9 8] of 64 tokens per sample, backbone 0.61 MFLOPs
}

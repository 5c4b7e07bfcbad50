package hnet

import (
	"math"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/nlpodyssey/spago/mat"

	"github.com/dcdit/dcdit/cond"
	"github.com/dcdit/dcdit/dc"
	"github.com/dcdit/dcdit/internal/fixtures"
	"github.com/dcdit/dcdit/loaders/safetensors"
	"github.com/dcdit/dcdit/ops"
)

const (
	forwardTol = 5e-5
	gradTol    = 5e-4
)

func values(x mat.Tensor) []float32 { return mat.Data[float32](x.Value()) }

func bools(b []bool) []int {
	out := make([]int, len(b))
	for i, v := range b {
		if v {
			out[i] = 1
		}
	}
	return out
}

func floats(ints []int) []float32 {
	out := make([]float32, len(ints))
	for i, v := range ints {
		out[i] = float32(v)
	}
	return out
}

// cfgFloat reads a number from the case's config, looking into the "hnet"
// section too.
func cfgFloat(t *testing.T, c fixtures.Case, key string) float64 {
	t.Helper()
	if v, ok := c.Config[key].(float64); ok {
		return v
	}
	if h, ok := c.Config["hnet"].(map[string]any); ok {
		if v, ok := h[key].(float64); ok {
			return v
		}
	}
	t.Fatalf("%s: config.json has no number %q", c.Name, key)
	return 0
}

// loadFixture builds the reference model of a dcdit-tiny case.
func loadFixture(t *testing.T, c fixtures.Case) *dc.Model {
	t.Helper()
	heads, ok := c.Config["hnet"].(map[string]any)["num_heads"].([]any)
	if !ok || len(heads) == 0 {
		t.Fatalf("%s: config.json lacks hnet.num_heads", c.Name)
	}
	m, err := Load(filepath.Join(c.Dir, "weights.safetensors"), LoadOptions{
		Heads: int(heads[len(heads)-1].(float64)),
		Settings: dc.Settings{
			Sigma:           cfgFloat(t, c, "dechunk_kernel_sigma"),
			TargetN:         cfgFloat(t, c, "downsample_factor_N"),
			RatioLossWeight: cfgFloat(t, c, "ratio_loss_weight"),
			RatioBatchSize:  int(cfgFloat(t, c, "ratio_batch_size")),
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	cfg := m.Config
	for key, got := range map[string]int{"enc_dec_dim": cfg.EncDecDim, "routing_dim": cfg.ModelDim, "router_bottleneck": cfg.RouterDim,
		"num_rows": cfg.GridRows, "num_cols": cfg.GridCols, "in_channels": cfg.InChannels, "out_channels": cfg.OutChannels} {
		if want, ok := c.Int(key); ok && want != got {
			t.Fatalf("inferred %s = %d, config.json says %d", key, got, want)
		}
	}
	return m
}

// runs lists the per-run prefixes of io.safetensors (those with a
// "<run>.frac" tensor and per-run outputs), sorted.
func runs(t *testing.T, f *safetensors.File) []string {
	t.Helper()
	var out []string
	for _, info := range f.Tensors() {
		if run, ok := strings.CutSuffix(info.Name, ".frac"); ok && !strings.Contains(run, ".") {
			if _, ok := f.Tensor(run + ".boundary_mask"); ok {
				out = append(out, run)
			}
		}
	}
	sort.Strings(out)
	if len(out) == 0 {
		t.Fatal("io.safetensors holds no runs")
	}
	return out
}

type inputs struct {
	x, R    []float32 // token-major
	t       []float32
	y       []int
	B, L, C int
}

func readInputs(t *testing.T, m *dc.Model, io *fixtures.File) inputs {
	cfg := m.Config
	in := inputs{t: floats(io.Ints("t")), y: io.Ints("y"), L: cfg.Tokens(), C: cfg.InChannels}
	in.B = len(in.t)
	in.x = dc.ToTokens(io.F32("x"), in.B, cfg.InChannels, cfg.GridRows, cfg.GridCols, 1)
	in.R = dc.ToTokens(io.F32("R"), in.B, cfg.OutChannels, cfg.GridRows, cfg.GridCols, 1)
	return in
}

func forward(t *testing.T, m *dc.Model, in inputs, frac []float32, grad bool) (*dc.Result, mat.Tensor, mat.Tensor) {
	t.Helper()
	c, err := m.Backbone.Condition(cond.Input{T: in.t, Labels: in.y})
	if err != nil {
		t.Fatal(err)
	}
	x := mat.NewDense[float32](mat.WithShape(in.B*in.L, in.C), mat.WithBacking(append([]float32(nil), in.x...)), mat.WithGrad(grad))
	res, err := m.Forward(x, c, frac)
	if err != nil {
		t.Fatal(err)
	}
	return res, x, c.Vector()
}

// dcditInputs are the inputs of a dcdit-tiny io.safetensors (its README's
// table): the latents, timesteps, labels and the weighting R of S, each
// run's drop fractions, and the Lite-CFG call's arguments. Every other
// tensor is an output, an intermediate or a gradient and must be compared.
var dcditInputs = []string{"x", "t", "y", "R", "*.frac", "litecfg.t", "litecfg.y", "litecfg.cfg_scale"}

// computeDCDiT runs the case's model and records everything the reference
// provides: the routing (conditioning, encoder output, router logits,
// probabilities, natural masks, confidences, the ratio loss in its
// groupings and its own gradient); for every run (drop fraction or
// Lite-CFG vector) the kept masks, counts, chunk order, plug-back indices,
// de-chunk output, main network output, model output, and where the
// fixture has them S and its gradients; and the Lite-CFG sample function.
func computeDCDiT(t *testing.T, c fixtures.Case) *fixtures.Got {
	t.Helper()
	m := loadFixture(t, c)
	net := m.Backbone.(*Network)
	cfg := m.Config
	io := c.Open(t, "io.safetensors")
	f, err := safetensors.Open(filepath.Join(c.Dir, "io.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	got := fixtures.NewGot()
	in := readInputs(t, m, io)

	// gradients records every "<prefix>grad.<param>" tensor of the file
	// from the parameter's accumulated gradient.
	gradients := func(prefix string) {
		t.Helper()
		n := 0
		for _, info := range f.Tensors() {
			name, ok := strings.CutPrefix(info.Name, prefix+"grad.")
			if !ok || name == "x" {
				continue
			}
			p, ok := m.Params.Lookup(name)
			if !ok {
				p, ok = net.Params.Lookup(name)
			}
			if !ok {
				t.Errorf("%s: no parameter %q", info.Name, name)
				continue
			}
			got.F32(info.Name, p.Gradient(), gradTol)
			n++
		}
		if n == 0 {
			t.Errorf("no %sgrad.* tensors", prefix)
		}
	}

	// Routing at no drop.
	res, _, cvec := forward(t, m, in, nil, false)
	got.F32("c", values(cvec), forwardTol)
	head := io.Shape("enc_out_b0_head")
	got.F32("enc_out_b0_head", values(res.Encoded)[:head[0]*head[1]], forwardTol)
	got.F32("router_logit", values(res.Routing.Logit), forwardTol)
	got.F32("p", res.Routing.Prob(), forwardTol)
	got.F32("selected_probs", values(res.Routing.Confidence), forwardTol)
	got.Ints("boundary_mask_natural", bools(res.Routing.Natural))
	got.Ints("num_natural", res.Routing.NumNatural)
	// ratio_loss uses the configured grouping, ratio_loss_none the whole
	// batch, ratio_loss_rbs<k> groups of k.
	N := cfgFloat(t, c, "downsample_factor_N")
	groupings := map[string]int{"ratio_loss": cfg.RatioBatchSize, "ratio_loss_none": 0}
	for _, info := range f.Tensors() {
		if k, ok := strings.CutPrefix(info.Name, "ratio_loss_rbs"); ok {
			g, err := strconv.Atoi(k)
			if err != nil {
				t.Fatalf("%s: group size %q", info.Name, k)
			}
			groupings[info.Name] = g
		}
	}
	for name, group := range groupings {
		loss, err := res.RatioLoss(N, group)
		if err != nil {
			t.Fatal(err)
		}
		got.F32(name, values(loss), forwardTol)
	}
	// The ratio loss alone, back-propagated to the router.
	m.Params.ZeroGrad()
	net.Params.ZeroGrad()
	loss, err := res.RatioLoss(N, cfg.RatioBatchSize)
	if err != nil {
		t.Fatal(err)
	}
	if err := ops.Backward(loss); err != nil {
		t.Fatal(err)
	}
	gradients("ratio_only.")

	for _, run := range runs(t, f) {
		frac := io.F32(run + ".frac")
		grads := io.Has(run + ".S")
		res, x, _ := forward(t, m, in, frac, grads)
		ch := res.Chunks
		got.Ints(run+".boundary_mask", bools(ch.Kept))
		got.Ints(run+".num_kept", ch.NumKept)
		// Chunk order [B, M_max]: the kept tokens in raster order, then
		// padding the reference leaves unspecified (only j < M_b counts).
		mmax := int(io.Shape(run + ".chunk_sort_indices")[1])
		idx, next := make([]int, in.B*mmax), make([]int, in.B*mmax)
		kept := make([]bool, in.B*mmax)
		for b := range in.B {
			for j := range min(mmax, ch.NumKept[b]) {
				idx[b*mmax+j] = ch.Index[ch.Offsets[b]+j] - b*in.L
				next[b*mmax+j], kept[b*mmax+j] = 1, true
			}
		}
		got.Ints(run+".next_mask", next)
		got.IntsWhere(run+".chunk_sort_indices", idx, kept)
		got.Ints(run+".plug_back_idx", ch.PlugBack)
		got.F32(run+".dechunk_packed", values(res.DeChunked), forwardTol)
		if name := run + ".main_out_b0"; io.Has(name) {
			got.F32(name, values(res.Main)[:ch.NumKept[0]*cfg.ModelDim], forwardTol)
		}
		got.F32(run+".out", dc.FromTokens(values(res.Out), in.B, cfg.OutChannels, cfg.GridRows, cfg.GridCols, 1), forwardTol)
		if name := run + ".ratio_loss"; io.Has(name) {
			loss, err := res.RatioLoss(cfg.TargetN, cfg.RatioBatchSize)
			if err != nil {
				t.Fatal(err)
			}
			got.F32(name, values(loss), forwardTol)
		}
		if !grads {
			continue
		}
		m.Params.ZeroGrad()
		net.Params.ZeroGrad()
		loss, err := res.RatioLoss(cfg.TargetN, cfg.RatioBatchSize)
		if err != nil {
			t.Fatal(err)
		}
		R := mat.NewDense[float32](mat.WithShape(in.B*in.L, cfg.OutChannels), mat.WithBacking(in.R))
		S := ops.Add(ops.Sum(ops.Mul(res.Out, R)), ops.Scale(loss, cfg.RatioLossWeight))
		// S is a sum with cancellation: absolute tolerance 5e-5·Σ|out·R|.
		var mag float64
		for i, v := range values(res.Out) {
			mag += math.Abs(float64(v * in.R[i]))
		}
		got.Abs32(run+".S", values(S), forwardTol*mag)
		if err := ops.Backward(S); err != nil {
			t.Fatal(err)
		}
		gx := dc.FromTokens(mat.Data[float32](x.Grad()), in.B, cfg.InChannels, cfg.GridRows, cfg.GridCols, 1)
		got.F32(run+".grad.x", gx, gradTol)
		gradients(run + ".")
	}

	// The reference's Lite-CFG sample function.
	frac := io.F32("litecfg.frac")
	B := len(frac)
	out, lres, err := LiteCFG(m, io.F32("x"), cond.Input{T: floats(io.Ints("litecfg.t")), Labels: io.Ints("litecfg.y")}, io.F32("litecfg.cfg_scale")[0], frac[0], frac[B-1])
	if err != nil {
		t.Fatal(err)
	}
	got.Ints("litecfg.num_kept", lres.Chunks.NumKept)
	got.F32("litecfg.out", out, forwardTol)
	return got
}

// compareDCDiT checks a dcdit-tiny case's io.safetensors against got:
// every tensor must be an input or compared.
func compareDCDiT(c fixtures.Case, got *fixtures.Got, logf func(string, ...any)) []error {
	return fixtures.Compare(filepath.Join(c.Dir, "io.safetensors"), dcditInputs, got, logf)
}

// The model reproduces every output, intermediate and gradient of the
// reference DC-DiT (see computeDCDiT).
func TestFixtureDCDiT(t *testing.T) {
	fixtures.Run(t, "dcdit-tiny", func(t *testing.T, c fixtures.Case) {
		fixtures.Report(t, compareDCDiT(c, computeDCDiT(t, c), t.Logf))
	})
}

// A corrupted expected tensor (NaN, or one element 10% off) or a NaN input
// in a copy of the case fails the comparison of TestFixtureDCDiT.
func TestFixtureDCDiTMutations(t *testing.T) {
	fixtures.Run(t, "dcdit-tiny", func(t *testing.T, c fixtures.Case) {
		got := computeDCDiT(t, c)
		fixtures.CheckMutations(t, c, "io.safetensors", dcditInputs, func(mc fixtures.Case) []error {
			return compareDCDiT(mc, got, nil)
		})
	})
}

package hnet

import (
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/nlpodyssey/spago/mat"

	"github.com/dcdit/dcdit/dc"
	"github.com/dcdit/dcdit/internal/fixtures"
	"github.com/dcdit/dcdit/loaders/safetensors"
	"github.com/dcdit/dcdit/ops"
)

const (
	forwardTol = 5e-5
	gradTol    = 5e-4
)

func check(t *testing.T, name string, got, want []float32, tol float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s: %d values, want %d", name, len(got), len(want))
		return
	}
	e := fixtures.RelErr(got, want)
	if e > tol {
		t.Errorf("%s: err %.3g > %g", name, e, tol)
	} else {
		t.Logf("%s: err %.3g", name, e)
	}
}

func checkInts(t *testing.T, name string, got, want []int) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s: %d values, want %d", name, len(got), len(want))
		return
	}
	for i := range got {
		if got[i] != want[i] {
			t.Errorf("%s[%d] = %d, want %d", name, i, got[i], want[i])
			return
		}
	}
	t.Logf("%s: exact", name)
}

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

// tensorNames lists the tensors of the case's io.safetensors.
func tensorNames(t *testing.T, c fixtures.Case) []string {
	t.Helper()
	f, err := safetensors.Open(filepath.Join(c.Dir, "io.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	for _, info := range f.Tensors() {
		out = append(out, info.Name)
	}
	return out
}

// runs lists the per-run prefixes of io.safetensors (those with a
// "<run>.frac" tensor and per-run outputs), sorted.
func runs(t *testing.T, c fixtures.Case) []string {
	t.Helper()
	f, err := safetensors.Open(filepath.Join(c.Dir, "io.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
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
	in.x = dc.ToTokens(io.F32("x"), in.B, cfg.InChannels, cfg.GridRows, cfg.GridCols)
	in.R = dc.ToTokens(io.F32("R"), in.B, cfg.OutChannels, cfg.GridRows, cfg.GridCols)
	return in
}

func forward(t *testing.T, m *dc.Model, in inputs, frac []float32, grad bool) (*dc.Result, mat.Tensor, mat.Tensor) {
	t.Helper()
	c, err := m.Backbone.Condition(in.t, in.y)
	if err != nil {
		t.Fatal(err)
	}
	x := mat.NewDense[float32](mat.WithShape(in.B*in.L, in.C), mat.WithBacking(append([]float32(nil), in.x...)), mat.WithGrad(grad))
	res, err := m.Forward(x, c, frac)
	if err != nil {
		t.Fatal(err)
	}
	return res, x, c
}

// TestFixtureRouting: conditioning, encoder output, router logits,
// probabilities, natural masks, confidences and the ratio loss in its
// three groupings, plus the ratio loss's own gradient.
func TestFixtureRouting(t *testing.T) {
	fixtures.Run(t, "dcdit-tiny", func(t *testing.T, c fixtures.Case) {
		m := loadFixture(t, c)
		io := c.Open(t, "io.safetensors")
		in := readInputs(t, m, io)
		res, _, cond := forward(t, m, in, nil, false)
		check(t, "c", values(cond), io.F32("c"), forwardTol)
		head := io.Shape("enc_out_b0_head")
		check(t, "enc_out_b0_head", values(res.Encoded)[:head[0]*head[1]], io.F32("enc_out_b0_head"), forwardTol)
		check(t, "router_logit", values(res.Routing.Logit), io.F32("router_logit"), forwardTol)
		check(t, "p", res.Routing.Prob(), io.F32("p"), forwardTol)
		check(t, "selected_probs", values(res.Routing.Confidence), io.F32("selected_probs"), forwardTol)
		checkInts(t, "boundary_mask_natural", bools(res.Routing.Natural), io.Ints("boundary_mask_natural"))
		checkInts(t, "num_natural", res.Routing.NumNatural, io.Ints("num_natural"))

		N := cfgFloat(t, c, "downsample_factor_N")
		// ratio_loss uses the configured grouping, ratio_loss_none the whole
		// batch, ratio_loss_rbs<k> groups of k.
		groupings := map[string]int{"ratio_loss": m.Config.RatioBatchSize, "ratio_loss_none": 0}
		for _, info := range tensorNames(t, c) {
			if k, ok := strings.CutPrefix(info, "ratio_loss_rbs"); ok {
				g, err := strconv.Atoi(k)
				if err != nil {
					t.Fatalf("%s: group size %q", info, k)
				}
				groupings[info] = g
			}
		}
		for name, group := range groupings {
			if !io.Has(name) {
				t.Errorf("io.safetensors lacks %s", name)
				continue
			}
			loss, err := res.RatioLoss(N, group)
			if err != nil {
				t.Fatal(err)
			}
			check(t, name, values(loss), io.F32(name), forwardTol)
		}

		// The ratio loss alone, back-propagated to the router.
		net := m.Backbone.(*Network)
		m.Params.ZeroGrad()
		net.Params.ZeroGrad()
		loss, err := res.RatioLoss(N, m.Config.RatioBatchSize)
		if err != nil {
			t.Fatal(err)
		}
		if err := ops.Backward(loss); err != nil {
			t.Fatal(err)
		}
		checkGrads(t, m, io, c.Dir, "ratio_only.")
	})
}

// checkGrads compares every "<prefix>grad.<param>" tensor with the
// parameter's accumulated gradient.
func checkGrads(t *testing.T, m *dc.Model, io *fixtures.File, dir, prefix string) {
	t.Helper()
	f, err := safetensors.Open(filepath.Join(dir, "io.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	net := m.Backbone.(*Network)
	n := 0
	for _, info := range f.Tensors() {
		name, ok := strings.CutPrefix(info.Name, prefix+"grad.")
		if !ok || name == "x" {
			continue
		}
		p := m.Params.Get(name)
		if p == nil {
			p = net.Params.Get(name)
		}
		if p == nil {
			t.Errorf("%s: no parameter %q", info.Name, name)
			continue
		}
		check(t, info.Name, p.Gradient(), io.F32(info.Name), gradTol)
		n++
	}
	if n == 0 {
		t.Errorf("no %sgrad.* tensors", prefix)
	}
}

// TestFixtureRuns: every run (drop fraction or Lite-CFG vector): kept
// masks, counts, chunk order, plug-back indices, de-chunk output, the
// main network's output and the model output; with gradients where the
// fixture has them.
func TestFixtureRuns(t *testing.T) {
	fixtures.Run(t, "dcdit-tiny", func(t *testing.T, c fixtures.Case) {
		m := loadFixture(t, c)
		io := c.Open(t, "io.safetensors")
		in := readInputs(t, m, io)
		cfg := m.Config
		for _, run := range runs(t, c) {
			t.Run(run, func(t *testing.T) {
				frac := io.F32(run + ".frac")
				grads := io.Has(run + ".S")
				res, x, _ := forward(t, m, in, frac, grads)
				ch := res.Chunks
				checkInts(t, run+".boundary_mask", bools(ch.Kept), io.Ints(run+".boundary_mask"))
				checkInts(t, run+".num_kept", ch.NumKept, io.Ints(run+".num_kept"))
				mmax := int(io.Shape(run + ".chunk_sort_indices")[1])
				csi, next := io.Ints(run+".chunk_sort_indices"), io.Ints(run+".next_mask")
				var gotIdx, wantIdx, gotNext []int
				for b := range in.B {
					for j := range mmax {
						v := 0
						if j < ch.NumKept[b] {
							v = 1
							gotIdx = append(gotIdx, ch.Index[ch.Offsets[b]+j]-b*in.L)
							wantIdx = append(wantIdx, csi[b*mmax+j])
						}
						gotNext = append(gotNext, v)
					}
				}
				checkInts(t, run+".next_mask", gotNext, next)
				checkInts(t, run+".chunk_sort_indices", gotIdx, wantIdx)
				checkInts(t, run+".plug_back_idx", ch.PlugBack, io.Ints(run+".plug_back_idx"))
				check(t, run+".dechunk_packed", values(res.DeChunked), io.F32(run+".dechunk_packed"), forwardTol)
				if name := run + ".main_out_b0"; io.Has(name) {
					check(t, name, values(res.Main)[:ch.NumKept[0]*cfg.ModelDim], io.F32(name), forwardTol)
				}
				out := dc.FromTokens(values(res.Out), in.B, cfg.OutChannels, cfg.GridRows, cfg.GridCols)
				check(t, run+".out", out, io.F32(run+".out"), forwardTol)
				if name := run + ".ratio_loss"; io.Has(name) {
					loss, err := res.RatioLoss(cfg.TargetN, cfg.RatioBatchSize)
					if err != nil {
						t.Fatal(err)
					}
					check(t, name, values(loss), io.F32(name), forwardTol)
				}
				if !grads {
					return
				}
				net := m.Backbone.(*Network)
				m.Params.ZeroGrad()
				net.Params.ZeroGrad()
				loss, err := res.RatioLoss(cfg.TargetN, cfg.RatioBatchSize)
				if err != nil {
					t.Fatal(err)
				}
				R := mat.NewDense[float32](mat.WithShape(in.B*in.L, cfg.OutChannels), mat.WithBacking(in.R))
				S := ops.Add(ops.Sum(ops.Mul(res.Out, R)), ops.Scale(loss, cfg.RatioLossWeight))
				// S is a sum with cancellation: absolute tolerance
				// 5e-5·Σ|out·R|.
				var mag float64
				for i, v := range values(res.Out) {
					mag += float64(abs32(v * in.R[i]))
				}
				if d := float64(abs32(values(S)[0] - io.F32(run + ".S")[0])); d > forwardTol*mag {
					t.Errorf("%s.S: |diff| %.3g > %.3g", run, d, forwardTol*mag)
				} else {
					t.Logf("%s.S: |diff| %.3g (tolerance %.3g)", run, d, forwardTol*mag)
				}
				if err := ops.Backward(S); err != nil {
					t.Fatal(err)
				}
				gx := dc.FromTokens(mat.Data[float32](x.Grad()), in.B, cfg.InChannels, cfg.GridRows, cfg.GridCols)
				check(t, run+".grad.x", gx, io.F32(run+".grad.x"), gradTol)
				checkGrads(t, m, io, c.Dir, run+".")
			})
		}
	})
}

func abs32(v float32) float32 {
	if v < 0 {
		return -v
	}
	return v
}

// TestFixtureLiteCFG: the reference's Lite-CFG sample function.
func TestFixtureLiteCFG(t *testing.T) {
	fixtures.Run(t, "dcdit-tiny", func(t *testing.T, c fixtures.Case) {
		m := loadFixture(t, c)
		io := c.Open(t, "io.safetensors")
		frac := io.F32("litecfg.frac")
		B := len(frac)
		out, res, err := m.LiteCFG(io.F32("x"), floats(io.Ints("litecfg.t")), io.Ints("litecfg.y"), io.F32("litecfg.cfg_scale")[0], frac[0], frac[B-1])
		if err != nil {
			t.Fatal(err)
		}
		checkInts(t, "litecfg.num_kept", res.Chunks.NumKept, io.Ints("litecfg.num_kept"))
		check(t, "litecfg.out", out, io.F32("litecfg.out"), forwardTol)
	})
}

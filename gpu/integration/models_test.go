package integration

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nlpodyssey/spago/mat"

	"github.com/dcdit/dcdit/cond"
	"github.com/dcdit/dcdit/dc"
	"github.com/dcdit/dcdit/dc/hnet"
	"github.com/dcdit/dcdit/dit"
	"github.com/dcdit/dcdit/gpu/cuda"
	"github.com/dcdit/dcdit/gpu/device"
	"github.com/dcdit/dcdit/internal/fixtures"
	"github.com/dcdit/dcdit/loaders/arch"
	"github.com/dcdit/dcdit/ops"
	"github.com/dcdit/dcdit/optim"
	"github.com/dcdit/dcdit/params"
)

// Bounds (FP32 GEMMs, TF32 off): max |GPU − CPU| / max |CPU| per tensor.
const (
	forwardTol = 1e-4
	gradTol    = 1e-3
	stepTol    = 1e-3
)

// gpu opens the CUDA runtime or skips the test.
func gpu(t testing.TB) *cuda.Runtime {
	t.Helper()
	rt, err := cuda.Open(cuda.Options{})
	if err != nil {
		t.Skipf("no usable CUDA device: %v", err)
	}
	if _, _, _, err := rt.NVRTC(); err != nil {
		rt.Close()
		t.Skipf("no NVRTC: %v", err)
	}
	t.Cleanup(func() { rt.Close() })
	return rt
}

// openDevice opens the device at a GEMM precision.
func openDevice(t testing.TB, rt *cuda.Runtime, prec cuda.Precision) *device.Device {
	t.Helper()
	d, err := device.Open(rt, device.Options{Precision: prec})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

// worstParam returns the parameter whose arena range differs most between
// got and want, relative to that parameter's own magnitude.
func worstParam(set *params.Set, got, want []float32) fixtures.Worst[string] {
	var w fixtures.Worst[string]
	for _, p := range set.List() {
		lo, hi, _ := set.Range(p.Name)
		w.Add(p.Name, fixtures.RelErr(got[lo:hi], want[lo:hi]))
	}
	return w
}

// pass is what a forward and backward pass gives, on the host: the output,
// the loss, and the gradient of every parameter (the arena's order).
type pass struct {
	out  []float32
	loss float32
	grad []float32
}

// parity compares a pass with the parameters on the device with the same
// pass on the CPU: the output and the loss within forwardTol, every
// parameter's gradient within gradTol. It returns a summary of the errors,
// and one error per bound missed (a NaN or an infinity misses every bound).
func parity(set *params.Set, dev, cpu pass) (string, []error) {
	eOut := fixtures.RelErr(dev.out, cpu.out)
	eLoss := fixtures.RelErr([]float32{dev.loss}, []float32{cpu.loss})
	grad := worstParam(set, dev.grad, cpu.grad)
	summary := fmt.Sprintf("output %.2g, loss %.2g, worst parameter gradient %.2g (%s)", eOut, eLoss, grad.Err, grad.At)
	var errs []error
	if !fixtures.Within(eOut, forwardTol) || !fixtures.Within(eLoss, forwardTol) {
		errs = append(errs, fmt.Errorf("forward: output %.3g, loss %.3g, want ≤ %g", eOut, eLoss, forwardTol))
	}
	if !fixtures.Within(grad.Err, gradTol) {
		errs = append(errs, fmt.Errorf("gradient of %s: %.3g, want ≤ %g", grad.At, grad.Err, gradTol))
	}
	return summary, errs
}

func hostData(t testing.TB, x mat.Tensor) []float32 {
	t.Helper()
	if _, ok := x.Value().(device.Resident); ok {
		h, err := device.ToHost(x)
		if err != nil {
			t.Fatal(err)
		}
		return mat.Data[float32](h)
	}
	return append([]float32(nil), mat.Data[float32](x.Value())...)
}

// randomize fills every parameter with N(0, 1/fan_in) (vectors: 0.3·N(0, 1)),
// so that adaLN-Zero's zeros do not hide any path from the comparison.
func randomize(set *params.Set, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 17))
	for _, p := range set.List() {
		v := p.Values()
		cols := p.Dense.Shape()[1]
		scale := 0.3
		if cols > 1 {
			scale = 1 / math.Sqrt(float64(cols))
		}
		for i := range v {
			v[i] = float32(scale * rng.NormFloat64())
		}
	}
}

func normals(rng *rand.Rand, n int, scale float64) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(scale * rng.NormFloat64())
	}
	return v
}

func constant(rows, cols int, v []float32) mat.Tensor {
	return mat.NewDense[float32](mat.WithShape(rows, cols), mat.WithBacking(v))
}

// ditInputs are a batch for a DiT: latents, timesteps, labels and a
// regression target for the MSE loss.
type ditInputs struct {
	x, t, target []float32
	y            []int
}

func newDiTInputs(cfg *arch.DiTConfig, batch int, seed uint64) *ditInputs {
	rng := rand.New(rand.NewPCG(seed, 3))
	in := &ditInputs{x: normals(rng, batch*cfg.InChannels*cfg.InputSize*cfg.InputSize, 1)}
	for range batch {
		in.t = append(in.t, float32(rng.IntN(1000)))
		in.y = append(in.y, rng.IntN(cfg.NumClasses+1))
	}
	in.target = normals(rng, batch*cfg.NumTokens()*cfg.PatchSize*cfg.PatchSize*cfg.OutChannels(), 1)
	return in
}

// tinyDiT is a two-block DiT on 8×8 latents, small enough for the CPU.
func tinyDiT() *arch.DiTConfig {
	return &arch.DiTConfig{Depth: 2, HiddenSize: 64, NumHeads: 4, PatchSize: 2, InChannels: 4, InputSize: 8,
		LearnSigma: true, NumClasses: 10, MLPRatio: 4, FrequencySize: 256}
}

// ditPass runs ForwardLatents, the MSE loss and the backward pass, and
// returns the output and the loss (on whichever side the parameters are).
func ditPass(t testing.TB, m *dit.Model, in *ditInputs) (out, loss mat.Tensor) {
	t.Helper()
	out = m.ForwardLatents(in.x, in.t, in.y)
	s := out.Shape()
	loss = ops.MSE(out, constant(s[0], s[1], in.target))
	if err := ops.Backward(loss); err != nil {
		t.Fatal(err)
	}
	return out, loss
}

// ditHostPass runs ditPass with the parameters on the host and returns
// what it gave.
func ditHostPass(t testing.TB, m *dit.Model, in *ditInputs) pass {
	t.Helper()
	out, loss := ditPass(t, m, in)
	p := pass{out: hostData(t, out), loss: hostData(t, loss)[0], grad: slices.Clone(m.Params.Grad)}
	ops.Release(loss)
	return p
}

// TestParityFailsNaN: the comparison of the device tests fails a device
// that returns NaN. The stand-in for the device is a CPU pass of the tiny
// DiT with NaN written over the values a device would have returned.
func TestParityFailsNaN(t *testing.T) {
	m, err := dit.Init(tinyDiT(), 1)
	if err != nil {
		t.Fatal(err)
	}
	randomize(m.Params, 2)
	cpu := ditHostPass(t, m, newDiTInputs(m.Config, 2, 4))
	if summary, errs := parity(m.Params, cpu, cpu); len(errs) != 0 {
		t.Fatalf("a pass against itself (%s): %v", summary, errs)
	}
	nan := float32(math.NaN())
	allNaN := func(v []float32) []float32 {
		o := make([]float32, len(v))
		for i := range o {
			o[i] = nan
		}
		return o
	}
	oneNaN := func(v []float32) []float32 {
		o := slices.Clone(v)
		o[len(o)/2] = nan
		return o
	}
	tests := []struct {
		name string
		dev  pass
		want []string // how the failures start, in order
	}{
		{"all NaN", pass{allNaN(cpu.out), nan, allNaN(cpu.grad)}, []string{"forward:", "gradient of"}},
		{"output", pass{oneNaN(cpu.out), cpu.loss, cpu.grad}, []string{"forward:"}},
		{"loss", pass{cpu.out, nan, cpu.grad}, []string{"forward:"}},
		{"one gradient element", pass{cpu.out, cpu.loss, oneNaN(cpu.grad)}, []string{"gradient of"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			summary, errs := parity(m.Params, tt.dev, cpu)
			ok := len(errs) == len(tt.want)
			for i := range errs {
				ok = ok && strings.HasPrefix(errs[i].Error(), tt.want[i])
			}
			if !ok {
				t.Errorf("failures %q (%s), want ones starting %q", errs, summary, tt.want)
			}
		})
	}
	// The training-step check: every parameter after the step NaN.
	if w := worstParam(m.Params, allNaN(m.Params.Data), m.Params.Data); fixtures.Within(w.Err, stepTol) {
		t.Errorf("an all-NaN step passes: worst %g (%s)", w.Err, w.At)
	}
}

// TestDiTModel: a whole dit.Model forward (ForwardLatents: patch
// embedding, embedders, blocks, final layer) and backward through an MSE
// loss, with the parameters on the device, against the CPU.
func TestDiTModel(t *testing.T) {
	rt := gpu(t)
	d := openDevice(t, rt, cuda.FP32)
	small, err := dit.PresetConfig("DiT-S/2", 32)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name  string
		cfg   *arch.DiTConfig
		batch int
	}{
		{"tiny", tinyDiT(), 3},
		{"DiT-S/2", small, 4},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m, err := dit.Init(c.cfg, 1)
			if err != nil {
				t.Fatal(err)
			}
			randomize(m.Params, 2)
			in := newDiTInputs(c.cfg, c.batch, 4)

			cpu := ditHostPass(t, m, in)
			m.Params.ZeroGrad()

			ar, err := device.NewArena(d, m.Params)
			if err != nil {
				t.Fatal(err)
			}
			defer ar.Close()
			out, loss := ditPass(t, m, in)
			dev := pass{out: hostData(t, out), loss: hostData(t, loss)[0]}
			if err := ar.DownloadGrad(); err != nil {
				t.Fatal(err)
			}
			dev.grad = m.Params.Grad
			ops.Release(loss)

			summary, errs := parity(m.Params, dev, cpu)
			t.Logf("%s (%d parameters, batch %d): %s", c.name, m.Params.Len(), c.batch, summary)
			for _, err := range errs {
				t.Error(err)
			}
		})
	}
}

// TestDiTTrainingStep: one AdamW step of every parameter of a DiT, the
// optimiser on the device over the arena's flat buffers, against the CPU's
// optim.AdamW.
func TestDiTTrainingStep(t *testing.T) {
	rt := gpu(t)
	d := openDevice(t, rt, cuda.FP32)
	cfg := tinyDiT()
	m, err := dit.Init(cfg, 5)
	if err != nil {
		t.Fatal(err)
	}
	randomize(m.Params, 6)
	before := slices.Clone(m.Params.Data)
	in := newDiTInputs(cfg, 3, 7)
	h := optim.Hyper{LR: 1e-4, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.01}

	_, loss := ditPass(t, m, in)
	opt, err := optim.NewAdamW(optim.AllTrainable(m.Params.Len()), h)
	if err != nil {
		t.Fatal(err)
	}
	opt.Step(m.Params.Data, m.Params.Grad)
	cpuAfter := slices.Clone(m.Params.Data)
	ops.Release(loss)
	m.Params.ZeroGrad()
	copy(m.Params.Data, before)

	ar, err := device.NewArena(d, m.Params)
	if err != nil {
		t.Fatal(err)
	}
	defer ar.Close()
	devOpt, err := optim.NewAdamW(optim.AllTrainable(m.Params.Len()), h)
	if err != nil {
		t.Fatal(err)
	}
	adam, err := ar.NewOptimizer(devOpt, math.Inf(1), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer adam.Close()
	_, loss = ditPass(t, m, in)
	if err := adam.Step(); err != nil {
		t.Fatal(err)
	}
	if err := ar.Download(); err != nil {
		t.Fatal(err)
	}
	ops.Release(loss)

	w := worstParam(m.Params, m.Params.Data, cpuAfter)
	// The update alone (after − before): AdamW's first step is about
	// lr·sign(g), so an element whose gradient is rounding noise on both
	// sides may step the other way; count those.
	gd, cd := make([]float32, len(before)), make([]float32, len(before))
	flips := 0
	for i := range before {
		gd[i], cd[i] = m.Params.Data[i]-before[i], cpuAfter[i]-before[i]
		if (gd[i] > 0) != (cd[i] > 0) && gd[i] != cd[i] {
			flips++
		}
	}
	t.Logf("AdamW step, %d parameters: worst updated parameter %.2g (%s); update alone %.2g; %d elements stepped the other way",
		len(before), w.Err, w.At, fixtures.RelErr(gd, cd), flips)
	if !fixtures.Within(w.Err, stepTol) {
		t.Errorf("updated %s: %.3g, want ≤ %g", w.At, w.Err, stepTol)
	}
}

// dcModel builds a small DC-DiT (N = 4, 10 classes) with random weights
// (randomDC).
func dcModel(t testing.TB, grid, E, D, heads, depth, groups int) (*dc.Model, *params.Set) {
	t.Helper()
	cfg := &dc.Config{InChannels: 4, OutChannels: 8, GridRows: grid, GridCols: grid, EncDecDim: E, ModelDim: D, CondDim: D,
		RouterDim: D / 4, EncoderBlocks: 2, DecoderBlocks: 2, NormGroups: groups, RouterGroups: 4, Sigma: 1, TargetN: 4,
		RatioLossWeight: 0.03}
	nc := &hnet.Config{Width: D, Depth: depth, Heads: heads, MLPHidden: 4 * D, FrequencySize: 256, NumClasses: 10}
	return randomDC(t, cfg, nc)
}

// randomDC builds a DC-DiT with random weights, its main network the
// reference's (hnet), and its two parameter sets joined into one arena.
func randomDC(t testing.TB, cfg *dc.Config, nc *hnet.Config) (*dc.Model, *params.Set) {
	t.Helper()
	rng := rand.New(rand.NewPCG(11, 12))
	ts := map[string]dc.Tensor{}
	for _, shapes := range []map[string][]int{dc.ScaffoldShapes(cfg), hnet.Shapes(nc)} {
		names := make([]string, 0, len(shapes))
		for name := range shapes {
			names = append(names, name)
		}
		slices.Sort(names) // a fixed order of draws
		for _, name := range names {
			sh := shapes[name]
			n, fan := 1, 1
			for i, v := range sh {
				n *= v
				if i > 0 {
					fan *= v
				}
			}
			data := make([]float32, n)
			for i := range data {
				if len(sh) == 1 {
					data[i] = float32(0.3 * rng.NormFloat64())
					if strings.Contains(name, "norm") {
						data[i] += 1
					}
				} else {
					data[i] = float32(rng.NormFloat64() / math.Sqrt(float64(fan)))
				}
			}
			ts[name] = dc.Tensor{Shape: sh, Data: data}
		}
	}
	net, err := hnet.New(nc, ts)
	if err != nil {
		t.Fatal(err)
	}
	m, err := dc.New(cfg, ts, net)
	if err != nil {
		t.Fatal(err)
	}
	joint, err := params.Join(m.Params, net.Params)
	if err != nil {
		t.Fatal(err)
	}
	return m, joint
}

// dcInputs is a batch for a DC-DiT.
type dcInputs struct {
	x, target []float32
	in        cond.Input
}

// dcLatents is x as a DC-DiT's input [rows, InChannels]: a host matrix, or
// uploaded to d when d is not nil (the scaffold's first convolution takes
// no host operand beside device weights).
func dcLatents(t testing.TB, cfg *dc.Config, x []float32, d *device.Device) mat.Tensor {
	t.Helper()
	rows := len(x) / cfg.InChannels
	if d == nil {
		return constant(rows, cfg.InChannels, x)
	}
	up, err := d.Upload(rows, cfg.InChannels, x)
	if err != nil {
		t.Fatal(err)
	}
	return up
}

// calibrate shifts the router's scorer bias so that about keep of the
// tokens are natural boundaries, halfway between two logits so that no
// probability sits at the 0.5 threshold (which the two sides could then
// decide differently). It runs on the device when d is not nil; the bias
// moves on the host either way, so an arena bound to the parameters must
// be uploaded again (or made afterwards) to see it.
func calibrate(t testing.TB, m *dc.Model, in *dcInputs, keep float64, d *device.Device) {
	t.Helper()
	c, err := m.Backbone.Condition(in.in)
	if err != nil {
		t.Fatal(err)
	}
	res, err := m.Forward(dcLatents(t, m.Config, in.x, d), c, nil)
	if err != nil {
		t.Fatal(err)
	}
	logits := hostData(t, res.Routing.Logit)
	slices.Sort(logits)
	k := int(float64(len(logits)) * (1 - keep))
	m.Params.Get("hnet.routing_module.residual_scorer.3.bias").Values()[0] -= (logits[k-1] + logits[k]) / 2
	ops.Release(res.Out)
}

// dcResult is what a DC-DiT pass gives, on the host.
type dcResult struct {
	out            []float32
	loss           float32
	natural, kept  []bool
	index, numKept []int
}

// dcPass runs the model (x on the device when d is not nil), the loss
// MSE(out, target) + w·ratio loss, and the backward pass.
func dcPass(t testing.TB, m *dc.Model, in *dcInputs, rho float32, d *device.Device) dcResult {
	t.Helper()
	cfg := m.Config
	rows := len(in.x) / cfg.InChannels
	x := dcLatents(t, cfg, in.x, d)
	c, err := m.Backbone.Condition(in.in)
	if err != nil {
		t.Fatal(err)
	}
	res, err := m.Forward(x, c, []float32{rho})
	if err != nil {
		t.Fatal(err)
	}
	ratio, err := res.RatioLoss(cfg.TargetN, 0)
	if err != nil {
		t.Fatal(err)
	}
	loss := ops.Add(ops.MSE(res.Out, constant(rows, cfg.OutChannels, in.target)), ops.Scale(ratio, cfg.RatioLossWeight))
	if err := ops.Backward(loss); err != nil {
		t.Fatal(err)
	}
	r := dcResult{out: hostData(t, res.Out), loss: hostData(t, loss)[0], natural: res.Routing.Natural, kept: res.Chunks.Kept,
		index: res.Chunks.Index, numKept: res.Chunks.NumKept}
	ops.Release(loss)
	return r
}

// TestDCModel: a whole dc.Model (conv encoder, router, tail drop, chunking,
// the hnet main network, de-chunking, conv decoder, final layer) forward
// and backward through the MSE and ratio losses, at ρ = 0 and ρ = 0.4,
// with every parameter on the device, against the CPU. The routing masks
// and the packed index must be identical.
func TestDCModel(t *testing.T) {
	rt := gpu(t)
	d := openDevice(t, rt, cuda.FP32)
	cases := []struct {
		name                            string
		grid, E, D, heads, depth, group int
		batch                           int
	}{
		{"tiny", 8, 32, 64, 4, 2, 8, 3},
		{"DC-DiT-S-like", 16, 96, 384, 6, 2, 32, 4},
	}
	for _, c := range cases {
		m, joint := dcModel(t, c.grid, c.E, c.D, c.heads, c.depth, c.group)
		rng := rand.New(rand.NewPCG(21, 22))
		L := m.Config.Tokens()
		in := &dcInputs{x: normals(rng, c.batch*L*4, 1), target: normals(rng, c.batch*L*8, 1)}
		for range c.batch {
			in.in.T = append(in.in.T, float32(rng.IntN(1000)))
			in.in.Labels = append(in.in.Labels, rng.IntN(11))
		}
		calibrate(t, m, in, 0.3, nil)
		joint.ZeroGrad()
		for _, rho := range []float32{0, 0.4} {
			t.Run(fmt.Sprintf("%s/rho=%g", c.name, rho), func(t *testing.T) {
				cpu := dcPass(t, m, in, rho, nil)
				cpuGrad := slices.Clone(joint.Grad)
				joint.ZeroGrad()

				ar, err := device.NewArena(d, joint)
				if err != nil {
					t.Fatal(err)
				}
				defer ar.Close()
				dev := dcPass(t, m, in, rho, d)
				if err := ar.DownloadGrad(); err != nil {
					t.Fatal(err)
				}
				defer joint.ZeroGrad()

				if !slices.Equal(dev.natural, cpu.natural) || !slices.Equal(dev.kept, cpu.kept) || !slices.Equal(dev.index, cpu.index) {
					t.Fatalf("routing differs: kept per sample %v on the device, %v on the CPU", dev.numKept, cpu.numKept)
				}
				summary, errs := parity(joint, pass{dev.out, dev.loss, joint.Grad}, pass{cpu.out, cpu.loss, cpuGrad})
				t.Logf("%s ρ=%g (%d parameters, batch %d, kept %v of %d): %s; masks identical",
					c.name, rho, joint.Len(), c.batch, cpu.numKept, L, summary)
				for _, err := range errs {
					t.Error(err)
				}
			})
		}
	}
}

// ditXL builds DiT-XL/2 on 256 px latents (32×32×4) with random weights,
// and a batch of B inputs for it.
func ditXL(t testing.TB, B int) (*dit.Model, *ditInputs) {
	t.Helper()
	cfg, err := dit.PresetConfig("DiT-XL/2", 32)
	if err != nil {
		t.Fatal(err)
	}
	m, err := dit.Init(cfg, 1)
	if err != nil {
		t.Fatal(err)
	}
	randomize(m.Params, 3)
	return m, newDiTInputs(cfg, B, 9)
}

// TestDiTXLForwardTiming times a DiT-XL/2 at batch 32 on 256 px latents
// (32×32×4, 8192 tokens), FP32 and TF32 GEMMs: the forward pass, and the
// forward and backward pass through an MSE loss, each the average of 5
// after a warm-up, each waited for. The graph is kept (a training
// forward) and released after every round, so the pool serves every
// round after the first. DCDIT_CPU_TIMING=1 adds one CPU forward pass.
func TestDiTXLForwardTiming(t *testing.T) {
	if testing.Short() {
		t.Skip("long")
	}
	rt := gpu(t)
	const B, rounds = 32, 5
	m, in := ditXL(t, B)
	cfg := m.Config
	flop := float64(B) * dit.ForwardFLOPs(cfg, cfg.NumTokens()).Total()
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1e3 }
	var first []float32
	for _, prec := range []cuda.Precision{cuda.FP32, cuda.TF32} {
		d := openDevice(t, rt, prec)
		ar, err := device.NewArena(d, m.Params)
		if err != nil {
			t.Fatal(err)
		}
		var fwd, step time.Duration
		for round := range rounds + 1 {
			start := time.Now()
			y := m.ForwardLatents(in.x, in.t, in.y)
			if err := d.Synchronize(); err != nil {
				t.Fatal(err)
			}
			el := time.Since(start)
			if round == 0 {
				out := hostData(t, y)
				if first == nil {
					first = out
				} else {
					t.Logf("TF32 output vs FP32: %.2g", fixtures.RelErr(out, first))
				}
			} else {
				fwd += el
			}
			ops.Release(y)
		}
		for round := range rounds + 1 {
			if err := ar.ZeroGrad(); err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			_, loss := ditPass(t, m, in)
			if err := d.Synchronize(); err != nil {
				t.Fatal(err)
			}
			if round > 0 {
				step += time.Since(start)
			}
			ops.Release(loss)
		}
		fwd /= rounds
		step /= rounds
		free, total, _ := rt.MemInfo()
		t.Logf("DiT-XL/2, batch %d, %v: forward %.1f ms (%.1f TFLOP/s; %.2f TFLOP a pass, 2 per multiply-add); forward+backward %.1f ms (≈%.1f TFLOP/s at 3× the forward); device memory free %d of %d MiB",
			B, prec, ms(fwd), flop/fwd.Seconds()/1e12, flop/1e12, ms(step), 3*flop/step.Seconds()/1e12, free>>20, total>>20)
		if err := ar.Close(); err != nil {
			t.Fatal(err)
		}
		d.Close()
	}
	if os.Getenv("DCDIT_CPU_TIMING") == "1" {
		start := time.Now()
		y := m.ForwardLatents(in.x, in.t, in.y)
		el := time.Since(start)
		t.Logf("CPU forward (GOMAXPROCS %d): %.2f s (%.2f TFLOP/s); output vs GPU FP32 %.2g", runtime.GOMAXPROCS(0), el.Seconds(),
			flop/el.Seconds()/1e12, fixtures.RelErr(mat.Data[float32](y.Value()), first))
	}
}

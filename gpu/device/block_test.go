package device_test

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/nlpodyssey/spago/mat"

	"github.com/dcdit/dcdit/adaln"
	"github.com/dcdit/dcdit/gpu/cuda"
	"github.com/dcdit/dcdit/gpu/device"
	"github.com/dcdit/dcdit/internal/fixtures"
	"github.com/dcdit/dcdit/ops"
	"github.com/dcdit/dcdit/params"
)

const prefix = "blocks.0."

// block is adaln.ApplyBlock with the parameters looked up by a function
// instead of a *params.Set (whose parameters live on the host), op for op.
// TestBlockMirror checks that it is the same computation.
func block(p func(name string) mat.Tensor, heads int, x, c mat.Tensor, offsets []int) mat.Tensor {
	D := x.Shape()[1]
	mod := ops.Linear(ops.SiLU(c), p("adaLN_modulation.1.weight"), p("adaLN_modulation.1.bias"))
	chunk := func(k int) mat.Tensor { return ops.SliceCols(mod, k*D, (k+1)*D) }
	shiftMSA, scaleMSA, gateMSA := chunk(0), chunk(1), chunk(2)
	shiftMLP, scaleMLP, gateMLP := chunk(3), chunk(4), chunk(5)

	h := ops.Modulate(ops.LayerNorm(x, 1e-6), shiftMSA, scaleMSA, offsets)
	qkv := ops.Linear(h, p("attn.qkv.weight"), p("attn.qkv.bias"))
	a := ops.Attention(qkv, offsets, heads)
	a = ops.Linear(a, p("attn.proj.weight"), p("attn.proj.bias"))
	x = ops.GatedResidual(x, gateMSA, a, offsets)

	h = ops.Modulate(ops.LayerNorm(x, 1e-6), shiftMLP, scaleMLP, offsets)
	h = ops.GELU(ops.Linear(h, p("mlp.fc1.weight"), p("mlp.fc1.bias")))
	h = ops.Linear(h, p("mlp.fc2.weight"), p("mlp.fc2.bias"))
	return ops.GatedResidual(x, gateMLP, h, offsets)
}

// blockInputs is one block's parameters (random, scaled by fan-in, the
// adaLN projection large enough that gates and scales matter), tokens x
// and conditioning c, all requiring gradients, and an upstream gradient.
type blockInputs struct {
	set     *params.Set
	x, c, r *mat.Dense[float32]
	offsets []int
	heads   int
}

func newBlockInputs(t testing.TB, seed uint64, D, heads int, offsets []int) *blockInputs {
	t.Helper()
	specs := []params.Spec{
		{Name: prefix + "adaLN_modulation.1.weight", Rows: 6 * D, Cols: D}, {Name: prefix + "adaLN_modulation.1.bias", Rows: 6 * D, Cols: 1},
		{Name: prefix + "attn.qkv.weight", Rows: 3 * D, Cols: D}, {Name: prefix + "attn.qkv.bias", Rows: 3 * D, Cols: 1},
		{Name: prefix + "attn.proj.weight", Rows: D, Cols: D}, {Name: prefix + "attn.proj.bias", Rows: D, Cols: 1},
		{Name: prefix + "mlp.fc1.weight", Rows: 4 * D, Cols: D}, {Name: prefix + "mlp.fc1.bias", Rows: 4 * D, Cols: 1},
		{Name: prefix + "mlp.fc2.weight", Rows: D, Cols: 4 * D}, {Name: prefix + "mlp.fc2.bias", Rows: D, Cols: 1},
	}
	set, err := params.New(specs)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(seed, 5))
	fill := func(v []float32, scale float64) {
		for i := range v {
			v[i] = float32(scale * rng.NormFloat64())
		}
	}
	for i, p := range set.List() {
		fill(p.Values(), 1/math.Sqrt(float64(specs[i&^1].Cols)))
	}
	N := offsets[len(offsets)-1]
	dense := func(rows, cols int, grad bool) *mat.Dense[float32] {
		v := make([]float32, rows*cols)
		fill(v, 1)
		return mat.NewDense[float32](mat.WithShape(rows, cols), mat.WithBacking(v), mat.WithGrad(grad))
	}
	return &blockInputs{set: set, x: dense(N, D, true), c: dense(len(offsets)-1, D, true), r: dense(N, D, false), offsets: offsets, heads: heads}
}

// hostRun runs adaln.ApplyBlock on the CPU, forward and backward.
func (b *blockInputs) hostRun(t testing.TB) mat.Tensor {
	y := adaln.ApplyBlock(b.set, prefix, b.heads, b.x, b.c, b.offsets)
	y.AccGrad(b.r)
	if err := ops.Backward(y); err != nil {
		t.Fatal(err)
	}
	return y
}

// TestBlockMirror: block is adaln.ApplyBlock, bit for bit, values and every
// gradient (CPU only: it makes the GPU comparison one of dit's block).
func TestBlockMirror(t *testing.T) {
	a := newBlockInputs(t, 1, 24, 3, []int{0, 5, 5, 17})
	ya := a.hostRun(t)
	b := newBlockInputs(t, 1, 24, 3, []int{0, 5, 5, 17})
	yb := block(func(n string) mat.Tensor { return b.set.Get(prefix + n) }, b.heads, b.x, b.c, b.offsets)
	yb.AccGrad(b.r)
	if err := ops.Backward(yb); err != nil {
		t.Fatal(err)
	}
	same := func(what string, x, y []float32) {
		for i := range x {
			if x[i] != y[i] {
				t.Fatalf("%s[%d]: ApplyBlock %v, mirror %v", what, i, x[i], y[i])
			}
		}
	}
	same("y", mat.Data[float32](ya.Value()), mat.Data[float32](yb.Value()))
	same("dx", mat.Data[float32](a.x.Grad()), mat.Data[float32](b.x.Grad()))
	same("dc", mat.Data[float32](a.c.Grad()), mat.Data[float32](b.c.Grad()))
	same("dparams", a.set.Grad, b.set.Grad)
}

// deviceInputs uploads the block's parameters, x, c and r.
type deviceInputs struct {
	params  map[string]*device.Tensor
	x, c, r *device.Tensor
}

func upload(t testing.TB, d *device.Device, b *blockInputs) *deviceInputs {
	t.Helper()
	up := func(m mat.Tensor) *device.Tensor {
		x, err := device.ToDevice(d, m)
		if err != nil {
			t.Fatal(err)
		}
		return x
	}
	di := &deviceInputs{params: make(map[string]*device.Tensor), x: up(b.x), c: up(b.c), r: up(b.r)}
	for _, p := range b.set.List() {
		di.params[p.Name] = up(p)
	}
	return di
}

func (di *deviceInputs) run(t testing.TB, b *blockInputs) mat.Tensor {
	y := block(func(n string) mat.Tensor { return di.params[prefix+n] }, b.heads, di.x, di.c, b.offsets)
	y.AccGrad(di.r)
	if err := ops.Backward(y); err != nil {
		t.Fatal(err)
	}
	return y
}

func (di *deviceInputs) zeroGrad() {
	for _, p := range di.params {
		p.ZeroGrad()
	}
	di.x.ZeroGrad()
	di.c.ZeroGrad()
}

func download(t testing.TB, x mat.Tensor) []float32 {
	t.Helper()
	if x == nil {
		t.Fatal("no gradient")
	}
	h, err := device.ToHost(x)
	if err != nil {
		t.Fatal(err)
	}
	return mat.Data[float32](h)
}

// TestDeviceBlock runs the DiT block forward and backward on the GPU and
// on the CPU and compares the output and every gradient (parameters, x, c);
// at DiT-XL size it also times both.
func TestDeviceBlock(t *testing.T) {
	d := device.OpenGPU(t, device.Options{})
	cases := []struct {
		name       string
		D, heads   int
		offsets    []int
		timeRounds int
	}{
		{"ragged, D 96, 3 heads × 32", 96, 3, []int{0, 7, 7, 70, 133}, 0},
		{"DiT-XL: 8 × 256 tokens, D 1152, 16 heads × 72", 1152, 16, []int{0, 256, 512, 768, 1024, 1280, 1536, 1792, 2048}, 10},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := newBlockInputs(t, uint64(i+2), c.D, c.heads, c.offsets)
			start := time.Now()
			hy := b.hostRun(t)
			cpu := time.Since(start)
			di := upload(t, d, b)
			dy := di.run(t, b)
			check := func(what string, got, want []float32, tol float64) {
				e, err := fixtures.Check(what, got, want, tol)
				t.Logf("%-40s %.2g", what, e)
				if err != nil {
					t.Error(err)
				}
			}
			check("y", download(t, dy), mat.Data[float32](hy.Value()), 1e-4)
			check("dx", download(t, di.x.Grad()), mat.Data[float32](b.x.Grad()), 1e-3)
			check("dc", download(t, di.c.Grad()), mat.Data[float32](b.c.Grad()), 1e-3)
			for _, p := range b.set.List() {
				check("d "+p.Name, download(t, di.params[p.Name].Grad()), p.Gradient(), 1e-3)
			}
			if c.timeRounds == 0 {
				ops.Release(hy, dy)
				return
			}
			// CPU: the first run above and two more.
			cpuTimes := []time.Duration{cpu}
			for range 2 {
				ops.Release(hy)
				b.set.ZeroGrad()
				b.x.ZeroGrad()
				b.c.ZeroGrad()
				start := time.Now()
				hy = b.hostRun(t)
				cpuTimes = append(cpuTimes, time.Since(start))
			}
			ops.Release(hy)
			ops.Release(dy)
			gpuTotal, gpuFwd := timeDevice(t, d, di, b, c.timeRounds)
			t.Logf("block forward+backward: CPU %v (runs %v), GPU FP32 %v (forward %v), average of %d",
				cpuTimes[len(cpuTimes)-1], cpuTimes, gpuTotal, gpuFwd, c.timeRounds)

			// TF32: the same block on a device whose GEMMs use TF32, checked
			// against the CPU with TF32's bound and timed.
			tf, err := device.Open(d.Runtime(), device.Options{Precision: cuda.TF32})
			if err != nil {
				t.Fatal(err)
			}
			defer tf.Close()
			b.set.ZeroGrad()
			b.x.ZeroGrad()
			b.c.ZeroGrad()
			hy = b.hostRun(t)
			dt := upload(t, tf, b)
			ty := dt.run(t, b)
			check("TF32 y", download(t, ty), mat.Data[float32](hy.Value()), 2e-2)
			check("TF32 dx", download(t, dt.x.Grad()), mat.Data[float32](b.x.Grad()), 2e-2)
			for _, p := range b.set.List() {
				check("TF32 d "+p.Name, download(t, dt.params[p.Name].Grad()), p.Gradient(), 2e-2)
			}
			ops.Release(hy, ty)
			tfTotal, tfFwd := timeDevice(t, tf, dt, b, c.timeRounds)
			t.Logf("block forward+backward: GPU TF32 %v (forward %v), average of %d", tfTotal, tfFwd, c.timeRounds)
		})
	}
}

// timeDevice returns the average wall time of rounds forward+backward
// passes of the block on d, and of the forward passes alone, each waited
// for; the graph is released after each round, so the pool serves every
// allocation after the first.
func timeDevice(t *testing.T, d *device.Device, di *deviceInputs, b *blockInputs, rounds int) (total, forward time.Duration) {
	t.Helper()
	var free []uint64 // device memory free after each round
	defer func() { t.Logf("free device memory after each timed round (MiB): %v", free) }()
	for range rounds {
		di.zeroGrad()
		if err := d.Synchronize(); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		y := block(func(n string) mat.Tensor { return di.params[prefix+n] }, b.heads, di.x, di.c, b.offsets)
		if err := d.Synchronize(); err != nil {
			t.Fatal(err)
		}
		forward += time.Since(start)
		y.AccGrad(di.r)
		if err := ops.Backward(y); err != nil {
			t.Fatal(err)
		}
		if err := d.Synchronize(); err != nil {
			t.Fatal(err)
		}
		total += time.Since(start)
		ops.Release(y)
		f, _, err := d.Runtime().MemInfo()
		if err != nil {
			t.Fatal(err)
		}
		free = append(free, f>>20)
	}
	n := time.Duration(rounds)
	return total / n, forward / n
}

package ops

import (
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"github.com/nlpodyssey/spago/mat"

	"github.com/dcdit/dcdit/gpu/cuda"
	"github.com/dcdit/dcdit/gpu/device"
	"github.com/dcdit/dcdit/internal/fixtures"
)

// The device is opened once for all the GPU tests of a run (compiling the
// kernels takes NVRTC seconds cold) and lives until the process ends.
var gpu struct {
	once sync.Once
	dev  *device.Device
	skip string
}

// testDevice returns the GPU as ops sees it, or skips naming what is
// missing (CI has no GPU).
func testDevice(t *testing.T) *device.Device {
	t.Helper()
	gpu.once.Do(func() {
		rt, err := cuda.Open(cuda.Options{})
		if err != nil {
			gpu.skip = "no usable CUDA device: " + err.Error()
			return
		}
		if _, _, _, err := rt.NVRTC(); err != nil {
			gpu.skip = "no NVRTC: " + err.Error()
			return
		}
		if gpu.dev, err = device.Open(rt, device.Options{}); err != nil {
			gpu.skip = "opening the device: " + err.Error()
		}
	})
	if gpu.dev == nil {
		t.Skip(gpu.skip)
	}
	return gpu.dev
}

func toHost(t *testing.T, x mat.Tensor) []float32 {
	t.Helper()
	h, err := device.ToHost(x)
	if err != nil {
		t.Fatal(err)
	}
	return mat.Data[float32](h)
}

// TestDeviceOpsMatchHost runs each op with a device implementation on the
// GPU and on the CPU from the same float32 inputs, back-propagates the same
// random upstream gradient through both, and compares the values and every
// input's gradient (FP32 GEMMs, TF32 off).
func TestDeviceOpsMatchHost(t *testing.T) {
	d := testDevice(t)
	off := []int{0, 5, 5, 37, 40}
	cases := []struct {
		name  string
		ins   []input
		build func(x []mat.Tensor) mat.Tensor
		tol   float64
	}{
		{"Linear", []input{{name: "x", rows: 37, cols: 48}, {name: "w", rows: 40, cols: 48}, {name: "b", rows: 40, cols: 1}},
			func(x []mat.Tensor) mat.Tensor { return Linear(x[0], x[1], x[2]) }, 1e-5},
		{"Linear no bias, constant x", []input{{name: "x", rows: 300, cols: 129, noGrad: true}, {name: "w", rows: 65, cols: 129}},
			func(x []mat.Tensor) mat.Tensor { return Linear(x[0], x[1], nil) }, 1e-5},
		{"Add", []input{{name: "a", rows: 33, cols: 17}, {name: "b", rows: 33, cols: 17}},
			func(x []mat.Tensor) mat.Tensor { return Add(x[0], x[1]) }, 1e-5},
		{"Sub", []input{{name: "a", rows: 33, cols: 17}, {name: "b", rows: 33, cols: 17}},
			func(x []mat.Tensor) mat.Tensor { return Sub(x[0], x[1]) }, 1e-5},
		{"Mul", []input{{name: "a", rows: 33, cols: 17}, {name: "b", rows: 33, cols: 17}},
			func(x []mat.Tensor) mat.Tensor { return Mul(x[0], x[1]) }, 1e-5},
		{"Scale", []input{{name: "x", rows: 33, cols: 17}}, func(x []mat.Tensor) mat.Tensor { return Scale(x[0], -1.5) }, 1e-5},
		{"GELU", []input{{name: "x", rows: 64, cols: 33, scale: 6}}, func(x []mat.Tensor) mat.Tensor { return GELU(x[0]) }, 1e-5},
		{"SiLU", []input{{name: "x", rows: 64, cols: 33, scale: 6}}, func(x []mat.Tensor) mat.Tensor { return SiLU(x[0]) }, 1e-5},
		{"Sigmoid", []input{{name: "x", rows: 64, cols: 33, scale: 6}}, func(x []mat.Tensor) mat.Tensor { return Sigmoid(x[0]) }, 1e-5},
		{"LayerNorm", []input{{name: "x", rows: 40, cols: 96, scale: 3}}, func(x []mat.Tensor) mat.Tensor { return LayerNorm(x[0], 1e-6) }, 1e-5},
		{"Modulate", []input{{name: "x", rows: 40, cols: 24}, {name: "shift", rows: 4, cols: 24}, {name: "scale", rows: 4, cols: 24}},
			func(x []mat.Tensor) mat.Tensor { return Modulate(x[0], x[1], x[2], off) }, 1e-5},
		{"GatedResidual", []input{{name: "x", rows: 40, cols: 24}, {name: "gate", rows: 4, cols: 24}, {name: "h", rows: 40, cols: 24}},
			func(x []mat.Tensor) mat.Tensor { return GatedResidual(x[0], x[1], x[2], off) }, 1e-5},
		{"Attention 2 heads × 16", []input{{name: "qkv", rows: 40, cols: 3 * 2 * 16, scale: 2}},
			func(x []mat.Tensor) mat.Tensor { return Attention(x[0], off, 2) }, 1e-5},
		{"Attention 16 heads × 72", []input{{name: "qkv", rows: 300, cols: 3 * 16 * 72, scale: 2}},
			func(x []mat.Tensor) mat.Tensor { return Attention(x[0], []int{0, 256, 300}, 16) }, 1e-5},
		{"SliceCols", []input{{name: "x", rows: 4, cols: 24}}, func(x []mat.Tensor) mat.Tensor { return SliceCols(x[0], 8, 16) }, 1e-5},
		{"Linear, inference (no graph)", []input{{name: "x", rows: 37, cols: 48, noGrad: true}, {name: "w", rows: 40, cols: 48, noGrad: true}},
			func(x []mat.Tensor) mat.Tensor { return GELU(Linear(x[0], x[1], nil)) }, 1e-5},
		{"SliceCols twice, summed", []input{{name: "x", rows: 4, cols: 24}},
			func(x []mat.Tensor) mat.Tensor { return Add(SliceCols(x[0], 0, 8), SliceCols(x[0], 16, 24)) }, 1e-5},
		{"RMSNorm", []input{{name: "x", rows: 40, cols: 96, scale: 3}, {name: "w", rows: 96, cols: 1}},
			func(x []mat.Tensor) mat.Tensor { return RMSNorm(x[0], x[1], 1e-5) }, 1e-5},
		{"GroupNorm", []input{{name: "x", rows: 2 * 36, cols: 32, scale: 2}, {name: "w", rows: 32, cols: 1}, {name: "b", rows: 32, cols: 1}},
			func(x []mat.Tensor) mat.Tensor { return GroupNorm(x[0], x[1], x[2], 2, 8, 1e-5) }, 1e-5},
		{"GroupNormSiLU", []input{{name: "x", rows: 2 * 36, cols: 32, scale: 2}, {name: "w", rows: 32, cols: 1}, {name: "b", rows: 32, cols: 1}},
			func(x []mat.Tensor) mat.Tensor { return GroupNormSiLU(x[0], x[1], x[2], 2, 8, 1e-5) }, 1e-5},
		{"Conv3x3", []input{{name: "x", rows: 2 * 5 * 7, cols: 12}, {name: "w", rows: 20, cols: 12 * 9}, {name: "b", rows: 20, cols: 1}},
			func(x []mat.Tensor) mat.Tensor { return Conv3x3(x[0], x[1], x[2], 2, 5, 7) }, 1e-5},
		{"Conv1x1", []input{{name: "x", rows: 70, cols: 12}, {name: "w", rows: 20, cols: 12}, {name: "b", rows: 20, cols: 1}},
			func(x []mat.Tensor) mat.Tensor { return Conv1x1(x[0], x[1], x[2]) }, 1e-5},
		{"GatherRows with repeats", []input{{name: "x", rows: 10, cols: 24}},
			func(x []mat.Tensor) mat.Tensor { return GatherRows(x[0], []int{3, 0, 9, 3, 3, 7}) }, 1e-5},
		{"ScatterRows", []input{{name: "x", rows: 4, cols: 24}},
			func(x []mat.Tensor) mat.Tensor { return ScatterRows(x[0], []int{8, 1, 5, 0}, 10) }, 1e-5},
		{"DeChunk", []input{{name: "h", rows: 40, cols: 24}, {name: "p", rows: 40, cols: 1, scale: 0.3}},
			func(x []mat.Tensor) mat.Tensor {
				pos := make([]float64, 80)
				for i := range 40 {
					pos[2*i], pos[2*i+1] = float64(i%7), float64((3*i)%5)
				}
				return DeChunk(x[0], Sigmoid(x[1]), off, pos, 1.5, 1e-4)
			}, 1e-4},
		{"AddPerSample", []input{{name: "x", rows: 40, cols: 24}, {name: "v", rows: 4, cols: 24}},
			func(x []mat.Tensor) mat.Tensor { return AddPerSample(x[0], x[1], off) }, 1e-5},
		{"AddRowVector", []input{{name: "x", rows: 40, cols: 24}, {name: "v", rows: 1, cols: 24}},
			func(x []mat.Tensor) mat.Tensor { return AddRowVector(x[0], x[1]) }, 1e-5},
		{"ScaleRows of STE", []input{{name: "x", rows: 40, cols: 24}, {name: "s", rows: 40, cols: 1}},
			func(x []mat.Tensor) mat.Tensor { return ScaleRows(x[0], STE(x[1])) }, 1e-5},
		{"ScaleRows", []input{{name: "x", rows: 40, cols: 24}, {name: "s", rows: 40, cols: 1}},
			func(x []mat.Tensor) mat.Tensor { return ScaleRows(x[0], x[1]) }, 1e-5},
		{"MSE", []input{{name: "a", rows: 300, cols: 33}, {name: "b", rows: 300, cols: 33}},
			func(x []mat.Tensor) mat.Tensor { return MSE(x[0], x[1]) }, 1e-5},
		{"Sum and Mean", []input{{name: "a", rows: 300, cols: 33}},
			func(x []mat.Tensor) mat.Tensor { return Add(Sum(x[0]), Scale(Mean(x[0]), 3)) }, 1e-5},
		{"MeanRows", []input{{name: "x", rows: 40, cols: 3}},
			func(x []mat.Tensor) mat.Tensor { return MeanRows(x[0], off) }, 1e-5},
		{"host constants beside device operands", []input{{name: "x", rows: 4, cols: 4}},
			func(x []mat.Tensor) mat.Tensor {
				c := newMatrix(4, 4, []float32{1, -2, 3, 4, 5, 6, -7, 8, 9, 10, 11, 12, -13, 14, 15, 16})
				return Add(Mul(x[0], c), Linear(c, x[0], nil))
			}, 1e-5},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(i+1), 17))
			hx := to32(makeInputs(rng, c.ins))
			dx := make([]mat.Tensor, len(hx))
			for k, h := range hx {
				var err error
				if dx[k], err = device.ToDevice(d, h); err != nil {
					t.Fatal(err)
				}
			}
			hy, dy := c.build(tensors(hx)), c.build(dx)
			r := to32(makeInputs(rng, []input{{rows: hy.Shape()[0], cols: hy.Shape()[1], noGrad: true}}))[0]
			dr, err := device.ToDevice(d, r)
			if err != nil {
				t.Fatal(err)
			}
			if _, ok := dy.(*deviceValue); ok != allConstant(c.ins) {
				t.Fatalf("device result is a %T: want a bare value exactly when nothing takes a gradient", dy)
			}
			if !allConstant(c.ins) {
				if err := seedBackward(hy, r); err != nil {
					t.Fatal(err)
				}
				if err := seedBackward(dy, dr); err != nil {
					t.Fatal(err)
				}
			}
			check := func(what string, got, want []float32) {
				e, err := fixtures.Check(what, got, want, c.tol)
				t.Logf("%s: %.2g", what, e)
				if err != nil {
					t.Error(err)
				}
			}
			check("value", toHost(t, dy), mat.Data[float32](hy.Value()))
			for k, in := range c.ins {
				if in.noGrad {
					if dx[k].HasGrad() {
						t.Errorf("constant %s got a gradient", in.name)
					}
					continue
				}
				check("d"+in.name, toHost(t, dx[k].Grad()), mat.Data[float32](hx[k].Grad()))
			}
			Release(hy, dy)
		})
	}
}

func allConstant(ins []input) bool {
	for _, in := range ins {
		if !in.noGrad {
			return false
		}
	}
	return true
}

// TestDeviceScalarRoot: Backward seeds a device scalar root with a device
// 1 (Tensor.NewScalar), as it seeds a host one: y = x·wᵀ for one row gives
// dw = x.
func TestDeviceScalarRoot(t *testing.T) {
	d := testDevice(t)
	xs := []float32{1, -2, 3.5, 0.25, 7}
	x, err := d.Upload(1, 5, xs)
	if err != nil {
		t.Fatal(err)
	}
	w, err := d.Upload(1, 5, []float32{3, 1, 4, 1, 5})
	if err != nil {
		t.Fatal(err)
	}
	w.SetRequiresGrad(true)
	y := Linear(x, w, nil)
	if err := Backward(y); err != nil {
		t.Fatal(err)
	}
	if dw := toHost(t, w.Grad()); !slices.Equal(dw, xs) {
		t.Errorf("dw = %v, want x = %v", dw, xs)
	}
	if x.HasGrad() {
		t.Errorf("x takes no gradient but got one")
	}
	Release(y)
}

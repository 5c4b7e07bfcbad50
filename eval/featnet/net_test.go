package featnet

import (
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/nlpodyssey/spago/mat"

	"github.com/dcdit/dcdit/datasets/shapes"
	"github.com/dcdit/dcdit/loaders/dtype"
	"github.com/dcdit/dcdit/loaders/safetensors"
	"github.com/dcdit/dcdit/ops"
)

// bundled is the committed network that dcdit eval uses.
var bundled = filepath.Join("..", "..", "testdata", "featnet", "model.safetensors")

// TestPool2 checks the average pool's values and its gradient (through
// ops.Backward) exactly, on even and odd grids: each output is the mean of
// its 2×2 cell, each input in a cell receives a quarter of that output's
// gradient, and trailing odd rows and columns receive none.
func TestPool2(t *testing.T) {
	for _, c := range []struct{ batch, h, w, ch int }{{1, 2, 2, 1}, {2, 4, 6, 3}, {2, 5, 7, 2}} {
		n := c.batch * c.h * c.w
		xv := make([]float64, n*c.ch)
		for i := range xv {
			xv[i] = float64(i*i%17) - 8
		}
		x := mat.NewDense[float64](mat.WithShape(n, c.ch), mat.WithBacking(xv))
		x.SetRequiresGrad(true)
		y, ho, wo := pool2(x, c.batch, c.h, c.w)
		if ho != c.h/2 || wo != c.w/2 {
			t.Fatalf("%+v: pooled to %d×%d", c, ho, wo)
		}
		m := c.batch * ho * wo
		rv := make([]float64, m*c.ch)
		for i := range rv {
			rv[i] = float64(i%5) + 1
		}
		loss := ops.Sum(ops.Mul(y, mat.NewDense[float64](mat.WithShape(m, c.ch), mat.WithBacking(rv))))
		if err := ops.Backward(loss); err != nil {
			t.Fatal(err)
		}
		got := mat.Data[float64](y.Value())
		gx := mat.Data[float64](x.Grad())
		wantG := make([]float64, len(xv))
		for b := range c.batch {
			for i := range ho {
				for j := range wo {
					o := (b*ho*wo + i*wo + j) * c.ch
					for k := range c.ch {
						var s float64
						for _, d := range [][2]int{{0, 0}, {0, 1}, {1, 0}, {1, 1}} {
							in := (b*c.h*c.w + (2*i+d[0])*c.w + 2*j + d[1]) * c.ch
							s += xv[in+k]
							wantG[in+k] = rv[o+k] / 4
						}
						if got[o+k] != s/4 {
							t.Fatalf("%+v: y[%d] = %g, want %g", c, o+k, got[o+k], s/4)
						}
					}
				}
			}
		}
		for i := range wantG {
			if gx[i] != wantG[i] {
				t.Fatalf("%+v: dx[%d] = %g, want %g", c, i, gx[i], wantG[i])
			}
		}
		ops.Release(loss)
	}
}

// tinyOptions train a small network on 8×8 data in well under a second.
func tinyOptions() TrainOptions {
	return TrainOptions{
		Config: Config{InChannels: shapes.Channels, Widths: []int{8, 8, 8, 8}, Groups: 4, FeatureDim: 8, NumClasses: len(shapes.Classes)},
		Seed:   5, Size: 8, Samples: 48, Steps: 6, Batch: 8, LR: 3e-3, NoiseSigma: 0.2,
		HeldOutSeed: 6, HeldOutSamples: 16,
	}
}

// TestTrainDeterministic trains the tiny network twice, the second time
// on one core, and wants the same weights bit for bit.
func TestTrainDeterministic(t *testing.T) {
	a, ra, err := Train(tinyOptions())
	if err != nil {
		t.Fatal(err)
	}
	prev := runtime.GOMAXPROCS(1)
	b, rb, err := Train(tinyOptions())
	runtime.GOMAXPROCS(prev)
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range a.p.Data {
		if math.Float32bits(v) != math.Float32bits(b.p.Data[i]) {
			t.Fatalf("weight %d: %v then %v", i, v, b.p.Data[i])
		}
	}
	if ra.Info != rb.Info || ra.FinalLoss != rb.FinalLoss {
		t.Fatalf("reports differ: %+v vs %+v", ra, rb)
	}
	// A different seed must change the weights (the seed is used).
	o := tinyOptions()
	o.Seed = 7
	c, _, err := Train(o)
	if err != nil {
		t.Fatal(err)
	}
	same := true
	for i, v := range a.p.Data {
		same = same && v == c.p.Data[i]
	}
	if same {
		t.Fatal("seeds 5 and 7 gave the same weights")
	}
}

// TestSaveLoad round-trips a tiny network and checks that the features of
// the loaded one equal the original's, on square and non-square grids.
func TestSaveLoad(t *testing.T) {
	net, rep, err := Train(tinyOptions())
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "net.safetensors")
	if err := net.Save(path, map[string]string{"note": "test"}); err != nil {
		t.Fatal(err)
	}
	back, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if back.Info != rep.Info {
		t.Fatalf("info %+v, want %+v", back.Info, rep.Info)
	}
	for _, hw := range [][2]int{{8, 8}, {8, 12}, {16, 16}, {9, 11}} {
		n, c := 3, shapes.Channels
		x := make([]float32, n*c*hw[0]*hw[1])
		for i := range x {
			x[i] = float32(i%13)/6 - 1
		}
		f1, err := net.Features(x, n, c, hw[0], hw[1])
		if err != nil {
			t.Fatal(err)
		}
		f2, err := back.Features(x, n, c, hw[0], hw[1])
		if err != nil {
			t.Fatal(err)
		}
		if len(f1) != n*net.Dim() {
			t.Fatalf("%v: %d features, want %d", hw, len(f1), n*net.Dim())
		}
		for i := range f1 {
			if f1[i] != f2[i] {
				t.Fatalf("%v: feature %d: %v before saving, %v after", hw, i, f1[i], f2[i])
			}
		}
		if _, err := back.Classify(x, n, c, hw[0], hw[1]); err != nil {
			t.Fatal(err)
		}
	}
	if err := net.Save(path, map[string]string{MetaDataset: "other"}); err == nil {
		t.Fatal("extra metadata overrode the data version")
	}
}

func TestInputErrors(t *testing.T) {
	net, err := newNet(tinyOptions().Config)
	if err != nil {
		t.Fatal(err)
	}
	good := make([]float32, 2*4*8*8)
	nan := append([]float32(nil), good...)
	nan[300] = float32(math.NaN())
	cases := []struct {
		name       string
		x          []float32
		n, c, h, w int
		want       string
	}{
		{"too small", make([]float32, 2*4*7*8), 2, 4, 7, 8, "at least 8×8"},
		{"channels", make([]float32, 2*3*8*8), 2, 3, 8, 8, "3 channels"},
		{"length", good[:10], 2, 4, 8, 8, "10 latent values"},
		{"NaN", nan, 2, 4, 8, 8, "(sample 1) is NaN"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := net.Features(c.x, c.n, c.c, c.h, c.w)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want one containing %q", err, c.want)
			}
		})
	}
}

// TestLoadErrors damages a valid file in several ways and wants each load
// to fail naming the file and the problem.
func TestLoadErrors(t *testing.T) {
	net, err := newNet(tinyOptions().Config)
	if err != nil {
		t.Fatal(err)
	}
	net.initWeights(1)
	dir := t.TempDir()
	good := filepath.Join(dir, "good.safetensors")
	if err := net.Save(good, nil); err != nil {
		t.Fatal(err)
	}
	f, err := safetensors.Open(good)
	if err != nil {
		t.Fatal(err)
	}
	meta := f.Metadata()
	var tensors []safetensors.WriteTensor
	for _, ti := range f.Tensors() {
		tt, _ := f.Tensor(ti.Name)
		b, err := tt.Bytes()
		if err != nil {
			t.Fatal(err)
		}
		tensors = append(tensors, safetensors.WriteTensor{Name: ti.Name, DType: ti.DType, Shape: ti.Shape, Data: append([]byte(nil), b...)})
	}
	f.Close()
	raw, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	// rewrite writes the tensors and metadata after edit changes them.
	rewrite := func(name string, edit func(ts []safetensors.WriteTensor, m map[string]string) []safetensors.WriteTensor) string {
		ts := append([]safetensors.WriteTensor(nil), tensors...)
		m := map[string]string{}
		for k, v := range meta {
			m[k] = v
		}
		ts = edit(ts, m)
		p := filepath.Join(dir, name)
		if err := safetensors.Write(p, ts, m); err != nil {
			t.Fatal(err)
		}
		return p
	}
	find := func(ts []safetensors.WriteTensor, name string) int {
		for i := range ts {
			if ts[i].Name == name {
				return i
			}
		}
		t.Fatalf("no tensor %s", name)
		return -1
	}
	truncated := filepath.Join(dir, "truncated.safetensors")
	if err := os.WriteFile(truncated, raw[:len(raw)-100], 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		path string
		want []string
	}{
		{"missing file", filepath.Join(dir, "none.safetensors"), []string{"none.safetensors", "no such file"}},
		{"truncated", truncated, []string{"truncated.safetensors"}},
		{"renamed tensor", rewrite("renamed.safetensors", func(ts []safetensors.WriteTensor, _ map[string]string) []safetensors.WriteTensor {
			ts[find(ts, "conv1.weight")].Name = "conv1.kernel"
			return ts
		}), []string{"renamed.safetensors", `tensor "conv1.weight": missing (expected shape [8 8 3 3])`, `tensor "conv1.kernel": unexpected`}},
		{"misshaped tensor", rewrite("shape.safetensors", func(ts []safetensors.WriteTensor, _ map[string]string) []safetensors.WriteTensor {
			i := find(ts, "head.weight")
			ts[i].Shape = []int64{ts[i].Shape[1], ts[i].Shape[0]}
			return ts
		}), []string{"shape.safetensors", `tensor "head.weight": expected shape [10 8], found [8 10]`}},
		{"other data version", rewrite("version.safetensors", func(ts []safetensors.WriteTensor, m map[string]string) []safetensors.WriteTensor {
			m[MetaDataset] = "shapes/v1"
			return ts
		}), []string{"version.safetensors", `trained on data "shapes/v1"`, shapes.Version}},
		{"not a feature network", rewrite("format.safetensors", func(ts []safetensors.WriteTensor, m map[string]string) []safetensors.WriteTensor {
			delete(m, MetaFormat)
			return ts
		}), []string{"format.safetensors", "not a feature network"}},
		{"bad config", rewrite("config.safetensors", func(ts []safetensors.WriteTensor, m map[string]string) []safetensors.WriteTensor {
			m[MetaConfig] = `{"in_channels": 4, "depth": 3}`
			return ts
		}), []string{"config.safetensors", MetaConfig, `unknown field "depth"`}},
		{"NaN weight", rewrite("nan.safetensors", func(ts []safetensors.WriteTensor, _ map[string]string) []safetensors.WriteTensor {
			i := find(ts, "feature.bias")
			b := append([]byte(nil), ts[i].Data...)
			if err := dtype.EncodeFloat32(b[:4], []float32{float32(math.NaN())}, dtype.F32); err != nil {
				t.Fatal(err)
			}
			ts[i].Data = b
			return ts
		}), []string{"nan.safetensors", `tensor "feature.bias": value 0 is NaN`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Load(c.path)
			if err == nil {
				t.Fatal("loaded")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

// TestBundled loads the committed network and classifies a freshly
// generated batch from a seed neither its training nor its recorded
// held-out measurement used.
func TestBundled(t *testing.T) {
	net, err := Load(bundled)
	if err != nil {
		t.Fatal(err)
	}
	if net.Info.Dataset != shapes.Version || !(net.Info.HeldOutAccuracy >= 0.95) {
		t.Fatalf("bundled network info %+v: want data %s and held-out accuracy ≥ 0.95", net.Info, shapes.Version)
	}
	const n = 500
	x, y, err := RealData(shapes.DefaultSize, 0x7e57_0001, n)
	if err != nil {
		t.Fatal(err)
	}
	acc, err := net.Accuracy(x, y, n, shapes.Channels, shapes.DefaultSize, shapes.DefaultSize)
	if err != nil {
		t.Fatal(err)
	}
	if !(acc >= 0.95) {
		t.Fatalf("accuracy %.4f on fresh held-out data, want ≥ 0.95", acc)
	}
	fl, err := DataFloor(net, FloorOptions{Num: 200, Seed: 0x7e57_0002})
	if err != nil {
		t.Fatal(err)
	}
	if !(fl.Accuracy >= 0.95 && fl.FD >= 0) {
		t.Fatalf("floor %+v", fl)
	}
	t.Logf("accuracy %.4f; floor at 200 per half: FD %.3f, accuracy %.4f", acc, fl.FD, fl.Accuracy)
}

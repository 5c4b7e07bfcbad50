package inception

import (
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/dcdit/dcdit/loaders/dtype"
	"github.com/dcdit/dcdit/loaders/pytorch"
	"github.com/dcdit/dcdit/loaders/safetensors"
)

// stateTensor is one tensor of a test checkpoint.
type stateTensor struct {
	name  string
	dt    dtype.DType
	shape []int64
	data  []byte
}

// stateDict encodes params in dt, in state-dict order, with each
// BatchNorm's 0-d I64 num_batches_tracked as torch writes it.
func stateDict(t *testing.T, params map[string][]float32, dt dtype.DType) []stateTensor {
	t.Helper()
	var out []stateTensor
	for _, e := range expectedTensors() {
		v := params[e.name]
		raw := make([]byte, len(v)*dt.Size())
		if err := dtype.EncodeFloat32(raw, v, dt); err != nil {
			t.Fatal(err)
		}
		out = append(out, stateTensor{e.name, dt, e.shape, raw})
		if name, ok := strings.CutSuffix(e.name, ".bn.running_var"); ok {
			out = append(out, stateTensor{name + ".bn.num_batches_tracked", dtype.I64, []int64{}, make([]byte, 8)})
		}
	}
	return out
}

func writeSafetensors(t *testing.T, path string, ts []stateTensor) {
	t.Helper()
	var w []safetensors.WriteTensor
	for _, x := range ts {
		w = append(w, safetensors.WriteTensor{Name: x.name, DType: x.dt, Shape: x.shape, Data: x.data})
	}
	if err := safetensors.Write(path, w, nil); err != nil {
		t.Fatal(err)
	}
}

func writePyTorch(t *testing.T, path string, ts []stateTensor) {
	t.Helper()
	var w []pytorch.SaveTensor
	for _, x := range ts {
		w = append(w, pytorch.SaveTensor{Name: x.name, DType: x.dt, Shape: x.shape, Data: x.data})
	}
	if err := pytorch.Save(path, w, pytorch.SaveOptions{}); err != nil {
		t.Fatal(err)
	}
}

// sameNet reports the first parameter in which a and b differ.
func sameNet(a, b *Net) string {
	type pair struct {
		name string
		x, y []float32
	}
	ps := []pair{{"fc.weight", a.fcW, b.fcW}, {"fc.bias", a.fcB, b.fcB}}
	for i := range a.stem {
		ps = append(ps, pair{a.stem[i].name, a.stem[i].w, b.stem[i].w}, pair{a.stem[i].name + " bias", a.stem[i].b, b.stem[i].b})
	}
	for i, blk := range a.blocks {
		for name, c := range blk.convs {
			d := b.blocks[i].convs[name]
			ps = append(ps, pair{c.name, c.w, d.w}, pair{c.name + " bias", c.b, d.b})
		}
		ps = append(ps, pair{blk.name + " stacked 1×1", blk.in1x1, b.blocks[i].in1x1})
	}
	for _, p := range ps {
		if !slices.Equal(p.x, p.y) {
			return p.name
		}
	}
	return ""
}

// The published .pth (F32, zip) and safetensors copies in F32 and F16 load
// to the same network, num_batches_tracked entries ignored.
func TestLoadFormats(t *testing.T) {
	params := randomParams(21)
	want := build(params)
	dir := t.TempDir()
	cases := []struct {
		file  string
		dt    dtype.DType
		write func(*testing.T, string, []stateTensor)
	}{
		{"pt_inception.pth", dtype.F32, writePyTorch},
		{"f16.safetensors", dtype.F16, writeSafetensors},
		{"f32.safetensors", dtype.F32, writeSafetensors},
	}
	for _, c := range cases {
		t.Run(c.file, func(t *testing.T) {
			path := filepath.Join(dir, c.file)
			c.write(t, path, stateDict(t, params, c.dt))
			n, err := Load(path)
			if err != nil {
				t.Fatal(err)
			}
			if p := sameNet(n, want); p != "" {
				t.Errorf("%s differs from the folded state dict", p)
			}
			os.Remove(path)
		})
	}
}

// fold computes the BatchNorm fold in float64: y = γ(x−m)/√(v+ε) + β.
func TestFold(t *testing.T) {
	spec := convSpec{"m", 2, 2, 1, 1, 1, 0, 0}
	params := map[string][]float32{
		"m.conv.weight":     {1, 2, 3, 4},
		"m.bn.weight":       {2, 0.5},
		"m.bn.bias":         {0.25, -1},
		"m.bn.running_mean": {1, -2},
		"m.bn.running_var":  {3, 0},
	}
	c := fold(spec, params)
	for o := range 2 {
		s := float64(params["m.bn.weight"][o]) / math.Sqrt(float64(params["m.bn.running_var"][o])+0.001)
		for i := range 2 {
			if want := float32(float64(params["m.conv.weight"][2*o+i]) * s); c.w[2*o+i] != want {
				t.Errorf("w[%d][%d] = %g, want %g", o, i, c.w[2*o+i], want)
			}
		}
		if want := float32(float64(params["m.bn.bias"][o]) - float64(params["m.bn.running_mean"][o])*s); c.b[o] != want {
			t.Errorf("b[%d] = %g, want %g", o, c.b[o], want)
		}
	}
}

func TestLoadErrors(t *testing.T) {
	params := randomParams(22)
	full := stateDict(t, params, dtype.F16)
	f32 := func(name string, shape ...int64) stateTensor {
		n := int64(1)
		for _, d := range shape {
			n *= d
		}
		return stateTensor{name, dtype.F32, shape, make([]byte, 4*n)}
	}
	// with returns the full state dict with tensor name replaced by x
	// (dropped when x.name is empty), or x appended when name is "".
	with := func(name string, x stateTensor) []stateTensor {
		var out []stateTensor
		for _, s := range full {
			if s.name != name {
				out = append(out, s)
			} else if x.name != "" {
				out = append(out, x)
			}
		}
		if name == "" {
			out = append(out, x)
		}
		return out
	}
	f16 := func(name string, shape []int64, v ...float32) stateTensor {
		raw := make([]byte, 2*len(v))
		if err := dtype.EncodeFloat32(raw, v, dtype.F16); err != nil {
			t.Fatal(err)
		}
		return stateTensor{name, dtype.F16, shape, raw}
	}
	// A running_var with its first value replaced.
	variance := func(v float32) stateTensor {
		vals := slices.Clone(params["Mixed_6b.branch7x7_2.bn.running_var"])
		vals[0] = v
		return f16("Mixed_6b.branch7x7_2.bn.running_var", []int64{128}, vals...)
	}
	cases := []struct {
		name     string
		tensors  []stateTensor
		truncate bool
		want     []string
	}{
		{"wrong shape", with("Conv2d_1a_3x3.conv.weight", f32("Conv2d_1a_3x3.conv.weight", 32, 3, 3, 2)),
			false, []string{`tensor "Conv2d_1a_3x3.conv.weight": shape [32 3 3 2], want [32 3 3 3]`}},
		{"transposed fc", with("fc.weight", f32("fc.weight", 2048, 1008)),
			false, []string{`tensor "fc.weight": shape [2048 1008], want [1008 2048]`}},
		{"missing", with("Mixed_7c.branch_pool.bn.bias", stateTensor{}),
			false, []string{`missing "Mixed_7c.branch_pool.bn.bias"`}},
		{"only one tensor", []stateTensor{f32("fc.bias", 1008)},
			false, []string{`missing "Conv2d_1a_3x3.conv.weight"`, "more"}},
		{"unexpected", with("", f32("AuxLogits.fc.weight", 1000, 768)),
			false, []string{`unexpected "AuxLogits.fc.weight"`}},
		{"integer weight", with("fc.bias", stateTensor{"fc.bias", dtype.I64, []int64{1008}, make([]byte, 8*1008)}),
			false, []string{`tensor "fc.bias": dtype I64, want F32, F16 or BF16`}},
		{"float counter", with("Conv2d_1a_3x3.bn.num_batches_tracked", f32("Conv2d_1a_3x3.bn.num_batches_tracked", 2)),
			false, []string{`tensor "Conv2d_1a_3x3.bn.num_batches_tracked": F32 [2], want a single integer`}},
		{"NaN", with("Mixed_6b.branch7x7_2.bn.running_var", variance(float32(math.NaN()))),
			false, []string{`tensor "Mixed_6b.branch7x7_2.bn.running_var": element 0 is NaN, want a finite value`}},
		{"negative variance", with("Mixed_6b.branch7x7_2.bn.running_var", variance(-0.5)),
			false, []string{`tensor "Mixed_6b.branch7x7_2.bn.running_var": element 0 is -0.5, want a variance ≥ 0`}},
		{"truncated", full, true, []string{"truncated.safetensors"}},
	}
	dir := t.TempDir()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(c.name, " ", "_")+".safetensors")
			writeSafetensors(t, path, c.tensors)
			defer os.Remove(path)
			if c.truncate {
				st, err := os.Stat(path)
				if err != nil {
					t.Fatal(err)
				}
				if err := os.Truncate(path, st.Size()-1000); err != nil {
					t.Fatal(err)
				}
			}
			_, err := Load(path)
			if err == nil {
				t.Fatal("no error")
			}
			t.Log(err)
			for _, s := range append([]string{"inception: ", path}, c.want...) {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q lacks %q", err, s)
				}
			}
		})
	}
}

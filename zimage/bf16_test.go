package zimage

import (
	"encoding/binary"
	"maps"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/dcdit/dcdit/cond"
	"github.com/dcdit/dcdit/internal/fixtures"
	"github.com/dcdit/dcdit/loaders/arch"
	"github.com/dcdit/dcdit/loaders/dtype"
	"github.com/dcdit/dcdit/loaders/safetensors"
	"github.com/dcdit/dcdit/ops"
)

// toBF16 returns ts with the F32 tensors that convert selects rounded to
// BF16 (to nearest even), the others as they are.
func toBF16(t *testing.T, ts map[string]safetensors.WriteTensor, convert func(name string) bool) map[string]safetensors.WriteTensor {
	t.Helper()
	out := map[string]safetensors.WriteTensor{}
	for name, tt := range ts {
		if convert(name) {
			if tt.DType != dtype.F32 {
				t.Fatalf("tensor %q is %s, want F32 to round to BF16", name, tt.DType)
			}
			data := make([]byte, len(tt.Data)/2)
			for i := range len(tt.Data) / 4 {
				v := math.Float32frombits(binary.LittleEndian.Uint32(tt.Data[4*i:]))
				binary.LittleEndian.PutUint16(data[2*i:], dtype.Float32ToBF16(v))
			}
			tt = safetensors.WriteTensor{Name: name, DType: dtype.BF16, Shape: slices.Clone(tt.Shape), Data: data}
		}
		out[name] = tt
	}
	return out
}

// linearWeights returns the internal names of cfg's Linear weights: the
// 2-D tensors named *.weight.
func linearWeights(cfg *arch.ZImageConfig) []string {
	exp := arch.ExpectedZImage(cfg, arch.Comfy)
	var out []string
	for i, name := range exp.Names() {
		if len(exp.Shape(i)) == 2 && strings.HasSuffix(name, ".weight") {
			out = append(out, name)
		}
	}
	return out
}

// loadBoth loads path in float32 and with KeepBF16, and checks that the
// second keeps exactly the weights want as bfloat16, equal to the first's
// values, and the rest in its arena, equal too.
func loadBoth(t *testing.T, path string, cfg map[string]any, want []string) (f32, bf16 *Model) {
	t.Helper()
	f32, _, err := LoadModel(path, LoadOptions{Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	bf16, _, err = LoadModel(path, LoadOptions{Config: cfg, KeepBF16: true})
	if err != nil {
		t.Fatal(err)
	}
	if got := slices.Sorted(maps.Keys(bf16.bf16)); !slices.Equal(got, slices.Sorted(slices.Values(want))) {
		t.Fatalf("kept as bfloat16: %v, want %v", got, want)
	}
	for name, w := range bf16.bf16 {
		ref := f32.Params.Get(name)
		if s := ref.Shape(); w.Rows != s[0] || w.Cols != s[1] {
			t.Errorf("%s: bfloat16 [%d %d], float32 %v", name, w.Rows, w.Cols, s)
		}
		for i, v := range w.Data {
			if math.Float32bits(dtype.BF16ToFloat32(v)) != math.Float32bits(ref.Values()[i]) {
				t.Fatalf("%s[%d]: bfloat16 %#04x, float32 %v", name, i, v, ref.Values()[i])
			}
		}
	}
	if n, m := len(bf16.Params.List())+len(bf16.bf16), len(f32.Params.List()); n != m {
		t.Errorf("%d tensors in the arena and %d kept as bfloat16, want %d in all", len(bf16.Params.List()), len(bf16.bf16), m)
	}
	for _, p := range bf16.Params.List() {
		if !slices.Equal(p.Values(), f32.Params.Get(p.Name).Values()) {
			t.Errorf("%s differs between the two loads", p.Name)
		}
	}
	return f32, bf16
}

// sameBits fails unless got and want hold the same float32 bit patterns.
func sameBits(t *testing.T, what string, got, want []float32) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", what, len(got), len(want))
	}
	for i := range want {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			t.Fatalf("%s[%d] = %v, want %v bit for bit", what, i, got[i], want[i])
		}
	}
}

// With KeepBF16, the fixture's weights rounded to BF16 (in both namings,
// vectors in BF16 or F32, one part of a fused projection left F32) load
// with their Linear weights as bfloat16 and give the outputs of the same
// file loaded in float32, bit for bit.
func TestKeepBF16Fixture(t *testing.T) {
	fixtures.Run(t, "zimage-tiny", func(t *testing.T, c fixtures.Case) {
		orig := filepath.Join(c.Dir, "weights.safetensors")
		src := readAll(t, orig)
		ref, err := Load(orig, LoadOptions{Config: c.Config})
		if err != nil {
			t.Fatal(err)
		}
		all := linearWeights(ref.Config)
		lats, ts, caps := fixtureBatch(t, c, c.Open(t, ioFile))
		matrix := func(name string) bool { return len(src[name].Shape) == 2 && strings.HasSuffix(name, ".weight") }
		for _, tc := range []struct {
			name  string
			ts    map[string]safetensors.WriteTensor
			want  []string
			noF32 bool // no tensor of the file is F32
		}{
			{"diffusers", toBF16(t, src, func(string) bool { return true }), all, true},
			{"comfy", toBF16(t, toComfy(t, src, patchKey(t, c), "model.diffusion_model."), func(string) bool { return true }), all, true},
			{"diffusers, matrices only", toBF16(t, src, matrix), all, false},
			{
				"diffusers, layers.0.attention.to_k F32",
				toBF16(t, src, func(name string) bool { return name != "layers.0.attention.to_k.weight" }),
				slices.DeleteFunc(slices.Clone(all), func(n string) bool { return n == "layers.0.attention.qkv.weight" }),
				false,
			},
			{"F32", src, nil, false},
		} {
			t.Run(tc.name, func(t *testing.T) {
				path := writeAll(t, filepath.Join(t.TempDir(), "bf16.safetensors"), tc.ts)
				f32, bf16 := loadBoth(t, path, c.Config, tc.want)
				want, err := f32.Forward(lats, ts, caps)
				if err != nil {
					t.Fatal(err)
				}
				got, err := bf16.Forward(lats, ts, caps)
				if err != nil {
					t.Fatal(err)
				}
				for i := range want {
					sameBits(t, "output", got[i], want[i])
				}
				if tc.noF32 {
					// The file is all BF16, so the float32 load holds
					// rounded weights: the outputs move off the fixture's,
					// which shows the rounding took place.
					if e := fixtures.RelErr(slices.Concat(got...), slices.Concat(fixtureOutputs(t, c, orig)...)); !(e > 0) {
						t.Errorf("outputs of the BF16 file equal those of the F32 one (rel err %g)", e)
					}
				}
			})
		}
	})
}

// A random toy model saved, rounded to BF16 and loaded with KeepBF16 runs
// Forward and, as a DC backbone, Condition and Forward exactly as loaded
// in float32; it refuses to be saved or run as a backbone with gradients,
// and its ops refuse a graph.
func TestKeepBF16Toy(t *testing.T) {
	cfg := smallConfig()
	cfg.NLayers, cfg.NRefinerLayers = 2, 1
	rng := rand.New(rand.NewPCG(7, 9))
	dir := filepath.Join(t.TempDir(), "f32")
	if err := Save(dir, newModel32(t, cfg, rng), nil, nil); err != nil {
		t.Fatal(err)
	}
	bdir := filepath.Join(t.TempDir(), "bf16")
	if err := os.Mkdir(bdir, 0o755); err != nil {
		t.Fatal(err)
	}
	writeAll(t, filepath.Join(bdir, WeightsFile), toBF16(t, readAll(t, filepath.Join(dir, WeightsFile)), func(string) bool { return true }))
	js, err := os.ReadFile(filepath.Join(dir, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bdir, "config.json"), js, 0o644); err != nil {
		t.Fatal(err)
	}
	// A float32 file keeps nothing as bfloat16.
	loadBoth(t, dir, nil, nil)
	f32, bf16 := loadBoth(t, bdir, nil, linearWeights(cfg))

	var lats []Latent
	var caps [][]float32
	for s, g := range [][2]int{{4, 4}, {3, 5}} {
		H, W := g[0]*cfg.PatchSize, g[1]*cfg.PatchSize
		lats = append(lats, Latent{Data: randF32(rng, cfg.InChannels*H*W, 1), F: 1, H: H, W: W})
		caps = append(caps, randF32(rng, (5+20*s)*cfg.CapFeatDim, 1))
	}
	tv := []float32{0.2, 0.8}
	want, err := f32.Forward(lats, tv, caps)
	if err != nil {
		t.Fatal(err)
	}
	got, err := bf16.Forward(lats, tv, caps)
	if err != nil {
		t.Fatal(err)
	}
	for i := range want {
		sameBits(t, "Forward", got[i], want[i])
	}

	// As a DC backbone: tokens at fractional positions.
	f32.Params.SetRequiresGrad(false)
	bf16.Params.SetRequiresGrad(false)
	in := cond.Input{T: tv, Captions: captionsOf(caps, cfg.CapFeatDim)}
	offsets := []int{0, 7, 12}
	tokens := f32.constant(12, cfg.Dim, randF32(rng, 12*cfg.Dim, 1))
	pos := make([]float64, 24)
	for i := range pos {
		pos[i] = 8 * rng.Float64()
	}
	hidden := func(m *Model) []float32 {
		t.Helper()
		b := NewBackbone(m)
		c, err := b.Condition(in)
		if err != nil {
			t.Fatal(err)
		}
		h, err := b.Forward(tokens, c, offsets, pos)
		if err != nil {
			t.Fatal(err)
		}
		return values(h)
	}
	sameBits(t, "Backbone.Forward", hidden(bf16), hidden(f32))

	if err := Save(filepath.Join(t.TempDir(), "out"), bf16, nil, nil); err == nil || !strings.Contains(err.Error(), "KeepBF16") {
		t.Errorf("Save of a bfloat16 model: error %v, want one naming KeepBF16", err)
	}
	bf16.Params.SetRequiresGrad(true)
	if _, err := NewBackbone(bf16).Condition(in); err == nil || !strings.Contains(err.Error(), "no backward pass") {
		t.Errorf("Condition with gradients on a bfloat16 model: error %v, want a refusal", err)
	}
	func() {
		defer func() {
			if r, _ := recover().(string); !strings.Contains(r, "ops: LinearBF16: b requires a gradient") {
				t.Errorf("Timestep with gradients on a bfloat16 model: panic %q, want LinearBF16's refusal", r)
			}
		}()
		ops.Release(bf16.Timestep(tv))
	}()
}

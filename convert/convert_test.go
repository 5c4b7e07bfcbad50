package convert

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/dcdit/dcdit/dit"
	"github.com/dcdit/dcdit/internal/fixtures"
	"github.com/dcdit/dcdit/internal/testckpt"
	"github.com/dcdit/dcdit/loaders"
	"github.com/dcdit/dcdit/loaders/arch"
	"github.com/dcdit/dcdit/loaders/dtype"
	"github.com/dcdit/dcdit/loaders/safetensors"
	"github.com/dcdit/dcdit/posembed"
)

// step is one conversion of a chain: to a layout and dtype, written as a
// file (name ending in .safetensors) or a folder, with a shard size.
type step struct {
	layout    arch.Layout
	dt        dtype.DType
	out       string
	shardSize int64
	prefix    bool
}

// convertPath plans and executes one conversion of the checkpoint at in.
func convertPath(in, out string, numHeads int, opts Options, wo WriteOptions) error {
	ck, err := loaders.Open(in)
	if err != nil {
		return err
	}
	defer ck.Close()
	p, err := NewPlan(inputOf(ck, numHeads), opts)
	if err != nil {
		return err
	}
	return Execute(p, ck, out, wo)
}

func inputOf(ck *loaders.Checkpoint, numHeads int) arch.Input {
	in := arch.Input{Metadata: ck.Metadata, Config: ck.Config, NumHeads: numHeads}
	for _, t := range ck.Tensors {
		in.Tensors = append(in.Tensors, arch.TensorMeta{Name: t.Name, DType: t.DType, Shape: t.Shape})
	}
	return in
}

// chain runs the steps in a temporary folder and returns the last output.
func chain(t *testing.T, src string, numHeads int, steps ...step) string {
	t.Helper()
	dir := t.TempDir()
	in := src
	for _, s := range steps {
		out := filepath.Join(dir, s.out)
		err := convertPath(in, out, numHeads, Options{Layout: s.layout, DType: s.dt, ComfyPrefix: s.prefix}, WriteOptions{ShardSize: s.shardSize})
		if err != nil {
			t.Fatalf("%s → %s (%s): %v", in, out, s.layout, err)
		}
		in = out
	}
	return in
}

// sameTensors requires the two checkpoints to hold the same tensor names,
// dtypes, shapes and bytes.
func sameTensors(t *testing.T, want, got string) {
	t.Helper()
	a, err := loaders.Open(want)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := loaders.Open(got)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	names := func(c *loaders.Checkpoint) []string {
		var n []string
		for _, t := range c.Tensors {
			n = append(n, t.Name)
		}
		return n
	}
	if !slices.Equal(names(a), names(b)) {
		t.Fatalf("tensor names differ:\n want %v\n got  %v", names(a), names(b))
	}
	for _, ta := range a.Tensors {
		tb, _ := b.Tensor(ta.Name)
		if ta.DType != tb.DType || !slices.Equal(ta.Shape, tb.Shape) {
			t.Errorf("%s: %s %v, want %s %v", ta.Name, tb.DType, tb.Shape, ta.DType, ta.Shape)
			continue
		}
		ra, _ := ta.Bytes()
		rb, _ := tb.Bytes()
		if !bytes.Equal(ra, rb) {
			t.Errorf("%s: bytes differ", ta.Name)
		}
	}
}

// writeTiny writes a generated checkpoint of exp's tensors, letting edit
// change any tensor's values first, and returns its path.
func writeTiny(t *testing.T, exp arch.Expected, dt dtype.DType, edit func(name string, v []float32) []float32) string {
	t.Helper()
	ts, err := testckpt.Tensors(exp, dt, 7)
	if err != nil {
		t.Fatal(err)
	}
	for i := range ts {
		v := make([]float32, numel(ts[i].Shape))
		if err := dtype.DecodeFloat32(v, ts[i].Data, dt); err != nil {
			t.Fatal(err)
		}
		if ts[i].Name == "pos_embed" {
			// DiT's table is fixed: a converted file recomputes it.
			grid := int(math.Sqrt(float64(ts[i].Shape[1])))
			posembed.SinCosGrid(v, grid, int(ts[i].Shape[2]))
		}
		if edit != nil {
			v = edit(ts[i].Name, v)
		}
		ts[i].Data = make([]byte, len(v)*dt.Size())
		if err := dtype.EncodeFloat32(ts[i].Data, v, dt); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(t.TempDir(), "src.safetensors")
	if err := safetensors.Write(path, ts, map[string]string{"format": "pt"}); err != nil {
		t.Fatal(err)
	}
	return path
}

// tinyDiT writes a generated DiT; in the diffusers naming every block's
// embedder copy is block 0's, as diffusers' conversion script makes them.
func tinyDiT(t *testing.T, layout arch.Layout, edit func(string, []float32) []float32) string {
	return genDiT(t, testckpt.TinyDiT(), layout, edit)
}

func genDiT(t *testing.T, c *arch.DiTConfig, layout arch.Layout, edit func(string, []float32) []float32) string {
	first := map[string][]float32{}
	tie := func(name string, v []float32) []float32 {
		if _, rest, ok := strings.Cut(name, ".norm1.emb."); ok {
			if f, seen := first[rest]; seen {
				v = slices.Clone(f)
			} else {
				first[rest] = slices.Clone(v)
			}
		}
		if edit != nil {
			v = edit(name, v)
		}
		return v
	}
	return writeTiny(t, arch.ExpectedDiT(c, layout), dtype.F32, tie)
}

func tinyZImage(t *testing.T, layout arch.Layout) string {
	return writeTiny(t, arch.ExpectedZImage(testckpt.TinyZImage(), layout), dtype.F32, nil)
}

// Round trips through another layout give back the same bytes, for
// generated checkpoints and the shared fixtures, as files and as sharded
// folders.
func TestRoundTrips(t *testing.T) {
	heads := testckpt.TinyDiT().NumHeads
	cases := []struct {
		name  string
		src   func(t *testing.T) string
		heads int
		steps []step
	}{
		{"dit original→diffusers→original", func(t *testing.T) string { return tinyDiT(t, arch.Original, nil) }, heads,
			[]step{{layout: arch.Diffusers, out: "d"}, {layout: arch.Original, out: "o.safetensors"}}},
		{"dit original→diffusers sharded→original", func(t *testing.T) string { return tinyDiT(t, arch.Original, nil) }, heads,
			[]step{{layout: arch.Diffusers, out: "d", shardSize: 20_000}, {layout: arch.Original, out: "o"}}},
		// Tensors of 1 MiB and more are copied by the kernel (Linux):
		// the fused qkv of width 512 splits into 1 MiB parts.
		{"dit width 512 original→diffusers→original", func(t *testing.T) string {
			c := &arch.DiTConfig{Depth: 1, HiddenSize: 512, NumHeads: 8, PatchSize: 2, InChannels: 4, InputSize: 8,
				LearnSigma: true, NumClasses: 10, MLPRatio: 4, FrequencySize: 256}
			return genDiT(t, c, arch.Original, nil)
		}, 8, []step{{layout: arch.Diffusers, out: "d"}, {layout: arch.Original, out: "o.safetensors"}}},
		{"dit diffusers→original→diffusers", func(t *testing.T) string { return tinyDiT(t, arch.Diffusers, nil) }, heads,
			[]step{{layout: arch.Original, out: "o.safetensors"}, {layout: arch.Diffusers, out: "d.safetensors"}}},
		{"dit .pt→safetensors", func(t *testing.T) string { return "../testdata/checkpoints/dit-original.pt" }, heads,
			[]step{{layout: arch.Original, out: "o.safetensors"}}},
		{"zimage diffusers→comfy→diffusers", func(t *testing.T) string { return tinyZImage(t, arch.Diffusers) }, 0,
			[]step{{layout: arch.Comfy, out: "c.safetensors"}, {layout: arch.Diffusers, out: "d.safetensors"}}},
		{"zimage diffusers→comfy prefixed→comfy→diffusers", func(t *testing.T) string { return tinyZImage(t, arch.Diffusers) }, 0,
			[]step{{layout: arch.Comfy, out: "c.safetensors", prefix: true}, {layout: arch.Comfy, out: "c2"}, {layout: arch.Diffusers, out: "d", shardSize: 100_000}}},
		{"zimage comfy→diffusers→comfy", func(t *testing.T) string { return tinyZImage(t, arch.Comfy) }, 0,
			[]step{{layout: arch.Diffusers, out: "d"}, {layout: arch.Comfy, out: "c.safetensors"}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			src := c.src(t)
			sameTensors(t, src, chain(t, src, c.heads, c.steps...))
		})
	}
}

func TestRoundTripFixtures(t *testing.T) {
	fixtures.Run(t, "dit-tiny", func(t *testing.T, c fixtures.Case) {
		heads := c.PositiveInt(t, "num_heads")
		orig := filepath.Join(c.Dir, "weights.safetensors")
		sameTensors(t, orig, chain(t, orig, heads, step{layout: arch.Diffusers, out: "d"}, step{layout: arch.Original, out: "o.safetensors"}))
		diff := filepath.Join(c.Dir, "weights-diffusers.safetensors")
		// The fixture's two namings hold the same weights.
		sameTensors(t, diff, chain(t, orig, heads, step{layout: arch.Diffusers, out: "d.safetensors"}))
		sameTensors(t, diff, chain(t, diff, heads, step{layout: arch.Original, out: "o"}, step{layout: arch.Diffusers, out: "d.safetensors"}))
	})
	fixtures.Run(t, "zimage-tiny", func(t *testing.T, c fixtures.Case) {
		w := filepath.Join(c.Dir, "weights.safetensors")
		sameTensors(t, w, chain(t, w, 0, step{layout: arch.Comfy, out: "c.safetensors", prefix: true}, step{layout: arch.Diffusers, out: "d.safetensors"}))
	})
}

// bf16RNE is an independent float32 → bfloat16 → float32 rounding: nearest,
// ties to even, NaN kept NaN.
func bf16RNE(f float32) float32 {
	u := math.Float32bits(f)
	if f != f {
		return f
	}
	u += 0x7fff + (u>>16)&1
	return math.Float32frombits(u &^ 0xffff)
}

// F32 → BF16 → F32 equals one rounding of every value, ties and extremes
// included.
func TestCastBF16RoundTrip(t *testing.T) {
	specials := []float32{1 + 1.0/256, 1 + 3.0/256, 1 + 1.0/512, -(1 + 3.0/512), math.MaxFloat32 / 2, 1e-40, -1e-42, 0, float32(math.Copysign(0, -1)), 3.14159265}
	src := tinyDiT(t, arch.Original, func(name string, v []float32) []float32 {
		if name == "y_embedder.embedding_table.weight" {
			copy(v, specials)
		}
		return v
	})
	out := chain(t, src, 2, step{layout: arch.Original, dt: dtype.BF16, out: "b.safetensors"}, step{layout: arch.Original, dt: dtype.F32, out: "f.safetensors"})
	a, _ := loaders.Open(src)
	defer a.Close()
	b, _ := loaders.Open(out)
	defer b.Close()
	for _, ta := range a.Tensors {
		tb, _ := b.Tensor(ta.Name)
		va, _ := ta.Float32()
		vb, _ := tb.Float32()
		if tb.DType != dtype.F32 || len(va) != len(vb) {
			t.Fatalf("%s: %s with %d values, want F32 with %d", ta.Name, tb.DType, len(vb), len(va))
		}
		for i := range va {
			if want := bf16RNE(va[i]); math.Float32bits(vb[i]) != math.Float32bits(want) {
				t.Fatalf("%s[%d]: %g → %g, want %g", ta.Name, i, va[i], vb[i], want)
			}
		}
	}
}

// An F16 cast of a value beyond ±65504 fails naming the tensor and leaves
// no output; with AllowOverflow it is stored as Inf.
func TestF16Overflow(t *testing.T) {
	const victim = "blocks.1.mlp.fc2.weight"
	src := tinyDiT(t, arch.Original, func(name string, v []float32) []float32 {
		if name == victim {
			v[5] = 1e5
		}
		return v
	})
	for _, out := range []string{"h.safetensors", "h"} {
		path := filepath.Join(t.TempDir(), out)
		err := convertPath(src, path, 2, Options{Layout: arch.Diffusers, DType: dtype.F16}, WriteOptions{ShardSize: 20_000})
		if err == nil || !strings.Contains(err.Error(), victim) || !strings.Contains(err.Error(), "F16") {
			t.Errorf("%s: err = %v, want an overflow naming %s", out, err, victim)
		}
		assertNothing(t, path)
	}
	path := filepath.Join(t.TempDir(), "h.safetensors")
	if err := convertPath(src, path, 2, Options{Layout: arch.Original, DType: dtype.F16, AllowOverflow: true}, WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	ck, _ := loaders.Open(path)
	defer ck.Close()
	tt, _ := ck.Tensor(victim)
	v, _ := tt.Float32()
	if !math.IsInf(float64(v[5]), 1) {
		t.Errorf("%s[5] = %g, want +Inf", victim, v[5])
	}
}

// assertNothing checks that a failed conversion left neither path nor a
// temporary file or folder beside it.
func assertNothing(t *testing.T, path string) {
	t.Helper()
	if _, err := os.Lstat(path); err == nil {
		t.Errorf("%s exists after a failed conversion", path)
	}
	entries, _ := os.ReadDir(filepath.Dir(path))
	for _, e := range entries {
		t.Errorf("%s left behind", e.Name())
	}
}

// Per-block embedder copies that differ cannot be folded: the copy is
// named and nothing is written.
func TestDifferentEmbedderCopies(t *testing.T) {
	depth := testckpt.TinyDiT().Depth
	victim := "transformer_blocks." + strconv.Itoa(depth-1) + ".norm1.emb.class_embedder.embedding_table.weight"
	src := tinyDiT(t, arch.Diffusers, func(name string, v []float32) []float32 {
		if name == victim {
			v[len(v)-1] += 1
		}
		return v
	})
	for _, out := range []string{"o.safetensors", "o"} {
		path := filepath.Join(t.TempDir(), out)
		err := convertPath(src, path, 2, Options{Layout: arch.Original}, WriteOptions{})
		if err == nil || !strings.Contains(err.Error(), victim) {
			t.Errorf("%s: err = %v, want the differing copy %s named", out, err, victim)
		}
		assertNothing(t, path)
	}
}

// Input tensors that no rule consumes fail the plan, named.
func TestLeftovers(t *testing.T) {
	for _, c := range []struct {
		src  func(t *testing.T) string
		want []string
	}{
		{func(t *testing.T) string {
			ts, _ := testckpt.Tensors(arch.ExpectedDiT(testckpt.TinyDiT(), arch.Original), dtype.F32, 1)
			ts = append(ts, safetensors.WriteTensor{Name: "ema_decay", DType: dtype.F32, Shape: []int64{1}, Data: make([]byte, 4)})
			p := filepath.Join(t.TempDir(), "x.safetensors")
			if err := safetensors.Write(p, ts, nil); err != nil {
				t.Fatal(err)
			}
			return p
		}, []string{"ema_decay"}},
		{func(t *testing.T) string { return "../testdata/checkpoints/zimage-comfy-full.safetensors" }, []string{"first_stage_model.", "text_encoders."}},
	} {
		src := c.src(t)
		ck, err := loaders.Open(src)
		if err != nil {
			t.Fatal(err)
		}
		_, err = NewPlan(inputOf(ck, 2), Options{Layout: arch.Diffusers})
		ck.Close()
		for _, w := range c.want {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("%s: err = %v, want %q named", src, err, w)
			}
		}
	}
}

// Wrong targets and unsupported layouts are refused before anything runs.
func TestPlanRefusals(t *testing.T) {
	ditSrc, ziSrc := tinyDiT(t, arch.Original, nil), tinyZImage(t, arch.Diffusers)
	for _, c := range []struct {
		src  string
		opts Options
		want string
	}{
		{ditSrc, Options{Layout: arch.Comfy}, "no ComfyUI layout"},
		{ziSrc, Options{Layout: arch.Original}, "use --layout diffusers"},
		{ditSrc, Options{Layout: arch.DCLayout}, "rewritten whole"},
		{ditSrc, Options{Layout: "official"}, "rewritten whole"},
		{ditSrc, Options{Layout: arch.Diffusers, DType: dtype.F8_E4M3}, "cannot cast"},
	} {
		ck, _ := loaders.Open(c.src)
		_, err := NewPlan(inputOf(ck, 2), c.opts)
		ck.Close()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s %+v: err = %v, want %q", filepath.Base(c.src), c.opts, err, c.want)
		}
	}
	// An existing output is never replaced.
	out := filepath.Join(t.TempDir(), "exists.safetensors")
	os.WriteFile(out, []byte("keep"), 0o644)
	if err := convertPath(ditSrc, out, 2, Options{Layout: arch.Diffusers}, WriteOptions{}); err == nil || !strings.Contains(err.Error(), "already exists") {
		t.Errorf("err = %v, want the existing output refused", err)
	}
}

// The plan is made from headers and accounts for every output's bytes;
// progress reaches the total.
func TestPlanAndProgress(t *testing.T) {
	src := tinyDiT(t, arch.Original, nil)
	ck, _ := loaders.Open(src)
	defer ck.Close()
	p, err := NewPlan(inputOf(ck, 2), Options{Layout: arch.Diffusers, DType: dtype.BF16})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Dropped) != 1 || p.Dropped[0].Name != "pos_embed" {
		t.Errorf("dropped %v, want pos_embed", p.Dropped)
	}
	if want := int(arch.ExpectedDiT(testckpt.TinyDiT(), arch.Diffusers).NumParameters() * 2); p.TotalBytes() != int64(want) {
		t.Errorf("total %d bytes, want %d", p.TotalBytes(), want)
	}
	var last, total int64
	out := filepath.Join(t.TempDir(), "d")
	if err := Execute(p, ck, out, WriteOptions{Progress: func(d, n int64) { last, total = d, n }}); err != nil {
		t.Fatal(err)
	}
	if last != p.TotalBytes() || total != p.TotalBytes() {
		t.Errorf("progress ended at %d/%d, want %d", last, total, p.TotalBytes())
	}
	for _, f := range []string{"config.json", "diffusion_pytorch_model.safetensors"} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Error(err)
		}
	}
}

// A shard size splits a folder output in diffusers' shard naming with an
// index that loaders read back.
func TestSharding(t *testing.T) {
	src := tinyZImage(t, arch.Comfy)
	out := chain(t, src, 0, step{layout: arch.Diffusers, out: "d", shardSize: 200_000})
	ix, err := safetensors.ReadIndex(filepath.Join(out, "diffusion_pytorch_model.safetensors.index.json"))
	if err != nil {
		t.Fatal(err)
	}
	shards := ix.Shards()
	if len(shards) < 2 {
		t.Fatalf("%d shards, want several", len(shards))
	}
	for i, s := range shards {
		if want := safetensors.ShardName("diffusion_pytorch_model", i+1, len(shards)); s != want {
			t.Errorf("shard %d is %s, want %s", i, s, want)
		}
	}
}

// A converted DiT loads with dit.Load and computes exactly what its
// source computes.
func TestConvertedDiTForward(t *testing.T) {
	src := tinyDiT(t, arch.Original, nil)
	for _, steps := range [][]step{
		{{layout: arch.Diffusers, out: "d"}},
		{{layout: arch.Diffusers, out: "d.safetensors"}, {layout: arch.Original, out: "o.safetensors"}},
	} {
		got := chain(t, src, 2, steps...)
		want := forward(t, src, 2)
		out := forward(t, got, 0) // the head count travels in the output
		if !slices.Equal(want, out) {
			t.Errorf("%s: forward output differs from the source's", filepath.Base(got))
		}
	}
}

func forward(t *testing.T, path string, heads int) []float32 {
	t.Helper()
	w, err := dit.Load(path, dit.LoadOptions{NumHeads: heads})
	if err != nil {
		t.Fatal(err)
	}
	m, err := dit.New(w)
	if err != nil {
		t.Fatal(err)
	}
	c := w.Config
	const B = 2
	x := make([]float32, B*c.InChannels*c.InputSize*c.InputSize)
	for i := range x {
		x[i] = float32(math.Sin(float64(i) * 0.37))
	}
	out, err := m.Denoiser()(x, []int{10, 700}, []int{1, c.NumClasses})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

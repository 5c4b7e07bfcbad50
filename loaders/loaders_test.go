package loaders_test

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/dcdit/dcdit/internal/testckpt"
	"github.com/dcdit/dcdit/loaders"
	"github.com/dcdit/dcdit/loaders/arch"
	"github.com/dcdit/dcdit/loaders/dtype"
)

const testdata = "../testdata"

func detect(t *testing.T, ck *loaders.Checkpoint, numHeads int) *arch.Report {
	t.Helper()
	return arch.Detect(ck.ArchInput(numHeads))
}

// Every generated layout opens, is recognised and yields the config it was
// generated from, with no missing or unexpected keys.
func TestOpenEveryLayout(t *testing.T) {
	dit, zi := testckpt.TinyDiT(), testckpt.TinyZImage()
	cases := []struct {
		path     string
		format   loaders.Format
		files    int
		arch     arch.Architecture
		layout   arch.Layout
		prefix   string
		config   any
		training string
	}{
		{"dit-original.safetensors", loaders.FormatSafetensors, 1, arch.DiT, arch.Original, "", dit, ""},
		{"dit-original-f16.safetensors", loaders.FormatSafetensors, 1, arch.DiT, arch.Original, "", dit, ""},
		{"dit-original.pt", loaders.FormatPyTorch, 1, arch.DiT, arch.Original, "", dit, ""},
		{"dit-train.pt", loaders.FormatPyTorch, 1, arch.DiT, arch.Original, "", dit, "ema"},
		{"dit-diffusers", loaders.FormatSafetensors, 1, arch.DiT, arch.Diffusers, "", dit, ""},
		{"dit-diffusers/transformer/diffusion_pytorch_model.safetensors", loaders.FormatSafetensors, 1, arch.DiT, arch.Diffusers, "", nil, ""},
		{"dit-diffusers-sharded", loaders.FormatSharded, 3, arch.DiT, arch.Diffusers, "", nil, ""},
		{"zimage-diffusers", loaders.FormatSharded, 3, arch.ZImage, arch.Diffusers, "", zi, ""},
		{"zimage-diffusers/transformer/diffusion_pytorch_model.safetensors.index.json", loaders.FormatSharded, 3, arch.ZImage, arch.Diffusers, "", nil, ""},
		{"zimage-comfy.safetensors", loaders.FormatSafetensors, 1, arch.ZImage, arch.Comfy, "", nil, ""},
		{"zimage-comfy-full.safetensors", loaders.FormatSafetensors, 1, arch.ZImage, arch.Comfy, "model.diffusion_model.", nil, ""},
	}
	for _, c := range cases {
		t.Run(c.path, func(t *testing.T) {
			ck, err := loaders.Open(filepath.Join(testdata, "checkpoints", c.path))
			if err != nil {
				t.Fatal(err)
			}
			defer ck.Close()
			if ck.Format != c.format || len(ck.Files) != c.files {
				t.Errorf("format %s with %d files, want %s with %d", ck.Format, len(ck.Files), c.format, c.files)
			}
			numHeads := 0
			if c.arch == arch.DiT && ck.Config == nil {
				numHeads = dit.NumHeads // DiT weights alone do not store it
			}
			r := detect(t, ck, numHeads)
			if r.Architecture != c.arch || r.Layout != c.layout || r.Prefix != c.prefix {
				t.Fatalf("detected %s/%s prefix %q, want %s/%s prefix %q", r.Architecture, r.Layout, r.Prefix, c.arch, c.layout, c.prefix)
			}
			if c.config != nil && !reflect.DeepEqual(r.Config, c.config) {
				t.Errorf("config = %+v\nwant     %+v", r.Config, c.config)
			}
			if len(r.Missing)+len(r.Unexpected)+len(r.Mismatched) != 0 {
				t.Errorf("missing %v, unexpected %v, mismatched %v", r.Missing, r.Unexpected, r.Mismatched)
			}
			if c.training != "" && (ck.Training == nil || ck.Training.Selected != c.training) {
				t.Errorf("training = %+v, want state dict %q", ck.Training, c.training)
			}
		})
	}
}

// Tensor data decodes to the same values from every container.
func TestSameValuesAcrossContainers(t *testing.T) {
	var ref []float32
	for _, p := range []string{"dit-original.safetensors", "dit-original.pt", "dit-train.pt"} {
		ck, err := loaders.Open(filepath.Join(testdata, "checkpoints", p))
		if err != nil {
			t.Fatal(err)
		}
		w, ok := ck.Tensor("blocks.1.attn.qkv.weight")
		if !ok {
			t.Fatalf("%s: blocks.1.attn.qkv.weight missing", p)
		}
		v, err := w.Float32()
		if err != nil {
			t.Fatal(err)
		}
		got := append([]float32(nil), v...)
		ck.Close()
		if ref == nil {
			ref = got
			continue
		}
		if !reflect.DeepEqual(got, ref) {
			t.Errorf("%s: values differ from the safetensors copy", p)
		}
	}
}

// DecodeFloat32 fills a buffer with what Float32 returns, from every
// container and dtype, whatever its read size (chunks that split the
// tensor unevenly included), and refuses a buffer of the wrong length.
func TestDecodeFloat32(t *testing.T) {
	for _, p := range []string{"dit-original.safetensors", "dit-original-f16.safetensors", "dit-original.pt", "dit-train.pt"} {
		ck, err := loaders.Open(filepath.Join(testdata, "checkpoints", p))
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{"blocks.1.attn.qkv.weight", "y_embedder.embedding_table.weight", "final_layer.linear.bias"} {
			w, ok := ck.Tensor(name)
			if !ok {
				t.Fatalf("%s: %s missing", p, name)
			}
			want, err := w.Float32()
			if err != nil {
				t.Fatal(err)
			}
			for _, chunk := range []int{0, 7, 4096, 1 << 22} {
				got := make([]float32, len(want))
				if err := w.DecodeFloat32Chunked(got, chunk); err != nil {
					t.Fatalf("%s %s, chunk %d: %v", p, name, chunk, err)
				}
				if !reflect.DeepEqual(got, want) {
					t.Errorf("%s %s, chunk %d: values differ from Float32's", p, name, chunk)
				}
			}
			if err := w.DecodeFloat32(make([]float32, len(want)+1)); err == nil || !strings.Contains(err.Error(), name) {
				t.Errorf("%s %s: a buffer one too long gave %v, want an error naming the tensor", p, name, err)
			}
		}
		ck.Close()
	}
}

// Every malformed input fails with one error naming the file and the problem.
func TestBadInputs(t *testing.T) {
	for _, c := range testckpt.BadCases() {
		t.Run(c.Path, func(t *testing.T) {
			ck, err := loaders.Open(filepath.Join(testdata, "bad", c.Path))
			if err == nil {
				ck.Close()
				t.Fatal("opened without error")
			}
			for _, want := range c.Want {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not mention %q", err, want)
				}
			}
		})
	}
}

// The committed test data is exactly what the generator writes.
func TestGeneratedTestdataUpToDate(t *testing.T) {
	tmp := t.TempDir()
	if err := testckpt.Generate(tmp); err != nil {
		t.Fatal(err)
	}
	for _, sub := range []string{"checkpoints", "bad"} {
		compareTrees(t, filepath.Join(tmp, sub), filepath.Join(testdata, sub))
	}
}

func compareTrees(t *testing.T, want, got string) {
	t.Helper()
	seen := map[string]bool{}
	filepath.WalkDir(want, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(want, p)
		seen[rel] = true
		a, _ := os.ReadFile(p)
		b, err := os.ReadFile(filepath.Join(got, rel))
		if err != nil || !bytes.Equal(a, b) {
			t.Errorf("testdata/%s is stale or missing: run go generate ./loaders/", filepath.Join(filepath.Base(got), rel))
		}
		return nil
	})
	filepath.WalkDir(got, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(got, p)
		if !seen[rel] {
			t.Errorf("testdata/%s is not produced by the generator", filepath.Join(filepath.Base(got), rel))
		}
		return nil
	})
}

// A full-size Z-Image-Turbo folder (24.6 GB of holes) opens from headers
// alone with the published tensor and parameter counts.
func TestFullSizeZImageSparse(t *testing.T) {
	dir := fullSizeZImage(t)
	ck, err := loaders.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	var params int64
	for _, tt := range ck.Tensors {
		params += tt.NumElements()
	}
	if len(ck.Files) != 3 || len(ck.Tensors) != 521 || params != 6_154_908_736 {
		t.Errorf("%d shards, %d tensors, %d parameters; want 3, 521, 6154908736", len(ck.Files), len(ck.Tensors), params)
	}
	r := detect(t, ck, 0)
	if !reflect.DeepEqual(r.Config, testckpt.ZImageTurbo()) {
		t.Errorf("config = %+v", r.Config)
	}
}

func fullSizeZImage(tb testing.TB) string {
	tb.Helper()
	dir := tb.TempDir()
	tr := filepath.Join(dir, "transformer")
	if err := os.MkdirAll(tr, 0o755); err != nil {
		tb.Fatal(err)
	}
	exp := arch.ExpectedZImage(testckpt.ZImageTurbo(), arch.Diffusers)
	if _, err := testckpt.WriteSparseSharded(tr, "diffusion_pytorch_model", exp, dtype.F32, 10_000_000_000); err != nil {
		tb.Fatal(err)
	}
	return dir
}

func BenchmarkOpenFullSizeZImage(b *testing.B) {
	dir := fullSizeZImage(b)
	b.ResetTimer()
	for b.Loop() {
		ck, err := loaders.Open(dir)
		if err != nil {
			b.Fatal(err)
		}
		detect(&testing.T{}, ck, 0)
		ck.Close()
	}
}

package vae

import (
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dcdit/dcdit/internal/fixtures"
	"github.com/dcdit/dcdit/loaders/dtype"
	"github.com/dcdit/dcdit/loaders/safetensors"
)

// The fixtures' files.
const (
	ioFile      = "io.safetensors"
	weightsFile = "weights.safetensors"
	ldmFile     = "weights-ldm.safetensors"
)

// The fixture kinds, which the same tests run over.
var kinds = []string{"vae-sd-tiny", "vae-flux-tiny"}

// runKinds runs f over every case of every kind.
func runKinds(t *testing.T, f func(t *testing.T, c fixtures.Case)) {
	for _, kind := range kinds {
		t.Run(kind, func(t *testing.T) { fixtures.Run(t, kind, f) })
	}
}

// toNHWC reorders an NCHW tensor [b, c, h, w] to NHWC.
func toNHWC(v []float32, b, c, h, w int) []float32 {
	out := make([]float32, len(v))
	for n := range b {
		for ch := range c {
			for i := range h {
				for j := range w {
					out[((n*h+i)*w+j)*c+ch] = v[((n*c+ch)*h+i)*w+j]
				}
			}
		}
	}
	return out
}

// toNCHW reorders an NHWC tensor [b, h, w, c] to NCHW.
func toNCHW(v []float32, b, h, w, c int) []float32 {
	out := make([]float32, len(v))
	for n := range b {
		for ch := range c {
			for i := range h {
				for j := range w {
					out[((n*c+ch)*h+i)*w+j] = v[((n*h+i)*w+j)*c+ch]
				}
			}
		}
	}
	return out
}

// nchw reads an io tensor [B, C, H, W] as NHWC with its dimensions.
func nchw(t *testing.T, f *fixtures.File, name string) (v []float32, b, c, h, w int) {
	t.Helper()
	s := f.Shape(name)
	if len(s) != 4 {
		t.Fatalf("%s has shape %v, want [B, C, H, W]", name, s)
	}
	b, c, h, w = int(s[0]), int(s[1]), int(s[2]), int(s[3])
	return toNHWC(f.F32(name), b, c, h, w), b, c, h, w
}

// caseConfig parses the case's config.json as a diffusers config.
func caseConfig(t *testing.T, c fixtures.Case) *Config {
	t.Helper()
	cfg, err := ReadConfig(filepath.Join(c.Dir, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// vaeFolder makes a diffusers VAE folder in a temporary directory: the
// case's config.json and weights as diffusion_pytorch_model.safetensors.
func vaeFolder(t *testing.T, c fixtures.Case, weights string) string {
	t.Helper()
	dir := t.TempDir()
	link(t, filepath.Join(c.Dir, "config.json"), filepath.Join(dir, "config.json"))
	link(t, weights, filepath.Join(dir, folderWeights[0]))
	return dir
}

func link(t *testing.T, from, to string) {
	t.Helper()
	abs, err := filepath.Abs(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(abs, to); err != nil {
		t.Fatal(err)
	}
}

// readTensors returns every tensor of a safetensors file as written.
func readTensors(t *testing.T, path string) []safetensors.WriteTensor {
	t.Helper()
	f, err := safetensors.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []safetensors.WriteTensor
	for _, info := range f.Tensors() {
		st, _ := f.Tensor(info.Name)
		raw, err := st.Bytes()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, safetensors.WriteTensor{Name: info.Name, DType: info.DType, Shape: info.Shape, Data: append([]byte(nil), raw...)})
	}
	return out
}

func writeTensors(t *testing.T, path string, ts []safetensors.WriteTensor) {
	t.Helper()
	if err := safetensors.Write(path, ts, nil); err != nil {
		t.Fatal(err)
	}
}

// f32Tensor makes an F32 tensor to write.
func f32Tensor(name string, shape []int64, v []float32) safetensors.WriteTensor {
	return safetensors.WriteTensor{Name: name, DType: dtype.F32, Shape: shape, Data: dtype.F32Bytes(v)}
}

// randomModel builds a model of configuration cfg with random weights as
// the fixtures draw them (convs N(0, 1/fan_in), biases N(0, 0.1²), norm
// weights 1 + N(0, 0.2²)); each parameter also goes to each, when not nil,
// by diffusers name.
func randomModel(t testing.TB, cfg *Config, seed uint64, each func(TensorSpec, []float32)) *Model {
	t.Helper()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(seed, 1))
	b := builder{}
	b.load = func(name string, n int) ([]float32, error) {
		spec := b.specs[len(b.specs)-1]
		v := make([]float32, n)
		std, mean := 0.1, 0.0
		switch {
		case len(spec.Shape) > 1:
			fan := 1
			for _, d := range spec.Shape[1:] {
				fan *= int(d)
			}
			std = 1 / math.Sqrt(float64(fan))
		case strings.HasSuffix(name, "norm1.weight"), strings.HasSuffix(name, "norm2.weight"), strings.HasSuffix(name, "norm.weight"), strings.HasSuffix(name, "norm_out.weight"):
			std, mean = 0.2, 1
		}
		for i := range v {
			v[i] = float32(mean + std*rng.NormFloat64())
		}
		if each != nil {
			each(spec, v)
		}
		return v, nil
	}
	return b.build(cfg)
}

// randomTensors is randomModel that also returns the weights as F32
// tensors to write.
func randomTensors(t testing.TB, cfg *Config, seed uint64) (*Model, []safetensors.WriteTensor) {
	var ts []safetensors.WriteTensor
	m := randomModel(t, cfg, seed, func(s TensorSpec, v []float32) { ts = append(ts, f32Tensor(s.Name, s.Shape, v)) })
	return m, ts
}

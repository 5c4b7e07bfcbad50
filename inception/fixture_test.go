package inception

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/dcdit/dcdit/internal/fixtures"
	"github.com/dcdit/dcdit/loaders/dtype"
	"github.com/dcdit/dcdit/loaders/npy"
)

const (
	fixtureKind = "fid-inception"
	// netTol bounds every network output and the resized input (the
	// README's tolerance; a float64 re-run of the reference is within
	// 3.2e-6). TestFixtureResize holds the resize to bit-exactness.
	netTol = 5e-5
)

// networkInputs are the fid-inception tensors the network reads.
var networkInputs = []string{"images", "images299"}

// fidOwned are the statistics and Fréchet-distance tensors of the
// fixture: package fid checks them; here they only have to be finite.
var fidOwned = []string{
	"feats_*", "mu_*", "sigma_*", "fid", "fid_*", "tr_covmean", "fallback",
	"lowrank.*", "singular.*", "samples.*", "samples_mu", "samples_sigma_diag",
}

// notComputed are Compare's input patterns: what the network reads and
// what another package checks.
func notComputed() []string { return append(append([]string(nil), networkInputs...), fidOwned...) }

// loadFixtureNet loads the case's weights, which only the shared fixture
// root holds (they are too large for testdata); it skips the test when
// DCDIT_FIXTURES does not point there.
func loadFixtureNet(t *testing.T, c fixtures.Case) *Net {
	t.Helper()
	name, _ := c.Config["weights_file"].(string)
	if name == "" {
		t.Fatalf("%s: config.json has no weights_file", c.Dir)
	}
	path := filepath.Join(c.Dir, name)
	if os.Getenv(fixtures.EnvVar) == "" {
		t.Skipf("set %s=../shared/fixtures to run the Inception parity tests (%s is not in testdata)", fixtures.EnvVar, name)
	}
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		t.Skipf("%s has no %s: set %s=../shared/fixtures to run the Inception parity tests", c.Dir, name, fixtures.EnvVar)
	}
	n, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// toNHWC converts b images of c×h×w (NCHW) to NHWC.
func toNHWC(x []float32, b, c, h, w int) []float32 {
	y := make([]float32, len(x))
	for n := range b {
		for k := range c {
			for i := range h {
				for j := range w {
					y[((n*h+i)*w+j)*c+k] = x[((n*c+k)*h+i)*w+j]
				}
			}
		}
	}
	return y
}

// imageCHW returns image n of an NHWC batch of h×w×c maps as c×h×w.
func imageCHW(x []float32, n, h, w, c int) []float32 {
	y := make([]float32, h*w*c)
	img := x[n*h*w*c : (n+1)*h*w*c]
	for i := range h {
		for j := range w {
			for k := range c {
				y[(k*h+i)*w+j] = img[(i*w+j)*c+k]
			}
		}
	}
	return y
}

// runImages runs the network on an NCHW input tensor of the fixture.
func runImages(t *testing.T, n *Net, io *fixtures.File, name string, want Outputs) *Result {
	t.Helper()
	s := io.Shape(name)
	if len(s) != 4 || s[1] != 3 {
		t.Fatalf("io.safetensors %q: shape %v, want [B 3 H W]", name, s)
	}
	b, h, w := int(s[0]), int(s[2]), int(s[3])
	r, err := n.Run(toNHWC(io.F32(name), b, 3, h, w), b, h, w, want)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// computeInception runs the case's network on its inputs and records
// every network tensor of io.safetensors.
func computeInception(t *testing.T, c fixtures.Case) *fixtures.Got {
	t.Helper()
	n := loadFixtureNet(t, c)
	io := c.Open(t, "io.safetensors")
	got := fixtures.NewGot()

	all := Outputs{Resized: true, Block1: true, Mixed5d: true, Mixed6e: true, Mixed7c: true, Pooled: true, Logits: true}
	r := runImages(t, n, io, "images", all)
	got.F32("features", r.Features, netTol)
	got.F32("logits", r.Logits, netTol)
	got.F32("logits_nobias", r.LogitsNoBias, netTol)
	for _, f := range []struct {
		dim int
		v   []float32
	}{{64, r.Features64}, {192, r.Features192}, {768, r.Features768}} {
		if name := fmt.Sprintf("features_d%d", f.dim); io.Has(name) {
			got.F32(name, f.v, netTol)
		}
	}

	// Intermediates of single images, named "<map>.<image>", with their
	// [C, H, W] shapes in config.json.
	maps := map[string][]float32{
		"resized": r.Resized, "block1": r.Block1, "mixed_5d": r.Mixed5d, "mixed_6e": r.Mixed6e, "mixed_7c": r.Mixed7c,
	}
	inter, ok := c.Config["intermediates"].(map[string]any)
	if !ok {
		t.Fatalf("%s: config.json has no intermediates", c.Dir)
	}
	for name := range inter {
		base, idx, ok := strings.Cut(name, ".")
		img, err := strconv.Atoi(idx)
		v, known := maps[base]
		if !ok || err != nil || !known {
			t.Fatalf("%s: intermediate %q is not <map>.<image> with a known map", c.Dir, name)
		}
		s := io.Shape(name)
		if len(s) != 3 {
			t.Fatalf("io.safetensors %q: shape %v, want [C H W]", name, s)
		}
		ch, h, w := int(s[0]), int(s[1]), int(s[2])
		if len(v) < (img+1)*ch*h*w {
			t.Fatalf("io.safetensors %q: shape %v does not match the network's map (%d values for the batch)", name, s, len(v))
		}
		got.F32(name, imageCHW(v, img, h, w, ch), netTol)
	}

	if io.Has("images299") {
		r := runImages(t, n, io, "images299", Outputs{Logits: true})
		got.F32("features299", r.Features, netTol)
		got.F32("logits299", r.Logits, netTol)
	}
	if io.Has("samples_features") {
		got.F32("samples_features", samplesFeatures(t, n, c), netTol)
	}
	return got
}

// samplesFeatures runs the network on the case's uint8 sample batch (a
// DiT-style .npz), as pytorch-fid reads the same images from PNG files.
func samplesFeatures(t *testing.T, n *Net, c fixtures.Case) []float32 {
	t.Helper()
	cfg, _ := c.Config["samples"].(map[string]any)
	file, _ := cfg["file"].(string)
	key, _ := cfg["key"].(string)
	if file == "" || key == "" {
		t.Fatalf("%s: config.json has no samples file and key", c.Dir)
	}
	ar, err := npy.OpenNPZ(filepath.Join(c.Dir, file))
	if err != nil {
		t.Fatal(err)
	}
	defer ar.Close()
	a, err := ar.Read(key)
	if err != nil {
		t.Fatal(err)
	}
	if a.DType != dtype.U8 || len(a.Shape) != 4 || a.Shape[3] != 3 {
		t.Fatalf("%s %s: %s %v, want uint8 [N H W 3]", file, key, a.DType, a.Shape)
	}
	r, err := n.RunUint8(a.Data, a.Shape[0], a.Shape[1], a.Shape[2], Outputs{})
	if err != nil {
		t.Fatal(err)
	}
	return r.Features
}

// compareInception checks a case's io.safetensors against got.
func compareInception(c fixtures.Case, got *fixtures.Got, logf func(string, ...any)) []error {
	return fixtures.Compare(filepath.Join(c.Dir, "io.safetensors"), notComputed(), got, logf)
}

// The network matches pytorch-fid: the resize bit for bit, every
// intermediate map, the pooled features of every --dims, and the logits
// with and without the head's bias.
func TestFixtureInception(t *testing.T) {
	fixtures.Run(t, fixtureKind, func(t *testing.T, c fixtures.Case) {
		fixtures.Report(t, compareInception(c, computeInception(t, c), t.Logf))
	})
}

// A corrupted expected tensor (NaN, or one element 10% off) or a NaN input
// in a copy of the case fails the comparison of TestFixtureInception.
func TestFixtureInceptionMutations(t *testing.T) {
	fixtures.Run(t, fixtureKind, func(t *testing.T, c fixtures.Case) {
		got := computeInception(t, c)
		fixtures.CheckMutations(t, c, "io.safetensors", notComputed(), func(mc fixtures.Case) []error {
			return compareInception(mc, got, nil)
		})
	})
}

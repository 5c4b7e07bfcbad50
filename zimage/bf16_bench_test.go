package zimage_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dcdit/dcdit/internal/benchio"
	"github.com/dcdit/dcdit/internal/testckpt"
	"github.com/dcdit/dcdit/loaders/arch"
	"github.com/dcdit/dcdit/loaders/dtype"
	"github.com/dcdit/dcdit/zimage"
)

// The environment of the KeepBF16 benchmarks' child processes: the
// checkpoint folder, and "1" to load it with KeepBF16.
const (
	bf16ChildEnv = "DCDIT_ZIMAGE_BF16_CHILD"
	bf16KeepEnv  = "DCDIT_ZIMAGE_BF16_KEEP"
)

// midConfig is a mid-size Z-Image (dim 1024, 8 layers, 165 M parameters)
// with the real model's proportions and caption width.
func midConfig() *arch.ZImageConfig {
	return &arch.ZImageConfig{
		Dim: 1024, NLayers: 8, NRefinerLayers: 2, NHeads: 16, NKVHeads: 16, InChannels: 16, PatchSize: 2, FPatchSize: 1,
		CapFeatDim: 2560, QKNorm: true, NormEps: 1e-5, RopeTheta: 256, TScale: 1000,
		AxesDims: []int64{16, 24, 24}, AxesLens: []int64{1024, 64, 64},
		FFNHidden: 2730, AdaLNDim: 256, TMidDim: 1024, FrequencySize: 256,
	}
}

// batchFor is one 32×32 latent (256 image tokens) under a 64-token
// caption, for a model of config cfg.
func batchFor(cfg *arch.ZImageConfig) ([]zimage.Latent, []float32, [][]float32) {
	rng := rand.New(rand.NewPCG(4, 2))
	rnd := func(n int) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(rng.NormFloat64())
		}
		return v
	}
	return []zimage.Latent{{Data: rnd(cfg.InChannels * 32 * 32), F: 1, H: 32, W: 32}}, []float32{0.5}, [][]float32{rnd(64 * cfg.CapFeatDim)}
}

// BenchmarkKeepBF16 writes midConfig with random BF16 weights and, in a
// fresh process per mode, loads it in float32 and with KeepBF16 and runs
// one forward pass (keepBF16Child's metrics, with the weights' own bytes
// in each mode beside them); then it times forward passes of the two
// models alternately in this process and reports their ratio (float32
// time / bfloat16 time: the bfloat16 model's relative speed).
func BenchmarkKeepBF16(b *testing.B) {
	if runChild(b) {
		return
	}
	cfg := midConfig()
	dir := b.TempDir()
	if err := testckpt.WriteZImageFolder(dir, cfg, dtype.BF16, 1<<40, 1); err != nil {
		b.Fatal(err)
	}
	metrics := weightMetrics(cfg)
	for _, keep := range []bool{false, true} {
		childMetrics(b, dir, keep, metrics)
	}

	f32, _, err := zimage.LoadModel(dir, zimage.LoadOptions{})
	if err != nil {
		b.Fatal(err)
	}
	bf16, _, err := zimage.LoadModel(dir, zimage.LoadOptions{KeepBF16: true})
	if err != nil {
		b.Fatal(err)
	}
	lats, ts, caps := batchFor(cfg)
	var tf, tb time.Duration
	timed := func(m *zimage.Model) time.Duration {
		start := time.Now()
		if _, err := m.Forward(lats, ts, caps); err != nil {
			b.Fatal(err)
		}
		return time.Since(start)
	}
	for i := 0; b.Loop(); i++ {
		// Alternate which runs first, so that neither always finds the
		// other's leftovers in the caches.
		if i%2 == 0 {
			tf += timed(f32)
			tb += timed(bf16)
		} else {
			tb += timed(bf16)
			tf += timed(f32)
		}
	}
	report(b, metrics)
	n := float64(b.N)
	b.ReportMetric(tf.Seconds()/n*1e3, "f32-ms/forward")
	b.ReportMetric(tb.Seconds()/n*1e3, "bf16-ms/forward")
	b.ReportMetric(tf.Seconds()/tb.Seconds(), "speed-ratio")
}

// BenchmarkKeepBF16Turbo loads a full-size Z-Image-Turbo (6.15 B
// parameters) BF16 checkpoint with KeepBF16 in a fresh process and runs
// one forward pass, reporting keepBF16Child's metrics: what sampling the
// real model holds resident. The checkpoint is sparse (real headers, data
// holes that read as zeros), so writing it is free; loading fills 12.3 GB.
// Float32 would need 24.6 GB and is not run; the time per operation is a
// child's. It runs only with DCDIT_BENCH_LARGE=1 set.
func BenchmarkKeepBF16Turbo(b *testing.B) {
	if runChild(b) {
		return
	}
	if os.Getenv("DCDIT_BENCH_LARGE") == "" {
		b.Skip("holds 12.3 GB resident: set DCDIT_BENCH_LARGE=1 to run it")
	}
	cfg := testckpt.ZImageTurbo()
	dir := b.TempDir()
	if _, err := testckpt.WriteSparseSharded(dir, "diffusion_pytorch_model", arch.ExpectedZImage(cfg, arch.Diffusers), dtype.BF16, 5_000_000_000); err != nil {
		b.Fatal(err)
	}
	js, err := json.Marshal(arch.ZImageDiffusersConfig(cfg))
	if err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), js, 0o644); err != nil {
		b.Fatal(err)
	}
	metrics := weightMetrics(cfg)
	for b.Loop() {
		childMetrics(b, dir, true, metrics)
	}
	report(b, metrics)
}

// runChild does a child's work when the environment names a checkpoint,
// and reports whether it did.
func runChild(b *testing.B) bool {
	dir := os.Getenv(bf16ChildEnv)
	if dir == "" {
		return false
	}
	keepBF16Child(b, dir, os.Getenv(bf16KeepEnv) == "1")
	return true
}

// keepBF16Child loads the checkpoint in dir (with KeepBF16 when keep) and
// runs one forward pass of batchFor, printing, less the process's peak
// resident set before loading (VmHWM): the peak after loading (load=), the
// resident set once the loader's garbage is collected and returned to the
// system (resident=, the weights), and the peak after the forward pass
// (peak=), all in MiB.
func keepBF16Child(b *testing.B, dir string, keep bool) {
	before, ok := benchio.PeakMB()
	if !ok {
		b.Skip("no VmHWM in /proc/self/status")
	}
	m, _, err := zimage.LoadModel(dir, zimage.LoadOptions{KeepBF16: keep})
	if err != nil {
		b.Fatal(err)
	}
	load, _ := benchio.PeakMB()
	debug.FreeOSMemory()
	resident := residentMB(b)
	lats, ts, caps := batchFor(m.Config)
	if _, err := m.Forward(lats, ts, caps); err != nil {
		b.Fatal(err)
	}
	peak, _ := benchio.PeakMB()
	fmt.Printf("load=%.1f resident=%.1f peak=%.1f\n", load-before, resident-before, peak-before)
}

// residentMB returns the process's resident set size in MiB (VmRSS).
func residentMB(b *testing.B) float64 {
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(string(status), "\n") {
		if kb, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			v, err := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(kb), "kB")), 64)
			if err != nil {
				b.Fatal(err)
			}
			return v / 1024
		}
	}
	b.Fatal("no VmRSS in /proc/self/status")
	return 0
}

// weightMetrics returns the bytes of cfg's weights in MiB in float32 and
// as KeepBF16 holds them (its Linear weights at two bytes).
func weightMetrics(cfg *arch.ZImageConfig) map[string]float64 {
	exp := arch.ExpectedZImage(cfg, arch.Comfy)
	var f32, bf16 float64
	for i, name := range exp.Names() {
		n := 1.0
		for _, d := range exp.Shape(i) {
			n *= float64(d)
		}
		f32 += 4 * n
		if len(exp.Shape(i)) == 2 && strings.HasSuffix(name, ".weight") {
			bf16 += 2 * n
		} else {
			bf16 += 4 * n
		}
	}
	return map[string]float64{"f32-weights-MB": f32 / (1 << 20), "bf16-weights-MB": bf16 / (1 << 20)}
}

// childMetrics runs keepBF16Child in a fresh process (this benchmark,
// with the child's environment) and adds its metrics to metrics under
// the mode's prefix.
func childMetrics(b *testing.B, dir string, keep bool, metrics map[string]float64) {
	cmd := exec.Command(os.Args[0], "-test.run=^$", "-test.bench=^"+b.Name()+"$", "-test.benchtime=1x")
	cmd.Env = append(os.Environ(), bf16ChildEnv+"="+dir, bf16KeepEnv+"="+map[bool]string{false: "0", true: "1"}[keep])
	out, err := cmd.CombinedOutput()
	if err != nil {
		b.Fatalf("child (KeepBF16 %v): %v\n%s", keep, err, out)
	}
	mode := map[bool]string{false: "f32", true: "bf16"}[keep]
	for _, name := range []string{"load", "resident", "peak"} {
		v, ok := childMetric(string(out), name)
		if !ok {
			b.Fatalf("child (KeepBF16 %v) reported no %s:\n%s", keep, name, out)
		}
		metrics[mode+"-"+name+"-MB"] = v
	}
}

// childMetric reads "name=value" from a child's output.
func childMetric(out, name string) (float64, bool) {
	for _, f := range strings.Fields(out) {
		if v, ok := strings.CutPrefix(f, name+"="); ok {
			x, err := strconv.ParseFloat(v, 64)
			return x, err == nil
		}
	}
	return 0, false
}

// report reports metrics (b.Loop clears those reported before it).
func report(b *testing.B, metrics map[string]float64) {
	for unit, v := range metrics {
		b.ReportMetric(v, unit)
	}
}

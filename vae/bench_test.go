package vae

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"runtime"
	"runtime/debug"
	"testing"
	"time"

	"github.com/dcdit/dcdit/internal/benchio"
	"github.com/dcdit/dcdit/kernels/gemm"
)

// The released VAEs' configurations: Stable Diffusion 1.x/2.x (and DiT's),
// and FLUX.1's.
var (
	sdConfig = Config{InChannels: 3, OutChannels: 3, BlockOutChannels: []int{128, 256, 512, 512}, LayersPerBlock: 2, LatentChannels: 4,
		NormNumGroups: 32, MidBlockAddAttention: true, UseQuantConv: true, UsePostQuantConv: true, ScalingFactor: SDScalingFactor}
	fluxConfig = Config{InChannels: 3, OutChannels: 3, BlockOutChannels: []int{128, 256, 512, 512}, LayersPerBlock: 2, LatentChannels: 16,
		NormNumGroups: 32, MidBlockAddAttention: true, ScalingFactor: FluxScalingFactor, ShiftFactor: FluxShiftFactor}
)

// decodeFLOPs counts the multiply-adds (×2) of decoding one h×w latent:
// the convolutions and the mid attention's two (h·w)²·C products.
func decodeFLOPs(m *Model, h, w int) float64 {
	var f float64
	conv := func(c *conv, h, w int) {
		if c != nil {
			f += 2 * float64(h*w*c.cin*c.cout*c.size*c.size)
		}
	}
	res := func(r *resnet, h, w int) {
		conv(&r.conv1, h, w)
		conv(&r.conv2, h, w)
		conv(r.shortcut, h, w)
	}
	conv(m.postQuant, h, w)
	conv(&m.dec.convIn, h, w)
	mb := &m.dec.mid
	res(&mb.res[0], h, w)
	res(&mb.res[1], h, w)
	if a := mb.attn; a != nil {
		L := float64(h * w)
		f += 2*L*float64(a.c)*float64(4*a.c) + 4*L*L*float64(a.c)
	}
	for i := range m.dec.blocks {
		s := &m.dec.blocks[i]
		for j := range s.resnets {
			res(&s.resnets[j], h, w)
		}
		if s.sampler != nil {
			h, w = 2*h, 2*w
			conv(s.sampler, h, w)
		}
	}
	conv(&m.dec.convOut, h, w)
	return f
}

func randomLatent(n int, seed uint64) []float32 {
	rng := rand.New(rand.NewPCG(seed, 2))
	z := make([]float32, n)
	for i := range z {
		z[i] = float32(rng.NormFloat64())
	}
	return z
}

// gemmGFLOPs measures gemm.Gemm on the product of a 3×3 512→512
// convolution over 64×64 pixels (4096 × 512 × 4608), the baseline the
// decoder's throughput is stated against.
func gemmGFLOPs() float64 {
	const m, n, k = 4096, 512, 4608
	a, b, c := randomLatent(m*k, 3), randomLatent(k*n, 4), make([]float32, m*n)
	gemm.Gemm(false, false, m, n, k, 1, a, k, b, n, 0, c, n)
	const reps = 3
	start := time.Now()
	for range reps {
		gemm.Gemm(false, false, m, n, k, 1, a, k, b, n, 0, c, n)
	}
	return reps * 2 * m * n * k / time.Since(start).Seconds() / 1e9
}

// BenchmarkDecodeSD256 decodes 32×32×4 latents into 256² images with the
// Stable Diffusion VAE's configuration (random weights), one at a time and
// four together. It reports images/s, the decoder's GFLOP/s (counted as
// direct convolutions) and, as the baseline measured in the same run,
// gemm.Gemm's GFLOP/s on a conv-shaped product (the better of a
// measurement before and one after) and the ratio of the two.
func BenchmarkDecodeSD256(b *testing.B) {
	cfg := sdConfig
	m := randomModel(b, &cfg, 11, nil)
	const h, w = 32, 32
	for _, batch := range []int{1, 4} {
		b.Run(fmt.Sprintf("batch%d", batch), func(b *testing.B) {
			z := randomLatent(batch*h*w*cfg.LatentChannels, 5)
			base := gemmGFLOPs()
			start := time.Now()
			for b.Loop() {
				if _, err := m.Decode(z, batch, h, w); err != nil {
					b.Fatal(err)
				}
			}
			sec := time.Since(start).Seconds() / float64(b.N) / float64(batch)
			base = max(base, gemmGFLOPs())
			gf := decodeFLOPs(m, h, w) / sec / 1e9
			b.ReportMetric(1/sec, "images/s")
			b.ReportMetric(gf, "GFLOP/s")
			b.ReportMetric(base, "gemm-GFLOP/s")
			b.ReportMetric(gf/base, "x-gemm")
		})
	}
}

// BenchmarkEncodeSD256 encodes 256² images into 32×32×4 latents with the
// Stable Diffusion VAE's configuration (random weights), the work of
// `dcdit data encode`, one at a time and four together; images/s.
func BenchmarkEncodeSD256(b *testing.B) {
	cfg := sdConfig
	m := randomModel(b, &cfg, 12, nil)
	const side = 256
	for _, batch := range []int{1, 4} {
		b.Run(fmt.Sprintf("batch%d", batch), func(b *testing.B) {
			x := randomLatent(batch*side*side*cfg.InChannels, 6)
			start := time.Now()
			for b.Loop() {
				if _, err := m.Encode(x, batch, side, side); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(batch*b.N)/time.Since(start).Seconds(), "images/s")
		})
	}
}

// TestPeakRSSFluxDecode (DCDIT_VAE_BIG=1) decodes a 128×128×16 latent into
// a 1024² image with FLUX.1's VAE configuration (random weights) and
// reports the time and the peak resident memory the decode adds: the high
// water mark is reset after the model is built (where /proc/self/clear_refs
// allows), and the weights' own size is given beside it.
func TestPeakRSSFluxDecode(t *testing.T) {
	if os.Getenv("DCDIT_VAE_BIG") != "1" {
		t.Skip("set DCDIT_VAE_BIG=1 to decode a 1024² FLUX image")
	}
	cfg := fluxConfig
	params := 0
	m := randomModel(t, &cfg, 13, func(s TensorSpec, v []float32) { params += len(v) })
	const h, w = 128, 128
	z := randomLatent(h*w*cfg.LatentChannels, 6)
	runtime.GC()
	debug.FreeOSMemory()
	before, _ := benchio.PeakMB()
	reset := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) == nil
	base, _ := benchio.PeakMB()
	start := time.Now()
	img, err := m.Decode(z, 1, h, w)
	if err != nil {
		t.Fatal(err)
	}
	sec := time.Since(start).Seconds()
	peak, ok := benchio.PeakMB()
	if !ok {
		t.Skip("VmHWM unavailable")
	}
	for i, v := range img {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			t.Fatalf("image value %d is %g", i, v)
		}
	}
	t.Logf("1024² FLUX decode: %.1f s (%.1f GFLOP/s), weights %.0f MiB, image %.0f MiB", sec, decodeFLOPs(m, h, w)/sec/1e9,
		float64(params)*4/(1<<20), float64(len(img))*4/(1<<20))
	t.Logf("VmHWM: %.0f MiB before the decode, %.0f MiB after (high-water mark reset: %v, then %.0f MiB)", before, peak, reset, base)
}

package kernels

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/dcdit/dcdit/kernels/gemm"
)

// conv2DBenchShapes are the convolutions of Inception v3 and the SD VAE
// decoder that dominate their run times.
var conv2DBenchShapes = []struct {
	name string
	p    Conv2D
}{
	{"Mixed6b_1x7_17x17_128to128_b32", conv2DShape(32, 17, 17, 128, 128, 1, 7, 1, 1, 0, 0, 3, 3)},
	{"Conv2d2b_3x3p1_147x147_32to64_b8", conv2DShape(8, 147, 147, 32, 64, 3, 3, 1, 1, 1, 1, 1, 1)},
	{"VAEdown_3x3s2_256to128_128ch_b1", conv2DShape(1, 256, 256, 128, 128, 3, 3, 2, 2, 0, 1, 0, 1)},
	{"3x3p1_64x64_512to512_b1", conv2DShape(1, 64, 64, 512, 512, 3, 3, 1, 1, 1, 1, 1, 1)},
}

// im2colOnly is convDefault's blocking with the fast paths bypassed
// (conv2DForward takes them for convDefault alone).
var im2colOnly = convSizing{budget: convDefault.budget + 1, minRows: convDefault.minRows}

// BenchmarkConv2D reports, per shape, the GFLOP/s of Conv2DForward
// ("conv"), of the im2col path alone ("im2col", where a fast path would
// otherwise run) and of gemm.Gemm on the product of the same m×n×k, the
// baseline of the same run ("gemm"). FLOPs are counted as the direct
// convolution's, 2·pixels·Cout·KH·KW·Cin.
func BenchmarkConv2D(b *testing.B) {
	for _, s := range conv2DBenchShapes {
		p := s.p
		m, n, k := p.Batch*p.OutH()*p.OutW(), p.Cout, p.KH*p.KW*p.Cin
		flops := 2 * float64(m) * float64(n) * float64(k)
		// On a shared machine the best repetition is the steadiest measure
		// (PyTorch's benchmarks report it too).
		loop := func(b *testing.B, f func()) {
			var best time.Duration
			cpu0 := acCPUSeconds()
			for b.Loop() {
				t0 := time.Now()
				f()
				if d := time.Since(t0); best == 0 || d < best {
					best = d
				}
			}
			b.ReportMetric(flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			b.ReportMetric(flops/best.Seconds()/1e9, "best-GFLOP/s")
			b.ReportMetric(b.Elapsed().Seconds()*1e3/float64(b.N), "ms/op")
			b.ReportMetric((acCPUSeconds()-cpu0)*1e3/float64(b.N), "cpu-ms/op")
		}
		rng := rand.New(rand.NewPCG(19, 19))
		x := acToF32(acRandn(rng, p.Batch*p.H*p.W*p.Cin))
		w := acToF32(acRandn(rng, n*k))
		bias := acToF32(acRandn(rng, n))
		y := make([]float32, m*n)
		b.Run(s.name+"/conv", func(b *testing.B) {
			ws := make([]float32, Conv2DScratch(p))
			loop(b, func() { Conv2DForward(y, x, w, bias, p, ws) })
		})
		if p.path() != pathIm2col {
			b.Run(s.name+"/im2col", func(b *testing.B) {
				q := newConv2DPlan(p, im2colOnly)
				ws := make([]float32, q.scratch(n, workersFor(q.blocks)))
				loop(b, func() { conv2DForward(y, x, w, bias, p, ws, im2colOnly) })
			})
		}
		b.Run(s.name+"/gemm", func(b *testing.B) {
			a := acToF32(acRandn(rng, m*k))
			loop(b, func() { gemm.Gemm(false, false, m, n, k, 1, a, k, w, n, 0, y, n) })
		})
	}
}

// BenchmarkPool2D times Inception v3's largest pools, reporting input
// elements read per nanosecond. For scale: the convolutions of the
// Inception block each pool feeds run at BenchmarkConv2D's rates.
func BenchmarkPool2D(b *testing.B) {
	for _, c := range []struct {
		name                        string
		batch, h, w, ch, k, str, pd int
		max                         bool
	}{
		{"max_3x3s2_147x147x64_b32", 32, 147, 147, 64, 3, 2, 0, true},
		{"avg_3x3s1p1_35x35x288_b32", 32, 35, 35, 288, 3, 1, 1, false},
		{"avg_3x3s1p1_17x17x768_b32", 32, 17, 17, 768, 3, 1, 1, false},
	} {
		b.Run(c.name, func(b *testing.B) {
			x := acToF32(acRandn(rand.New(rand.NewPCG(20, 20)), c.batch*c.h*c.w*c.ch))
			oh, ow := (c.h+2*c.pd-c.k)/c.str+1, (c.w+2*c.pd-c.k)/c.str+1
			y := make([]float32, c.batch*oh*ow*c.ch)
			for b.Loop() {
				if c.max {
					MaxPool2D(y, x, c.batch, c.h, c.w, c.ch, c.k, c.str, c.pd)
				} else {
					AvgPool2D(y, x, c.batch, c.h, c.w, c.ch, c.k, c.str, c.pd, false)
				}
			}
			b.ReportMetric(b.Elapsed().Seconds()*1e3/float64(b.N), "ms/op")
		})
	}
}

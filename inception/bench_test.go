package inception

import (
	"math/rand/v2"
	"testing"

	"github.com/dcdit/dcdit/kernels/gemm"
)

// macsPerImage counts the multiply-adds of the network's convolutions and
// head on one 299×299 image, computed directly (without Winograd).
func macsPerImage() float64 {
	total := float64(FeatureDim * NumClasses)
	side := InputSize
	for i, c := range stemSpecs {
		side = (side+2*c.padH-c.kh)/c.stride + 1
		total += float64(side * side * c.cin * c.cout * c.kh * c.kw)
		if i == 2 || i == 4 {
			side = (side-3)/2 + 1
		}
	}
	for _, b := range blockSpecs {
		for _, c := range b.convs() {
			oh, ow := (side+2*c.padH-c.kh)/c.stride+1, (side+2*c.padW-c.kw)/c.stride+1
			total += float64(oh * ow * c.cin * c.cout * c.kh * c.kw)
		}
		if b.kind == kindB || b.kind == kindD {
			side = (side-3)/2 + 1
		}
	}
	return total
}

// BenchmarkFeatures measures pool3 features of a batch of 32 299×299
// images (random weights, so that it runs without the fixture), in
// images/s and in GFLOP/s of the direct convolutions (2·macsPerImage per
// image), to set against BenchmarkGemmBaseline's.
func BenchmarkFeatures(b *testing.B) {
	const batch = 32
	n := build(randomParams(9))
	_, imgs := randomImages(10, batch, InputSize, InputSize)
	if _, err := n.Features(imgs, batch, InputSize, InputSize); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for b.Loop() {
		if _, err := n.Features(imgs, batch, InputSize, InputSize); err != nil {
			b.Fatal(err)
		}
	}
	s := b.Elapsed().Seconds()
	b.ReportMetric(float64(batch*b.N)/s, "images/s")
	b.ReportMetric(2*macsPerImage()*float64(batch*b.N)/s/1e9, "GFLOP/s")
}

// BenchmarkGemmBaseline is a float32 GEMM shaped like a Mixed_6 1×1
// convolution over a chunk of 8 images (2312 pixels, 768 → 768): the
// throughput bound of the network's convolutions.
func BenchmarkGemmBaseline(b *testing.B) {
	const m, n, k = 8 * 17 * 17, 768, 768
	rng := rand.New(rand.NewPCG(1, 1))
	x, w, y := make([]float32, m*k), make([]float32, n*k), make([]float32, m*n)
	for i := range x {
		x[i] = rng.Float32()
	}
	for i := range w {
		w[i] = rng.Float32()
	}
	for b.Loop() {
		gemm.Gemm(false, true, m, n, k, 1, x, k, w, k, 0, y, n)
	}
	b.ReportMetric(2*m*n*k*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
}

package gemm

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// benchShape is one benchmarked product, m×k×n as in the PyTorch reference
// (torch_reference.py's gemm_MxKxN cases).
type benchShape struct {
	transA, transB bool
	m, k, n        int
}

func (s benchShape) String() string {
	t := "NN"
	switch {
	case s.transA && s.transB:
		t = "TT"
	case s.transA:
		t = "TN"
	case s.transB:
		t = "NT"
	}
	return fmt.Sprintf("%s_%dx%dx%d", t, s.m, s.k, s.n)
}

// benchShapes are DiT-S training products (tokens × width × width) and a
// square reference; the transposed variants are the backward passes.
var benchShapes = []benchShape{
	{false, false, 2048, 384, 1152},
	{false, false, 2048, 384, 1536},
	{false, false, 2048, 1536, 384},
	{false, false, 256, 1152, 1152},
	{false, false, 1024, 1024, 1024},
	{false, true, 2048, 384, 1152},
	{true, false, 2048, 384, 1152},
}

func benchGemm(b *testing.B, s benchShape, f func(bool, bool, int, int, int, float32, []float32, int, []float32, int, float32, []float32, int)) {
	rng := rand.New(rand.NewPCG(1, 1))
	x := randSlice[float32](rng, s.m*s.k)
	y := randSlice[float32](rng, s.k*s.n)
	z := make([]float32, s.m*s.n)
	lda, ldb := s.k, s.n
	if s.transA {
		lda = s.m
	}
	if s.transB {
		ldb = s.k
	}
	f(s.transA, s.transB, s.m, s.n, s.k, 1, x, lda, y, ldb, 0, z, s.n)
	cpu0 := cpuSeconds()
	for b.Loop() {
		f(s.transA, s.transB, s.m, s.n, s.k, 1, x, lda, y, ldb, 0, z, s.n)
	}
	reportFlops(b, 2*float64(s.m)*float64(s.k)*float64(s.n)*float64(b.N), cpuSeconds()-cpu0)
}

// reportFlops reports GFLOP/s of wall time and, where the CPU time is
// known, GFLOP per CPU-second: on a shared machine the latter shows the
// code's speed through the time slices other processes take.
func reportFlops(b *testing.B, flops, cpu float64) {
	b.ReportMetric(flops/b.Elapsed().Seconds()/1e9, "GFLOP/s")
	if cpu > 0 {
		b.ReportMetric(flops/cpu/1e9, "GFLOP/cpu-s")
	}
}

// BenchmarkSgemm times Gemm[float32] with the kernels DCDIT_KERNELS selects
// (the default: the best the CPU has).
func BenchmarkSgemm(b *testing.B) {
	for _, s := range benchShapes {
		b.Run(s.String(), func(b *testing.B) { benchGemm(b, s, Gemm[float32]) })
	}
}

// BenchmarkSgemmSerial times GemmSerial[float32] on the same shapes.
func BenchmarkSgemmSerial(b *testing.B) {
	for _, s := range benchShapes {
		b.Run(s.String(), func(b *testing.B) { benchGemm(b, s, GemmSerial[float32]) })
	}
}

// BenchmarkSgemmImpl times each available implementation explicitly,
// parallel and serial, so one run compares them all.
func BenchmarkSgemmImpl(b *testing.B) {
	for _, im := range sgemmImpls {
		if !im.available {
			continue
		}
		for _, par := range []bool{true, false} {
			mode := "parallel"
			if !par {
				mode = "serial"
			}
			for _, s := range benchShapes {
				b.Run(im.ks.name+"/"+mode+"/"+s.String(), func(b *testing.B) { benchGemm(b, s, viaKernels(im.ks, par)) })
			}
		}
	}
}

// smallShapes are per-head attention products (DiT-S: 256 tokens, head
// width 64) and tiny or vector-like cases, where packing and call overhead
// weigh most.
var smallShapes = []benchShape{
	{false, true, 256, 64, 256},
	{false, false, 256, 256, 64},
	{true, false, 64, 256, 256},
	{false, false, 64, 64, 64},
	{false, false, 1, 384, 1152},
	{false, false, 2048, 384, 1},
}

// BenchmarkSgemmSmall times GemmSerial[float32] on small products, as
// attention calls it from its own parallel loop over heads.
func BenchmarkSgemmSmall(b *testing.B) {
	for _, s := range smallShapes {
		b.Run(s.String(), func(b *testing.B) { benchGemm(b, s, GemmSerial[float32]) })
	}
}

// BenchmarkDgemm times Gemm[float64] (the portable path, for gradient
// checks) on the first training shape and on a small one.
func BenchmarkDgemm(b *testing.B) {
	for _, s := range []benchShape{benchShapes[0], {false, false, 256, 256, 256}} {
		b.Run(s.String(), func(b *testing.B) {
			rng := rand.New(rand.NewPCG(1, 1))
			x := randSlice[float64](rng, s.m*s.k)
			y := randSlice[float64](rng, s.k*s.n)
			z := make([]float64, s.m*s.n)
			cpu0 := cpuSeconds()
			for b.Loop() {
				Gemm(false, false, s.m, s.n, s.k, 1, x, s.k, y, s.n, 0, z, s.n)
			}
			reportFlops(b, 2*float64(s.m)*float64(s.k)*float64(s.n)*float64(b.N), cpuSeconds()-cpu0)
		})
	}
}

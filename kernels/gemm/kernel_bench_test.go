package gemm

import (
	"math/rand/v2"
	"testing"
)

// BenchmarkKernel times each micro-kernel alone on one goroutine, with a
// kc-deep A sliver against a block of B panels as the driver calls it, so
// the figure is the ceiling the driver can reach.
func BenchmarkKernel(b *testing.B) {
	for _, im := range sgemmImpls {
		if !im.available {
			continue
		}
		ks := im.ks
		b.Run(ks.name, func(b *testing.B) {
			rng := rand.New(rand.NewPCG(1, 1))
			kc, nc := ks.kc, ks.nc
			ap := randSlice[float32](rng, ks.mr*kc)
			bp := randSlice[float32](rng, kc*nc)
			c := make([]float32, ks.mr*nc)
			cpu0 := cpuSeconds()
			for b.Loop() {
				for jr := 0; jr < nc; jr += ks.nr {
					ks.kernel(kc, ap, bp[jr*kc:], c[jr:], nc, 1, 1)
				}
			}
			reportFlops(b, 2*float64(ks.mr*nc*kc)*float64(b.N), cpuSeconds()-cpu0)
		})
	}
}

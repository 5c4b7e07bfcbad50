package fid

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/dcdit/dcdit/kernels/gemm"
)

// fullRank returns a positive definite d×d covariance, G Gᵀ/d + 0.01·I.
func fullRank(rng *rand.Rand, d int) []float64 {
	g := make([]float64, d*d)
	for i := range g {
		g[i] = rng.NormFloat64()
	}
	s := make([]float64, d*d)
	gemm.Gemm(false, true, d, d, d, 1/float64(d), g, d, g, d, 0, s, d)
	for i := range d {
		s[i*d+i] += 0.01
		for j := range i {
			s[i*d+j] = s[j*d+i]
		}
	}
	return s
}

// BenchmarkFrechetDistance times the distance between two full-rank
// statistics, the case of a real evaluation (N > D).
func BenchmarkFrechetDistance(b *testing.B) {
	for _, d := range []int{512, 2048} {
		b.Run(fmt.Sprintf("D%d", d), func(b *testing.B) {
			rng := rand.New(rand.NewPCG(1, uint64(d)))
			s1 := Stats{Mu: make([]float64, d), Sigma: fullRank(rng, d), D: d}
			s2 := Stats{Mu: make([]float64, d), Sigma: fullRank(rng, d), D: d}
			for b.Loop() {
				if _, err := FrechetDistance(s1, s2); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkGemm2048 is the baseline the distance is measured against: one
// float64 2048×2048×2048 product of kernels/gemm.
func BenchmarkGemm2048(b *testing.B) {
	const d = 2048
	rng := rand.New(rand.NewPCG(2, d))
	x, y := fullRank(rng, d), fullRank(rng, d)
	c := make([]float64, d*d)
	for b.Loop() {
		gemm.Gemm(false, false, d, d, d, 1, x, d, y, d, 0, c, d)
	}
}

// BenchmarkAccumulator times adding 2048-dimensional features, 512 at a
// time (one buffer flush each).
func BenchmarkAccumulator(b *testing.B) {
	const d, rows = 2048, 512
	feats := make([]float32, rows*d)
	rng := rand.New(rand.NewPCG(3, d))
	for i := range feats {
		feats[i] = rng.Float32()
	}
	acc, err := NewAccumulator(d)
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if err := acc.Add(feats); err != nil {
			b.Fatal(err)
		}
	}
}

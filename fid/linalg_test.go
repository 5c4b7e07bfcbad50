package fid

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/dcdit/dcdit/internal/fixtures"
	"github.com/dcdit/dcdit/kernels"
	"github.com/dcdit/dcdit/kernels/gemm"
)

// orthogonal returns a random n×n orthogonal matrix (a product of n
// Householder reflections of random vectors).
func orthogonal(rng *rand.Rand, n int) []float64 {
	q := make([]float64, n*n)
	for i := range n {
		q[i*n+i] = 1
	}
	u := make([]float64, n)
	qu := make([]float64, n)
	for range min(n, 8) {
		var nn float64
		for i := range u {
			u[i] = rng.NormFloat64()
			nn += u[i] * u[i]
		}
		// q ← q (I − 2 u uᵀ / uᵀu)
		for i := range n {
			qu[i] = kernels.Dot(q[i*n:(i+1)*n], u)
		}
		for i := range n {
			for j := range n {
				q[i*n+j] -= 2 * qu[i] * u[j] / nn
			}
		}
	}
	return q
}

// withSpectrum returns Q diag(lambda) Qᵀ.
func withSpectrum(rng *rand.Rand, lambda []float64) []float64 {
	n := len(lambda)
	q := orthogonal(rng, n)
	ql := make([]float64, n*n)
	for i := range n {
		for j := range n {
			ql[i*n+j] = q[i*n+j] * lambda[j]
		}
	}
	a := make([]float64, n*n)
	gemm.Gemm(false, true, n, n, n, 1, ql, n, q, n, 0, a, n)
	for i := range n {
		for j := range i {
			a[i*n+j] = a[j*n+i]
		}
	}
	return a
}

func TestEigenvalues(t *testing.T) {
	tests := []struct {
		name   string
		lambda func(n int) []float64
		n      int
	}{
		{"distinct", func(n int) []float64 {
			l := make([]float64, n)
			for i := range l {
				l[i] = float64(i) - 3.5
			}
			return l
		}, 150},
		{"clustered and zero", func(n int) []float64 {
			l := make([]float64, n)
			for i := range l {
				l[i] = float64(i % 3)
			}
			return l
		}, 131},
		{"graded", func(n int) []float64 {
			l := make([]float64, n)
			for i := range l {
				l[i] = math.Pow(10, -float64(i%12))
			}
			return l
		}, 70},
		{"one", func(int) []float64 { return []float64{2.5} }, 1},
		{"two", func(int) []float64 { return []float64{-1, 4} }, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(1, uint64(tt.n)))
			want := tt.lambda(tt.n)
			a := withSpectrum(rng, want)
			d, e := tridiagonalize(a, tt.n)
			got := tridiagEigenvalues(d, e)
			slices.Sort(want)
			var norm float64
			for _, l := range want {
				norm = max(norm, math.Abs(l))
			}
			if err := fixtures.AbsErr(got, want); !(err <= 1e-13*norm) {
				t.Errorf("eigenvalue error %g (norm %g)", err, norm)
			}
		})
	}
}

func TestPivotedCholesky(t *testing.T) {
	for _, tt := range []struct{ n, rank int }{{100, 100}, {100, 37}, {129, 1}, {5, 0}} {
		t.Run(fmt.Sprintf("n%d_rank%d", tt.n, tt.rank), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(2, uint64(tt.n)))
			lambda := make([]float64, tt.n)
			for i := range tt.rank {
				lambda[i] = 0.5 + rng.Float64()
			}
			a := withSpectrum(rng, lambda)
			orig := slices.Clone(a)
			l, perm, r := pivotedCholesky(a, tt.n)
			if r != tt.rank {
				t.Fatalf("rank %d, want %d", r, tt.rank)
			}
			var worst float64
			for i := range tt.n {
				for j := range tt.n {
					llt := kernels.Dot(l[i*r:(i+1)*r], l[j*r:(j+1)*r])
					worst = max(worst, math.Abs(llt-orig[perm[i]*tt.n+perm[j]]))
				}
				for c := i + 1; c < r; c++ {
					if l[i*r+c] != 0 {
						t.Fatalf("L[%d, %d] = %g above the diagonal", i, c, l[i*r+c])
					}
				}
			}
			if !(worst <= 1e-13) {
				t.Errorf("|P a Pᵀ − L Lᵀ| = %g", worst)
			}
		})
	}
}

func TestCongruence(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 3))
	n, r := 300, 260
	l := make([]float64, n*r)
	for i := range n {
		for c := 0; c <= min(i, r-1); c++ {
			l[i*r+c] = rng.NormFloat64()
		}
	}
	s := make([]float64, n*n)
	for i := range s {
		s[i] = rng.NormFloat64()
	}
	for i := range n {
		for j := range i {
			s[i*n+j] = s[j*n+i]
		}
	}
	got := congruence(s, n, l, r)
	sl := make([]float64, n*r)
	gemm.Gemm(false, false, n, r, n, 1, s, n, l, r, 0, sl, r)
	want := make([]float64, r*r)
	gemm.Gemm(true, false, r, r, n, 1, l, r, sl, r, 0, want, r)
	if err := fixtures.RelErr(got, want); !(err <= 1e-13) {
		t.Errorf("relative error %g", err)
	}
}

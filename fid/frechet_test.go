package fid

import (
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/dcdit/dcdit/internal/fixtures"
	"github.com/dcdit/dcdit/kernels"
)

// jacobiEigen returns the eigenvalues and eigenvectors (columns of v) of
// the small symmetric n×n matrix a by cyclic Jacobi rotations: a method
// independent of the package's factorisations, for reference values.
func jacobiEigen(a []float64, n int) (lambda, v []float64) {
	a = slices.Clone(a)
	v = make([]float64, n*n)
	for i := range n {
		v[i*n+i] = 1
	}
	for range 100 {
		var off, all float64
		for i := range n {
			for j := range n {
				all += a[i*n+j] * a[i*n+j]
				if i != j {
					off += a[i*n+j] * a[i*n+j]
				}
			}
		}
		if !(off > 1e-32*all) {
			break
		}
		for p := range n {
			for q := p + 1; q < n; q++ {
				if a[p*n+q] == 0 {
					continue
				}
				theta := (a[q*n+q] - a[p*n+p]) / (2 * a[p*n+q])
				t := math.Copysign(1, theta) / (math.Abs(theta) + math.Sqrt(theta*theta+1))
				c := 1 / math.Sqrt(t*t+1)
				s := t * c
				for k := range n {
					akp, akq := a[k*n+p], a[k*n+q]
					a[k*n+p], a[k*n+q] = c*akp-s*akq, s*akp+c*akq
				}
				for k := range n {
					apk, aqk := a[p*n+k], a[q*n+k]
					a[p*n+k], a[q*n+k] = c*apk-s*aqk, s*apk+c*aqk
				}
				for k := range n {
					vkp, vkq := v[k*n+p], v[k*n+q]
					v[k*n+p], v[k*n+q] = c*vkp-s*vkq, s*vkp+c*vkq
				}
			}
		}
	}
	lambda = make([]float64, n)
	for i := range n {
		lambda[i] = a[i*n+i]
	}
	return lambda, v
}

// refTraceSqrt is the fixture README's independent method:
// Σ √λ(√σ1 σ2 √σ1), negative round-off eigenvalues clamped to 0.
func refTraceSqrt(s1, s2 []float64, n int) float64 {
	lam, v := jacobiEigen(s1, n)
	root := make([]float64, n*n)
	for i := range n {
		for j := range n {
			for k := range n {
				root[i*n+j] += v[i*n+k] * math.Sqrt(max(lam[k], 0)) * v[j*n+k]
			}
		}
	}
	m := matmul(matmul(root, s2, n), root, n)
	mu, _ := jacobiEigen(m, n)
	var sum float64
	for _, x := range mu {
		sum += math.Sqrt(max(x, 0))
	}
	return sum
}

func matmul(a, b []float64, n int) []float64 {
	c := make([]float64, n*n)
	for i := range n {
		for k := range n {
			for j := range n {
				c[i*n+j] += a[i*n+k] * b[k*n+j]
			}
		}
	}
	return c
}

// randomStats draws n rows of d correlated features (rank ≤ n − 1 when
// n ≤ d), with the features in zero set to a constant.
func randomStats(t *testing.T, rng *rand.Rand, n, d int, shift float64, zero []int) Stats {
	t.Helper()
	acc, err := NewAccumulator(d)
	if err != nil {
		t.Fatal(err)
	}
	mix := make([]float64, d*d)
	for i := range mix {
		mix[i] = rng.NormFloat64() / math.Sqrt(float64(d))
	}
	row := make([]float32, d)
	z := make([]float64, d)
	for range n {
		for j := range z {
			z[j] = rng.NormFloat64()
		}
		for i := range d {
			row[i] = float32(shift + kernels.Dot(mix[i*d:(i+1)*d], z) + 0.1*z[i])
		}
		for _, i := range zero {
			row[i] = 1.5
		}
		if err := acc.Add(row); err != nil {
			t.Fatal(err)
		}
	}
	s, err := acc.Stats()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// FrechetDistance agrees with the README's eigenvalue method (Jacobi here)
// on full-rank, rank-deficient and fallback cases, and is symmetric.
func TestFrechetAgainstEigenMethod(t *testing.T) {
	tests := []struct {
		name       string
		n, m, d    int
		za, zb     []int
		fallback   bool
		tol        float64
		traceShift float64
	}{
		{"full rank", 200, 150, 24, nil, nil, false, 1e-10, 0.5},
		{"one singular", 10, 150, 24, nil, nil, false, 1e-7, 0.5},
		{"both singular", 12, 9, 30, nil, nil, false, 1e-7, 0.2},
		{"crossed zero variance", 100, 80, 20, []int{3}, []int{7}, true, 1e-9, 0.3},
		{"nested zero variance", 100, 80, 20, []int{3}, []int{3, 7}, false, 1e-9, 0.3},
		{"identical", 60, 60, 16, nil, nil, false, 1e-9, 0},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(i), 7))
			a := randomStats(t, rng, tt.n, tt.d, 1, tt.za)
			b := randomStats(t, rng, tt.m, tt.d, 1+tt.traceShift, tt.zb)
			if tt.name == "identical" {
				b = a
			}
			r, err := FrechetDistance(a, b)
			if err != nil {
				t.Fatal(err)
			}
			if r.Fallback != tt.fallback {
				t.Fatalf("fallback %v, want %v", r.Fallback, tt.fallback)
			}
			s1, s2 := slices.Clone(a.Sigma), slices.Clone(b.Sigma)
			if tt.fallback {
				for j := range tt.d {
					s1[j*tt.d+j] += Eps
					s2[j*tt.d+j] += Eps
				}
			}
			want := refTraceSqrt(s1, s2, tt.d)
			if e := math.Abs(r.TrCovmean-want) / want; !(e <= tt.tol) {
				t.Errorf("tr √(σ1σ2) %.17g, eigenvalue method %.17g: relative error %g", r.TrCovmean, want, e)
			}
			back, err := FrechetDistance(b, a)
			if err != nil {
				t.Fatal(err)
			}
			if e := math.Abs(back.FID - r.FID); !(e <= 1e-9*(1+math.Abs(r.FID))) || back.Fallback != r.Fallback {
				t.Errorf("FID(a, b) = %v, FID(b, a) = %v", r.FID, back.FID)
			}
			if tt.name == "identical" && !(math.Abs(r.FID) <= 1e-9*r.TrCovmean) {
				t.Errorf("FID of identical statistics = %g", r.FID)
			}
		})
	}
}

// Diagonal covariances commute: tr √(σ1σ2) = Σ √(a_i b_i) exactly. In the
// second case the zero-variance sets, {2, 5} and {3, 5}, are crossed, so
// pytorch-fid falls back and each term is √((a_i + ε)(b_i + ε)); the
// traces in the distance stay without ε.
func TestFrechetDiagonal(t *testing.T) {
	tests := []struct {
		name     string
		va, vb   []float64
		fallback bool
	}{
		{"one dimension", []float64{2.25}, []float64{4}, false},
		{"crossed zero variances", []float64{1, 4, 0, 2.25, 9, 0}, []float64{4, 1, 3, 0, 1, 0}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := len(tt.va)
			a := Stats{Mu: make([]float64, d), Sigma: make([]float64, d*d), D: d}
			b := Stats{Mu: make([]float64, d), Sigma: make([]float64, d*d), D: d}
			off := 0.0
			if tt.fallback {
				off = Eps
			}
			var tr, fid float64
			for i := range d {
				a.Sigma[i*d+i], b.Sigma[i*d+i] = tt.va[i], tt.vb[i]
				b.Mu[i] = float64(i + 1)
				tr += math.Sqrt((tt.va[i] + off) * (tt.vb[i] + off))
				fid += float64((i+1)*(i+1)) + tt.va[i] + tt.vb[i]
			}
			fid -= 2 * tr
			r, err := FrechetDistance(a, b)
			if err != nil {
				t.Fatal(err)
			}
			if r.Fallback != tt.fallback {
				t.Errorf("fallback %v, want %v", r.Fallback, tt.fallback)
			}
			// A backward-stable eigensolver leaves each eigenvalue
			// ~ulp·|σ1σ2| off, and the offset's √(ε·ε) = 1e-6 term
			// amplifies that by 1/(2√λ).
			if e := math.Abs(r.TrCovmean - tr); !(e <= 1e-9*tr) {
				t.Errorf("tr %.17g, want %.17g", r.TrCovmean, tr)
			}
			if e := math.Abs(r.FID - fid); !(e <= 1e-9*fid) {
				t.Errorf("FID %.17g, want %.17g", r.FID, fid)
			}
		})
	}
}

func TestFallbackRule(t *testing.T) {
	tests := []struct {
		d      int
		za, zb []int
		want   bool
	}{
		{64, []int{5}, []int{17}, true},
		{64, []int{1, 2}, []int{2, 3}, true},
		{64, []int{5}, []int{5, 17}, false},
		{64, []int{5, 17}, []int{17}, false},
		{64, []int{5}, []int{5}, false},
		{64, nil, []int{17}, false},
		{64, nil, nil, false},
		{127, []int{5}, []int{17}, true},
		{128, []int{5}, []int{17}, false},
		{2048, []int{5}, []int{17}, false},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("D%d_%v_%v", tt.d, tt.za, tt.zb), func(t *testing.T) {
			if got := fallbackRule(tt.d, tt.za, tt.zb); got != tt.want {
				t.Errorf("fallbackRule = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestFrechetErrors(t *testing.T) {
	good := func(d int) Stats {
		s := Stats{Mu: make([]float64, d), Sigma: make([]float64, d*d), D: d}
		for i := range d {
			s.Sigma[i*d+i] = 1
		}
		return s
	}
	with := func(f func(s *Stats)) Stats {
		s := good(3)
		f(&s)
		return s
	}
	tests := []struct {
		name string
		a, b Stats
		want string
	}{
		{"dimensions differ", good(3), good(4), "first D = 3, second D = 4"},
		{"mu length", with(func(s *Stats) { s.Mu = s.Mu[:2] }), good(3), "first statistics: mu has 2 values, want D = 3"},
		{"sigma length", good(3), with(func(s *Stats) { s.Sigma = s.Sigma[:8] }), "second statistics: sigma has 8 values, want D×D = 9"},
		{"NaN mu", with(func(s *Stats) { s.Mu[1] = math.NaN() }), good(3), "first statistics: mu[1] is NaN"},
		{"Inf sigma", good(3), with(func(s *Stats) { s.Sigma[5] = math.Inf(1) }), "second statistics: sigma[1][2] is +Inf"},
		{"negative variance", with(func(s *Stats) { s.Sigma[4] = -1 }), good(3), "sigma[1][1] = -1, a negative variance"},
		{"not symmetric", good(3), with(func(s *Stats) { s.Sigma[1] = 0.5 }), "second statistics: sigma is not symmetric"},
		{"empty", Stats{}, good(3), "first statistics: D = 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := FrechetDistance(tt.a, tt.b)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %v, want one containing %q", err, tt.want)
			}
		})
	}
}

// For the fixture's sample batch (N ≤ D) the trace is the exact one of the
// stored matrices: σ1 = B Bᵀ with B the centred features / √(N − 1), and
// tr √(σ1σ2) = Σ √λ(Bᵀ σ2 B), an N×N eigenproblem solved here by Jacobi.
func TestFixtureSamplesTraceExact(t *testing.T) {
	fixtures.Run(t, "fid-inception", func(t *testing.T, c fixtures.Case) {
		io := c.Open(t, ioFile)
		shape := io.Shape("samples_features")
		n, d := int(shape[0]), int(shape[1])
		feats := io.F32("samples_features")
		acc, err := NewAccumulator(d)
		if err != nil {
			t.Fatal(err)
		}
		if err := acc.Add(feats); err != nil {
			t.Fatal(err)
		}
		s, err := acc.Stats()
		if err != nil {
			t.Fatal(err)
		}
		statsFile, _ := cfgMap(t, c, c.Config, "stats")["file"].(string)
		ref, err := ReadStats(filepath.Join(c.Dir, statsFile))
		if err != nil {
			t.Fatal(err)
		}
		r, err := FrechetDistance(s, ref)
		if err != nil {
			t.Fatal(err)
		}
		b := make([]float64, d*n) // D×N
		for i := range n {
			for j := range d {
				b[j*n+i] = (float64(feats[i*d+j]) - s.Mu[j]) / math.Sqrt(float64(n-1))
			}
		}
		sb := make([]float64, d*n)
		for i := range d {
			for k := range d {
				if w := ref.Sigma[i*d+k]; w != 0 {
					for j := range n {
						sb[i*n+j] += w * b[k*n+j]
					}
				}
			}
		}
		m := make([]float64, n*n)
		for i := range n {
			for j := range n {
				for k := range d {
					m[i*n+j] += b[k*n+i] * sb[k*n+j]
				}
			}
		}
		lam, _ := jacobiEigen(m, n)
		slices.Sort(lam)
		// Centring makes B's columns sum to zero: the smallest eigenvalue
		// is 0 but for round-off, whose square root would not be.
		var want float64
		for _, l := range lam[1:] {
			want += math.Sqrt(l)
		}
		if e := math.Abs(r.TrCovmean-want) / want; !(e <= 1e-12) {
			t.Errorf("tr √(σ1σ2) %.17g, exact (rank-%d factor) %.17g: relative error %g", r.TrCovmean, n-1, want, e)
		}
	})
}

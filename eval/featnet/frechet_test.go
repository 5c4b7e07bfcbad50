package featnet

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// diag returns a dim×dim diagonal matrix.
func diag(v ...float64) []float64 {
	m := make([]float64, len(v)*len(v))
	for i, x := range v {
		m[i*len(v)+i] = x
	}
	return m
}

// randomSPD returns a random symmetric positive definite matrix A·Aᵀ/dim
// + εI with a spread of eigenvalues.
func randomSPD(r *rand.Rand, dim int, eps float64) []float64 {
	a := make([]float64, dim*dim)
	for i := range a {
		a[i] = r.NormFloat64()
	}
	m := make([]float64, dim*dim)
	for i := range dim {
		for j := range dim {
			var s float64
			for k := range dim {
				s += a[i*dim+k] * a[j*dim+k]
			}
			m[i*dim+j] = s / float64(dim)
		}
		m[i*dim+i] += eps
	}
	return m
}

// invert returns m⁻¹ by Gauss–Jordan elimination with partial pivoting.
func invert(t *testing.T, m []float64, dim int) []float64 {
	a := append([]float64(nil), m...)
	inv := diag(make([]float64, dim)...)
	for i := range dim {
		inv[i*dim+i] = 1
	}
	for c := range dim {
		p := c
		for r := c + 1; r < dim; r++ {
			if math.Abs(a[r*dim+c]) > math.Abs(a[p*dim+c]) {
				p = r
			}
		}
		if a[p*dim+c] == 0 {
			t.Fatal("singular matrix")
		}
		for k := range dim {
			a[c*dim+k], a[p*dim+k] = a[p*dim+k], a[c*dim+k]
			inv[c*dim+k], inv[p*dim+k] = inv[p*dim+k], inv[c*dim+k]
		}
		d := a[c*dim+c]
		for k := range dim {
			a[c*dim+k] /= d
			inv[c*dim+k] /= d
		}
		for r := range dim {
			if r == c {
				continue
			}
			f := a[r*dim+c]
			for k := range dim {
				a[r*dim+k] -= f * a[c*dim+k]
				inv[r*dim+k] -= f * inv[c*dim+k]
			}
		}
	}
	return inv
}

// traceSqrtDB returns tr((A·B)^½) by the Denman–Beavers iteration on the
// non-symmetric product: an independent route (no eigensolver, no
// symmetric square root) to Frechet's last term.
func traceSqrtDB(t *testing.T, a, b []float64, dim int) float64 {
	y := mul(a, b, dim)
	z := diag(make([]float64, dim)...)
	for i := range dim {
		z[i*dim+i] = 1
	}
	for range 60 {
		yi, zi := invert(t, y, dim), invert(t, z, dim)
		for i := range y {
			y[i], z[i] = (y[i]+zi[i])/2, (z[i]+yi[i])/2
		}
	}
	var tr float64
	for i := range dim {
		tr += y[i*dim+i]
	}
	return tr
}

func TestFrechet(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	const dim = 12
	sa, sb := randomSPD(r, dim, 0.1), randomSPD(r, dim, 0.05)
	ma, mb := make([]float64, dim), make([]float64, dim)
	var dmu, tra, trb float64
	for i := range dim {
		ma[i], mb[i] = r.NormFloat64(), r.NormFloat64()
		dmu += (ma[i] - mb[i]) * (ma[i] - mb[i])
		tra += sa[i*dim+i]
		trb += sb[i*dim+i]
	}
	spdWant := dmu + tra + trb - 2*traceSqrtDB(t, sa, sb, dim)

	// A rank-deficient covariance (eigenvalues 0, rounding may make them
	// slightly negative) must still work: its square root is clamped.
	low := make([]float64, 9)
	for i, v := range []float64{1, 2, 3} {
		for j, w := range []float64{1, 2, 3} {
			low[i*3+j] = v * w
		}
	}

	cases := []struct {
		name string
		a, b Moments
		want float64
		tol  float64
	}{
		{"identical", Moments{Mean: ma, Cov: sa}, Moments{Mean: ma, Cov: sa}, 0, 1e-9},
		{"means only", Moments{Mean: []float64{1, 2}, Cov: diag(1, 1)}, Moments{Mean: []float64{4, 6}, Cov: diag(1, 1)}, 25, 1e-12},
		// Diagonal covariances: Σ (μa−μb)² + Σ (√σa − √σb)².
		{"diagonal", Moments{Mean: []float64{0, 1, 2}, Cov: diag(4, 9, 0.25)}, Moments{Mean: []float64{1, 1, 0}, Cov: diag(1, 16, 1)},
			1 + 0 + 4 + 1 + 1 + 0.25, 1e-12},
		{"zero covariance", Moments{Mean: []float64{0, 0}, Cov: diag(0, 0)}, Moments{Mean: []float64{0, 0}, Cov: diag(4, 9)}, 13, 1e-12},
		{"1-D", Moments{Mean: []float64{3}, Cov: []float64{2}}, Moments{Mean: []float64{1}, Cov: []float64{8}},
			4 + 2 + 8 - 2*4, 1e-12},
		{"random SPD pair vs Denman–Beavers", Moments{Mean: ma, Cov: sa}, Moments{Mean: mb, Cov: sb}, spdWant, 1e-8 * spdWant},
		// (Σa^½ Σb Σa^½)^½ with Σb = Σa is Σa, so the covariance terms
		// cancel even when Σa is singular.
		{"rank-deficient identical", Moments{Mean: []float64{0, 0, 0}, Cov: low}, Moments{Mean: []float64{0, 0, 0}, Cov: low}, 0, 1e-9},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := Frechet(c.a, c.b)
			if err != nil {
				t.Fatal(err)
			}
			if !(math.Abs(got-c.want) <= c.tol) {
				t.Errorf("Frechet = %.15g, want %.15g (±%g)", got, c.want, c.tol)
			}
			back, err := Frechet(c.b, c.a)
			if err != nil {
				t.Fatal(err)
			}
			if !(math.Abs(back-got) <= 1e-9*max(1, got)) {
				t.Errorf("not symmetric: FD(a,b) = %.15g, FD(b,a) = %.15g", got, back)
			}
		})
	}
}

func TestFrechetErrors(t *testing.T) {
	ok := Moments{Mean: []float64{0, 0}, Cov: diag(1, 1)}
	cases := []struct {
		name string
		a, b Moments
		want string
	}{
		{"NaN mean", Moments{Mean: []float64{math.NaN(), 0}, Cov: diag(1, 1)}, ok, "a mean[0] is NaN"},
		{"Inf covariance", ok, Moments{Mean: []float64{0, 0}, Cov: []float64{1, 0, 0, math.Inf(1)}}, "b cov[1, 1] is +Inf"},
		{"dimensions differ", ok, Moments{Mean: []float64{0}, Cov: []float64{1}}, "dimensions differ"},
		{"short covariance", Moments{Mean: []float64{0, 0}, Cov: []float64{1}}, ok, "1 covariance values"},
		{"empty", Moments{}, ok, "no mean"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Frechet(c.a, c.b)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want one containing %q", err, c.want)
			}
		})
	}
}

func TestStats(t *testing.T) {
	cases := []struct {
		name     string
		x        []float64
		n, dim   int
		mean     []float64
		cov      []float64
		errMatch string
	}{
		{name: "two dims", x: []float64{1, 2, 3, 6, 5, 4}, n: 3, dim: 2,
			// deviations (−2, −2), (0, 2), (2, 0): Σ d dᵀ = [[8, 4], [4, 8]], /2.
			mean: []float64{3, 4}, cov: []float64{4, 2, 2, 4}},
		{name: "large offset", x: []float64{1e9 + 1, 1e9 - 1}, n: 2, dim: 1, mean: []float64{1e9}, cov: []float64{2}},
		{name: "NaN", x: []float64{1, math.NaN(), 3, 4}, n: 2, dim: 2, errMatch: "sample 0, feature 1) is NaN"},
		{name: "Inf", x: []float64{1, 2, math.Inf(-1), 4}, n: 2, dim: 2, errMatch: "is -Inf"},
		{name: "one sample", x: []float64{1, 2}, n: 1, dim: 2, errMatch: "at least 2"},
		{name: "wrong length", x: []float64{1, 2, 3}, n: 2, dim: 2, errMatch: "3 values"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m, err := Stats(c.x, c.n, c.dim)
			if c.errMatch != "" {
				if err == nil || !strings.Contains(err.Error(), c.errMatch) {
					t.Fatalf("error %v, want one containing %q", err, c.errMatch)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if m.N != c.n {
				t.Errorf("N = %d, want %d", m.N, c.n)
			}
			for i := range c.mean {
				if m.Mean[i] != c.mean[i] {
					t.Errorf("mean = %v, want %v", m.Mean, c.mean)
					break
				}
			}
			for i := range c.cov {
				if !(math.Abs(m.Cov[i]-c.cov[i]) <= 1e-12) {
					t.Errorf("cov = %v, want %v", m.Cov, c.cov)
					break
				}
			}
		})
	}
}

// TestSymEig checks the Jacobi solver's reconstruction V·Λ·Vᵀ = A and
// Vᵀ·V = I on a random symmetric matrix.
func TestSymEig(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	const dim = 20
	a := randomSPD(r, dim, 0)
	for i := range a { // make it indefinite too
		if i%dim == i/dim {
			a[i] -= 0.5
		}
	}
	ev, v, err := symEig(append([]float64(nil), a...), dim, true)
	if err != nil {
		t.Fatal(err)
	}
	for i := range dim {
		for j := range dim {
			var rec, orth float64
			for k := range dim {
				rec += v[i*dim+k] * ev[k] * v[j*dim+k]
				orth += v[k*dim+i] * v[k*dim+j]
			}
			if !(math.Abs(rec-a[i*dim+j]) <= 1e-12) {
				t.Fatalf("V·Λ·Vᵀ[%d,%d] = %g, want %g", i, j, rec, a[i*dim+j])
			}
			want := 0.0
			if i == j {
				want = 1
			}
			if !(math.Abs(orth-want) <= 1e-12) {
				t.Fatalf("Vᵀ·V[%d,%d] = %g, want %g", i, j, orth, want)
			}
		}
	}
}

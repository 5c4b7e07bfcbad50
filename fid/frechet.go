package fid

import (
	"fmt"
	"math"
	"slices"
)

// Eps is the offset pytorch-fid adds to both covariances' diagonals when
// it falls back (calculate_frechet_distance's eps).
const Eps = 1e-6

// Result is a Fréchet distance with what went into it.
type Result struct {
	// FID is ||μ1 − μ2||² + tr σ1 + tr σ2 − 2 TrCovmean.
	FID float64
	// TrCovmean is tr √(σ1 σ2) (with the offset when Fallback is set).
	TrCovmean float64
	// Fallback reports that pytorch-fid would have taken its eps-offset
	// retry, √((σ1 + εI)(σ2 + εI)); the traces of σ1 and σ2 in FID stay
	// without the offset, as there.
	Fallback bool
}

// FrechetDistance computes the Fréchet distance between the Gaussians of
// a (the samples, μ1 σ1) and b (the reference, μ2 σ2) as pytorch-fid's
// calculate_frechet_distance does.
//
// pytorch-fid takes SciPy's sqrtm of σ1 σ2 and, if that has a non-finite
// entry, retries with εI added to both covariances. This function instead
// computes tr √(σ1 σ2) = Σ √λ(σ1 σ2) from symmetric factorisations (see
// traceSqrtProduct), which is finite for every pair of covariances, so
// SciPy's failure is predicted by a rule (fallbackRule) and the offset
// applied exactly when it holds. The eigenvalues of σ1 σ2 are real and
// non-negative for covariances, so there is no imaginary part: where
// pytorch-fid drops a small one (as for rank-deficient covariances) this
// agrees with it, and there is no "imaginary component" error.
//
// For a rank-deficient covariance (N ≤ D) SciPy's result also holds the
// square roots of the round-off eigenvalues of the product's null space,
// about 1e-6 of the trace for 4 samples at D = 2048; this function returns
// the trace of the given matrices without them (see traceSqrtProduct), so
// it differs from pytorch-fid by that much there. With N > D, as for any
// real evaluation, both agree to round-off.
//
// Both Stats must have the same D, finite values, symmetric covariances
// (up to round-off; the symmetric part is used) and non-negative
// variances.
func FrechetDistance(a, b Stats) (Result, error) {
	if err := a.check("first statistics"); err != nil {
		return Result{}, err
	}
	if err := b.check("second statistics"); err != nil {
		return Result{}, err
	}
	if a.D != b.D {
		return Result{}, fmt.Errorf("fid: the statistics have different dimensions: first D = %d, second D = %d", a.D, b.D)
	}
	n := a.D
	res := Result{Fallback: fallbackRule(n, zeroVariance(a), zeroVariance(b))}
	s1, s2 := symmetric(a.Sigma, n), symmetric(b.Sigma, n)
	if res.Fallback {
		for i := range n {
			s1[i*n+i] += Eps
			s2[i*n+i] += Eps
		}
	}
	res.TrCovmean = traceSqrtProduct(s1, s2, n)
	var diff, tr1, tr2 float64
	for i := range n {
		d := a.Mu[i] - b.Mu[i]
		diff += d * d
		tr1 += a.Sigma[i*n+i]
		tr2 += b.Sigma[i*n+i]
	}
	res.FID = diff + tr1 + tr2 - 2*res.TrCovmean
	if math.IsNaN(res.FID) || math.IsInf(res.FID, 0) {
		return Result{}, fmt.Errorf("fid: the distance is %v (||μ1 − μ2||² %v, traces %v and %v, tr √(σ1σ2) %v)", res.FID, diff, tr1, tr2, res.TrCovmean)
	}
	return res, nil
}

// asymmetry bounds |σij − σji| relative to max |σ|: float32 round-off of
// a covariance computed elsewhere passes, a matrix of the wrong layout
// does not.
const asymmetry = 1e-6

// check validates statistics; side names them in errors ("first", or a
// file's path).
func (s Stats) check(side string) error {
	d := s.D
	switch {
	case d < 1:
		return fmt.Errorf("fid: %s: D = %d, want at least 1", side, d)
	case len(s.Mu) != d:
		return fmt.Errorf("fid: %s: mu has %d values, want D = %d", side, len(s.Mu), d)
	case len(s.Sigma) != d*d:
		return fmt.Errorf("fid: %s: sigma has %d values, want D×D = %d", side, len(s.Sigma), d*d)
	}
	for i, v := range s.Mu {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Errorf("fid: %s: mu[%d] is %v", side, i, v)
		}
	}
	var scale float64
	for i, v := range s.Sigma {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Errorf("fid: %s: sigma[%d][%d] is %v", side, i/d, i%d, v)
		}
		scale = max(scale, math.Abs(v))
	}
	for i := range d {
		if v := s.Sigma[i*d+i]; v < 0 {
			return fmt.Errorf("fid: %s: sigma[%d][%d] = %v, a negative variance", side, i, i, v)
		}
		for j := range i {
			if x, y := s.Sigma[i*d+j], s.Sigma[j*d+i]; !(math.Abs(x-y) <= asymmetry*scale) {
				return fmt.Errorf("fid: %s: sigma is not symmetric: sigma[%d][%d] = %v, sigma[%d][%d] = %v", side, i, j, x, j, i, y)
			}
		}
	}
	return nil
}

// symmetric returns (σ + σᵀ)/2.
func symmetric(sigma []float64, n int) []float64 {
	s := slices.Clone(sigma)
	for i := range n {
		for j := range i {
			v := 0.5 * (s[i*n+j] + s[j*n+i])
			s[i*n+j], s[j*n+i] = v, v
		}
	}
	return s
}

// zeroVariance lists the features whose variance is exactly zero.
func zeroVariance(s Stats) []int {
	var z []int
	for i := range s.D {
		if s.Sigma[i*s.D+i] == 0 {
			z = append(z, i)
		}
	}
	return z
}

// scipyBlock is where SciPy 1.10's sqrtm stops failing on the pattern
// below: it takes the triangular square root of the Schur form in 64×64
// blocks, and the pattern's NaNs were only seen for D < 2 blocks.
const scipyBlock = 128

// fallbackRule predicts when SciPy's sqrtm(σ1 σ2) returns a non-finite
// matrix, so that pytorch-fid takes its offset path: when some feature has
// zero variance in the first set but not in the second and another the
// other way round (both zero-variance sets non-empty, neither containing
// the other). σ1 σ2 then has a defective zero eigenvalue, which has no
// square root, and SciPy's recursion divides zero by zero. Merely singular
// covariances (N ≤ D) give a finite complex result, not the fallback.
func fallbackRule(d int, za, zb []int) bool {
	if d >= scipyBlock || len(za) == 0 || len(zb) == 0 {
		return false
	}
	return !subset(za, zb) && !subset(zb, za)
}

// subset reports whether every element of the sorted list a is in the
// sorted list b.
func subset(a, b []int) bool {
	for _, x := range a {
		if _, ok := slices.BinarySearch(b, x); !ok {
			return false
		}
	}
	return true
}

// traceSqrtProduct returns tr √(s1 s2) = Σ √λ(s1 s2) for symmetric positive
// semi-definite n×n s1 and s2.
//
// With s = L Lᵀ, the non-zero eigenvalues of s·t are those of the
// symmetric Lᵀ t L, so no square root of a matrix is formed: both
// matrices are factored by pivoted Cholesky, the one of lower rank r
// (round-off pivots dropped) gives L, and the eigenvalues of the r×r
// Lᵀ t L come from Householder tridiagonalisation and bisection; the few
// tiny negative ones round-off leaves are taken as 0. Factoring the
// lower-rank side keeps the null space of a singular covariance out of
// the eigenproblem, where it would add √(round-off) terms. All O(n³) work
// is in GEMMs.
func traceSqrtProduct(s1, s2 []float64, n int) float64 {
	l, perm, r := pivotedCholesky(slices.Clone(s1), n)
	other := s2
	if l2, perm2, r2 := pivotedCholesky(slices.Clone(s2), n); r2 < r {
		l, perm, r, other = l2, perm2, r2, s1
	}
	if r == 0 {
		return 0
	}
	// The other matrix, permuted like L's rows.
	t := make([]float64, n*n)
	for i := range n {
		row := other[perm[i]*n : (perm[i]+1)*n]
		for j := range n {
			t[i*n+j] = row[perm[j]]
		}
	}
	m := congruence(t, n, l, r)
	var scale float64
	for i := range r {
		scale = max(scale, m[i*r+i])
	}
	if !(scale > 0) {
		return 0
	}
	for i := range m {
		m[i] /= scale
	}
	d, e := tridiagonalize(m, r)
	var sum float64
	for _, lam := range tridiagEigenvalues(d, e) {
		sum += math.Sqrt(max(lam, 0))
	}
	return sum * math.Sqrt(scale)
}

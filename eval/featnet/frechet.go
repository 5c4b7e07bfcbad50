package featnet

import (
	"errors"
	"fmt"
	"math"
)

// Moments are the first two moments of a set of feature vectors, in
// float64: float32 sums over thousands of samples lose the digits that
// small Fréchet distances live in.
type Moments struct {
	Mean []float64 // [dim]
	Cov  []float64 // [dim, dim], row-major, unbiased (divided by N − 1)
	N    int       // the number of samples
}

// Dim is the dimension of the vectors.
func (m Moments) Dim() int { return len(m.Mean) }

// Stats returns the mean and unbiased covariance of n feature vectors of
// dimension dim (features row-major, n×dim). It needs n ≥ 2 and finite
// values.
func Stats(features []float64, n, dim int) (Moments, error) {
	switch {
	case dim < 1:
		return Moments{}, fmt.Errorf("featnet: stats: dimension %d, want ≥ 1", dim)
	case n < 2:
		return Moments{}, fmt.Errorf("featnet: stats: %d samples, want at least 2 for a covariance", n)
	case len(features) != n*dim:
		return Moments{}, fmt.Errorf("featnet: stats: %d values, want n·dim = %d·%d = %d", len(features), n, dim, n*dim)
	}
	for i, v := range features {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return Moments{}, fmt.Errorf("featnet: stats: value %d (sample %d, feature %d) is %v", i, i/dim, i%dim, v)
		}
	}
	mean := make([]float64, dim)
	for s := range n {
		for j, v := range features[s*dim : (s+1)*dim] {
			mean[j] += v
		}
	}
	for j := range mean {
		mean[j] /= float64(n)
	}
	// Two passes (centre, then multiply) rather than E[xxᵀ] − μμᵀ, which
	// cancels catastrophically when the mean is large against the spread.
	cov := make([]float64, dim*dim)
	d := make([]float64, dim)
	for s := range n {
		for j, v := range features[s*dim : (s+1)*dim] {
			d[j] = v - mean[j]
		}
		for i := range dim {
			row := cov[i*dim : (i+1)*dim]
			for j := i; j < dim; j++ {
				row[j] += d[i] * d[j]
			}
		}
	}
	for i := range dim {
		for j := i; j < dim; j++ {
			v := cov[i*dim+j] / float64(n-1)
			cov[i*dim+j], cov[j*dim+i] = v, v
		}
	}
	return Moments{Mean: mean, Cov: cov, N: n}, nil
}

// check validates one side of a Fréchet distance.
func (m Moments) check(side string) error {
	dim := len(m.Mean)
	if dim == 0 {
		return fmt.Errorf("featnet: frechet: %s has no mean", side)
	}
	if len(m.Cov) != dim*dim {
		return fmt.Errorf("featnet: frechet: %s has %d covariance values for a %d-dimensional mean, want %d", side, len(m.Cov), dim, dim*dim)
	}
	for i, v := range m.Mean {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Errorf("featnet: frechet: %s mean[%d] is %v", side, i, v)
		}
	}
	for i, v := range m.Cov {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Errorf("featnet: frechet: %s cov[%d, %d] is %v", side, i/dim, i%dim, v)
		}
	}
	return nil
}

// Frechet returns the Fréchet distance between the Gaussians with moments a
// and b, FID's formula:
//
//	‖μa − μb‖² + tr(Σa) + tr(Σb) − 2 tr((Σa^½ Σb Σa^½)^½)
//
// The last term equals tr((Σa Σb)^½) (same eigenvalues) but is computed
// through symmetric matrices only: Σa^½ from an eigendecomposition of Σa,
// then the eigenvalues of the symmetric Σa^½ Σb Σa^½. Both are positive
// semi-definite in exact arithmetic; rounding can leave eigenvalues
// slightly below zero, which are clamped to 0 (scipy's sqrtm instead
// returns a complex result there, which FID code then discards). Rounding
// can likewise make the result a tiny negative number for identical
// inputs; it is clamped to 0.
func Frechet(a, b Moments) (float64, error) {
	if err := a.check("a"); err != nil {
		return 0, err
	}
	if err := b.check("b"); err != nil {
		return 0, err
	}
	dim := len(a.Mean)
	if len(b.Mean) != dim {
		return 0, fmt.Errorf("featnet: frechet: dimensions differ: a has %d, b has %d", dim, len(b.Mean))
	}
	var dmu, tra, trb float64
	for i := range dim {
		d := a.Mean[i] - b.Mean[i]
		dmu += d * d
		tra += a.Cov[i*dim+i]
		trb += b.Cov[i*dim+i]
	}
	sa, err := sqrtPSD(a.Cov, dim)
	if err != nil {
		return 0, err
	}
	m := mul(mul(sa, b.Cov, dim), sa, dim)
	symmetrise(m, dim)
	ev, _, err := symEig(m, dim, false)
	if err != nil {
		return 0, err
	}
	var trsqrt float64
	for _, v := range ev {
		trsqrt += math.Sqrt(max(v, 0))
	}
	fd := dmu + tra + trb - 2*trsqrt
	if math.IsNaN(fd) || math.IsInf(fd, 0) {
		return 0, fmt.Errorf("featnet: frechet: the distance is %v", fd)
	}
	return max(fd, 0), nil
}

// sqrtPSD returns the symmetric square root V·diag(√max(λ, 0))·Vᵀ of the
// symmetric matrix s [dim, dim].
func sqrtPSD(s []float64, dim int) ([]float64, error) {
	c := append([]float64(nil), s...)
	symmetrise(c, dim)
	ev, v, err := symEig(c, dim, true)
	if err != nil {
		return nil, err
	}
	out := make([]float64, dim*dim)
	for k, l := range ev {
		r := math.Sqrt(max(l, 0))
		if r == 0 {
			continue
		}
		for i := range dim {
			vik := v[i*dim+k] * r
			row := out[i*dim : (i+1)*dim]
			for j := range dim {
				row[j] += vik * v[j*dim+k]
			}
		}
	}
	return out, nil
}

// symmetrise replaces m by (m + mᵀ)/2, removing the rounding asymmetry of
// a product such as S·B·S before an eigensolver that assumes symmetry.
func symmetrise(m []float64, dim int) {
	for i := range dim {
		for j := i + 1; j < dim; j++ {
			v := (m[i*dim+j] + m[j*dim+i]) / 2
			m[i*dim+j], m[j*dim+i] = v, v
		}
	}
}

// mul returns a·b for [dim, dim] matrices.
func mul(a, b []float64, dim int) []float64 {
	out := make([]float64, dim*dim)
	for i := range dim {
		row := out[i*dim : (i+1)*dim]
		for k := range dim {
			aik := a[i*dim+k]
			if aik == 0 {
				continue
			}
			bk := b[k*dim : (k+1)*dim]
			for j := range dim {
				row[j] += aik * bk[j]
			}
		}
	}
	return out
}

// maxSweeps bounds the Jacobi iteration; cyclic Jacobi converges
// quadratically and needs 6–10 sweeps for the dimensions used here.
const maxSweeps = 100

// symEig returns the eigenvalues of the symmetric matrix a [dim, dim]
// (destroyed) and, when vectors is set, the eigenvectors as the columns of
// v [dim, dim], by the cyclic Jacobi method (Golub & Van Loan §8.5 with
// Rutishauser's stable rotation formulas). Jacobi is slow for large
// matrices (O(dim³) per sweep) but accurate to the relative precision of
// the entries, which matters for the small eigenvalues of a covariance,
// and simple enough to trust for dim ≤ 128.
func symEig(a []float64, dim int, vectors bool) (ev, v []float64, err error) {
	if len(a) != dim*dim {
		return nil, nil, fmt.Errorf("featnet: eigen: %d values for a %d×%d matrix", len(a), dim, dim)
	}
	if vectors {
		v = make([]float64, dim*dim)
		for i := range dim {
			v[i*dim+i] = 1
		}
	}
	var scale float64
	for _, x := range a {
		scale = max(scale, math.Abs(x))
	}
	if scale == 0 {
		return make([]float64, dim), v, nil
	}
	for range maxSweeps {
		var off float64
		for i := range dim {
			for j := i + 1; j < dim; j++ {
				off += a[i*dim+j] * a[i*dim+j]
			}
		}
		// Stop when the off-diagonal mass is at rounding level against the
		// largest entry: further rotations only shuffle noise.
		if off <= (1e-30*scale*scale)*float64(dim*dim) || off == 0 {
			ev = make([]float64, dim)
			for i := range dim {
				ev[i] = a[i*dim+i]
			}
			return ev, v, nil
		}
		for p := range dim {
			for q := p + 1; q < dim; q++ {
				apq := a[p*dim+q]
				if apq == 0 {
					continue
				}
				app, aqq := a[p*dim+p], a[q*dim+q]
				theta := (aqq - app) / (2 * apq)
				t := 1 / (math.Abs(theta) + math.Sqrt(theta*theta+1))
				if theta < 0 {
					t = -t
				}
				if math.IsInf(theta, 0) {
					t = 0
				}
				c := 1 / math.Sqrt(t*t+1)
				s := t * c
				// Rotate rows and columns p and q: A ← Jᵀ A J.
				for k := range dim {
					akp, akq := a[k*dim+p], a[k*dim+q]
					a[k*dim+p] = c*akp - s*akq
					a[k*dim+q] = s*akp + c*akq
				}
				for k := range dim {
					apk, aqk := a[p*dim+k], a[q*dim+k]
					a[p*dim+k] = c*apk - s*aqk
					a[q*dim+k] = s*apk + c*aqk
				}
				if vectors {
					for k := range dim {
						vkp, vkq := v[k*dim+p], v[k*dim+q]
						v[k*dim+p] = c*vkp - s*vkq
						v[k*dim+q] = s*vkp + c*vkq
					}
				}
			}
		}
	}
	return nil, nil, errors.New("featnet: eigen: Jacobi did not converge (non-finite or non-symmetric input?)")
}

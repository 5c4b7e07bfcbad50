package fid

import (
	"math"

	"github.com/dcdit/dcdit/kernels"
	"github.com/dcdit/dcdit/kernels/gemm"
	"github.com/dcdit/dcdit/kernels/parallel"
)

// Dense symmetric linear algebra for tr √(σ1 σ2), on row-major float64
// matrices in full (both triangles) storage.

const (
	// eps is float64's machine epsilon, 2⁻⁵².
	eps = 0x1p-52
	// panel is the column block of the factorisations: wide enough that
	// the trailing updates run as GEMMs, narrow enough that the panel
	// work (level 2) stays a small share.
	panel = 64
	// block is the column block of the congruence products, the step at
	// which they skip the zero triangle of the Cholesky factor.
	block = 128
	// rowGrain is the fewest rows worth a goroutine in the level-2 loops.
	rowGrain = 256
)

// pivotedCholesky factors the n×n positive semi-definite matrix a
// (overwritten) with diagonal pivoting: a[perm[i], perm[j]] ≈ (L Lᵀ)[i, j]
// with L n×rank, lower trapezoidal, returned row-major. It stops, as
// LAPACK's dpstrf does by default, when no remaining pivot exceeds
// n·ulp·max diag: what is left is round-off of a singular matrix, whose
// square root would only add noise. a must hold both triangles: the
// pivoting moves upper elements below the diagonal.
func pivotedCholesky(a []float64, n int) (l []float64, perm []int, rank int) {
	perm = make([]int, n)
	for i := range perm {
		perm[i] = i
	}
	var maxDiag float64
	for i := range n {
		maxDiag = max(maxDiag, a[i*n+i])
	}
	tol := float64(n) * eps * maxDiag
	rank = n
	// work[i] is Σ L[i, c]² over the current panel's columns: the part of
	// the Schur complement's diagonal not yet applied to a.
	work := make([]float64, n)
	pan := make([]float64, n*panel)
factor:
	for j0 := 0; j0 < n; j0 += panel {
		jb := min(panel, n-j0)
		clear(work[j0:])
		for k := j0; k < j0+jb; k++ {
			p, best := k, a[k*n+k]-work[k]
			for i := k + 1; i < n; i++ {
				if d := a[i*n+i] - work[i]; d > best {
					p, best = i, d
				}
			}
			if !(best > tol) {
				rank = k
				break factor
			}
			if p != k {
				swapSym(a, n, k, p)
				work[k], work[p] = work[p], work[k]
				perm[k], perm[p] = perm[p], perm[k]
			}
			ajj := math.Sqrt(best)
			a[k*n+k] = ajj
			rowK := a[k*n+j0 : k*n+k]
			parallel.For(n-k-1, rowGrain, func(lo, hi int) {
				for i := k + 1 + lo; i < k+1+hi; i++ {
					v := (a[i*n+k] - kernels.Dot(a[i*n+j0:i*n+k], rowK)) / ajj
					a[i*n+k] = v
					work[i] += v * v
				}
			})
		}
		if rest := n - j0 - jb; rest > 0 {
			// The panel goes to its own buffer: gemm's operands must not
			// overlap the block it updates.
			p := pan[:rest*jb]
			for i := range rest {
				copy(p[i*jb:(i+1)*jb], a[(j0+jb+i)*n+j0:])
			}
			t := j0 + jb
			gemm.Gemm(false, true, rest, rest, jb, -1, p, jb, p, jb, 1, a[t*n+t:], n)
		}
	}
	l = make([]float64, n*rank)
	for i := range n {
		copy(l[i*rank:i*rank+min(i+1, rank)], a[i*n:])
	}
	return l, perm, rank
}

// swapSym exchanges rows k and p and columns k and p of the n×n matrix a:
// the symmetric permutation, and the row exchange of the factor built in
// columns below k.
func swapSym(a []float64, n, k, p int) {
	rk, rp := a[k*n:(k+1)*n], a[p*n:(p+1)*n]
	for j := range rk {
		rk[j], rp[j] = rp[j], rk[j]
	}
	for i := range n {
		a[i*n+k], a[i*n+p] = a[i*n+p], a[i*n+k]
	}
}

// congruence returns the r×r matrix Lᵀ S L for S n×n symmetric and L n×r
// lower trapezoidal (row-major), skipping L's zero triangle: column block
// c of L is zero above row c.
func congruence(s []float64, n int, l []float64, r int) []float64 {
	sl := make([]float64, n*r)
	for c0 := 0; c0 < r; c0 += block {
		cw := min(block, r-c0)
		gemm.Gemm(false, false, n, cw, n-c0, 1, s[c0:], n, l[c0*r+c0:], r, 0, sl[c0:], r)
	}
	m := make([]float64, r*r)
	// Row strip i0 of M from the diagonal on: Lᵀ's rows i0… are zero
	// before column i0.
	for i0 := 0; i0 < r; i0 += block {
		iw := min(block, r-i0)
		gemm.Gemm(true, false, iw, r-i0, n-i0, 1, l[i0*r+i0:], r, sl[i0*r+i0:], r, 0, m[i0*r+i0:], r)
	}
	for i := range r {
		for j := range i {
			m[i*r+j] = m[j*r+i]
		}
	}
	return m
}

// tridiagonalize reduces the n×n symmetric matrix a (overwritten) to a
// tridiagonal matrix with the same eigenvalues, by Householder reflections
// blocked as in LAPACK's dsytrd: within a panel the reflections are
// applied lazily through V and W (A − V Wᵀ − W Vᵀ), after it the trailing
// matrix is updated by one GEMM. It returns the diagonal d and the
// subdiagonal e.
func tridiagonalize(a []float64, n int) (d, e []float64) {
	d = make([]float64, n)
	e = make([]float64, max(n-1, 0))
	v := make([]float64, n*panel) // reflector c in column c, rows k…n−1
	w := make([]float64, n*panel)
	vw := make([]float64, 2*n*panel)
	wv := make([]float64, 2*n*panel)
	y := make([]float64, n)
	t1 := make([]float64, panel)
	t2 := make([]float64, panel)
	for k := 0; k < n; k += panel {
		nb := min(panel, n-k)
		m := n - k
		clear(v[:m*panel])
		clear(w[:m*panel])
		for i := range nb {
			j := k + i
			// Column j, rows j…n−1, brought up to date with the panel's
			// earlier reflections.
			for r := j; r < n; r++ {
				vr, wr, vj, wj := v[(r-k)*panel:], w[(r-k)*panel:], v[i*panel:], w[i*panel:]
				a[r*n+j] -= kernels.Dot(vr[:i], wj[:i]) + kernels.Dot(wr[:i], vj[:i])
			}
			d[j] = a[j*n+j]
			if j == n-1 {
				break
			}
			// The reflection H = I − τ u uᵀ with H a[j+1:, j] = (β, 0, …).
			alpha := a[(j+1)*n+j]
			var ss float64
			for r := j + 2; r < n; r++ {
				ss += a[r*n+j] * a[r*n+j]
			}
			tau, beta, scale := 0.0, alpha, 0.0
			if ss != 0 {
				beta = -math.Copysign(math.Sqrt(alpha*alpha+ss), alpha)
				tau = (beta - alpha) / beta
				scale = 1 / (alpha - beta)
			}
			e[j] = beta
			v[(j+1-k)*panel+i] = 1
			for r := j + 2; r < n; r++ {
				v[(r-k)*panel+i] = a[r*n+j] * scale
			}
			// w = τ (A22 − V Wᵀ − W Vᵀ) u over rows/columns j+1…, then
			// w −= (τ/2)(wᵀu) u, so that A22 ← A22 − u wᵀ − w uᵀ.
			lo := j + 1
			uvec := y[:n-lo]
			for r := lo; r < n; r++ {
				uvec[r-lo] = v[(r-k)*panel+i]
			}
			parallel.For(n-lo, rowGrain, func(p, q int) {
				for r := lo + p; r < lo+q; r++ {
					w[(r-k)*panel+i] = kernels.Dot(a[r*n+lo:r*n+n], uvec)
				}
			})
			clear(t1[:i])
			clear(t2[:i])
			for r := lo; r < n; r++ {
				ur := uvec[r-lo]
				vr, wr := v[(r-k)*panel:], w[(r-k)*panel:]
				for c := range i {
					t1[c] += wr[c] * ur
					t2[c] += vr[c] * ur
				}
			}
			var wu float64
			for r := lo; r < n; r++ {
				vr, wr := v[(r-k)*panel:], w[(r-k)*panel:]
				wr[i] = tau * (wr[i] - kernels.Dot(vr[:i], t1[:i]) - kernels.Dot(wr[:i], t2[:i]))
				wu += wr[i] * uvec[r-lo]
			}
			half := -0.5 * tau * wu
			for r := lo; r < n; r++ {
				w[(r-k)*panel+i] += half * uvec[r-lo]
			}
		}
		rest := m - nb
		if rest <= 0 {
			continue
		}
		// A[t:, t:] −= [V W] [W V]ᵀ over the rows below the panel.
		for r := range rest {
			src := (nb + r) * panel
			copy(vw[r*2*nb:], v[src:src+nb])
			copy(vw[r*2*nb+nb:], w[src:src+nb])
			copy(wv[r*2*nb:], w[src:src+nb])
			copy(wv[r*2*nb+nb:], v[src:src+nb])
		}
		t := k + nb
		gemm.Gemm(false, true, rest, rest, 2*nb, -1, vw, 2*nb, wv, 2*nb, 1, a[t*n+t:], n)
	}
	return d, e
}

// tridiagEigenvalues returns the eigenvalues of the symmetric tridiagonal
// matrix with diagonal d and subdiagonal e, in ascending order, each by
// bisection on Sturm counts (as LAPACK's dstebz) to within a few ulps of
// the matrix norm: the accuracy any backward-stable method has.
func tridiagEigenvalues(d, e []float64) []float64 {
	n := len(d)
	e2 := make([]float64, len(e))
	lo, hi := math.Inf(1), math.Inf(-1)
	var maxE2 float64
	for i := range n {
		var r float64
		if i > 0 {
			r += math.Abs(e[i-1])
		}
		if i < n-1 {
			r += math.Abs(e[i])
			e2[i] = e[i] * e[i]
			maxE2 = max(maxE2, e2[i])
		}
		lo, hi = min(lo, d[i]-r), max(hi, d[i]+r)
	}
	// pivmin keeps a zero pivot of the LDLᵀ recurrence from dividing by
	// zero; it is far below anything that moves an eigenvalue.
	pivmin := 0x1p-1022 * max(1, maxE2)
	norm := max(math.Abs(lo), math.Abs(hi))
	lo -= 2 * eps * norm
	hi += 2 * eps * norm
	atol := eps*norm + pivmin
	out := make([]float64, n)
	// Eigenvalues go in groups of four whose Sturm recurrences run side by
	// side: each is a chain of dependent divisions, and four chains keep
	// the divider busy.
	parallel.For((n+3)/4, 4, func(p, q int) {
		for g := p; g < q; g++ {
			var a, b, mid [4]float64
			var k [4]int
			for j := range 4 {
				a[j], b[j], k[j] = lo, hi, min(4*g+j, n-1)
			}
			for range 200 {
				done := true
				for j := range 4 {
					mid[j] = 0.5 * (a[j] + b[j])
					if b[j]-a[j] > 2*eps*max(math.Abs(a[j]), math.Abs(b[j]))+atol {
						done = false
					}
				}
				if done {
					break
				}
				c := sturm4(d, e2, pivmin, &mid)
				for j := range 4 {
					if c[j] >= k[j]+1 {
						b[j] = mid[j]
					} else {
						a[j] = mid[j]
					}
				}
			}
			for j := range 4 {
				out[k[j]] = 0.5 * (a[j] + b[j])
			}
		}
	})
	return out
}

// sturm4 counts, for each of four shifts x, the eigenvalues ≤ x of the
// tridiagonal matrix (d, e² = e2): the negative pivots of the LDLᵀ
// factorisation of T − x·I.
func sturm4(d, e2 []float64, pivmin float64, x *[4]float64) [4]int {
	var c [4]int
	q0, q1, q2, q3 := d[0]-x[0], d[0]-x[1], d[0]-x[2], d[0]-x[3]
	for i := 0; ; i++ {
		if math.Abs(q0) < pivmin {
			q0 = -pivmin
		}
		if math.Abs(q1) < pivmin {
			q1 = -pivmin
		}
		if math.Abs(q2) < pivmin {
			q2 = -pivmin
		}
		if math.Abs(q3) < pivmin {
			q3 = -pivmin
		}
		if q0 <= 0 {
			c[0]++
		}
		if q1 <= 0 {
			c[1]++
		}
		if q2 <= 0 {
			c[2]++
		}
		if q3 <= 0 {
			c[3]++
		}
		if i == len(e2) {
			return c
		}
		di, ei := d[i+1], e2[i]
		q0 = di - ei/q0 - x[0]
		q1 = di - ei/q1 - x[1]
		q2 = di - ei/q2 - x[2]
		q3 = di - ei/q3 - x[3]
	}
}

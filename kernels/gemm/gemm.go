// Package gemm multiplies row-major matrices: C = alpha·op(A)·op(B) + beta·C.
//
// The float32 path is a packed, cache-blocked GEMM in the GotoBLAS/BLIS
// style (see driver.go) whose innermost register-blocked micro-kernel is
// chosen at start-up: AVX-512 or AVX2+FMA assembly on amd64, portable Go
// elsewhere. GemmBF16 runs the float32 path on a B held as bfloat16,
// widened to float32 as it is packed. The float64 path runs the same
// driver with a Go micro-kernel; it exists for gradient checks.
//
// Setting DCDIT_KERNELS=generic in the environment (read once, at start-up)
// forces the portable Go micro-kernel; DCDIT_KERNELS=avx2 forces the AVX2
// kernel on machines that also have AVX-512. Other values, or a kernel the
// CPU lacks, leave the automatic choice in place.
package gemm

import "unsafe"

// Float is the element types the kernels support: float32 is the working
// precision; float64 exists for gradient checks and references.
type Float interface{ ~float32 | ~float64 }

// Messages of the panics raised on caller bugs. They are constants so that
// callers and tests can match them exactly.
const (
	badM   = "gemm: m < 0"
	badN   = "gemm: n < 0"
	badK   = "gemm: k < 0"
	badLdA = "gemm: bad leading dimension of A"
	badLdB = "gemm: bad leading dimension of B"
	badLdC = "gemm: bad leading dimension of C"
	shortA = "gemm: insufficient length of a"
	shortB = "gemm: insufficient length of b"
	shortC = "gemm: insufficient length of c"
)

// Gemm computes C = alpha·op(A)·op(B) + beta·C for row-major matrices, where
// op(X) is X, or Xᵀ when the matching trans flag is set. op(A) is m×k,
// op(B) is k×n and C is m×n; lda, ldb and ldc are the row strides of A, B
// and C as stored (A is k×m when transA is set, B is n×k when transB is
// set). With beta = 0, C is overwritten (NaNs in it do not propagate); with
// k = 0 or alpha = 0, A and B are not read and C becomes beta·C. Elements of
// c outside the m×n window are never written; c must not overlap a or b.
// Large products run on all cores.
//
// It panics with a "gemm: ..." message when a dimension or stride is
// inconsistent with the slices: those are caller bugs.
func Gemm[T Float](transA, transB bool, m, n, k int, alpha T, a []T, lda int, b []T, ldb int, beta T, c []T, ldc int) {
	gemmT(true, transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}

// GemmSerial is Gemm on the calling goroutine only, for callers that are
// already parallel (e.g. attention over heads).
func GemmSerial[T Float](transA, transB bool, m, n, k int, alpha T, a []T, lda int, b []T, ldb int, beta T, c []T, ldc int) {
	gemmT(false, transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}

// gemmT checks the arguments and hands them to the driver of the matching
// width. Going through []float32 / []float64 keeps one compiled driver per
// width and lets types defined as ~float32 reach the assembly kernels.
func gemmT[T Float](par, transA, transB bool, m, n, k int, alpha T, a []T, lda int, b []T, ldb int, beta T, c []T, ldc int) {
	checkArgs(transA, transB, m, n, k, len(a), lda, len(b), ldb, len(c), ldc)
	if unsafe.Sizeof(alpha) == 4 {
		gemm(sgemmKernels, par, transA, transB, m, n, k, float32(alpha), reinterpret[float32](a), lda,
			reinterpret[float32](b), ldb, float32(beta), reinterpret[float32](c), ldc)
		return
	}
	gemm(dgemmKernels, par, transA, transB, m, n, k, float64(alpha), reinterpret[float64](a), lda,
		reinterpret[float64](b), ldb, float64(beta), reinterpret[float64](c), ldc)
}

// reinterpret views s as a slice of E, which has the same size and
// representation as T (E is T's underlying type).
func reinterpret[E, T Float](s []T) []E {
	return unsafe.Slice((*E)(unsafe.Pointer(unsafe.SliceData(s))), len(s))
}

// checkArgs panics unless every element the product may touch lies inside
// its slice. A leading dimension only has to cover the stored row width, so
// empty matrices may pass 0.
func checkArgs(transA, transB bool, m, n, k, lenA, lda, lenB, ldb, lenC, ldc int) {
	switch {
	case m < 0:
		panic(badM)
	case n < 0:
		panic(badN)
	case k < 0:
		panic(badK)
	}
	rowsA, colsA := m, k
	if transA {
		rowsA, colsA = k, m
	}
	rowsB, colsB := k, n
	if transB {
		rowsB, colsB = n, k
	}
	switch {
	case lda < colsA:
		panic(badLdA)
	case ldb < colsB:
		panic(badLdB)
	case ldc < n:
		panic(badLdC)
	}
	// A and B are read only when the product is not empty.
	if m > 0 && n > 0 && k > 0 {
		if lenA < (rowsA-1)*lda+colsA {
			panic(shortA)
		}
		if lenB < (rowsB-1)*ldb+colsB {
			panic(shortB)
		}
	}
	if m > 0 && n > 0 && lenC < (m-1)*ldc+n {
		panic(shortC)
	}
}

// naive is the reference definition, written for clarity, not speed. The
// tests use it as the oracle for every implementation.
func naive[T Float](transA, transB bool, m, n, k int, alpha T, a []T, lda int, b []T, ldb int, beta T, c []T, ldc int) {
	for i := 0; i < m; i++ {
		for j := 0; j < n; j++ {
			var s T
			for p := 0; p < k; p++ {
				// Index only the layout in use: the other may lie outside a
				// slice that is exactly long enough.
				var av, bv T
				if transA {
					av = a[p*lda+i]
				} else {
					av = a[i*lda+p]
				}
				if transB {
					bv = b[j*ldb+p]
				} else {
					bv = b[p*ldb+j]
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

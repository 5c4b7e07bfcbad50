package cuda

import (
	"fmt"
	"math"
	"unsafe"
)

// Precision selects a GEMM's storage types and arithmetic.
type Precision int

const (
	// FP32: A, B and C float32; IEEE float32 products and sums
	// (CUBLAS_COMPUTE_32F), the parity reference.
	FP32 Precision = iota
	// TF32: float32 storage; products on the tensor cores with A and B
	// rounded to TF32 (10-bit mantissa), float32 accumulation
	// (CUBLAS_COMPUTE_32F_FAST_TF32).
	TF32
	// BF16: A and B bfloat16 (uint16 bit patterns), C float32, float32
	// accumulation: mixed-precision training's weight-gradient form.
	BF16
	// BF16Out: A, B and C bfloat16, float32 accumulation: the form
	// PyTorch's bf16 matmul has.
	BF16Out
)

// String returns the precision's name, e.g. "TF32".
func (p Precision) String() string {
	switch p {
	case FP32:
		return "FP32"
	case TF32:
		return "TF32"
	case BF16:
		return "BF16"
	case BF16Out:
		return "BF16Out"
	}
	return fmt.Sprintf("Precision(%d)", int(p))
}

// cuBLAS and CUDA library constants (cublas_api.h, library_types.h).
const (
	cudaR32F               = 0
	cudaR16BF              = 14
	cublasCompute32F       = 68
	cublasCompute32FTF32   = 77
	cublasGemmDefault      = -1
	cublasOpN              = 0
	cublasOpT              = 1
	cublasStatusSuccess    = 0
	cublasNotInitialized   = 1
	cublasAllocFailed      = 3
	cublasInvalidValue     = 7
	cublasArchMismatch     = 8
	cublasMappingError     = 11
	cublasExecutionFailed  = 13
	cublasInternalError    = 14
	cublasNotSupported     = 15
	cublasLicenseError     = 16
	bf16Size, f32Size      = 2, 4
	maxCublasInt           = math.MaxInt32
	cublasStatusNamePrefix = "CUBLAS_STATUS_"
)

// types returns the data types of A/B and C, their sizes and the compute
// type of p.
func (p Precision) types() (ab, c int32, abSize, cSize int, compute int32, err error) {
	switch p {
	case FP32:
		return cudaR32F, cudaR32F, f32Size, f32Size, cublasCompute32F, nil
	case TF32:
		return cudaR32F, cudaR32F, f32Size, f32Size, cublasCompute32FTF32, nil
	case BF16:
		return cudaR16BF, cudaR32F, bf16Size, f32Size, cublasCompute32F, nil
	case BF16Out:
		return cudaR16BF, cudaR16BF, bf16Size, bf16Size, cublasCompute32F, nil
	}
	return 0, 0, 0, 0, 0, fmt.Errorf("cuda: unknown GEMM precision %d", int(p))
}

// BLAS is a cuBLAS handle bound to a runtime's context and stream.
type BLAS struct {
	rt      *Runtime
	path    string
	h       uintptr
	version int

	cublasCreate               func(h *uintptr) int32
	cublasDestroy              func(h uintptr) int32
	cublasSetStream            func(h, s uintptr) int32
	cublasGetVersion           func(h uintptr, v *int32) int32
	cublasGetStatusName        func(s int32) string
	cublasGemmEx               func(h uintptr, ta, tb int32, m, n, k int32, alpha unsafe.Pointer, a uintptr, at int32, lda int32, b uintptr, bt int32, ldb int32, beta unsafe.Pointer, c uintptr, ct int32, ldc int32, compute int32, algo int32) int32
	cublasGemmStridedBatchedEx func(h uintptr, ta, tb int32, m, n, k int32, alpha unsafe.Pointer, a uintptr, at int32, lda int32, sa int64, b uintptr, bt int32, ldb int32, sb int64, beta unsafe.Pointer, c uintptr, ct int32, ldc int32, sc int64, batch int32, compute int32, algo int32) int32
}

// BLAS loads cuBLAS at its first call and returns the runtime's handle,
// which runs on the runtime's stream.
func (r *Runtime) BLAS() (*BLAS, error) {
	r.blasOnce.Do(func() { r.blas, r.blasErr = r.openBLAS() })
	return r.blas, r.blasErr
}

func (r *Runtime) openBLAS() (*BLAS, error) {
	h, path, err := openLibrary(libCUBLAS, r.opts.LibDirs)
	if err != nil {
		return nil, err
	}
	bl := &BLAS{rt: r, path: path}
	b := &binder{path: path, handle: h}
	b.bind(&bl.cublasCreate, "cublasCreate_v2")
	b.bind(&bl.cublasDestroy, "cublasDestroy_v2")
	b.bind(&bl.cublasSetStream, "cublasSetStream_v2")
	b.bind(&bl.cublasGetVersion, "cublasGetVersion_v2")
	b.bind(&bl.cublasGemmEx, "cublasGemmEx")
	b.bind(&bl.cublasGemmStridedBatchedEx, "cublasGemmStridedBatchedEx")
	if b.err != nil {
		return nil, b.err
	}
	b.bindOptional(&bl.cublasGetStatusName, "cublasGetStatusName")
	err = r.do(func() error {
		if err := bl.check(bl.cublasCreate(&bl.h), "cublasCreate_v2"); err != nil {
			return err
		}
		if err := bl.check(bl.cublasSetStream(bl.h, r.stream.h), "cublasSetStream_v2"); err != nil {
			return err
		}
		var v int32
		if err := bl.check(bl.cublasGetVersion(bl.h, &v), "cublasGetVersion_v2"); err != nil {
			return err
		}
		bl.version = int(v)
		return nil
	})
	if err != nil {
		if bl.h != 0 {
			bl.close()
		}
		return nil, err
	}
	return bl, nil
}

// Path is the libcublas file (or soname) that was loaded.
func (bl *BLAS) Path() string { return bl.path }

// Version is cuBLAS's version number (major·10000 + minor·100 + patch).
func (bl *BLAS) Version() int { return bl.version }

func (bl *BLAS) close() error {
	return bl.rt.do(func() error { return bl.check(bl.cublasDestroy(bl.h), "cublasDestroy_v2") })
}

func (bl *BLAS) check(s int32, call string) error {
	if s == cublasStatusSuccess {
		return nil
	}
	return &Error{Library: "libcublas", Call: call, Code: int(s), Name: bl.statusName(s)}
}

func (bl *BLAS) statusName(s int32) string {
	if bl.cublasGetStatusName != nil {
		return bl.cublasGetStatusName(s)
	}
	names := map[int32]string{
		cublasNotInitialized: "NOT_INITIALIZED", cublasAllocFailed: "ALLOC_FAILED",
		cublasInvalidValue: "INVALID_VALUE", cublasArchMismatch: "ARCH_MISMATCH",
		cublasMappingError: "MAPPING_ERROR", cublasExecutionFailed: "EXECUTION_FAILED",
		cublasInternalError: "INTERNAL_ERROR", cublasNotSupported: "NOT_SUPPORTED",
		cublasLicenseError: "LICENSE_ERROR",
	}
	if n, ok := names[s]; ok {
		return cublasStatusNamePrefix + n
	}
	return fmt.Sprintf("cublasStatus %d", s)
}

// gemmShape checks one row-major product's arguments as gemm.Gemm does,
// and the extents against the buffers (in elements of the given sizes). It
// returns an error instead of panicking: device code reports, the caller
// decides.
func gemmShape(transA, transB bool, m, n, k, lda, ldb, ldc int, lenA, lenB, lenC int, batch int, sa, sb, sc int64) error {
	switch {
	case m < 0 || n < 0 || k < 0:
		return fmt.Errorf("negative dimension m=%d n=%d k=%d", m, n, k)
	case batch < 0:
		return fmt.Errorf("negative batch %d", batch)
	case max(m, n, k, lda, ldb, ldc, batch) > maxCublasInt:
		return fmt.Errorf("dimension above cuBLAS's 32-bit limit")
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
		return fmt.Errorf("lda %d < %d columns of A as stored", lda, colsA)
	case ldb < colsB:
		return fmt.Errorf("ldb %d < %d columns of B as stored", ldb, colsB)
	case ldc < n:
		return fmt.Errorf("ldc %d < n %d", ldc, n)
	}
	if m == 0 || n == 0 || batch == 0 {
		return nil
	}
	last := int64(batch - 1)
	need := func(name string, rows, cols, ld int, stride int64, have int) error {
		want := last*stride + int64((rows-1)*ld+cols)
		if stride < 0 || int64(have) < want {
			return fmt.Errorf("%s holds %d elements, the product needs %d (stride %d, batch %d)", name, have, want, stride, batch)
		}
		return nil
	}
	if k > 0 {
		if err := need("A", rowsA, colsA, lda, sa, lenA); err != nil {
			return err
		}
		if err := need("B", rowsB, colsB, ldb, sb, lenB); err != nil {
			return err
		}
	}
	return need("C", m, n, ldc, sc, lenC)
}

func cublasOp(trans bool) int32 {
	if trans {
		return cublasOpT
	}
	return cublasOpN
}

// Gemm computes C = alpha·op(A)·op(B) + beta·C for row-major device
// matrices, with gemm.Gemm's arguments and semantics: op(X) is X, or Xᵀ when
// the matching trans flag is set; op(A) is m×k, op(B) k×n and C m×n; lda,
// ldb and ldc are the row strides of A, B and C as stored, in elements. The
// element types follow p (A and B hold bfloat16 bit patterns for BF16 and
// BF16Out). With beta = 0, C is overwritten. The product is queued on the
// runtime's stream.
func (bl *BLAS) Gemm(p Precision, transA, transB bool, m, n, k int, alpha float32, a Buffer, lda int, b Buffer, ldb int, beta float32, c Buffer, ldc int) error {
	return bl.GemmStridedBatched(p, transA, transB, m, n, k, alpha, a, lda, 0, b, ldb, 0, beta, c, ldc, 0, 1)
}

// GemmStridedBatched computes batch independent products as Gemm does,
// product i reading A at element offset i·strideA, B at i·strideB and
// writing C at i·strideC (strides in elements).
func (bl *BLAS) GemmStridedBatched(p Precision, transA, transB bool, m, n, k int, alpha float32, a Buffer, lda int, strideA int64, b Buffer, ldb int, strideB int64, beta float32, c Buffer, ldc int, strideC int64, batch int) error {
	abT, cT, abSize, cSize, compute, err := p.types()
	if err != nil {
		return err
	}
	call := fmt.Sprintf("GEMM %v m=%d n=%d k=%d transA=%v transB=%v batch=%d", p, m, n, k, transA, transB, batch)
	if err := gemmShape(transA, transB, m, n, k, lda, ldb, ldc, a.n/abSize, b.n/abSize, c.n/cSize, batch, strideA, strideB, strideC); err != nil {
		return fmt.Errorf("cuda: %s: %w", call, err)
	}
	if m == 0 || n == 0 || batch == 0 {
		return nil
	}
	// cuBLAS is column-major. A row-major matrix with row stride ld, read
	// column-major with the same ld, is its transpose; so the row-major
	// C = op(A)·op(B) is the column-major Cᵀ = op(B)ᵀ·op(A)ᵀ, computed by
	// swapping the operands (and m with n) and keeping each trans flag.
	// A leading dimension of 0 (allowed for an empty operand) is raised to
	// 1, cuBLAS's minimum.
	alphaP, betaP := &alpha, &beta
	lda, ldb = max(lda, 1), max(ldb, 1)
	// Device pointers travel as integers: they are not Go memory.
	aP, bP, cP := uintptr(a.ptr), uintptr(b.ptr), uintptr(c.ptr)
	return bl.rt.do(func() error {
		var s int32
		if batch == 1 {
			s = bl.cublasGemmEx(bl.h, cublasOp(transB), cublasOp(transA), int32(n), int32(m), int32(k),
				unsafe.Pointer(alphaP), bP, abT, int32(ldb), aP, abT, int32(lda),
				unsafe.Pointer(betaP), cP, cT, int32(ldc), compute, cublasGemmDefault)
			return bl.check(s, "cublasGemmEx("+call+")")
		}
		s = bl.cublasGemmStridedBatchedEx(bl.h, cublasOp(transB), cublasOp(transA), int32(n), int32(m), int32(k),
			unsafe.Pointer(alphaP), bP, abT, int32(ldb), strideB, aP, abT, int32(lda), strideA,
			unsafe.Pointer(betaP), cP, cT, int32(ldc), strideC, int32(batch), compute, cublasGemmDefault)
		return bl.check(s, "cublasGemmStridedBatchedEx("+call+")")
	})
}

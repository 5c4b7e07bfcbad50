package gemm

import "github.com/dcdit/dcdit/loaders/dtype"

// A BF16 checkpoint's matrices stay bfloat16 in memory, at half the bytes
// of float32. GemmBF16 reads such a B through the float32 driver: packing
// widens each element to float32 as it lays out the panels (bfloat16 is
// the upper half of a float32, so widening is a shift and exact), and
// everything after packing — blocking, micro-kernels, accumulation order —
// is Gemm's. The result is therefore bit-identical to Gemm on the widened
// B, and the kernels need no bfloat16 variant.

// GemmBF16 computes C = alpha·A·op(B) + beta·C, where A is float32, m×k,
// row-major with row stride lda, and B holds bfloat16 bit patterns (the
// upper 16 bits of a float32). op(B) is k×n: B is stored k×n, or n×k when
// transB is set — a Linear layer's [out, in] weight, for y = x·Wᵀ. The
// arithmetic is float32 and the result equals Gemm's on B widened to
// float32, bit for bit, with the same rules for beta, NaNs and the window
// of C. Large products run on all cores.
//
// It panics with a "gemm: ..." message when a dimension or stride is
// inconsistent with the slices, as Gemm does.
func GemmBF16(transB bool, m, n, k int, alpha float32, a []float32, lda int, b []uint16, ldb int, beta float32, c []float32, ldc int) {
	gemmBF16(sgemmKernels, true, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}

// GemmBF16Serial is GemmBF16 on the calling goroutine only, for callers
// that are already parallel.
func GemmBF16Serial(transB bool, m, n, k int, alpha float32, a []float32, lda int, b []uint16, ldb int, beta float32, c []float32, ldc int) {
	gemmBF16(sgemmKernels, false, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}

// gemmBF16 checks the arguments and runs the product with kernel set ks.
func gemmBF16(ks *kernelSet[float32], par, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []uint16, ldb int, beta float32, c []float32, ldc int) {
	checkArgs(false, transB, m, n, k, len(a), lda, len(b), ldb, len(c), ldc)
	ks.run(par, &args[float32]{transB: transB, m: m, n: n, k: k, alpha: alpha, beta: beta,
		a: a, bh: b, c: c, lda: lda, ldb: ldb, ldc: ldc})
}

// packBF16 is packB for a B of bfloat16 bit patterns: the same panels,
// element (p, j) of panel t at dst[t*nr*kb + p*nr + j] and columns past nb
// zero, each element widened to float32. Its structure is packPanels',
// with the k steps of B contiguous when trans is set.
func (ks *kernelSet[E]) packBF16(dst []E, trans bool, b []uint16, ldb, p0, kb, j0, nb, nr int) {
	t0 := 0
	if !trans && ks.copy2DBF16 != nil && nb >= nr {
		// packRows k steps at a time across all full panels, as in
		// packPanels.
		t0 = nb / nr
		for pp := 0; pp < kb; pp += packRows {
			rows := min(packRows, kb-pp)
			for t := 0; t < t0; t++ {
				ks.copy2DBF16(dst[t*nr*kb+pp*nr:], nr, b[(p0+pp)*ldb+j0+t*nr:], ldb, rows, nr)
			}
		}
	}
	for t := t0; t*nr < nb; t++ {
		d := dst[t*nr*kb : (t+1)*nr*kb]
		cols := min(nr, nb-t*nr)
		c0 := j0 + t*nr
		if !trans {
			for p := 0; p < kb; p++ {
				dp := d[p*nr : p*nr+nr]
				for j, v := range b[(p0+p)*ldb+c0 : (p0+p)*ldb+c0+cols] {
					dp[j] = E(dtype.BF16ToFloat32(v))
				}
				clear(dp[cols:])
			}
			continue
		}
		x := 0
		if ks.transpose4BF16 != nil && cols >= 4 {
			for ; x+4 <= cols; x += 4 {
				ks.transpose4BF16(d[x:], nr, b[(c0+x)*ldb+p0:], ldb, kb)
			}
			if x < cols {
				// An overlapping last group, as in packPanels.
				x = cols - 4
				ks.transpose4BF16(d[x:], nr, b[(c0+x)*ldb+p0:], ldb, kb)
				x = cols
			}
		}
		for ; x < cols; x++ {
			for p, v := range b[(c0+x)*ldb+p0 : (c0+x)*ldb+p0+kb] {
				d[p*nr+x] = E(dtype.BF16ToFloat32(v))
			}
		}
		for x := cols; x < nr; x++ {
			for p := 0; p < kb; p++ {
				d[p*nr+x] = 0
			}
		}
	}
}

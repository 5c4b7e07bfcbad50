//go:build amd64 && gc && !purego

package gemm

// packTrans4AVX is
//
//	for r := 0; r < 4; r++ {
//		for p := 0; p < n; p++ {
//			dst[p*ldd+r] = src[r*lds+p]
//		}
//	}
//
// It does not check lengths: dst needs (n-1)·ldd+4 elements and src
// 3·lds+n. It may prefetch the four rows after those it reads.
//
//go:noescape
func packTrans4AVX(dst []float32, ldd int, src []float32, lds int, n int)

// transpose4AVX is packTrans4AVX with its lengths checked.
func transpose4AVX(dst []float32, ldd int, src []float32, lds int, n int) {
	if n == 0 {
		return
	}
	_ = dst[(n-1)*ldd+3]
	_ = src[3*lds+n-1]
	packTrans4AVX(dst, ldd, src, lds, n)
}

// packCopyAVX is
//
//	for r := 0; r < rows; r++ {
//		copy(dst[r*ldd:r*ldd+cols], src[r*lds:r*lds+cols])
//	}
//
// It does not check lengths: dst needs (rows-1)·ldd+cols elements and src
// (rows-1)·lds+cols.
//
//go:noescape
func packCopyAVX(dst []float32, ldd int, src []float32, lds int, rows, cols int)

// copy2DAVX is packCopyAVX with its lengths checked.
func copy2DAVX(dst []float32, ldd int, src []float32, lds int, rows, cols int) {
	if rows == 0 || cols == 0 {
		return
	}
	_ = dst[(rows-1)*ldd+cols-1]
	_ = src[(rows-1)*lds+cols-1]
	packCopyAVX(dst, ldd, src, lds, rows, cols)
}

//go:build amd64 && gc && !purego

package gemm

// packTrans4BF16AVX2 is
//
//	for r := 0; r < 4; r++ {
//		for p := 0; p < n; p++ {
//			dst[p*ldd+r] = math.Float32frombits(uint32(src[r*lds+p]) << 16)
//		}
//	}
//
// It needs AVX2 and does not check lengths: dst needs (n-1)·ldd+4
// elements and src 3·lds+n. It may prefetch the four rows after those it
// reads.
//
//go:noescape
func packTrans4BF16AVX2(dst []float32, ldd int, src []uint16, lds int, n int)

// transpose4BF16AVX2 is packTrans4BF16AVX2 with its lengths checked.
func transpose4BF16AVX2(dst []float32, ldd int, src []uint16, lds int, n int) {
	if n == 0 {
		return
	}
	_ = dst[(n-1)*ldd+3]
	_ = src[3*lds+n-1]
	packTrans4BF16AVX2(dst, ldd, src, lds, n)
}

// packCopyBF16AVX2 is
//
//	for r := 0; r < rows; r++ {
//		for j := 0; j < cols; j++ {
//			dst[r*ldd+j] = math.Float32frombits(uint32(src[r*lds+j]) << 16)
//		}
//	}
//
// It needs AVX2 and does not check lengths: dst needs (rows-1)·ldd+cols
// elements and src (rows-1)·lds+cols.
//
//go:noescape
func packCopyBF16AVX2(dst []float32, ldd int, src []uint16, lds int, rows, cols int)

// copy2DBF16AVX2 is packCopyBF16AVX2 with its lengths checked.
func copy2DBF16AVX2(dst []float32, ldd int, src []uint16, lds int, rows, cols int) {
	if rows == 0 || cols == 0 {
		return
	}
	_ = dst[(rows-1)*ldd+cols-1]
	_ = src[(rows-1)*lds+cols-1]
	packCopyBF16AVX2(dst, ldd, src, lds, rows, cols)
}

//go:build amd64 && gc && !purego

package gemm

//go:generate sh -c "cd _asm && go run . -dir .."

// sgemmKernel12x32AVX512 is, with 16-lane ZMM registers holding the tile,
//
//	for i := 0; i < 12; i++ {
//		for j := 0; j < 32; j++ {
//			var s float32
//			for p := 0; p < kc; p++ {
//				s += a[p*12+i] * b[p*32+j]
//			}
//			if beta == 0 {
//				c[i*ldc+j] = alpha * s
//			} else {
//				c[i*ldc+j] = alpha*s + beta*c[i*ldc+j]
//			}
//		}
//	}
//
// It does not check lengths: a needs 12·kc elements, b 32·kc, and c
// 11·ldc+32.
//
//go:noescape
func sgemmKernel12x32AVX512(kc int, a, b, c []float32, ldc int, alpha, beta float32)

// sgemmKernel4of12x32AVX512 is, with 16-lane ZMM registers holding the tile,
//
//	for i := 0; i < 4; i++ {
//		for j := 0; j < 32; j++ {
//			var s float32
//			for p := 0; p < kc; p++ {
//				s += a[p*12+i] * b[p*32+j]
//			}
//			if beta == 0 {
//				c[i*ldc+j] = alpha * s
//			} else {
//				c[i*ldc+j] = alpha*s + beta*c[i*ldc+j]
//			}
//		}
//	}
//
// It does not check lengths: a needs 12·kc elements, b 32·kc, and c
// 3·ldc+32. It serves the last, partial sliver of a packed A block.
//
//go:noescape
func sgemmKernel4of12x32AVX512(kc int, a, b, c []float32, ldc int, alpha, beta float32)

// sgemmKernel8of12x32AVX512 is, with 16-lane ZMM registers holding the tile,
//
//	for i := 0; i < 8; i++ {
//		for j := 0; j < 32; j++ {
//			var s float32
//			for p := 0; p < kc; p++ {
//				s += a[p*12+i] * b[p*32+j]
//			}
//			if beta == 0 {
//				c[i*ldc+j] = alpha * s
//			} else {
//				c[i*ldc+j] = alpha*s + beta*c[i*ldc+j]
//			}
//		}
//	}
//
// It does not check lengths: a needs 12·kc elements, b 32·kc, and c
// 7·ldc+32. It serves the last, partial sliver of a packed A block.
//
//go:noescape
func sgemmKernel8of12x32AVX512(kc int, a, b, c []float32, ldc int, alpha, beta float32)

// sgemmKernel6x16AVX2 is, with 8-lane YMM registers holding the tile,
//
//	for i := 0; i < 6; i++ {
//		for j := 0; j < 16; j++ {
//			var s float32
//			for p := 0; p < kc; p++ {
//				s += a[p*6+i] * b[p*16+j]
//			}
//			if beta == 0 {
//				c[i*ldc+j] = alpha * s
//			} else {
//				c[i*ldc+j] = alpha*s + beta*c[i*ldc+j]
//			}
//		}
//	}
//
// It does not check lengths: a needs 6·kc elements, b 16·kc, and c
// 5·ldc+16.
//
//go:noescape
func sgemmKernel6x16AVX2(kc int, a, b, c []float32, ldc int, alpha, beta float32)

// sgemmKernel2of6x16AVX2 is, with 8-lane YMM registers holding the tile,
//
//	for i := 0; i < 2; i++ {
//		for j := 0; j < 16; j++ {
//			var s float32
//			for p := 0; p < kc; p++ {
//				s += a[p*6+i] * b[p*16+j]
//			}
//			if beta == 0 {
//				c[i*ldc+j] = alpha * s
//			} else {
//				c[i*ldc+j] = alpha*s + beta*c[i*ldc+j]
//			}
//		}
//	}
//
// It does not check lengths: a needs 6·kc elements, b 16·kc, and c
// 1·ldc+16. It serves the last, partial sliver of a packed A block.
//
//go:noescape
func sgemmKernel2of6x16AVX2(kc int, a, b, c []float32, ldc int, alpha, beta float32)

// sgemmKernel4of6x16AVX2 is, with 8-lane YMM registers holding the tile,
//
//	for i := 0; i < 4; i++ {
//		for j := 0; j < 16; j++ {
//			var s float32
//			for p := 0; p < kc; p++ {
//				s += a[p*6+i] * b[p*16+j]
//			}
//			if beta == 0 {
//				c[i*ldc+j] = alpha * s
//			} else {
//				c[i*ldc+j] = alpha*s + beta*c[i*ldc+j]
//			}
//		}
//	}
//
// It does not check lengths: a needs 6·kc elements, b 16·kc, and c
// 3·ldc+16. It serves the last, partial sliver of a packed A block.
//
//go:noescape
func sgemmKernel4of6x16AVX2(kc int, a, b, c []float32, ldc int, alpha, beta float32)

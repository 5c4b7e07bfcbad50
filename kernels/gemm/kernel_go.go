package gemm

// Register tile of the portable micro-kernel. The Go compiler keeps its 8
// accumulators and 6 operands in the 15 scalar float registers it has on
// amd64; a 4×4 tile spills accumulators to the stack on every step and
// measured a third slower.
const goMR, goNR = 2, 4

// kernelGo2x4 is the portable micro-kernel: for i < 2, j < 4
//
//	c[i*ldc+j] = alpha·Σ_{p<kc} a[p*2+i]·b[p*4+j] + beta·c[i*ldc+j]
//
// reading no c when beta == 0.
func kernelGo2x4[E float32 | float64](kc int, a, b, c []E, ldc int, alpha, beta E) {
	var c00, c01, c02, c03, c10, c11, c12, c13 E
	a, b = a[:2*kc], b[:4*kc]
	for p := 0; p < kc; p++ {
		ap := a[2*p : 2*p+2 : 2*p+2]
		bp := b[4*p : 4*p+4 : 4*p+4]
		a0, a1 := ap[0], ap[1]
		b0, b1, b2, b3 := bp[0], bp[1], bp[2], bp[3]
		c00 += a0 * b0
		c01 += a0 * b1
		c02 += a0 * b2
		c03 += a0 * b3
		c10 += a1 * b0
		c11 += a1 * b1
		c12 += a1 * b2
		c13 += a1 * b3
	}
	storeRow(c[0:4], c00, c01, c02, c03, alpha, beta)
	storeRow(c[ldc:ldc+4], c10, c11, c12, c13, alpha, beta)
}

func storeRow[E float32 | float64](c []E, s0, s1, s2, s3, alpha, beta E) {
	c = c[:4]
	if beta == 0 {
		c[0], c[1], c[2], c[3] = alpha*s0, alpha*s1, alpha*s2, alpha*s3
		return
	}
	c[0] = alpha*s0 + beta*c[0]
	c[1] = alpha*s1 + beta*c[1]
	c[2] = alpha*s2 + beta*c[2]
	c[3] = alpha*s3 + beta*c[3]
}

package gemm

import "unsafe"

// A product whose B operand is reused across many calls (the weights of a
// convolution applied block by block) can pack B once: GemmSerial packs
// both operands on every call, and for short blocks of A re-packing B costs
// a fifth of the time. PackB lays op(B) out exactly as the driver's packB
// does for a whole-matrix region (balanced k and n blocks of the kernel
// set in use, nr-column panels), so GemmPackedB runs the driver's loops
// with only A packed per call.

// Messages of the prepacked path's panics (caller bugs).
const (
	shortPacked = "gemm: packed buffer shorter than PackedBLen"
	badPacked   = "gemm: PackedB packed for another kernel or element type"
)

// PackedB is op(B), k×n, packed for GemmPackedB by PackB. It refers to the
// buffer given to PackB, which must not change while it is in use.
type PackedB[T Float] struct {
	k, n   int
	kc, nc int // the k and n block sizes it was packed for
	ks     unsafe.Pointer
	data   []T
}

// K is the number of rows of op(B).
func (p PackedB[T]) K() int { return p.k }

// N is the number of columns of op(B).
func (p PackedB[T]) N() int { return p.n }

// PackedBLen returns the length of the buffer PackB needs for a k×n op(B)
// with the kernels selected at start-up.
func PackedBLen[T Float](k, n int) int {
	var zero T
	if unsafe.Sizeof(zero) == 4 {
		return packedLen(sgemmKernels, k, n)
	}
	return packedLen(dgemmKernels, k, n)
}

// PackB packs op(B) (B is n×k when transB is set, with row stride ldb)
// into buf, which holds at least PackedBLen(k, n) elements, and returns
// the packed operand.
func PackB[T Float](buf []T, transB bool, k, n int, b []T, ldb int) PackedB[T] {
	checkB(transB, k, n, len(b), ldb)
	var zero T
	if unsafe.Sizeof(zero) == 4 {
		p := packWhole(sgemmKernels, reinterpret[float32](buf), transB, k, n, reinterpret[float32](b), ldb)
		return PackedB[T]{k: p.k, n: p.n, kc: p.kc, nc: p.nc, ks: p.ks, data: buf[:len(p.data)]}
	}
	p := packWhole(dgemmKernels, reinterpret[float64](buf), transB, k, n, reinterpret[float64](b), ldb)
	return PackedB[T]{k: p.k, n: p.n, kc: p.kc, nc: p.nc, ks: p.ks, data: buf[:len(p.data)]}
}

// GemmPackedB computes C = alpha·op(A)·B + beta·C on the calling goroutine,
// for op(A) m×k (A is k×m when transA is set, row stride lda) and B packed
// by PackB; it is GemmSerial with a prepacked B, with the same rules for
// beta, NaNs and the window of C.
func GemmPackedB[T Float](transA bool, m int, alpha T, a []T, lda int, b PackedB[T], beta T, c []T, ldc int) {
	checkArgs(transA, false, m, b.n, b.k, len(a), lda, b.k*b.n, b.n, len(c), ldc)
	var zero T
	if unsafe.Sizeof(zero) == 4 {
		if b.ks != unsafe.Pointer(sgemmKernels) {
			panic(badPacked)
		}
		pb := packedB[float32]{k: b.k, n: b.n, kc: b.kc, nc: b.nc, data: reinterpret[float32](b.data)}
		sgemmKernels.gemmPacked(transA, m, float32(alpha), reinterpret[float32](a), lda, &pb, float32(beta), reinterpret[float32](c), ldc)
		return
	}
	if b.ks != unsafe.Pointer(dgemmKernels) {
		panic(badPacked)
	}
	pb := packedB[float64]{k: b.k, n: b.n, kc: b.kc, nc: b.nc, data: reinterpret[float64](b.data)}
	dgemmKernels.gemmPacked(transA, m, float64(alpha), reinterpret[float64](a), lda, &pb, float64(beta), reinterpret[float64](c), ldc)
}

// checkB is checkArgs' test of B alone.
func checkB(transB bool, k, n, lenB, ldb int) {
	switch {
	case n < 0:
		panic(badN)
	case k < 0:
		panic(badK)
	}
	rows, cols := k, n
	if transB {
		rows, cols = n, k
	}
	if ldb < cols {
		panic(badLdB)
	}
	if rows > 0 && cols > 0 && lenB < (rows-1)*ldb+cols {
		panic(shortB)
	}
}

// packedB is PackedB at one element width.
type packedB[E float32 | float64] struct {
	k, n, kc, nc int
	ks           unsafe.Pointer
	data         []E
}

// blocks returns the balanced k and n block sizes of a whole-matrix region
// (as region computes them).
func (ks *kernelSet[E]) blocks(k, n int) (kc, nc int) {
	if k == 0 || n == 0 {
		return 0, 0
	}
	kc = ceilDiv(k, ceilDiv(k, ks.kc))
	nc = roundUp(ceilDiv(n, ceilDiv(n, ks.nc)), ks.nr)
	return kc, nc
}

// packedLen is the packed size: every k block holds its n blocks, each
// padded to whole nr-column panels.
func packedLen[E float32 | float64](ks *kernelSet[E], k, n int) int {
	if k == 0 || n == 0 {
		return 0
	}
	_, nc := ks.blocks(k, n)
	cols := 0
	for jc := 0; jc < n; jc += nc {
		cols += roundUp(min(nc, n-jc), ks.nr)
	}
	return k * cols
}

// packWhole packs op(B) block by block in the order gemmPacked reads it.
func packWhole[E float32 | float64](ks *kernelSet[E], buf []E, transB bool, k, n int, b []E, ldb int) packedB[E] {
	size := packedLen(ks, k, n)
	if len(buf) < size {
		panic(shortPacked)
	}
	kc, nc := ks.blocks(k, n)
	if size == 0 {
		return packedB[E]{k: k, n: n, kc: kc, nc: nc, ks: unsafe.Pointer(ks), data: buf[:0]}
	}
	off := 0
	for pc := 0; pc < k; pc += kc {
		kb := min(kc, k-pc)
		for jc := 0; jc < n; jc += nc {
			nb := min(nc, n-jc)
			ks.packB(buf[off:], transB, b, ldb, pc, kb, jc, nb, ks.nr)
			off += kb * roundUp(nb, ks.nr)
		}
	}
	return packedB[E]{k: k, n: n, kc: kc, nc: nc, ks: unsafe.Pointer(ks), data: buf[:size]}
}

// gemmPacked is region over the whole of C with B's blocks read from pb.
func (ks *kernelSet[E]) gemmPacked(transA bool, m int, alpha E, a []E, lda int, pb *packedB[E], beta E, c []E, ldc int) {
	k, n := pb.k, pb.n
	if m == 0 || n == 0 {
		return
	}
	if k == 0 || alpha == 0 {
		scale(m, n, beta, c, ldc)
		return
	}
	ws := ks.get()
	defer ks.put(ws)
	kc, nc := pb.kc, pb.nc
	mc := roundUp(ceilDiv(m, ceilDiv(m, ks.mc)), ks.mr)
	off := 0
	for pc := 0; pc < k; pc += kc {
		kb := min(kc, k-pc)
		bt := beta
		if pc > 0 {
			bt = 1
		}
		for ic := 0; ic < m; ic += mc {
			mb := min(mc, m-ic)
			ks.packA(ws.a, transA, a, lda, ic, mb, pc, kb, ks.mr)
			boff := off
			for jc := 0; jc < n; jc += nc {
				nb := min(nc, n-jc)
				ks.macro(ws, pb.data[boff:], mb, nb, kb, alpha, bt, c, ic*ldc+jc, ldc)
				boff += kb * roundUp(nb, ks.nr)
			}
		}
		for jc := 0; jc < n; jc += nc {
			off += kb * roundUp(min(nc, n-jc), ks.nr)
		}
	}
}

package gemm

import (
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/dcdit/dcdit/kernels/parallel"
)

// The driver follows the GotoBLAS/BLIS layering, transposed for row-major
// C: the micro-kernel keeps an mr×nr tile of C in registers, loading packed
// B as vectors along a row of C and broadcasting packed A down a column.
// Around it, for one region of C owned by one goroutine:
//
//	for pc over k in blocks of kc:           C += A[:, pc]·B[pc, :]
//	  for ic over rows in blocks of mc:      pack A block → mc×kc, mr-row slivers
//	    for jc over cols in blocks of nc:    pack B block → kc×nc, nr-col panels
//	      for ir over mc step mr:            A sliver (mr×kc) stays in L1
//	        for jr over nc step nr:          B panel streams from L2
//	          micro-kernel
//
// The B block is the operand reused most (by every sliver of A), so it is
// sized for L2; the A sliver is sized for L1 by kc. The A block only bounds
// memory and the number of times B is re-packed, so mc is large.
//
// Packing pads partial slivers and panels with zeros, so the micro-kernel
// always computes a full-width tile. The last sliver of a block runs a tail
// kernel that computes only as many rows as it needs; tiles that still
// stick out of C go through a small scratch tile merged by Go code.
//
// In parallel, C is cut into a grid of regions, a few per worker, that the
// workers take in turn; each region packs its own blocks. Packing buffers
// come from a free list, so steady-state calls allocate nothing.

// kernelSet is one micro-kernel and the blocking that suits it.
type kernelSet[E float32 | float64] struct {
	name   string
	mr, nr int // register tile
	kc     int // deepest k block: an mr×kc A sliver fits L1
	mc     int // most rows of a packed A block
	nc     int // most columns of a packed B block: kc×nc fits L2

	// kernel computes, for p < kc, i < mr, j < nr,
	//	c[i*ldc+j] = alpha·Σ_p a[p*mr+i]·b[p*nr+j] + beta·c[i*ldc+j]
	// reading no c when beta == 0.
	kernel func(kc int, a, b, c []E, ldc int, alpha, beta E)
	// tails are kernels like kernel that compute only the first rows of
	// the tile, by increasing rows, for the last sliver of A.
	tails []tailKernel[E]

	// transpose4, when set, is a fast
	//	dst[p*ldd+r] = src[r*lds+p] for r < 4, p < n
	// for packing the operand whose k steps are strided.
	transpose4 func(dst []E, ldd int, src []E, lds int, n int)
	// copy2D, when set, is a fast
	//	copy(dst[r*ldd:r*ldd+cols], src[r*lds:]) for r < rows
	// for packing the operand whose k steps are contiguous.
	copy2D func(dst []E, ldd int, src []E, lds int, rows, cols int)
	// transpose4BF16 and copy2DBF16, when set, are transpose4 and copy2D
	// reading bfloat16 bit patterns, each widened to float32, for the B
	// operand of GemmBF16.
	transpose4BF16 func(dst []E, ldd int, src []uint16, lds int, n int)
	copy2DBF16     func(dst []E, ldd int, src []uint16, lds int, rows, cols int)

	free freeList[E]
}

// tailKernel computes rows i < rows of a kernel's tile.
type tailKernel[E float32 | float64] struct {
	rows   int
	kernel func(kc int, a, b, c []E, ldc int, alpha, beta E)
}

// workspace is one goroutine's packing buffers, sized once for the largest
// blocks of its kernel set.
type workspace[E float32 | float64] struct {
	a, b []E // packed A block, packed B block
	tile []E // mr×nr scratch for tiles that stick out of C
}

// freeList hands out workspaces and keeps them for the next call. Unlike a
// sync.Pool it does not drop them at GC time: they are megabytes, and
// faulting them back in on every call after a collection costs more than
// keeping them. It keeps one per concurrent caller, up to maxFree.
type freeList[E float32 | float64] struct {
	mu   sync.Mutex
	list []*workspace[E]
	jobs []*job[E]
}

func (ks *kernelSet[E]) get() *workspace[E] {
	f := &ks.free
	f.mu.Lock()
	if n := len(f.list); n > 0 {
		ws := f.list[n-1]
		f.list = f.list[:n-1]
		f.mu.Unlock()
		return ws
	}
	f.mu.Unlock()
	return &workspace[E]{
		a:    make([]E, ks.mc*ks.kc),
		b:    make([]E, ks.kc*ks.nc),
		tile: make([]E, ks.mr*ks.nr),
	}
}

func (ks *kernelSet[E]) put(ws *workspace[E]) {
	f := &ks.free
	f.mu.Lock()
	if len(f.list) < maxFree() {
		f.list = append(f.list, ws)
	}
	f.mu.Unlock()
}

// maxFree is how many workspaces a kernel set keeps: enough for a parallel
// product run from each of GOMAXPROCS callers, not one per goroutine a
// program ever ran concurrently.
func maxFree() int { return 2 * runtime.GOMAXPROCS(0) }

// args is one product, as passed to Gemm.
type args[E float32 | float64] struct {
	transA, transB bool
	m, n, k        int
	alpha, beta    E
	a, b, c        []E
	lda, ldb, ldc  int
	// bh, when set, holds B as bfloat16 bit patterns (GemmBF16) in place
	// of b.
	bh []uint16
}

// minParallelWork is the number of multiply-adds below which a second
// goroutine costs more to start and join than it saves.
const minParallelWork = 1 << 19

// gemm runs a checked product with kernel set ks, over all cores when par
// is set and the product is large enough.
func gemm[E float32 | float64](ks *kernelSet[E], par, transA, transB bool, m, n, k int, alpha E, a []E, lda int, b []E, ldb int, beta E, c []E, ldc int) {
	ks.run(par, &args[E]{transA: transA, transB: transB, m: m, n: n, k: k, alpha: alpha, beta: beta,
		a: a, b: b, c: c, lda: lda, ldb: ldb, ldc: ldc})
}

// run computes the checked product p, over all cores when par is set and
// the product is large enough.
func (ks *kernelSet[E]) run(par bool, p *args[E]) {
	m, n, k := p.m, p.n, p.k
	if m == 0 || n == 0 {
		return
	}
	if k == 0 || p.alpha == 0 {
		scale(m, n, p.beta, p.c, p.ldc)
		return
	}
	workers := 1
	tiles := ceilDiv(m, ks.mr) * ceilDiv(n, ks.nr)
	work := float64(m) * float64(n) * float64(k)
	if par {
		workers = min(parallel.Workers(int(min(work/minParallelWork, 1<<30)), 1), tiles)
	}
	if workers == 1 {
		ws := ks.get()
		ks.region(ws, p, 0, m, 0, n)
		ks.put(ws)
		return
	}
	// More regions than workers, handed out first come first served, so
	// that a worker the OS gives less time (the machine is shared) takes
	// fewer regions instead of holding everyone up. Each region packs its
	// own operands, so regions stay large.
	tasks := workers
	if work >= float64(workers*tasksPerWorker)*minTaskWork {
		tasks = min(workers*tasksPerWorker, tiles)
	}
	ks.parallel(p, workers, tasks)
}

// tasksPerWorker regions per worker balance the load on a busy machine;
// minTaskWork (multiply-adds) keeps each region's packing small beside its
// arithmetic.
const (
	tasksPerWorker = 2
	minTaskWork    = 1 << 25
)

// parallel computes the product over a grid of about tasks regions with
// workers goroutines.
func (ks *kernelSet[E]) parallel(p *args[E], workers, tasks int) {
	j := ks.getJob()
	j.p = *p
	j.tm, j.tn = splitGrid(p.m, p.n, ks.mr, ks.nr, tasks)
	j.next.Store(0)
	parallel.For(workers, 1, j.body)
	j.p = args[E]{} // do not keep the caller's matrices alive
	ks.putJob(j)
}

// job is one parallel product: the arguments and the tm×tn grid of
// regions that the goroutines of parallel.For share out. Jobs are reused,
// with body bound once, so that a call allocates nothing of its own.
type job[E float32 | float64] struct {
	ks     *kernelSet[E]
	p      args[E]
	tm, tn int
	next   atomic.Int64 // next region to hand out
	body   func(lo, hi int)
}

// run is one worker: it computes regions of the grid, row-major, until
// none is left.
func (j *job[E]) run(_, _ int) {
	ks, p := j.ks, &j.p
	ws := ks.get()
	for {
		t := int(j.next.Add(1) - 1)
		if t >= j.tm*j.tn {
			break
		}
		i0, i1 := splitRange(p.m, ks.mr, j.tm, t/j.tn)
		j0, j1 := splitRange(p.n, ks.nr, j.tn, t%j.tn)
		ks.region(ws, p, i0, i1, j0, j1)
	}
	ks.put(ws)
}

func (ks *kernelSet[E]) getJob() *job[E] {
	f := &ks.free
	f.mu.Lock()
	if n := len(f.jobs); n > 0 {
		j := f.jobs[n-1]
		f.jobs = f.jobs[:n-1]
		f.mu.Unlock()
		return j
	}
	f.mu.Unlock()
	j := &job[E]{ks: ks}
	j.body = j.run
	return j
}

func (ks *kernelSet[E]) putJob(j *job[E]) {
	f := &ks.free
	f.mu.Lock()
	f.jobs = append(f.jobs, j)
	f.mu.Unlock()
}

// splitGrid chooses a tm×tn grid of about parts regions that keeps the
// largest region small and close to square: a region packs its rows of A
// once per column block and its columns of B once per row block, so
// besides its area it pays packing in proportion to rows + cols.
func splitGrid(m, n, mr, nr, parts int) (tm, tn int) {
	best := -1.0
	for f := 1; f <= parts; f++ {
		if parts%f != 0 || f > ceilDiv(m, mr) || parts/f > ceilDiv(n, nr) {
			continue
		}
		g := parts / f
		rows, cols := float64(largestPart(m, mr, f)), float64(largestPart(n, nr, g))
		// Packing one element costs about as much as 16 multiply-adds.
		cost := rows * cols * (1 + 16/rows + 16/cols)
		if best < 0 || cost < best {
			best, tm, tn = cost, f, g
		}
	}
	if best < 0 {
		return 1, 1
	}
	return tm, tn
}

// largestPart is the size of the largest of splitRange's parts.
func largestPart(n, step, parts int) int {
	largest := 0
	for t := 0; t < parts; t++ {
		lo, hi := splitRange(n, step, parts, t)
		largest = max(largest, hi-lo)
	}
	return largest
}

// splitRange returns part t of n elements split into parts pieces whose
// boundaries fall on multiples of step.
func splitRange(n, step, parts, t int) (lo, hi int) {
	units := ceilDiv(n, step)
	lo = min(units*t/parts*step, n)
	hi = min(units*(t+1)/parts*step, n)
	return lo, hi
}

// region computes rows [i0, i1) × columns [j0, j1) of C.
func (ks *kernelSet[E]) region(ws *workspace[E], p *args[E], i0, i1, j0, j1 int) {
	if i0 >= i1 || j0 >= j1 {
		return
	}
	// Blocks are balanced (k = 1024 with kc ≤ 384 gives 3×342, not
	// 384+384+256) so that no block is a thin remainder.
	kc := ceilDiv(p.k, ceilDiv(p.k, ks.kc))
	mc := roundUp(ceilDiv(i1-i0, ceilDiv(i1-i0, ks.mc)), ks.mr)
	nc := roundUp(ceilDiv(j1-j0, ceilDiv(j1-j0, ks.nc)), ks.nr)
	for pc := 0; pc < p.k; pc += kc {
		kb := min(kc, p.k-pc)
		beta := p.beta
		if pc > 0 {
			beta = 1
		}
		for ic := i0; ic < i1; ic += mc {
			mb := min(mc, i1-ic)
			ks.packA(ws.a, p.transA, p.a, p.lda, ic, mb, pc, kb, ks.mr)
			for jc := j0; jc < j1; jc += nc {
				nb := min(nc, j1-jc)
				if p.bh != nil {
					ks.packBF16(ws.b, p.transB, p.bh, p.ldb, pc, kb, jc, nb, ks.nr)
				} else {
					ks.packB(ws.b, p.transB, p.b, p.ldb, pc, kb, jc, nb, ks.nr)
				}
				ks.macro(ws, ws.b, mb, nb, kb, p.alpha, beta, p.c, ic*p.ldc+jc, p.ldc)
			}
		}
	}
}

// macro multiplies the packed mb×kb A block in ws by the packed kb×nb B
// block bpk into C starting at c[c0], with row stride ldc.
func (ks *kernelSet[E]) macro(ws *workspace[E], bpk []E, mb, nb, kb int, alpha, beta E, c []E, c0, ldc int) {
	mr, nr := ks.mr, ks.nr
	sa, sb := mr*kb, nr*kb
	for ir := 0; ir < mb; ir += mr {
		ap := ws.a[ir*kb : ir*kb+sa]
		rows := min(mr, mb-ir)
		kernel, kr := ks.kernel, mr
		for _, tk := range ks.tails {
			if tk.rows >= rows {
				kernel, kr = tk.kernel, tk.rows
				break
			}
		}
		for jr := 0; jr < nb; jr += nr {
			bp := bpk[jr*kb : jr*kb+sb]
			cols := min(nr, nb-jr)
			off := c0 + ir*ldc + jr
			if rows == kr && cols == nr {
				kernel(kb, ap, bp, c[off:], ldc, alpha, beta)
				continue
			}
			t := ws.tile
			kernel(kb, ap, bp, t, nr, 1, 0)
			for i := 0; i < rows; i++ {
				cr := c[off+i*ldc : off+i*ldc+cols]
				tr := t[i*nr : i*nr+cols]
				if beta == 0 {
					for j, v := range tr {
						cr[j] = alpha * v
					}
				} else {
					for j, v := range tr {
						cr[j] = alpha*v + beta*cr[j]
					}
				}
			}
		}
	}
}

// packRows is how many k steps the packing of a contiguous operand copies
// across all its slivers or panels before moving on: 8 rows of a matrix
// stay in L1 while their next few cache lines are consumed.
const packRows = 8

// packA copies rows [i0, i0+mb) × columns [p0, p0+kb) of op(A) into dst as
// slivers of mr rows: element (i, p) of sliver s lands at
// dst[s*mr*kb + p*mr + i], and rows past mb are zero.
func (ks *kernelSet[E]) packA(dst []E, trans bool, a []E, lda, i0, mb, p0, kb, mr int) {
	// op(A)(i, p) is a[p*lda+i] when transposed: each k step is then a
	// contiguous run of rows.
	ks.packPanels(dst, trans, a, lda, i0, mb, p0, kb, mr)
}

// packB copies rows [p0, p0+kb) × columns [j0, j0+nb) of op(B) into dst as
// panels of nr columns: element (p, j) of panel t lands at
// dst[t*nr*kb + p*nr + j], and columns past nb are zero.
func (ks *kernelSet[E]) packB(dst []E, trans bool, b []E, ldb, p0, kb, j0, nb, nr int) {
	// op(B)(p, j) is b[p*ldb+j] when not transposed: each k step is then a
	// contiguous run of columns.
	ks.packPanels(dst, !trans, b, ldb, j0, nb, p0, kb, nr)
}

// packPanels is the packing both operands share: indices x0 … x0+n−1 along
// the operand's free dimension (A's rows, B's columns) and k steps
// p0 … p0+kb−1 go to panels of w indices, element (x, p) of panel t at
// dst[t*w*kb + p*w + x], with indices past n zero. The operand holds
// element (x, p) at src[(p0+p)*ld + x0+x] when runs is set (each k step a
// contiguous run) and at src[(x0+x)*ld + p0+p] otherwise.
func (ks *kernelSet[E]) packPanels(dst []E, runs bool, src []E, ld, x0, n, p0, kb, w int) {
	t0 := 0
	if runs && ks.copy2D != nil && n >= w {
		// Copy packRows k steps at a time across all full panels: the rows
		// of src are then read nearly in order, where a whole panel at a
		// time walks page-strided strips that the prefetcher cannot
		// follow. (One k step at a time would write to panels w·kb apart,
		// a multiple of 4 KiB, which collide in L1.)
		t0 = n / w
		for pp := 0; pp < kb; pp += packRows {
			rows := min(packRows, kb-pp)
			for t := 0; t < t0; t++ {
				ks.copy2D(dst[t*w*kb+pp*w:], w, src[(p0+pp)*ld+x0+t*w:], ld, rows, w)
			}
		}
	}
	for t := t0; t*w < n; t++ {
		d := dst[t*w*kb : (t+1)*w*kb]
		cols := min(w, n-t*w)
		c0 := x0 + t*w
		if runs {
			for p := 0; p < kb; p++ {
				dp := d[p*w : p*w+w]
				copy(dp, src[(p0+p)*ld+c0:(p0+p)*ld+c0+cols])
				clear(dp[cols:])
			}
			continue
		}
		// Read runs of k steps, write with stride w.
		x := 0
		if ks.transpose4 != nil && cols >= 4 {
			for ; x+4 <= cols; x += 4 {
				ks.transpose4(d[x:], w, src[(c0+x)*ld+p0:], ld, kb)
			}
			if x < cols {
				// A last group overlapping the previous one rewrites a
				// few indices with the same values instead of going
				// scalar.
				x = cols - 4
				ks.transpose4(d[x:], w, src[(c0+x)*ld+p0:], ld, kb)
				x = cols
			}
		}
		for ; x < cols; x++ {
			for p, v := range src[(c0+x)*ld+p0 : (c0+x)*ld+p0+kb] {
				d[p*w+x] = v
			}
		}
		for x := cols; x < w; x++ {
			for p := 0; p < kb; p++ {
				d[p*w+x] = 0
			}
		}
	}
}

// scale sets C = beta·C over the m×n window; beta = 0 clears it, so NaNs
// in C do not survive.
func scale[E float32 | float64](m, n int, beta E, c []E, ldc int) {
	if beta == 1 {
		return
	}
	for i := 0; i < m; i++ {
		row := c[i*ldc : i*ldc+n]
		if beta == 0 {
			clear(row)
			continue
		}
		for j := range row {
			row[j] *= beta
		}
	}
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }
func roundUp(a, b int) int { return ceilDiv(a, b) * b }

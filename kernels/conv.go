package kernels

import (
	"github.com/dcdit/dcdit/kernels/gemm"
	"github.com/dcdit/dcdit/kernels/parallel"
)

// The 3×3 convolution is an implicit GEMM: the tokens are cut into blocks,
// each worker gathers a block's 3×3 neighbourhoods into a column panel in its
// own scratch (im2col, kept small enough to stay in L2) and multiplies it by
// the repacked weights with GemmSerial. y and dx blocks are independent and
// handed out dynamically; dW is a sum over all blocks, so the blocks are cut
// into gradChunks fixed runs, each summed into its own partial, and the
// partials are added in chunk order: the chunks depend on the problem's size
// alone, so results depend neither on scheduling nor on the number of cores.
// dbias is columnSums of dy, whose row blocks are fixed too. Token-major
// storage makes im2col cheap: a neighbour is a contiguous run of cin values,
// and the three horizontal neighbours of an interior token are one run of
// 3·cin.
//
// Column panels order their 9·cin columns tap-major (tap·cin + c, tap =
// 3·(di+1) + (dj+1)); the PyTorch weight order is (c, tap), so weights are
// repacked into scratch on each call (9·cin·cout elements, negligible next
// to the products).

// convSizing says how many tokens a block holds: as many as fit budget
// elements of column panel, but at least minRows.
type convSizing struct{ budget, minRows int }

// convDefault keeps a float32 column panel at 512 KiB, half of an L2 cache,
// leaving room for the GEMM's packed weights.
var convDefault = convSizing{budget: 1 << 17, minRows: 16}

// convRowAlign rounds block heights to a multiple of the GEMM micro-kernel
// heights (4, 6, 8, 12, 16): a partial register tile goes through a slower
// path.
const convRowAlign = 48

const (
	errConvDims    = "kernels: conv needs batch ≥ 0 and height, width, cin, cout ≥ 1"
	errConvTokens  = "kernels: conv needs tokens ≥ 0 and cin, cout ≥ 1"
	errConvX       = "kernels: conv x shorter than tokens·cin"
	errConvY       = "kernels: conv y shorter than tokens·cout"
	errConvDX      = "kernels: conv dx shorter than tokens·cin"
	errConvDY      = "kernels: conv dy shorter than tokens·cout"
	errConvW       = "kernels: conv w shorter than cout·cin·kernel size"
	errConvDW      = "kernels: conv dw shorter than cout·cin·kernel size"
	errConvBias    = "kernels: conv bias shorter than cout"
	errConvDBias   = "kernels: conv dbias shorter than cout"
	errConvScratch = "kernels: conv scratch smaller than Conv3x3Scratch"
)

// convPlan is how a 3×3 convolution is cut into blocks of tokens.
type convPlan struct {
	tokens int // batch·height·width
	rows   int // tokens per block (the last block may be shorter)
	blocks int
	kmax   int // 9·max(cin, cout): the width of the widest column panel
}

func newConvPlan(batch, height, width, cin, cout int, z convSizing) convPlan {
	if batch < 0 || height < 1 || width < 1 || cin < 1 || cout < 1 {
		panic(errConvDims)
	}
	p := convPlan{tokens: batch * height * width, kmax: 9 * max(cin, cout)}
	if p.tokens == 0 {
		return p
	}
	p.rows = max(z.budget/p.kmax, z.minRows)
	if p.rows >= convRowAlign {
		p.rows -= p.rows % convRowAlign
	}
	p.rows = min(p.rows, p.tokens)
	p.blocks = (p.tokens + p.rows - 1) / p.rows
	return p
}

// maxGradChunks caps the number of partial sums a weight gradient keeps
// (dW here, dU in winoFilter): enough for the cores of a workstation to
// share the blocks, few enough that the partials (9·cin·cout, or
// 16·cin·cout for Winograd, each) stay a small part of the scratch.
const maxGradChunks = 8

// gradChunks is how many runs of blocks a weight gradient sums separately
// before adding them in order. It depends on the number of blocks alone,
// never on the number of cores, so that the sum is the same bits on every
// machine; chunk ch holds blocks [ch·blocks/chunks, (ch+1)·blocks/chunks).
func gradChunks(blocks int) int { return min(blocks, maxGradChunks) }

// sumChunks adds the partial sums parts[ch·n : (ch+1)·n] of chunks 1 …
// chunks−1 into chunk 0's, in chunk order for every element, so that each
// sum has the same bits however the elements are shared out. Summing whole
// contiguous partials first keeps the reordering that follows to one
// buffer instead of a strided gather from every chunk.
func sumChunks[T gemm.Float](parts []T, n, chunks int) {
	parallel.For(n, max(1, ewGrain/chunks), func(lo, hi int) {
		dst := parts[lo:hi]
		for ch := 1; ch < chunks; ch++ {
			src := parts[ch*n+lo : ch*n+hi]
			src = src[:len(dst)]
			for i := range dst {
				dst[i] += src[i]
			}
		}
	})
}

// perWorker is the scratch of one worker: its column panel, 9·cin wide
// forward and up to 9·max(cin, cout) backward.
func (p convPlan) perWorker(cin int, backward bool) int {
	if !backward {
		return p.rows * 9 * cin
	}
	return p.rows * p.kmax
}

// partials is the scratch of the backward pass's dW partial sums, one
// [cout, 9·cin] per chunk of blocks, when the im2col path computes dW.
func (p convPlan) partials(cin, cout int) int { return gradChunks(p.blocks) * 9 * cin * cout }

// workers is how many workers ws can hold after the repacked weights and
// reserved (the dW partials) elements.
func (p convPlan) workers(cin, cout int, backward bool, reserved, wsLen int) int {
	w := min(parallel.Workers(p.blocks, 1), (wsLen-9*cin*cout-convPackedLen(cin, cout)-reserved)/p.perWorker(cin, backward))
	if w < 1 {
		panic(errConvScratch)
	}
	return w
}

// Conv3x3Scratch returns the number of T elements of scratch space ws that
// Conv3x3Forward and Conv3x3Backward need: the repacked weights, up to
// eight dW partial sums and, per worker, a column panel of a few hundred
// KiB.
func Conv3x3Scratch(batch, height, width, cin, cout int) int {
	return conv3x3Scratch(batch, height, width, cin, cout, convDefault)
}

func conv3x3Scratch(batch, height, width, cin, cout int, z convSizing) int {
	p := newConvPlan(batch, height, width, cin, cout, z)
	if p.tokens == 0 {
		return 0
	}
	n := 9*cin*cout + convPackedLen(cin, cout) + p.partials(cin, cout) + parallel.Workers(p.blocks, 1)*p.perWorker(cin, true)
	if z == convDefault && (useWinograd(cin, cout) || useWinograd(cout, cin)) {
		n = max(n, winoConvScratch(batch, height, width, cin, cout))
	}
	return n
}

// convPackedLen is the scratch for the weights packed once per call for
// gemm.GemmPackedB (forward: [9·cin, cout]; dx: [9·cout, cin]), at either
// element width.
func convPackedLen(cin, cout int) int {
	return max(gemm.PackedBLen[float32](9*cin, cout), gemm.PackedBLen[float32](9*cout, cin),
		gemm.PackedBLen[float64](9*cin, cout), gemm.PackedBLen[float64](9*cout, cin))
}

// Conv3x3Forward computes a 2-D convolution with a 3×3 kernel, stride 1 and
// zero padding 1 (PyTorch nn.Conv2d(cin, cout, 3, padding=1)) over
// token-major grids: x is [batch·height·width, cin] and sample b's tokens
// are rows b·H·W + (i·W + j). w is [cout, cin, 3, 3] (PyTorch layout), bias
// is [cout] or nil, y is [batch·height·width, cout]. ws holds at least
// Conv3x3Scratch(batch, height, width, cin, cout) elements.
func Conv3x3Forward[T gemm.Float](y, x, w, bias []T, batch, height, width, cin, cout int, ws []T) {
	conv3x3Forward(y, x, w, bias, batch, height, width, cin, cout, ws, convDefault)
}

func conv3x3Forward[T gemm.Float](y, x, w, bias []T, batch, height, width, cin, cout int, ws []T, z convSizing) {
	p := newConvPlan(batch, height, width, cin, cout, z)
	checkConv(p.tokens, cin, cout, 9, x, y, w, bias, errConvY)
	if p.tokens == 0 {
		return
	}
	if z == convDefault && useWinograd(cin, cout) {
		winograd3x3Forward(y, x, w, bias, batch, height, width, cin, cout, ws, winoDefault)
		return
	}
	workers := p.workers(cin, cout, false, 0, len(ws))
	// wt is [9·cin, cout]: row tap·cin + c holds w[:, c, tap].
	kin := 9 * cin
	wt := ws[:kin*cout]
	for co := range cout {
		for c := range cin {
			src := w[(co*cin+c)*9 : (co*cin+c+1)*9]
			for tap, v := range src {
				wt[(tap*cin+c)*cout+co] = v
			}
		}
	}
	// The weights are packed once for all blocks.
	plen := convPackedLen(cin, cout)
	pb := gemm.PackB(ws[kin*cout:kin*cout+plen], false, kin, cout, wt, cout)
	per := p.perWorker(cin, false)
	free := ws[kin*cout+plen:]
	forItems(p.blocks, workers, func(wk, b int) {
		col := free[wk*per : (wk+1)*per]
		t0 := b * p.rows
		t1 := min(t0+p.rows, p.tokens)
		im2col3x3(col, x, t0, t1, height, width, cin)
		yb := y[t0*cout : t1*cout]
		var beta T
		if bias != nil {
			for t := range t1 - t0 {
				copy(yb[t*cout:(t+1)*cout], bias[:cout])
			}
			beta = 1
		}
		gemm.GemmPackedB(false, t1-t0, 1, col, kin, pb, beta, yb, cout)
	})
}

// Conv3x3Backward writes dx (may be nil), dw and dbias (either may be nil)
// from dy, for Conv3x3Forward's x and w; gradients are overwritten, not
// accumulated. dx is the transposed convolution, computed as a 3×3
// convolution of dy with the flipped, channel-transposed kernel, so that it
// too gathers neighbourhoods instead of scattering into them.
func Conv3x3Backward[T gemm.Float](dx, dw, dbias, dy, x, w []T, batch, height, width, cin, cout int, ws []T) {
	conv3x3Backward(dx, dw, dbias, dy, x, w, batch, height, width, cin, cout, ws, convDefault)
}

func conv3x3Backward[T gemm.Float](dx, dw, dbias, dy, x, w []T, batch, height, width, cin, cout int, ws []T, z convSizing) {
	p := newConvPlan(batch, height, width, cin, cout, z)
	checkConv(p.tokens, cin, cout, 9, x, dy, w, nil, errConvDY)
	if dx != nil && len(dx) < p.tokens*cin {
		panic(errConvDX)
	}
	if dw != nil && len(dw) < cout*cin*9 {
		panic(errConvDW)
	}
	if dbias != nil && len(dbias) < cout {
		panic(errConvDBias)
	}
	if p.tokens == 0 {
		clear(dw[:min(len(dw), cout*cin*9)])
		clear(dbias[:min(len(dbias), cout)])
		return
	}
	kin, kout := 9*cin, 9*cout
	winoDx := dx != nil && z == convDefault && useWinograd(cout, cin)
	winoDw := dw != nil && z == convDefault && useWinograd(cin, cout)
	var reserved int
	if dw != nil && !winoDw {
		reserved = p.partials(cin, cout)
	}
	workers := p.workers(cin, cout, true, reserved, len(ws))
	// dx by Winograd (see winoDX) runs after dW, in the same scratch.
	if winoDx {
		defer winoDX(dx, dy, w, batch, height, width, cin, cout, ws)
		dx = nil
	}
	// So does dW (see winoFilter), before dx.
	if winoDw {
		defer winoFilter(dw, dy, x, batch, height, width, cin, cout, ws)
		dw = nil
	}
	if dbias != nil {
		columnSums(dbias[:cout], dy, p.tokens, cout)
	}
	// wf is [9·cout, cin]: row tap·cout + co holds w[co, :, 8−tap], the
	// kernel rotated by 180° with its channel axes swapped.
	wf := ws[:kout*cin]
	if dx != nil {
		for co := range cout {
			for c := range cin {
				src := w[(co*cin+c)*9 : (co*cin+c+1)*9]
				for tap, v := range src {
					wf[((8-tap)*cout+co)*cin+c] = v
				}
			}
		}
	}
	plen := convPackedLen(cin, cout)
	var pbf gemm.PackedB[T]
	if dx != nil {
		pbf = gemm.PackB(ws[kout*cin:kout*cin+plen], false, kout, cin, wf, cin)
	}
	// The dW partials, one per chunk of blocks, then the workers' column
	// panels.
	parts := ws[kout*cin+plen : kout*cin+plen+reserved]
	per := p.perWorker(cin, true)
	free := ws[kout*cin+plen+reserved:]
	col := func(wk int) []T { return free[wk*per : (wk+1)*per] }
	if dw != nil {
		chunks := gradChunks(p.blocks)
		forItems(chunks, workers, func(wk, ch int) {
			dwp := parts[ch*kin*cout : (ch+1)*kin*cout]
			b0, b1 := ch*p.blocks/chunks, (ch+1)*p.blocks/chunks
			for b := b0; b < b1; b++ {
				t0 := b * p.rows
				t1 := min(t0+p.rows, p.tokens)
				var beta T
				if b > b0 {
					beta = 1
				}
				im2col3x3(col(wk), x, t0, t1, height, width, cin)
				gemm.GemmSerial(true, false, cout, kin, t1-t0, 1, dy[t0*cout:t1*cout], cout, col(wk), kin, beta, dwp, kin)
			}
		})
		// Sum the chunks' partials, then return to PyTorch's (co, c, tap)
		// order.
		sumChunks(parts, kin*cout, chunks)
		parallel.For(cout, 8, func(lo, hi int) {
			for co := lo; co < hi; co++ {
				for c := range cin {
					for tap := range 9 {
						dw[(co*cin+c)*9+tap] = parts[co*kin+tap*cin+c]
					}
				}
			}
		})
	}
	if dx != nil {
		forItems(p.blocks, workers, func(wk, b int) {
			t0 := b * p.rows
			t1 := min(t0+p.rows, p.tokens)
			im2col3x3(col(wk), dy, t0, t1, height, width, cout)
			gemm.GemmPackedB(false, t1-t0, 1, col(wk), kout, pbf, 0, dx[t0*cin:t1*cin], cin)
		})
	}
}

// im2col3x3 gathers the 3×3 neighbourhoods of tokens t0..t1-1 of x (c
// channels, grids of height×width) into col [t1−t0, 9·c], tap-major, with
// zeros where a neighbour falls outside its sample's grid. Blocks may span
// samples: each token's sample is derived from its index.
func im2col3x3[T gemm.Float](col, x []T, t0, t1, height, width, c int) {
	hw := height * width
	k := 9 * c
	for t := t0; t < t1; t++ {
		dst := col[(t-t0)*k : (t-t0+1)*k]
		base := t / hw * hw
		i := (t - base) / width
		j := t - base - i*width
		for di := -1; di <= 1; di++ {
			seg := dst[(di+1)*3*c : (di+2)*3*c]
			ii := i + di
			if ii < 0 || ii >= height {
				clear(seg)
				continue
			}
			row := base + ii*width
			if j >= 1 && j+1 < width {
				copy(seg, x[(row+j-1)*c:(row+j+2)*c])
				continue
			}
			for dj := -1; dj <= 1; dj++ {
				s := seg[(dj+1)*c : (dj+2)*c]
				if jj := j + dj; jj >= 0 && jj < width {
					copy(s, x[(row+jj)*c:(row+jj+1)*c])
				} else {
					clear(s)
				}
			}
		}
	}
}

// checkConv validates the slices shared by the convolution kernels; out is
// y (forward) or dy (backward), named by outErr.
func checkConv[T gemm.Float](tokens, cin, cout, ksize int, x, out, w, bias []T, outErr string) {
	if len(x) < tokens*cin {
		panic(errConvX)
	}
	if len(out) < tokens*cout {
		panic(outErr)
	}
	if len(w) < cout*cin*ksize {
		panic(errConvW)
	}
	if bias != nil && len(bias) < cout {
		panic(errConvBias)
	}
}

// Conv1x1Forward computes the 1×1 convolution y = x·wᵀ + bias over the
// token-major layout of Conv3x3Forward: x is [tokens, cin], w is
// [cout, cin, 1, 1], bias is [cout] or nil, y is [tokens, cout]. It is a
// per-token linear map and runs as one parallel GEMM.
func Conv1x1Forward[T gemm.Float](y, x, w, bias []T, tokens, cin, cout int) {
	if tokens < 0 || cin < 1 || cout < 1 {
		panic(errConvTokens)
	}
	checkConv(tokens, cin, cout, 1, x, y, w, bias, errConvY)
	if tokens == 0 {
		return
	}
	var beta T
	if bias != nil {
		parallel.For(tokens, 256, func(lo, hi int) {
			for t := lo; t < hi; t++ {
				copy(y[t*cout:(t+1)*cout], bias[:cout])
			}
		})
		beta = 1
	}
	gemm.Gemm(false, true, tokens, cout, cin, 1, x, cin, w, cin, beta, y, cout)
}

// Conv1x1Backward writes dx (may be nil), dw and dbias (either may be nil)
// from dy for Conv1x1Forward's x and w; gradients are overwritten.
func Conv1x1Backward[T gemm.Float](dx, dw, dbias, dy, x, w []T, tokens, cin, cout int) {
	if tokens < 0 || cin < 1 || cout < 1 {
		panic(errConvTokens)
	}
	checkConv(tokens, cin, cout, 1, x, dy, w, nil, errConvDY)
	if dx != nil && len(dx) < tokens*cin {
		panic(errConvDX)
	}
	if dw != nil && len(dw) < cout*cin {
		panic(errConvDW)
	}
	if dbias != nil && len(dbias) < cout {
		panic(errConvDBias)
	}
	if tokens == 0 {
		clear(dw[:min(len(dw), cout*cin)])
		clear(dbias[:min(len(dbias), cout)])
		return
	}
	if dx != nil {
		gemm.Gemm(false, false, tokens, cin, cout, 1, dy, cout, w, cin, 0, dx, cin)
	}
	if dw != nil {
		gemm.Gemm(true, false, cout, cin, tokens, 1, dy, cout, x, cin, 0, dw, cin)
	}
	if dbias != nil {
		columnSums(dbias[:cout], dy, tokens, cout)
	}
}

// colGroup is how many columns columnSums handles per task: 16 float32
// values are one 64-byte cache line of each row.
const colGroup = 16

// columnSums sets dst[c] = Σ_t src[t·cols + c] without scratch: tasks own
// groups of columns, and sum blocks of rows into a stack array before adding
// them to the total, so float32 error grows with the number of blocks, not
// of rows.
func columnSums[T gemm.Float](dst, src []T, rows, cols int) {
	const rowBlock = 128
	groups := (cols + colGroup - 1) / colGroup
	parallel.For(groups, 1, func(lo, hi int) {
		for g := lo; g < hi; g++ {
			c0 := g * colGroup
			n := min(colGroup, cols-c0)
			var total [colGroup]T
			for r0 := 0; r0 < rows; r0 += rowBlock {
				var acc [colGroup]T
				for r := r0; r < min(r0+rowBlock, rows); r++ {
					for j, v := range src[r*cols+c0 : r*cols+c0+n] {
						acc[j] += v
					}
				}
				for j := range n {
					total[j] += acc[j]
				}
			}
			copy(dst[c0:c0+n], total[:n])
		}
	})
}

package kernels

import (
	"math"
	"sync/atomic"

	"github.com/dcdit/dcdit/kernels/gemm"
	"github.com/dcdit/dcdit/kernels/parallel"
)

// Attention works on one (sequence, head) pair at a time with GemmSerial,
// and spreads pairs over the cores: a DiT batch has dozens of pairs, and a
// single Z-Image sequence still has 30 heads, so pairs alone fill the
// machine without splitting any product. Each pair processes its queries in
// bands of rows; the band's scores and probabilities live in the worker's
// scratch, so memory is bounded by the band, not by L² per head.

// attnSizing says how tall the bands of query rows are: the whole sequence
// while its scores fit budget elements, else the tallest band that does,
// but never fewer than minBand rows (the dk and dv products accumulate over
// bands and their inner dimension is the band height).
type attnSizing struct{ budget, minBand int }

// attnDefault keeps a float32 band of scores at 512 KiB, so that the
// backward pass's two bands fill about one 1 MiB L2 cache; sequences up to
// 362 tokens are a single band, so DiT-sized attention never re-reads k
// and v. Past 1365 tokens bands stay 96 rows tall (3 MiB of scratch per
// worker at 4096 tokens).
var attnDefault = attnSizing{budget: 1 << 17, minBand: 96}

const (
	errAttnDims    = "kernels: attention needs heads ≥ 1 and headDim ≥ 1"
	errAttnOffsets = "kernels: attention offsets must start at 0 and be non-decreasing"
	errAttnQKV     = "kernels: attention qkv shorter than offsets[S]·3·heads·headDim"
	errAttnOut     = "kernels: attention out shorter than offsets[S]·heads·headDim"
	errAttnLSE     = "kernels: attention lse shorter than offsets[S]·heads"
	errAttnDQKV    = "kernels: attention dqkv shorter than offsets[S]·3·heads·headDim"
	errAttnDOut    = "kernels: attention dout shorter than offsets[S]·heads·headDim"
	errAttnScratch = "kernels: attention scratch smaller than AttentionScratch"
	errAttnProbs   = "kernels: attention probs shorter than AttentionProbs, or nothing to keep"
)

// band is the number of query rows processed together for a sequence of
// length l.
func (z attnSizing) band(l int) int {
	b := z.budget / max(l, 1)
	if b >= l {
		return l
	}
	// Whole multiples of the GEMM micro-kernel heights (4, 6, 8, 12, 16)
	// keep partial register tiles out of the band products.
	return min(l, max(b-b%48, z.minBand))
}

// perWorker is the scratch one worker needs for sequences up to lmax: a band
// of scores (two in the backward pass, for the probabilities and their
// gradient) plus one value per row. band·l grows with l, so the longest
// sequence bounds every shorter one.
func (z attnSizing) perWorker(lmax int, backward bool) int {
	b := z.band(lmax)
	if backward {
		return 2*b*lmax + b
	}
	return b*lmax + b
}

// checkAttention validates the shape arguments shared by the attention
// kernels and returns the token count, the longest sequence and the number
// of (sequence, head) pairs that have work.
func checkAttention(offsets []int, heads, headDim int) (n, lmax, busy int) {
	if heads < 1 || headDim < 1 {
		panic(errAttnDims)
	}
	if len(offsets) < 1 || offsets[0] != 0 {
		panic(errAttnOffsets)
	}
	for s := 1; s < len(offsets); s++ {
		l := offsets[s] - offsets[s-1]
		if l < 0 {
			panic(errAttnOffsets)
		}
		if l > 0 {
			busy++
		}
		lmax = max(lmax, l)
	}
	return offsets[len(offsets)-1], lmax, busy * heads
}

// AttentionScratch returns the number of T elements of scratch space ws that
// AttentionForward and AttentionBackward need for these sequences: a fixed
// amount per worker, linear in the longest sequence once it exceeds a few
// hundred tokens, independent of the number of heads.
func AttentionScratch(offsets []int, heads, headDim int) int {
	return attentionScratch(offsets, heads, headDim, attnDefault)
}

func attentionScratch(offsets []int, heads, headDim int, z attnSizing) int {
	_, lmax, busy := checkAttention(offsets, heads, headDim)
	if lmax == 0 {
		return 0
	}
	return parallel.Workers(busy, 1) * z.perWorker(lmax, true)
}

// attnNeed panics with msg unless buf holds at least n elements.
func attnNeed[T any](buf []T, n int, msg string) {
	if len(buf) < n {
		panic(msg)
	}
}

// attnWorkers is how many workers the scratch ws can hold, capped by the
// work available; fewer than one is a caller bug.
func attnWorkers(busy, per, wsLen int) int {
	w := min(parallel.Workers(busy, 1), wsLen/per)
	if w < 1 {
		panic(errAttnScratch)
	}
	return w
}

// runWorkers runs body(w) for every worker w in [0, workers) through
// parallel.For, so that each worker, and the scratch slot w it owns, is
// used by one goroutine at a time.
func runWorkers(workers int, body func(w int)) {
	parallel.For(workers, 1, func(lo, hi int) {
		for w := lo; w < hi; w++ {
			body(w)
		}
	})
}

// forItems runs body(w, i) for every i in [0, n) on workers workers,
// handing items out one at a time: attention pairs cost O(L²) with ragged
// L, and on a shared machine a core may be slowed by other processes, so
// static chunks would leave cores idle. Callers use it only where results
// do not depend on which worker computes an item.
func forItems(n, workers int, body func(w, i int)) {
	var next atomic.Int64
	runWorkers(workers, func(w int) {
		for {
			i := int(next.Add(1)) - 1
			if i >= n {
				return
			}
			body(w, i)
		}
	})
}

// AttentionForward computes softmax(scale·q·kᵀ)·v per head, independently
// within each packed sequence.
//
// qkv is [N, 3·heads·headDim]: columns are [q | k | v], each block
// head-major (head h occupies columns h·headDim..), the timm/DiT qkv Linear
// layout. out is [N, heads·headDim] (head-major columns, ready for the
// output projection). lse is [N·heads] (row-major over tokens then heads):
// the per-row log-sum-exp of the scaled scores, saved for backward. offsets
// has S+1 entries, offsets[0] = 0, offsets[S] = N; sequence s owns rows
// offsets[s]..offsets[s+1]-1 (0-length sequences are skipped). ws holds at
// least AttentionScratch(offsets, heads, headDim) elements.
func AttentionForward[T gemm.Float](out, lse, qkv []T, offsets []int, heads, headDim int, scale T, ws []T) {
	attentionForward(out, lse, qkv, offsets, heads, headDim, scale, ws, attnDefault)
}

func attentionForward[T gemm.Float](out, lse, qkv []T, offsets []int, heads, headDim int, scale T, ws []T, z attnSizing) {
	n, lmax, busy := checkAttention(offsets, heads, headDim)
	hd := heads * headDim
	attnNeed(qkv, n*3*hd, errAttnQKV)
	attnNeed(out, n*hd, errAttnOut)
	attnNeed(lse, n*heads, errAttnLSE)
	if lmax == 0 {
		return
	}
	per := z.perWorker(lmax, false)
	workers := attnWorkers(busy, per, len(ws))
	forItems((len(offsets)-1)*heads, workers, func(w, pair int) {
		s, h := pair/heads, pair%heads
		r0, l := offsets[s], offsets[s+1]-offsets[s]
		if l == 0 {
			return
		}
		attnForwardPair(out, lse, qkv, r0, l, h, heads, headDim, scale, ws[w*per:(w+1)*per], z)
	})
}

// attnForwardPair runs one head of one sequence (rows r0..r0+l-1).
func attnForwardPair[T gemm.Float](out, lse, qkv []T, r0, l, h, heads, d int, scale T, ws []T, z attnSizing) {
	hd := heads * d
	ld := 3 * hd
	q := qkv[r0*ld+h*d:]
	k := qkv[r0*ld+hd+h*d:]
	v := qkv[r0*ld+2*hd+h*d:]
	o := out[r0*hd+h*d:]
	band := z.band(l)
	p := ws[:band*l]
	inv := ws[band*l : band*l+band]
	for i0 := 0; i0 < l; i0 += band {
		nb := min(band, l-i0)
		gemm.GemmSerial(false, true, nb, l, d, scale, q[i0*ld:], ld, k, ld, 0, p, l)
		for i := range nb {
			row := p[i*l : (i+1)*l]
			m := rowMax(row)
			sum := expShiftRow(row, m)
			lse[(r0+i0+i)*heads+h] = m + T(math.Log(float64(sum)))
			inv[i] = 1 / sum
		}
		// The probabilities stay unnormalised through the product:
		// rescaling the d outputs of a row is cheaper than its l weights.
		gemm.GemmSerial(false, false, nb, d, l, 1, p, l, v, ld, 0, o[i0*hd:], hd)
		for i := range nb {
			row := o[(i0+i)*hd : (i0+i)*hd+d]
			for j := range row {
				row[j] *= inv[i]
			}
		}
	}
}

// AttentionBackward writes dqkv ([N, 3·heads·headDim], same layout as qkv)
// from dout ([N, heads·headDim]), using the out and lse saved by
// AttentionForward. Probabilities are recomputed from q, k and lse band by
// band instead of being stored, so memory stays bounded for long sequences.
func AttentionBackward[T gemm.Float](dqkv, dout, out, lse, qkv []T, offsets []int, heads, headDim int, scale T, ws []T) {
	attentionBackward(dqkv, dout, out, lse, qkv, offsets, heads, headDim, scale, ws, attnDefault)
}

func attentionBackward[T gemm.Float](dqkv, dout, out, lse, qkv []T, offsets []int, heads, headDim int, scale T, ws []T, z attnSizing) {
	n, lmax, busy := checkAttention(offsets, heads, headDim)
	hd := heads * headDim
	attnNeed(qkv, n*3*hd, errAttnQKV)
	attnNeed(dqkv, n*3*hd, errAttnDQKV)
	attnNeed(out, n*hd, errAttnOut)
	attnNeed(dout, n*hd, errAttnDOut)
	attnNeed(lse, n*heads, errAttnLSE)
	if lmax == 0 {
		return
	}
	per := z.perWorker(lmax, true)
	workers := attnWorkers(busy, per, len(ws))
	forItems((len(offsets)-1)*heads, workers, func(w, pair int) {
		s, h := pair/heads, pair%heads
		r0, l := offsets[s], offsets[s+1]-offsets[s]
		if l == 0 {
			return
		}
		attnBackwardPair(dqkv, dout, out, lse, qkv, r0, l, h, heads, headDim, scale, ws[w*per:(w+1)*per], z)
	})
}

// attnBackwardPair runs the backward pass of one head of one sequence. Per
// band of query rows B it needs P_B = exp(scale·q_B·kᵀ − lse_B), then
//
//	dv  += P_Bᵀ·dout_B
//	dS_B = P_B ∘ (dout_B·vᵀ − δ_B),  δ_i = Σ_d dout_id·out_id
//	dq_B = scale·dS_B·k
//	dk  += scale·dS_Bᵀ·q_B
//
// where δ_i equals Σ_j P_ij·dP_ij, the softmax's correction term, obtained
// from the saved output in O(d) instead of O(l) per row.
func attnBackwardPair[T gemm.Float](dqkv, dout, out, lse, qkv []T, r0, l, h, heads, d int, scale T, ws []T, z attnSizing) {
	hd := heads * d
	ld := 3 * hd
	q := qkv[r0*ld+h*d:]
	k := qkv[r0*ld+hd+h*d:]
	v := qkv[r0*ld+2*hd+h*d:]
	dq := dqkv[r0*ld+h*d:]
	dk := dqkv[r0*ld+hd+h*d:]
	dv := dqkv[r0*ld+2*hd+h*d:]
	do := dout[r0*hd+h*d:]
	o := out[r0*hd+h*d:]
	band := z.band(l)
	p := ws[:band*l]
	dp := ws[band*l : 2*band*l]
	delta := ws[2*band*l : 2*band*l+band]
	for i0 := 0; i0 < l; i0 += band {
		nb := min(band, l-i0)
		// The first band overwrites dk and dv, so dqkv needs no clearing.
		var beta T
		if i0 > 0 {
			beta = 1
		}
		gemm.GemmSerial(false, true, nb, l, d, scale, q[i0*ld:], ld, k, ld, 0, p, l)
		for i := range nb {
			expShiftRow(p[i*l:(i+1)*l], lse[(r0+i0+i)*heads+h])
			r := (i0 + i) * hd
			delta[i] = dot(do[r:r+d], o[r:r+d])
		}
		gemm.GemmSerial(true, false, l, d, nb, 1, p, l, do[i0*hd:], hd, beta, dv, ld)
		gemm.GemmSerial(false, true, nb, l, d, 1, do[i0*hd:], hd, v, ld, 0, dp, l)
		for i := range nb {
			pr := p[i*l : (i+1)*l]
			dr := dp[i*l : (i+1)*l]
			di := delta[i]
			for j, g := range dr[:len(pr)] {
				pr[j] *= g - di
			}
		}
		gemm.GemmSerial(false, false, nb, d, l, scale, p, l, k, ld, 0, dq[i0*ld:], ld)
		gemm.GemmSerial(true, false, l, d, nb, scale, p, l, q[i0*ld:], ld, beta, dk, ld)
	}
}

// Keeping the probabilities. For short sequences the backward pass can
// read the softmax probabilities that the forward pass computed instead of
// recomputing them: that saves one of its five L×L×d products and the
// exponentials, at L² values per (sequence, head) — as PyTorch does. It is
// offered only while every sequence is a single band (the forward pass then
// holds a whole L×L block anyway) and the whole set stays below
// maxKeptProbs values, so memory stays bounded for long sequences, which
// recompute as before.
const maxKeptProbs = 1 << 23 // 32 MiB of float32

// AttentionProbs returns the number of elements that AttentionForwardKeep
// needs to keep the probabilities of these sequences, or 0 when they are
// not to be kept (sequences too long, or nothing to compute): callers then
// use AttentionForward and AttentionBackward.
func AttentionProbs(offsets []int, heads, headDim int) int {
	return attentionProbs(offsets, heads, headDim, attnDefault)
}

func attentionProbs(offsets []int, heads, headDim int, z attnSizing) int {
	_, lmax, _ := checkAttention(offsets, heads, headDim)
	if lmax == 0 || z.band(lmax) != lmax {
		return 0
	}
	n := 0
	for s := 1; s < len(offsets); s++ {
		l := offsets[s] - offsets[s-1]
		n += heads * l * l
		if n > maxKeptProbs {
			return 0
		}
	}
	return n
}

// probsBase returns where each sequence's probabilities start in the
// kept set: sequence s holds heads blocks of l_s×l_s, head by head.
func probsBase(offsets []int, heads int) []int {
	base := make([]int, len(offsets))
	for s := 1; s < len(offsets); s++ {
		l := offsets[s] - offsets[s-1]
		base[s] = base[s-1] + heads*l*l
	}
	return base
}

// AttentionForwardKeep is AttentionForward that also stores the softmax
// probabilities in probs (AttentionProbs(offsets, heads, headDim) elements,
// which must be positive) for AttentionBackwardKept. The outputs equal
// AttentionForward's up to rounding: the probabilities are normalised
// before the product with v instead of after.
func AttentionForwardKeep[T gemm.Float](out, lse, probs, qkv []T, offsets []int, heads, headDim int, scale T, ws []T) {
	n, lmax, busy := checkAttention(offsets, heads, headDim)
	hd := heads * headDim
	attnNeed(qkv, n*3*hd, errAttnQKV)
	attnNeed(out, n*hd, errAttnOut)
	attnNeed(lse, n*heads, errAttnLSE)
	np := AttentionProbs(offsets, heads, headDim)
	if np == 0 || len(probs) < np {
		panic(errAttnProbs)
	}
	per := attnDefault.perWorker(lmax, false)
	workers := attnWorkers(busy, per, len(ws))
	forProbPairs(probs, offsets, heads, workers, func(_, r0, l, h int, p []T) {
		attnForwardKeepPair(out, lse, p, qkv, r0, l, h, heads, headDim, scale)
	})
}

// forProbPairs runs fn for every (sequence, head) pair with a token, on
// workers goroutines, with that pair's l×l block p of the stored
// probabilities (laid out as AttentionProbs sizes them).
func forProbPairs[T gemm.Float](probs []T, offsets []int, heads, workers int, fn func(w, r0, l, h int, p []T)) {
	base := probsBase(offsets, heads)
	forItems((len(offsets)-1)*heads, workers, func(w, pair int) {
		s, h := pair/heads, pair%heads
		r0, l := offsets[s], offsets[s+1]-offsets[s]
		if l == 0 {
			return
		}
		fn(w, r0, l, h, probs[base[s]+h*l*l:base[s]+(h+1)*l*l])
	})
}

// attnForwardKeepPair runs one head of one sequence as a single band,
// leaving the normalised probabilities in p (l×l).
func attnForwardKeepPair[T gemm.Float](out, lse, p, qkv []T, r0, l, h, heads, d int, scale T) {
	hd := heads * d
	ld := 3 * hd
	q := qkv[r0*ld+h*d:]
	k := qkv[r0*ld+hd+h*d:]
	v := qkv[r0*ld+2*hd+h*d:]
	gemm.GemmSerial(false, true, l, l, d, scale, q, ld, k, ld, 0, p, l)
	for i := range l {
		row := p[i*l : (i+1)*l]
		m := rowMax(row)
		sum := expShiftRow(row, m)
		lse[(r0+i)*heads+h] = m + T(math.Log(float64(sum)))
		inv := 1 / sum
		for j := range row {
			row[j] *= inv
		}
	}
	gemm.GemmSerial(false, false, l, d, l, 1, p, l, v, ld, 0, out[r0*hd+h*d:], hd)
}

// AttentionBackwardKept is AttentionBackward from the probabilities that
// AttentionForwardKeep stored (left unchanged), without recomputing them;
// ws is the scratch of AttentionBackward.
func AttentionBackwardKept[T gemm.Float](dqkv, dout, out, probs, qkv []T, offsets []int, heads, headDim int, scale T, ws []T) {
	n, lmax, busy := checkAttention(offsets, heads, headDim)
	hd := heads * headDim
	attnNeed(qkv, n*3*hd, errAttnQKV)
	attnNeed(dqkv, n*3*hd, errAttnDQKV)
	attnNeed(out, n*hd, errAttnOut)
	attnNeed(dout, n*hd, errAttnDOut)
	np := AttentionProbs(offsets, heads, headDim)
	if np == 0 || len(probs) < np {
		panic(errAttnProbs)
	}
	per := attnDefault.perWorker(lmax, true)
	workers := attnWorkers(busy, per, len(ws))
	forProbPairs(probs, offsets, heads, workers, func(w, r0, l, h int, p []T) {
		attnBackwardKeptPair(dqkv, dout, out, p, qkv, r0, l, h, heads, headDim, scale, ws[w*per:(w+1)*per])
	})
}

// attnBackwardKeptPair is attnBackwardPair for one band holding the whole
// sequence, with P read from p: dS goes to the scratch, p stays intact.
func attnBackwardKeptPair[T gemm.Float](dqkv, dout, out, p, qkv []T, r0, l, h, heads, d int, scale T, ws []T) {
	hd := heads * d
	ld := 3 * hd
	q := qkv[r0*ld+h*d:]
	k := qkv[r0*ld+hd+h*d:]
	v := qkv[r0*ld+2*hd+h*d:]
	dq := dqkv[r0*ld+h*d:]
	dk := dqkv[r0*ld+hd+h*d:]
	dv := dqkv[r0*ld+2*hd+h*d:]
	do := dout[r0*hd+h*d:]
	o := out[r0*hd+h*d:]
	ds := ws[:l*l]
	delta := ws[l*l : l*l+l]
	for i := range l {
		r := i * hd
		delta[i] = dot(do[r:r+d], o[r:r+d])
	}
	gemm.GemmSerial(true, false, l, d, l, 1, p, l, do, hd, 0, dv, ld)
	gemm.GemmSerial(false, true, l, l, d, 1, do, hd, v, ld, 0, ds, l)
	for i := range l {
		softmaxGradRow(ds[i*l:(i+1)*l], p[i*l:(i+1)*l], delta[i])
	}
	gemm.GemmSerial(false, false, l, d, l, scale, ds, l, k, ld, 0, dq, ld)
	gemm.GemmSerial(true, false, l, d, l, scale, ds, l, q, ld, 0, dk, ld)
}

// softmaxGradRow sets ds[j] = p[j]·(ds[j] − delta): the softmax's
// backward step for one row, from dP in ds.
func softmaxGradRow[T gemm.Float](ds, p []T, delta T) {
	p = p[:len(ds)]
	if n := len(ds) &^ 7; actAsm && !actPrecise[T]() && n > 0 {
		softmaxGradAVX2(asF32(ds), asF32(p), n, float32(delta))
		ds, p = ds[n:], p[n:]
	}
	for j, g := range ds {
		ds[j] = p[j] * (g - delta)
	}
}

// rowMax returns the largest element of a non-empty row.
func rowMax[T gemm.Float](row []T) T {
	if n := len(row) &^ 7; actAsm && !actPrecise[T]() && n > 0 {
		m := T(rowMaxAVX2(asF32(row), n))
		for _, v := range row[n:] {
			if v > m {
				m = v
			}
		}
		return m
	}
	m := row[0]
	for _, v := range row[1:] {
		if v > m {
			m = v
		}
	}
	return m
}

// dot returns Σ a_i·b_i over len(a) elements.
func dot[T gemm.Float](a, b []T) T {
	var s T
	for i, v := range a {
		s += v * b[i]
	}
	return s
}

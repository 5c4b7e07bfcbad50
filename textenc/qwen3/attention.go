package qwen3

import (
	"math"
	"sync/atomic"

	"github.com/dcdit/dcdit/kernels/gemm"
	"github.com/dcdit/dcdit/kernels/parallel"
)

// attnBand is how many query rows attention scores at a time: a causal
// band only needs the keys up to its last row, and the band's scores
// (attnBand × sequence length) stay in the worker's scratch.
const attnBand = 64

// attnScratch is the float32 scratch attend needs for sequences up to
// lmax rows: one band of scores per worker.
func attnScratch(pairs, lmax int) int {
	return parallel.Workers(pairs, 1) * attnBand * lmax
}

// attend computes causal grouped-query attention within each sequence of
// b. q and out are [N, heads·hd], k and v [N, kvHeads·hd], head-major
// columns; query head h reads key/value head h/(heads/kvHeads). Row i of a
// sequence whose first nreal rows are real tokens attends to keys j ≤ i
// with j < nreal: the transformers mask for right padding, under which a
// padding row attends to every real token. Masked keys get probability exactly 0, as
// exp(finfo.min − max) is in the reference. probs, when not nil, receives
// each sequence's probabilities as [heads, L, L] blocks one after the
// other (L the sequence length).
func attend(out, q, k, v []float32, b *batch, heads, kvHeads, hd int, scale float32, ws, probs []float32) {
	group := heads / kvHeads
	qw, kvw := heads*hd, kvHeads*hd
	seqs := len(b.offsets) - 1
	pairs := seqs * heads
	lmax := b.longest()
	per := attnBand * lmax
	workers := min(parallel.Workers(pairs, 1), len(ws)/per)
	probsAt := make([]int, seqs)
	for s := 1; s < seqs; s++ {
		l := b.offsets[s] - b.offsets[s-1]
		probsAt[s] = probsAt[s-1] + heads*l*l
	}
	var next atomic.Int64
	parallel.For(workers, 1, func(lo, hi int) {
		for wk := lo; wk < hi; wk++ {
			sc := ws[wk*per : (wk+1)*per]
			for {
				pair := int(next.Add(1)) - 1
				if pair >= pairs {
					break
				}
				s, h := pair/heads, pair%heads
				r0, l, nreal := b.offsets[s], b.offsets[s+1]-b.offsets[s], b.realLen[s]
				qh := q[r0*qw+h*hd:]
				kh := k[r0*kvw+(h/group)*hd:]
				vh := v[r0*kvw+(h/group)*hd:]
				oh := out[r0*qw+h*hd:]
				for i0 := 0; i0 < l; i0 += attnBand {
					nb := min(attnBand, l-i0)
					nk := keysOf(i0+nb-1, nreal)
					p := sc[:nb*nk]
					gemm.GemmSerial(false, true, nb, nk, hd, scale, qh[i0*qw:], qw, kh, kvw, 0, p, nk)
					for i := range nb {
						softmaxPrefix(p[i*nk:(i+1)*nk], keysOf(i0+i, nreal))
					}
					gemm.GemmSerial(false, false, nb, hd, nk, 1, p, nk, vh, kvw, 0, oh[i0*qw:], qw)
					if probs != nil {
						dst := probs[probsAt[s]+h*l*l:]
						for i := range nb {
							row := dst[(i0+i)*l : (i0+i+1)*l]
							copy(row, p[i*nk:(i+1)*nk])
							clear(row[nk:])
						}
					}
				}
			}
		}
	})
}

// keysOf is how many keys row i of a sequence with nreal real tokens
// attends to (keys 0 to keysOf−1): those not after it and not padding.
func keysOf(i, nreal int) int { return min(i+1, nreal) }

// softmaxPrefix sets row to the float32 softmax of its first n scores and
// zeroes the rest (the masked keys). The exponentials are evaluated in
// float64 and rounded once, the sum is kept in float64, and the row is
// scaled by the reciprocal of the sum, as torch's softmax kernel does.
func softmaxPrefix(row []float32, n int) {
	m := row[0]
	for _, x := range row[1:n] {
		m = max(m, x)
	}
	var sum float64
	for i, x := range row[:n] {
		e := float32(math.Exp(float64(x - m)))
		row[i] = e
		sum += float64(e)
	}
	inv := float32(1 / sum)
	for i := range row[:n] {
		row[i] *= inv
	}
	clear(row[n:])
}

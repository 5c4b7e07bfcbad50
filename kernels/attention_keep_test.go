package kernels

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestAttentionKeptMatchesRecomputed: with the probabilities kept, forward
// and backward give what the recomputing kernels give (up to rounding),
// the kept probabilities are left intact, and sequences too long for one
// band are not kept.
func TestAttentionKeptMatchesRecomputed(t *testing.T) {
	for _, c := range attnCases {
		if c.z != (attnSizing{}) {
			continue // the default sizing decides what is kept
		}
		t.Run(c.String(), func(t *testing.T) {
			off := acOffsets(c.lengths)
			np := AttentionProbs(off, c.heads, c.d)
			lmax := 0
			for _, l := range c.lengths {
				lmax = max(lmax, l)
			}
			if lmax*lmax > attnDefault.budget || lmax == 0 {
				if np != 0 {
					t.Fatalf("AttentionProbs = %d for sequences up to %d, want 0", np, lmax)
				}
				return
			}
			rng := rand.New(rand.NewPCG(9, uint64(len(c.lengths))))
			n := off[len(off)-1]
			hd := c.heads * c.d
			qkv := acRandn(rng, n*3*hd)
			r := acRandn(rng, n*hd)
			want := attnBackward64(c, qkv, r, off)

			out, lse := make([]float64, n*hd), make([]float64, n*c.heads)
			probs := acNaNs[float64](np)
			ws := acNaNs[float64](AttentionScratch(off, c.heads, c.d))
			AttentionForwardKeep(out, lse, probs, qkv, off, c.heads, c.d, c.scale, ws)
			outRef, lseRef := make([]float64, n*hd), make([]float64, n*c.heads)
			AttentionForward(outRef, lseRef, qkv, off, c.heads, c.d, c.scale, ws)
			kept := append([]float64(nil), probs...)
			dqkv := acNaNs[float64](n * 3 * hd)
			AttentionBackwardKept(dqkv, r, out, probs, qkv, off, c.heads, c.d, c.scale, ws)
			for what, pair := range map[string][2][]float64{"out": {out, outRef}, "lse": {lse, lseRef}, "dqkv": {dqkv, want}} {
				for i := range pair[1] {
					if e := math.Abs(pair[0][i] - pair[1][i]); !(e <= 1e-12*max(1, math.Abs(pair[1][i]))) {
						t.Fatalf("%s[%d] = %g, recomputed %g", what, i, pair[0][i], pair[1][i])
					}
				}
			}
			for i, v := range probs {
				if v != kept[i] {
					t.Fatalf("probs[%d] changed by the backward pass", i)
				}
			}
		})
	}
	mustPanicAttn(t, func() {
		off := []int{0, 2}
		AttentionForwardKeep(make([]float32, 2), make([]float32, 2), make([]float32, 3), make([]float32, 6), off, 1, 1, 1, make([]float32, 64))
	})
}

func mustPanicAttn(t *testing.T, f func()) {
	t.Helper()
	defer func() {
		if recover() == nil {
			t.Fatal("short probs did not panic")
		}
	}()
	f()
}

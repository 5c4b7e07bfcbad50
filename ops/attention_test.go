package ops

import (
	"fmt"
	"math"
	"testing"

	"github.com/nlpodyssey/spago/mat"
)

// attentionRef is softmax(q·kᵀ/√d)·v per head within each sequence.
func attentionRef(offsets []int, heads, dim int) func(x [][]float64) []float64 {
	return func(d [][]float64) []float64 {
		qkv := d[0]
		width := heads * dim
		rows := offsets[len(offsets)-1]
		out := make([]float64, rows*width)
		for s := 0; s+1 < len(offsets); s++ {
			lo, hi := offsets[s], offsets[s+1]
			for h := range heads {
				for i := lo; i < hi; i++ {
					scores := make([]float64, hi-lo)
					mx := math.Inf(-1)
					for j := lo; j < hi; j++ {
						var dot float64
						for c := range dim {
							dot += qkv[i*3*width+h*dim+c] * qkv[j*3*width+width+h*dim+c]
						}
						scores[j-lo] = dot / math.Sqrt(float64(dim))
						mx = math.Max(mx, scores[j-lo])
					}
					var z float64
					for k := range scores {
						scores[k] = math.Exp(scores[k] - mx)
						z += scores[k]
					}
					for j := lo; j < hi; j++ {
						p := scores[j-lo] / z
						for c := range dim {
							out[i*width+h*dim+c] += p * qkv[j*3*width+2*width+h*dim+c]
						}
					}
				}
			}
		}
		return out
	}
}

func TestAttention(t *testing.T) {
	var cases []opCase
	for _, tc := range []struct {
		lengths    []int
		heads, dim int
	}{
		{[]int{1}, 1, 1},
		{[]int{4}, 2, 3},
		{[]int{5, 1, 3, 0, 2}, 2, 4}, // ragged, with single-token and empty sequences
	} {
		offsets := []int{0}
		for _, l := range tc.lengths {
			offsets = append(offsets, offsets[len(offsets)-1]+l)
		}
		rows, heads, dim := offsets[len(offsets)-1], tc.heads, tc.dim
		cases = append(cases, opCase{
			name:  fmt.Sprintf("lengths=%v/heads=%d/dim=%d", tc.lengths, heads, dim),
			ins:   []input{{name: "qkv", rows: rows, cols: 3 * heads * dim}},
			build: func(x []mat.Tensor) mat.Tensor { return Attention(x[0], offsets, heads) },
			ref:   attentionRef(offsets, heads, dim),
			shape: [2]int{rows, heads * dim},
		})
	}
	runOpCases(t, cases)
}

func TestAttentionPanics(t *testing.T) {
	x := mat.NewDense[float32](mat.WithShape(4, 12))
	mustPanic(t, func() { Attention(x, []int{0, 4}, 5) }, "ops: Attention: qkv has 12 columns")
	mustPanic(t, func() { Attention(x, []int{0, 3}, 2) }, "ops: Attention: offsets run from 0 to 3, want 0 to 4")
}

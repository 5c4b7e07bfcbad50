package ops

import (
	"fmt"
	"math"

	"github.com/nlpodyssey/spago/ag"
	"github.com/nlpodyssey/spago/mat"
	"github.com/nlpodyssey/spago/mat/float"

	"github.com/dcdit/dcdit/kernels"
)

// Attention returns multi-head softmax self-attention over packed
// sequences: qkv is [N, 3·heads·headDim] with columns [q | k | v], each
// head-major (timm's fused qkv layout), and sequence s owns rows
// offsets[s] ≤ r < offsets[s+1]; tokens attend only within their sequence,
// with scale 1/√headDim. The result is [N, heads·headDim].
func Attention(qkv mat.Tensor, offsets []int, heads int) mat.Tensor {
	return run(newAttention(qkv, offsets, heads))
}

type attentionSpec struct {
	qkv              mat.Tensor
	offsets          []int
	rows, heads, dim int // dim is the head width
}

type attention[T float.DType] struct {
	attentionSpec
	out, lse []T // saved for the backward pass
	// probs holds the softmax probabilities when the sequences are short
	// enough to keep them (kernels.AttentionProbs), so that the backward
	// pass does not recompute them; nil otherwise.
	probs []T
}

func newAttention(qkv mat.Tensor, offsets []int, heads int) ag.AutoGradFunction {
	rows, cols := dims("Attention", "qkv", qkv)
	if heads < 1 || cols%(3*heads) != 0 {
		panic(fmt.Sprintf("ops: Attention: qkv has %d columns, want 3·heads·headDim with %d heads", cols, heads))
	}
	s := attentionSpec{qkv, copyOffsets("Attention", offsets, rows), rows, heads, cols / (3 * heads)}
	return pickOn("Attention", &attention[float32]{attentionSpec: s}, &attention[float64]{attentionSpec: s},
		&attentionDevice{attention: attention[float32]{attentionSpec: s}}, named{"qkv", qkv})
}

func (f *attention[T]) Operands() []mat.Tensor { return []mat.Tensor{f.qkv} }

func (f *attention[T]) scale() T { return T(1 / math.Sqrt(float64(f.dim))) }

func (f *attention[T]) Forward() (mat.Tensor, error) {
	width := f.heads * f.dim
	f.out = getBuffer[T](f.rows * width)
	f.lse = getBuffer[T](f.rows * f.heads)
	ws := getBuffer[T](kernels.AttentionScratch(f.offsets, f.heads, f.dim))
	defer putBuffer(ws)
	if n := kernels.AttentionProbs(f.offsets, f.heads, f.dim); n > 0 && f.qkv.RequiresGrad() {
		f.probs = getBuffer[T](n)
		kernels.AttentionForwardKeep(f.out, f.lse, f.probs, data[T](f.qkv), f.offsets, f.heads, f.dim, f.scale(), ws)
		return output(f.rows, width, f.out, f.lse, f.probs), nil
	}
	kernels.AttentionForward(f.out, f.lse, data[T](f.qkv), f.offsets, f.heads, f.dim, f.scale(), ws)
	return output(f.rows, width, f.out, f.lse), nil
}

func (f *attention[T]) Backward(gy mat.Tensor) error {
	dqkv := gradBuffer[T](f.qkv)
	if dqkv == nil {
		return nil
	}
	ws := getBuffer[T](kernels.AttentionScratch(f.offsets, f.heads, f.dim))
	if f.probs != nil {
		kernels.AttentionBackwardKept(dqkv, data[T](gy), f.out, f.probs, data[T](f.qkv), f.offsets, f.heads, f.dim, f.scale(), ws)
	} else {
		kernels.AttentionBackward(dqkv, data[T](gy), f.out, f.lse, data[T](f.qkv), f.offsets, f.heads, f.dim, f.scale(), ws)
	}
	putBuffer(ws)
	accGrad(f.qkv, dqkv)
	return nil
}

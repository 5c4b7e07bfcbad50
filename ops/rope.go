package ops

import (
	"fmt"

	"github.com/nlpodyssey/spago/ag"
	"github.com/nlpodyssey/spago/mat"
	"github.com/nlpodyssey/spago/mat/float"

	"github.com/dcdit/dcdit/kernels"
)

// RoPE applies rotary position embeddings with interleaved pairs to x
// [N, heads·hd]: in every head, the pair (x[2i], x[2i+1]) of row r is
// multiplied, as the complex number x[2i] + i·x[2i+1], by
// freqs[r, 2i] + i·freqs[r, 2i+1] (the (cos, sin) of the pair's angle at
// that token), as Z-Image's apply_rotary_emb does with view_as_complex.
// freqs is [N, hd] and shared by the heads; it is usually a constant, but
// its gradient is computed when it requires one. A zero row of freqs
// zeroes the row of x (Z-Image's batch padding).
func RoPE(x, freqs mat.Tensor, heads int) mat.Tensor { return run(newRoPE(x, freqs, heads)) }

type ropeSpec struct {
	x, freqs    mat.Tensor
	rows, heads int
	dim         int // head width
}

type rope[T float.DType] struct{ ropeSpec }

func newRoPE(x, freqs mat.Tensor, heads int) ag.AutoGradFunction {
	rows, cols := dims("RoPE", "x", x)
	if heads < 1 || cols%heads != 0 || (cols/heads)%2 != 0 {
		panic(fmt.Sprintf("ops: RoPE: x has %d columns, want heads·hd with %d heads and an even hd", cols, heads))
	}
	needShape("RoPE", "freqs", freqs, rows, cols/heads, " (rows of x × head width)")
	s := ropeSpec{x, freqs, rows, heads, cols / heads}
	return pick("RoPE", &rope[float32]{s}, &rope[float64]{s}, named{"x", x}, named{"freqs", freqs})
}

func (f *rope[T]) Operands() []mat.Tensor { return []mat.Tensor{f.x, f.freqs} }

func (f *rope[T]) Forward() (mat.Tensor, error) {
	y := getBuffer[T](f.rows * f.heads * f.dim)
	kernels.RoPEForward(y, data[T](f.x), data[T](f.freqs), f.rows, f.heads, f.dim)
	return output(f.rows, f.heads*f.dim, y), nil
}

// Backward multiplies by the conjugate rotation for x; the factors'
// gradient is the sum over heads of dy·conj(x) in the same pairing.
func (f *rope[T]) Backward(gy mat.Tensor) error {
	dx, df := gradBuffer[T](f.x), gradBuffer[T](f.freqs)
	kernels.RoPEBackward(dx, df, data[T](gy), data[T](f.x), data[T](f.freqs), f.rows, f.heads, f.dim)
	accGrad(f.x, dx)
	accGrad(f.freqs, df)
	return nil
}

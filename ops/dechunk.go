package ops

import (
	"fmt"

	"github.com/nlpodyssey/spago/ag"
	"github.com/nlpodyssey/spago/mat"
	"github.com/nlpodyssey/spago/mat/float"

	"github.com/dcdit/dcdit/kernels"
)

// DeChunk returns DC-DiT's de-chunk smoothing of packed kept tokens h
// [N, D] with boundary probabilities p (a vector of N elements), before
// plug-back (DeChunkLayer._smooth_spatial_kernel):
//
//	q_j = clamp(p_j, clamp, 1 − clamp)
//	W_ij = K_ij·q_j / (Σ_j' K_ij'·q_j' + 1e-8),  K_ij = exp(−‖pos_i − pos_j‖² / (2σ²))
//	y_i = q_i·h_i + (1 − q_i)·Σ_j W_ij·h_j
//
// where i and j range over the tokens of one sample (rows offsets[s] to
// offsets[s+1]−1) and pos[2i], pos[2i+1] are token i's grid row and column.
// Gradients flow to h and p (not through the clamp where it is active).
func DeChunk(h, p mat.Tensor, offsets []int, pos []float64, sigma, clamp float64) mat.Tensor {
	return node(newDeChunk(h, p, offsets, pos, sigma, clamp))
}

type deChunkSpec struct {
	h, p         mat.Tensor
	offsets      []int
	pos          []float64
	rows, cols   int
	sigma, clamp float64
}

type deChunk[T float.DType] struct {
	deChunkSpec
	q, z, s []T // saved by Forward
}

func newDeChunk(h, p mat.Tensor, offsets []int, pos []float64, sigma, clamp float64) ag.AutoGradFunction {
	colocate("DeChunk", &h, &p)
	rows, cols := dims("DeChunk", "h", h)
	needVector("DeChunk", "p", p, rows, " (the rows of h)")
	if len(pos) != 2*rows {
		panic(fmt.Sprintf("ops: DeChunk: pos has %d values, want 2·%d (row and column of each token)", len(pos), rows))
	}
	if !(sigma > 0) {
		panic(fmt.Sprintf("ops: DeChunk: sigma = %v, want > 0", sigma))
	}
	if !(clamp >= 0 && clamp < 0.5) {
		panic(fmt.Sprintf("ops: DeChunk: clamp = %v, want in [0, 0.5)", clamp))
	}
	s := deChunkSpec{h, p, copyOffsets("DeChunk", offsets, rows), append([]float64(nil), pos...), rows, cols, sigma, clamp}
	return pickOn("DeChunk", &deChunk[float32]{deChunkSpec: s}, &deChunk[float64]{deChunkSpec: s},
		&deChunkDevice{deChunk: deChunk[float32]{deChunkSpec: s}}, named{"h", h}, named{"p", p})
}

func (f *deChunk[T]) Operands() []mat.Tensor { return []mat.Tensor{f.h, f.p} }

func (f *deChunk[T]) Forward() (mat.Tensor, error) {
	y := make([]T, f.rows*f.cols)
	f.q, f.z, f.s = make([]T, f.rows), make([]T, f.rows), make([]T, f.rows*f.cols)
	ws := getBuffer[T](kernels.DeChunkScratch(f.offsets, f.cols))
	kernels.DeChunkForward(y, f.q, f.z, f.s, data[T](f.h), data[T](f.p), f.pos, f.offsets, f.rows, f.cols, f.sigma, f.clamp, 1-f.clamp, ws)
	putBuffer(ws)
	return newMatrix(f.rows, f.cols, y), nil
}

func (f *deChunk[T]) Backward(gy mat.Tensor) error {
	dh, dp := gradBuffer[T](f.h), gradBuffer[T](f.p)
	ws := getBuffer[T](kernels.DeChunkScratch(f.offsets, f.cols))
	kernels.DeChunkBackward(dh, dp, data[T](gy), data[T](f.h), data[T](f.p), f.q, f.z, f.s, f.pos, f.offsets, f.rows, f.cols, f.sigma, f.clamp, 1-f.clamp, ws)
	putBuffer(ws)
	accGrad(f.h, dh)
	accGrad(f.p, dp)
	return nil
}

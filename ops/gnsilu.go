package ops

import (
	"github.com/nlpodyssey/spago/ag"
	"github.com/nlpodyssey/spago/mat"
	"github.com/nlpodyssey/spago/mat/float"

	"github.com/dcdit/dcdit/kernels"
)

// GroupNormSiLU is SiLU(GroupNorm(x, w, b, batch, groups, eps)) in one op
// (kernels.GroupNormSiLUForward): the pre-activation of the conv blocks
// and of DC-DiT's router, without the normalised values as a separate
// tensor. Shapes and semantics are GroupNorm's.
func GroupNormSiLU(x, w, b mat.Tensor, batch, groups int, eps float64) mat.Tensor {
	// The shape checks and the spec are GroupNorm's.
	s := newGroupNorm(x, w, b, batch, groups, eps)
	var spec groupNormSpec
	switch g := s.(type) {
	case *groupNorm[float32]:
		spec = g.groupNormSpec
	case *groupNorm[float64]:
		spec = g.groupNormSpec
	case *groupNormDevice:
		spec = g.groupNormSpec
	}
	return run(pickOn("GroupNormSiLU", &groupNormSiLU[float32]{groupNormSpec: spec}, &groupNormSiLU[float64]{groupNormSpec: spec},
		&groupNormDevice{groupNorm: groupNorm[float32]{groupNormSpec: spec}, silu: true},
		named{"x", x}, named{"w", w}, named{"b", b}))
}

type groupNormSiLU[T float.DType] struct {
	groupNormSpec
	mean, rstd []T // per (sample, group), saved by Forward
}

var _ ag.AutoGradFunction = (*groupNormSiLU[float32])(nil)

func (f *groupNormSiLU[T]) Operands() []mat.Tensor { return []mat.Tensor{f.x, f.w, f.b} }

func (f *groupNormSiLU[T]) Forward() (mat.Tensor, error) {
	rows := f.batch * f.tokens
	y := make([]T, rows*f.channels)
	f.mean, f.rstd = make([]T, f.batch*f.groups), make([]T, f.batch*f.groups)
	kernels.GroupNormSiLUForward(y, f.mean, f.rstd, data[T](f.x), data[T](f.w), data[T](f.b),
		f.batch, f.tokens, f.channels, f.groups, T(f.eps))
	return newMatrix(rows, f.channels, y), nil
}

func (f *groupNormSiLU[T]) Backward(gy mat.Tensor) error {
	dx, dw, db := gradBuffer[T](f.x), gradBuffer[T](f.w), gradBuffer[T](f.b)
	kernels.GroupNormSiLUBackward(dx, dw, db, data[T](gy), data[T](f.x), f.mean, f.rstd, data[T](f.w), data[T](f.b),
		f.batch, f.tokens, f.channels, f.groups)
	accGrad(f.x, dx)
	accGrad(f.w, dw)
	accGrad(f.b, db)
	return nil
}

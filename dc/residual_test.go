package dc

import (
	"math/rand/v2"
	"testing"

	"github.com/nlpodyssey/spago/mat"

	"github.com/dcdit/dcdit/internal/fixtures"
	"github.com/dcdit/dcdit/ops"
)

// relativeResidual in inference, run on the dropped cells only, is
// residual_proj of every cell's encoding less its token cell's (what
// training runs), forward and backward; with every cell kept it is nothing
// at all.
func TestRelativeResidual(t *testing.T) {
	const n, d = 12, 5
	rng := rand.New(rand.NewPCG(4, 2))
	randn := func(k int) []float32 {
		v := make([]float32, k)
		for i := range v {
			v[i] = float32(rng.NormFloat64())
		}
		return v
	}
	tests := []struct {
		name      string
		tokenCell []int
	}{
		{"every cell kept", []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}},
		{"some dropped", []int{0, 0, 2, 2, 2, 5, 5, 7, 8, 8, 11, 11}},
		{"one kept per sample", []int{0, 0, 0, 0, 0, 0, 6, 6, 6, 6, 6, 6}},
	}
	encV, wV, gV := randn(n*d), randn(d*d), randn(n*d)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			run := func(f func(enc, w mat.Tensor) mat.Tensor) (out, dEnc, dW []float32) {
				enc, w := dense(n, d, append([]float32(nil), encV...), true), dense(d, d, append([]float32(nil), wV...), true)
				y := f(enc, w)
				if y == nil {
					return nil, nil, nil
				}
				if err := ops.Backward(ops.Sum(ops.Mul(y, dense(n, d, gV, false)))); err != nil {
					t.Fatal(err)
				}
				return values(y), mat.Data[float32](enc.Grad()), mat.Data[float32](w.Grad())
			}
			var ranInference, ranTraining int
			got, gotEnc, gotW := run(func(enc, w mat.Tensor) (y mat.Tensor) {
				y, ranInference = relativeResidual(enc, w, tt.tokenCell, true)
				return y
			})
			want, wantEnc, wantW := run(func(enc, w mat.Tensor) (y mat.Tensor) {
				y, ranTraining = relativeResidual(enc, w, tt.tokenCell, false)
				return y
			})
			dropped := 0
			for i, j := range tt.tokenCell {
				if i != j {
					dropped++
				}
			}
			if ranInference != dropped || ranTraining != n {
				t.Errorf("ran %d rows in inference and %d in training, want %d and %d", ranInference, ranTraining, dropped, n)
			}
			if tt.name == "every cell kept" {
				if got != nil {
					t.Fatalf("every cell kept: a residual of %d values, want none", len(got))
				}
				return
			}
			for _, c := range []struct {
				what      string
				got, want []float32
			}{{"residual", got, want}, {"enc gradient", gotEnc, wantEnc}, {"weight gradient", gotW, wantW}} {
				if e := fixtures.RelErr(c.got, c.want); !fixtures.Within(e, 1e-6) {
					t.Errorf("%s: rel err %g against residual_proj over every cell", c.what, e)
				}
			}
		})
	}
}

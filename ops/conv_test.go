package ops

import (
	"fmt"
	"testing"

	"github.com/nlpodyssey/spago/mat"
)

// convRef is a direct zero-padded 3×3 (or 1×1) convolution over
// token-major grids with PyTorch's weight layout.
func convRef(batch, height, width, cin, cout, k int, bias bool) func(x [][]float64) []float64 {
	return func(d [][]float64) []float64 {
		x, w := d[0], d[1]
		y := make([]float64, batch*height*width*cout)
		r := k / 2
		for b := range batch {
			for i := range height {
				for j := range width {
					for o := range cout {
						var s float64
						if bias {
							s = d[2][o]
						}
						for c := range cin {
							for di := -r; di <= r; di++ {
								for dj := -r; dj <= r; dj++ {
									ii, jj := i+di, j+dj
									if ii < 0 || jj < 0 || ii >= height || jj >= width {
										continue
									}
									s += x[(b*height*width+ii*width+jj)*cin+c] * w[((o*cin+c)*k+di+r)*k+dj+r]
								}
							}
						}
						y[(b*height*width+i*width+j)*cout+o] = s
					}
				}
			}
		}
		return y
	}
}

func TestConv(t *testing.T) {
	var cases []opCase
	for _, tc := range []struct {
		batch, height, width, cin, cout, k int
		bias                               bool
	}{
		{1, 1, 1, 1, 1, 3, true},
		{2, 3, 4, 2, 3, 3, true},
		{1, 5, 1, 3, 2, 3, false},
		{2, 2, 3, 4, 3, 1, true},
	} {
		tc := tc
		rows := tc.batch * tc.height * tc.width
		ins := []input{{name: "x", rows: rows, cols: tc.cin}, {name: "w", rows: tc.cout, cols: tc.cin * tc.k * tc.k}}
		if tc.bias {
			ins = append(ins, input{name: "b", rows: tc.cout, cols: 1})
		}
		cases = append(cases, opCase{
			name: fmt.Sprintf("%dx%dx%d/%d->%d/k=%d/bias=%v", tc.batch, tc.height, tc.width, tc.cin, tc.cout, tc.k, tc.bias),
			ins:  ins,
			build: func(x []mat.Tensor) mat.Tensor {
				var b mat.Tensor
				if tc.bias {
					b = x[2]
				}
				if tc.k == 1 {
					return Conv1x1(x[0], x[1], b)
				}
				return Conv3x3(x[0], x[1], b, tc.batch, tc.height, tc.width)
			},
			ref:   convRef(tc.batch, tc.height, tc.width, tc.cin, tc.cout, tc.k, tc.bias),
			shape: [2]int{rows, tc.cout},
		})
	}
	runOpCases(t, cases)
}

func TestConvPanics(t *testing.T) {
	x := mat.NewDense[float32](mat.WithShape(6, 2))
	mustPanic(t, func() { Conv3x3(x, mat.NewDense[float32](mat.WithShape(3, 18)), nil, 1, 2, 2) }, "ops: Conv3x3: x has 6 rows")
	mustPanic(t, func() { Conv3x3(x, mat.NewDense[float32](mat.WithShape(3, 9)), nil, 1, 2, 3) }, "ops: Conv3x3: w has shape [3 9], want [3 18]")
}

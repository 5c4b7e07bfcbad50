package dc_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/nlpodyssey/spago/mat"

	"github.com/dcdit/dcdit/cond"
	"github.com/dcdit/dcdit/dc"
	"github.com/dcdit/dcdit/upcycle"
)

// An encoder conv block whose conv2 is zero adds nothing to its input.
// Where it also trains nothing (frozen, or a Predict pass) its residual
// branch is left out: the prediction is bit for bit the one the full
// block gives, and the FLOPs as run drop the branch. While it trains, or
// once conv2 is not zero, it runs and is counted.
func TestIdleConvBranch(t *testing.T) {
	tests := []struct {
		name    string
		frozen  bool // the encoder tracks no gradient
		bias    bool // conv2's bias is not zero (one value of each block's)
		predict bool // Predict (no gradient asked) instead of Forward
		idle    bool
	}{
		{"frozen zero branch", true, false, false, true},
		{"trainable zero branch", false, false, false, false},
		{"trainable zero branch, predicting", false, false, true, true},
		{"frozen, conv2 bias not zero", true, true, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := scaffoldAround(t, randomDiT(t, 1, 3), func(s *upcycle.Scaffold) { s.RelativeResidual = true })
			cfg := m.Config
			// The final layer starts at zero; random, it shows what the
			// decoder reads.
			head := m.Params.Get("final_layer.linear.weight").Values()
			copy(head, randn(5, len(head)))
			for i := range cfg.EncoderBlocks {
				for _, name := range []string{"weight", "bias"} {
					clear(m.Params.Get(encoderTensor(i, "conv2."+name)).Values())
				}
				if tt.bias {
					m.Params.Get(encoderTensor(i, "conv2.bias")).Values()[1] = 0.5
				}
			}
			x := randn(4, 2*cfg.InChannels*cfg.Tokens())
			in := cond.Input{T: []float32{10, 600}, Labels: []int{1, 2}}
			frac := []float32{0, 0.5}

			// The full blocks: every tensor tracks a gradient.
			wantOut, full := predictWith(t, m, x, in, frac, false)
			if tt.frozen {
				for _, p := range m.Params.List() {
					if strings.HasPrefix(p.Name, "hnet.encoder.") {
						p.SetRequiresGrad(false)
					}
				}
			}
			got, res := predictWith(t, m, x, in, frac, tt.predict)
			if !slices.Equal(got, wantOut) {
				t.Errorf("the prediction differs from the full blocks'")
			}
			counted, err := m.ResultFLOPs(res)
			if err != nil {
				t.Fatal(err)
			}
			nominal := m.ForwardFLOPs(res.Chunks.NumKept)
			// A training forward runs the relative residual on every
			// cell, inference on the dropped ones (nominal).
			N, D := float64(2*cfg.Cells()), float64(cfg.ModelDim)
			trained := nominal
			trained.Residual = 2 * N * D * D
			fullCount, err := m.ResultFLOPs(full)
			if err != nil {
				t.Fatal(err)
			}
			if fullCount != trained {
				t.Errorf("the full blocks count %+v, want %+v", fullCount, trained)
			}
			want := trained
			if tt.predict {
				want = nominal
			}
			if tt.idle {
				// Only the last block's skip projection (E → D) runs.
				want.Encoder = 2 * N * float64(cfg.EncDecDim) * D
			}
			if counted != want {
				t.Errorf("counted %+v, want %+v", counted, want)
			}
		})
	}
}

// encoderTensor names a tensor of encoder conv block i.
func encoderTensor(i int, name string) string {
	return fmt.Sprintf("hnet.encoder.layers.%d.%s", i, name)
}

// predictWith runs m on latents x [B, C, H, W] by Predict, or by Forward
// (which keeps gradients' inputs), and returns the prediction, cell-major.
func predictWith(t *testing.T, m *dc.Model, x []float32, in cond.Input, frac []float32, predict bool) ([]float32, *dc.Result) {
	t.Helper()
	cfg := m.Config
	if predict {
		_, res, err := m.Predict(x, in, frac)
		if err != nil {
			t.Fatal(err)
		}
		return slices.Clone(mat.Data[float32](res.Out.Value())), res
	}
	c, err := m.Backbone.Condition(in)
	if err != nil {
		t.Fatal(err)
	}
	tokens := dc.ToTokens(x, in.Samples(), cfg.InChannels, cfg.GridRows, cfg.GridCols, cfg.Patch())
	res, err := m.Forward(mat.NewDense[float32](mat.WithShape(in.Samples()*cfg.Cells(), cfg.CellIn()), mat.WithBacking(tokens)), c, frac)
	if err != nil {
		t.Fatal(err)
	}
	return slices.Clone(mat.Data[float32](res.Out.Value())), res
}

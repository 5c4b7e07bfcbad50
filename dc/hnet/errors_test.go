package hnet

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/nlpodyssey/spago/mat"

	"github.com/dcdit/dcdit/cond"
	"github.com/dcdit/dcdit/dc"
	"github.com/dcdit/dcdit/internal/fixtures"
	"github.com/dcdit/dcdit/loaders"
)

func wantErr(t *testing.T, err error, parts ...string) {
	t.Helper()
	if err == nil {
		t.Errorf("no error, want one mentioning %q", parts)
		return
	}
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Errorf("error %q does not mention %q", err, p)
		}
	}
}

// Bad inputs and bad checkpoints are errors that name the problem.
func TestErrors(t *testing.T) {
	fixtures.Run(t, "dcdit-tiny", func(t *testing.T, c fixtures.Case) {
		m := loadFixture(t, c)
		cfg := m.Config
		L := cfg.Tokens()
		cv, err := m.Backbone.Condition(cond.Input{T: []float32{1, 2}, Labels: []int{0, 1}})
		if err != nil {
			t.Fatal(err)
		}
		x := mat.NewDense[float32](mat.WithShape(2*L, cfg.InChannels))
		_, err = m.Forward(mat.NewDense[float32](mat.WithShape(2*L+1, cfg.InChannels)), cv, nil)
		wantErr(t, err, "latents")
		_, err = m.Forward(x, cv, []float32{0.1, 0.2, 0.3})
		wantErr(t, err, "3 drop fractions for a batch of 2")
		_, err = m.Forward(x, cv, []float32{1})
		wantErr(t, err, "drop fraction")
		res, err := m.Forward(x, cv, nil)
		if err != nil {
			t.Fatal(err)
		}
		_, err = res.RatioLoss(4, 3)
		wantErr(t, err, "groups of 3")
		_, err = res.RatioLoss(1, 0)
		wantErr(t, err, "N = 1")
		_, err = m.Backbone.Condition(cond.Input{T: []float32{1}, Labels: []int{cfg.OutChannels + 1000}})
		wantErr(t, err, "label")
		_, _, err = LiteCFG(m, make([]float32, 3*cfg.InChannels*L), cond.Input{T: []float32{1, 2, 3}, Labels: []int{0, 1, 2}}, 1.5, 0, 0.5)
		wantErr(t, err, "even batch")

		ts, err := loaders.ReadSafetensors(filepath.Join(c.Dir, "weights.safetensors"))
		if err != nil {
			t.Fatal(err)
		}
		opts := LoadOptions{Heads: m.Backbone.(*Network).Config.Heads, Settings: dc.Settings{Sigma: 1, TargetN: 4}}
		ts["stray"] = dc.Tensor{Shape: []int{1}, Data: []float32{0}}
		_, err = FromTensors(ts, opts)
		wantErr(t, err, "unexpected", "stray")
		delete(ts, "stray")
		delete(ts, "hnet.decoder.layers.0.conv2.bias")
		_, err = FromTensors(ts, opts)
		wantErr(t, err, "missing hnet.decoder.layers.0.conv2.bias")
	})
}

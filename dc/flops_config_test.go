package dc

import (
	"errors"
	"testing"

	"github.com/nlpodyssey/spago/mat"

	"github.com/dcdit/dcdit/cond"
	"github.com/dcdit/dcdit/family"
	"github.com/dcdit/dcdit/params"
)

// countingBackbone is a Backbone that can be built around and counted:
// its cost is a fixed amount per sample plus per token.
type countingBackbone struct{ width int }

func (b countingBackbone) Width() int     { return b.width }
func (b countingBackbone) CondWidth() int { return b.width }
func (b countingBackbone) Condition(cond.Input) (cond.Value, error) {
	return nil, errors.New("not run")
}
func (b countingBackbone) Forward(mat.Tensor, cond.Value, []int, []float64) (mat.Tensor, error) {
	return nil, errors.New("not run")
}
func (b countingBackbone) Parameters() *params.Set     { return nil }
func (b countingBackbone) ParamGroups(string) []string { return nil }
func (b countingBackbone) Spec() family.Spec           { return nil }
func (b countingBackbone) FLOPs(lengths []int) float64 {
	var f float64
	for _, l := range lengths {
		f += 1000 + 7*float64(l)*float64(l)
	}
	return f
}

// ConfigFLOPs counts exactly what a built model's ForwardFLOPs counts, for
// several configurations and kept-token patterns, and counts the backbone
// as zero without a counter.
func TestConfigFLOPsMatchesModel(t *testing.T) {
	cfgs := []*Config{
		{InChannels: 4, OutChannels: 8, GridRows: 8, GridCols: 8, EncDecDim: 32, ModelDim: 64, CondDim: 64, RouterDim: 16,
			EncoderBlocks: 2, DecoderBlocks: 2, NormGroups: 8, RouterGroups: 8, Sigma: 1, TargetN: 4},
		{InChannels: 4, OutChannels: 4, GridRows: 6, GridCols: 10, EncDecDim: 16, ModelDim: 48, CondDim: 48, RouterDim: 24,
			EncoderBlocks: 1, DecoderBlocks: 3, NormGroups: 8, RouterGroups: 8, Sigma: 2, TargetN: 3},
	}
	for ci, cfg := range cfgs {
		ts := map[string]Tensor{}
		for name, shape := range ScaffoldShapes(cfg) {
			n := 1
			for _, d := range shape {
				n *= d
			}
			ts[name] = Tensor{Shape: shape, Data: make([]float32, n)}
		}
		bb := countingBackbone{width: cfg.ModelDim}
		m, err := New(cfg, ts, bb)
		if err != nil {
			t.Fatalf("config %d: %v", ci, err)
		}
		L := cfg.Tokens()
		for _, kept := range [][]int{{L}, {L / 4}, {L / 4, L / 8, 1}, {}} {
			want := m.ForwardFLOPs(kept)
			if got := ConfigFLOPs(cfg, bb, kept); got != want {
				t.Errorf("config %d, kept %v: ConfigFLOPs %+v, model %+v", ci, kept, got, want)
			}
			noBB := ConfigFLOPs(cfg, nil, kept)
			if noBB.Backbone != 0 || noBB.Total() != want.Total()-want.Backbone {
				t.Errorf("config %d, kept %v: without a counter %+v, want the model's %+v less the backbone", ci, kept, noBB, want)
			}
		}
	}
}

// The stand-in backbone refuses to run.
func TestConfigFLOPsBackboneDoesNotRun(t *testing.T) {
	var b Backbone = flopsOnly{}
	if _, err := b.Condition(cond.Input{}); err == nil {
		t.Error("Condition ran")
	}
	if _, err := b.Forward(nil, nil, nil, nil); err == nil {
		t.Error("Forward ran")
	}
}

// The token embedder costs one Linear from a cell's values to D per kept
// token, counted with the embedding; the dropped context a Linear D → E
// and a 3×3 convolution E → D over the grid, counted with the encoder;
// nothing else changes.
func TestScaffoldOptionFLOPs(t *testing.T) {
	base := Config{InChannels: 4, OutChannels: 8, GridRows: 8, GridCols: 8, PatchSize: 2, EncDecDim: 32, ModelDim: 64, CondDim: 64,
		RouterDim: 16, EncoderBlocks: 2, DecoderBlocks: 2, NormGroups: 8, RouterGroups: 8, Sigma: 1, TargetN: 4}
	cellIn, D, E, N := float64(base.CellIn()), float64(base.ModelDim), float64(base.EncDecDim), float64(base.Cells())
	for _, tt := range []struct {
		name string
		set  func(c *Config)
		part func(f FLOPs) float64
		want func(kept float64) float64 // per sample
	}{
		{"token embedder", func(c *Config) { c.TokenEmbedder = true }, func(f FLOPs) float64 { return f.Embed },
			func(kept float64) float64 { return 2 * kept * cellIn * D }},
		{"dropped context", func(c *Config) { c.DroppedContext = true }, func(f FLOPs) float64 { return f.Encoder },
			func(float64) float64 { return 2*N*D*E + 2*N*9*E*D }},
	} {
		with := base
		tt.set(&with)
		for _, kept := range [][]int{{16}, {5, 9}, {1}} {
			a, b := ConfigFLOPs(&base, countingBackbone{}, kept), ConfigFLOPs(&with, countingBackbone{}, kept)
			var want float64
			for _, k := range kept {
				want += tt.want(float64(k))
			}
			if got := tt.part(b) - tt.part(a); got != want {
				t.Errorf("%s, kept %v: adds %g FLOPs to its part, want %g", tt.name, kept, got, want)
			}
			if b.Total()-tt.part(b) != a.Total()-tt.part(a) {
				t.Errorf("%s, kept %v: changed other parts: %+v against %+v", tt.name, kept, b, a)
			}
		}
	}
}

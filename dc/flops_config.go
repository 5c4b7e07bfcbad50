package dc

import (
	"errors"

	"github.com/nlpodyssey/spago/mat"

	"github.com/dcdit/dcdit/cond"
	"github.com/dcdit/dcdit/family"
	"github.com/dcdit/dcdit/params"
)

// ConfigFLOPs counts one forward pass exactly as Model.ForwardFLOPs does,
// from the configuration alone: no weights are needed, so a recipe can be
// costed from checkpoint headers. backbone counts the conditioning and
// the transformer (nil counts them as zero); numKept holds each sample's
// kept tokens.
func ConfigFLOPs(c *Config, backbone BackboneFLOPs, numKept []int) FLOPs {
	return ConfigFLOPsIdle(c, backbone, numKept, nil)
}

// ConfigFLOPsIdle is ConfigFLOPs with the residual branch of conv block i
// (the encoder's blocks, then the decoder's) left out where idle[i], as
// Model.ResultFLOPs counts a pass that skipped it: what a caller that
// knows the branch stays zero and untrained (the weights cannot say)
// prices.
func ConfigFLOPsIdle(c *Config, backbone BackboneFLOPs, numKept []int, idle []bool) FLOPs {
	m := &Model{Config: c, Backbone: flopsOnly{backbone}}
	return m.forwardFLOPs(numKept, idle, -1)
}

// ConfigDenseFLOPs is the cost of Model.PredictDense on a batch of grids
// with the conv blocks idle where idle[i] says so, from a config alone.
func ConfigDenseFLOPs(c *Config, backbone BackboneFLOPs, batch int, idle []bool) FLOPs {
	m := &Model{Config: c, Backbone: flopsOnly{backbone}}
	return m.denseFLOPs(batch, idle)
}

// flopsOnly stands in for a backbone that is only counted, never run.
type flopsOnly struct{ counter BackboneFLOPs }

var errFLOPsOnly = errors.New("dc: a backbone given for counting FLOPs cannot run")

func (f flopsOnly) Width() int     { return 0 }
func (f flopsOnly) CondWidth() int { return 0 }
func (f flopsOnly) Condition(cond.Input) (cond.Value, error) {
	return nil, errFLOPsOnly
}
func (f flopsOnly) Forward(mat.Tensor, cond.Value, []int, []float64) (mat.Tensor, error) {
	return nil, errFLOPsOnly
}

func (f flopsOnly) Parameters() *params.Set     { return nil }
func (f flopsOnly) ParamGroups(string) []string { return nil }
func (f flopsOnly) Spec() family.Spec           { return nil }

// FLOPs delegates to the counter (zero without one).
func (f flopsOnly) FLOPs(lengths []int) float64 {
	if f.counter == nil {
		return 0
	}
	return f.counter.FLOPs(lengths)
}

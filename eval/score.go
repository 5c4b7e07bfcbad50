package eval

import (
	"errors"
	"fmt"

	"github.com/dcdit/dcdit/datasets"
	"github.com/dcdit/dcdit/dc"
)

// Score is a fixed-patch model scored on its own (ScoreTeacher): its
// samples as a distribution against the data's, with what it cost.
type Score struct {
	Quality
	// Tokens is the model's tokens per image; GFLOPsPerImage one sampling
	// step's forwards of one image (two when guided), as TeacherRow
	// counts them.
	Tokens         int     `json:"tokens"`
	GFLOPsPerImage float64 `json:"gflops_per_image"`
	// FeatureNet and DataFDFloor describe the data under the feature
	// network, as Report's do.
	FeatureNet  *FeatureNetStats `json:"feature_net"`
	DataFDFloor *float64         `json:"data_fd_floor"`
	Process     string           `json:"process"`
	NumSamples  int              `json:"num_samples"`
	Steps       int              `json:"steps"`
	CFG         float64          `json:"cfg"`
	Seed        uint64           `json:"seed"`
}

// ScoreTeacher draws opts.NumSamples samples from t alone as Run draws its
// teacher row's — the same conditions (labels 0, 1, 2, … in turn, or the
// data's first captions), noise, sampler and guidance at opts.CFG — and
// scores them with opts.Features (required) against the data samples of
// the same classes. With the same data and options its numbers are a DC
// evaluation's teacher row, bit for bit. Only NumSamples, Steps, CFG,
// Seed, DiffusionSteps, Features and Progress are read.
func ScoreTeacher(t Teacher, data *datasets.Set, opts Options) (*Score, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	if o.Features == nil {
		return nil, errors.New("eval: scoring a model on its own needs a feature network")
	}
	if o.NumSamples < 2 {
		return nil, fmt.Errorf("eval: %d samples: a Fréchet distance needs at least 2", o.NumSamples)
	}
	// The teacher's latents are the data's: the grid a DC model would
	// put on them is the data's too.
	cfg := &dc.Config{InChannels: data.C, OutChannels: t.outChannels(), GridRows: data.H, GridCols: data.W}
	if err := t.check(cfg, data); err != nil {
		return nil, err
	}
	if err := data.Validate(); err != nil {
		return nil, err
	}
	e := &evaluator{tc: t, o: o, data: data, cfg: cfg, L: cfg.Tokens(), total: o.Steps}
	e.n = cfg.InChannels * e.L
	e.r = &Report{}
	if e.train, e.sampler, _, err = t.processes(o); err != nil {
		return nil, err
	}
	if err := e.realStats(); err != nil {
		return nil, err
	}
	c, err := t.conditions(t.sampleKeys(o.NumSamples))
	if err != nil {
		return nil, err
	}
	samples, err := e.sample(t.model(c), o.CFG)
	if err != nil {
		return nil, err
	}
	q, err := e.scoreFeatures(samples)
	if err != nil {
		return nil, fmt.Errorf("eval: %w", err)
	}
	s := &Score{Quality: q, Tokens: t.tokens(), GFLOPsPerImage: t.forwardGFLOPs(), FeatureNet: e.r.FeatureNet, DataFDFloor: e.r.DataFDFloor,
		Process: t.process(), NumSamples: o.NumSamples, Steps: o.Steps, CFG: o.CFG, Seed: o.Seed}
	if t.guided(o.CFG) {
		s.GFLOPsPerImage *= 2
	}
	return s, nil
}

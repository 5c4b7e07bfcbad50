package evaluate

import (
	"github.com/dcdit/dcdit/eval"
	"github.com/dcdit/dcdit/sample"
)

// teaCache is --teacache's setting: the threshold, the teacher's and the
// DC model's calibrations, read from their sidecars.
func teaCache(opts *Options) (*eval.TeaCache, error) {
	teacher, err := sample.ReadTeaCacheFit(opts.Teacher)
	if err != nil {
		return nil, err
	}
	model, err := sample.ReadTeaCacheFit(opts.Checkpoint)
	if err != nil {
		return nil, err
	}
	return &eval.TeaCache{Threshold: opts.TeaCache, Teacher: teacher.Coefficients, Model: model.Coefficients}, nil
}

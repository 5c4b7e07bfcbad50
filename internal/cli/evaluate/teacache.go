package evaluate

import (
	"fmt"

	"github.com/dcdit/dcdit/eval"
	"github.com/dcdit/dcdit/gpu/accel"
	"github.com/dcdit/dcdit/internal/cli/cmdutil"
	"github.com/dcdit/dcdit/sample"
)

// teaCache is --teacache's sweep: the thresholds, the teacher's and the
// DC model's calibrations, read from their sidecars.
func teaCache(opts *Options) (*eval.TeaCache, error) {
	if opts.Device != "" && opts.Device != accel.CPU {
		return nil, &cmdutil.UsageError{Err: fmt.Errorf("--teacache runs on the CPU only for now (--device %s)", opts.Device)}
	}
	teacher, err := sample.ReadTeaCacheFit(opts.Teacher)
	if err != nil {
		return nil, err
	}
	model, err := sample.ReadTeaCacheFit(opts.Checkpoint)
	if err != nil {
		return nil, err
	}
	return &eval.TeaCache{Thresholds: opts.TeaCache, Teacher: teacher.Coefficients, Model: model.Coefficients}, nil
}

package eval

import (
	"testing"

	"github.com/dcdit/dcdit/dit"
	"github.com/dcdit/dcdit/sample"
)

// With TeaCache at threshold 0 the rows sample as without it (their
// FLOPs add only the cache's signal); a huge threshold skips the middle
// steps of the rows and of the teacher's extra row, which cost less.
func TestRunTeaCache(t *testing.T) {
	s := newSetup(t)
	opts := tinyOptions()
	opts.Steps = 4
	base, err := Run(s.m, TeacherOf(dit.Teacher{Model: s.teacher}, nil, 0), s.data, opts)
	if err != nil {
		t.Fatal(err)
	}
	identity := sample.Poly{1, 0}
	for _, tt := range []struct {
		threshold float64
		skips     bool
	}{{0, false}, {1e9, true}} {
		o := opts
		var calls, total int
		o.Progress = func(done, tot int) { calls, total = done, tot }
		o.TeaCache = &TeaCache{Threshold: tt.threshold, Teacher: identity, Model: identity}
		r, err := Run(s.m, TeacherOf(dit.Teacher{Model: s.teacher}, nil, 0), s.data, o)
		if err != nil {
			t.Fatal(err)
		}
		if calls != total {
			t.Errorf("threshold %v: progress reached %d of %d", tt.threshold, calls, total)
		}
		tr := r.TeacherTeaCache
		if tr == nil || tr.TeaCache == nil || (tr.TeaCache.SkippedSteps > 0) != tt.skips {
			t.Fatalf("threshold %v: teacher row %+v", tt.threshold, tr)
		}
		if cheaper := tr.GFLOPsPerImage < base.Teacher.GFLOPsPerImage; cheaper != tt.skips {
			t.Errorf("threshold %v: teacher %v GFLOPs/img with the cache, %v without", tt.threshold, tr.GFLOPsPerImage, base.Teacher.GFLOPsPerImage)
		}
		for i, row := range r.Rows {
			if row.TeaCache == nil || (row.TeaCache.SkippedSteps > 0) != tt.skips {
				t.Errorf("threshold %v, ρ %v: cache %+v", tt.threshold, row.Rho, row.TeaCache)
			}
			if cheaper := row.GFLOPsPerImage < base.Rows[i].GFLOPsPerImage; cheaper != tt.skips {
				t.Errorf("threshold %v, ρ %v: %v GFLOPs/img with the cache, %v without", tt.threshold, row.Rho, row.GFLOPsPerImage, base.Rows[i].GFLOPsPerImage)
			}
			if !tt.skips && row.SamplePSNR != base.Rows[i].SamplePSNR {
				t.Errorf("threshold 0, ρ %v: sample PSNR %v, without the cache %v", row.Rho, row.SamplePSNR, base.Rows[i].SamplePSNR)
			}
		}
	}
}

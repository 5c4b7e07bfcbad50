package eval

import (
	"bytes"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/dcdit/dcdit/dit"
	"github.com/dcdit/dcdit/sample"
)

// A TeaCache sweep leaves the uncached rows as they were and adds one run
// per threshold: at threshold 0 the teacher and every ρ sample as without
// the cache (their FLOPs add only the cache's signal); a huge threshold
// skips the middle steps, which cost less.
func TestRunTeaCache(t *testing.T) {
	s := newSetup(t)
	s.balance(t)
	opts := tinyOptions()
	opts.Steps = 4
	opts.Features = stubNet{c: s.m.Config.InChannels}
	teacher := TeacherOf(dit.Teacher{Model: s.teacher}, nil, 0)
	base, err := Run(s.m, teacher, s.data, opts)
	if err != nil {
		t.Fatal(err)
	}
	identity := sample.Poly{1, 0}
	thresholds := []float64{0, 1e9}
	o := opts
	var calls, total int
	o.Progress = func(done, tot int) { calls, total = done, tot }
	o.TeaCache = &TeaCache{Thresholds: thresholds, Teacher: identity, Model: identity}
	r, err := Run(s.m, teacher, s.data, o)
	if err != nil {
		t.Fatal(err)
	}
	if calls != total {
		t.Errorf("progress reached %d of %d", calls, total)
	}
	for i, row := range r.Rows {
		if row.SamplePSNR != base.Rows[i].SamplePSNR || row.GFLOPsPerImage != base.Rows[i].GFLOPsPerImage {
			t.Errorf("ρ %v: the uncached row changed with a sweep: %+v, without %+v", row.Rho, row, base.Rows[i])
		}
	}
	if len(r.TeaCache) != len(thresholds) {
		t.Fatalf("%d TeaCache runs, want %d", len(r.TeaCache), len(thresholds))
	}
	for k, run := range r.TeaCache {
		skips := thresholds[k] > 0
		if run.Threshold != thresholds[k] {
			t.Errorf("run %d: threshold %v, want %v", k, run.Threshold, thresholds[k])
		}
		tr := run.Teacher
		if (tr.TeaCache.SkippedSteps > 0) != skips || tr.Rho != nil {
			t.Errorf("threshold %v: teacher row %+v", run.Threshold, tr)
		}
		if cheaper := tr.GFLOPsPerImage < base.Teacher.GFLOPsPerImage; cheaper != skips {
			t.Errorf("threshold %v: teacher %v GFLOPs/img with the cache, %v without", run.Threshold, tr.GFLOPsPerImage, base.Teacher.GFLOPsPerImage)
		}
		if len(run.Rows) != len(base.Rows) {
			t.Fatalf("threshold %v: %d rows, want %d", run.Threshold, len(run.Rows), len(base.Rows))
		}
		for i, row := range run.Rows {
			if row.Rho == nil || *row.Rho != base.Rows[i].Rho || (row.TeaCache.SkippedSteps > 0) != skips {
				t.Errorf("threshold %v, row %d: ρ %v, cache %+v", run.Threshold, i, row.Rho, row.TeaCache)
			}
			if cheaper := row.GFLOPsPerImage < base.Rows[i].GFLOPsPerImage; cheaper != skips {
				t.Errorf("threshold %v, ρ %v: %v GFLOPs/img with the cache, %v without", run.Threshold, base.Rows[i].Rho, row.GFLOPsPerImage, base.Rows[i].GFLOPsPerImage)
			}
			if !skips && row.SamplePSNR != base.Rows[i].SamplePSNR {
				t.Errorf("threshold 0, ρ %v: sample PSNR %v, without the cache %v", base.Rows[i].Rho, row.SamplePSNR, base.Rows[i].SamplePSNR)
			}
		}
	}
	var table bytes.Buffer
	if err := r.WriteTable(&table); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(table.String(), "TeaCache") {
		t.Errorf("the table leaves out the sweep:\n%s", table.String())
	}
	if want := len(base.GridRows) + len(thresholds)*(1+len(opts.Rhos)); len(r.GridRows) != want {
		t.Errorf("%d grid rows, want %d: %q", len(r.GridRows), want, r.GridRows)
	}
	dir := t.TempDir()
	files, err := r.WriteFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(files, filepath.Join(dir, ParetoFile)) {
		t.Errorf("written %v, want the Pareto plot among them", files)
	}
	nan := math.NaN()
	r.TeaCache[1].Rows[0].FD = &nan
	if err := r.WriteParetoPNG(filepath.Join(dir, ParetoFile)); err == nil || !strings.Contains(err.Error(), "rho=") {
		t.Errorf("pareto plot of a NaN FD in the sweep: err = %v, want an error naming the point", err)
	}
}

package eval

import (
	"math"
	"strings"
	"testing"

	"github.com/dcdit/dcdit/dit"
)

// ScoreTeacher gives a DC evaluation's teacher row bit for bit, guided or
// not: the same samples, statistics, reference and cost.
func TestScoreTeacherIsRunsTeacherRow(t *testing.T) {
	s := newSetup(t)
	s.balance(t)
	for _, cfg := range []float64{1, 2.5} {
		opts := tinyOptions()
		opts.NumSamples, opts.GridSamples, opts.CFG = 4, 4, cfg
		opts.Features = stubNet{c: s.m.Config.InChannels}
		opts.NoRandomRouter = true
		r, err := Run(s.m, TeacherOf(dit.Teacher{Model: s.teacher}, nil, 0), s.data, opts)
		if err != nil {
			t.Fatal(err)
		}
		got, err := ScoreTeacher(TeacherOf(dit.Teacher{Model: s.teacher}, nil, 0), s.data, opts)
		if err != nil {
			t.Fatal(err)
		}
		want := r.Teacher
		same := func(a, b *float64) bool { return a != nil && b != nil && *a == *b && !math.IsNaN(*a) }
		if !same(got.FD, want.FD) || !same(got.ClassAccuracy, want.ClassAccuracy) || !same(got.RMS, want.RMS) {
			t.Errorf("cfg %v: FD %v, accuracy %v, RMS %v; the teacher row's %v, %v, %v", cfg, deref(got.FD), deref(got.ClassAccuracy), deref(got.RMS),
				deref(want.FD), deref(want.ClassAccuracy), deref(want.RMS))
		}
		if got.GFLOPsPerImage != want.GFLOPsPerImage || got.Tokens != want.Tokens || !same(got.DataFDFloor, r.DataFDFloor) || *got.FeatureNet != *r.FeatureNet {
			t.Errorf("cfg %v: %v GFLOPs, %d tokens, floor %v, net %+v; the run's %v, %d, %v, %+v", cfg, got.GFLOPsPerImage, got.Tokens, deref(got.DataFDFloor),
				*got.FeatureNet, want.GFLOPsPerImage, want.Tokens, deref(r.DataFDFloor), *r.FeatureNet)
		}
		if got.Process != ProcessDDPM || got.NumSamples != 4 || got.CFG != cfg {
			t.Errorf("cfg %v: recorded %q, %d samples, cfg %v", cfg, got.Process, got.NumSamples, got.CFG)
		}
	}
}

func deref(v *float64) any {
	if v == nil {
		return nil
	}
	return *v
}

func TestScoreTeacherRejects(t *testing.T) {
	s := newSetup(t)
	s.balance(t)
	teacher := TeacherOf(dit.Teacher{Model: s.teacher}, nil, 0)
	withNet := tinyOptions()
	withNet.Features = stubNet{c: s.m.Config.InChannels}
	tooMany := withNet
	tooMany.NumSamples, tooMany.GridSamples = 40, 4
	one := withNet
	one.NumSamples, one.GridSamples = 1, 1
	poisoned := withNet
	poisoned.Features = stubNet{c: s.m.Config.InChannels, poison: true}
	other := *s.data
	other.C = 3
	for _, c := range []struct {
		name string
		opts Options
		data bool
		want string
	}{
		{"no feature network", tinyOptions(), true, "needs a feature network"},
		{"one sample", one, true, "at least 2"},
		{"more samples than a class holds", tooMany, true, "samples of class"},
		{"NaN features", poisoned, true, "NaN"},
		{"other latents", withNet, false, "latents"},
	} {
		t.Run(c.name, func(t *testing.T) {
			data := s.data
			if !c.data {
				data = &other
			}
			_, err := ScoreTeacher(teacher, data, c.opts)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %v, want one saying %q", err, c.want)
			}
		})
	}
}

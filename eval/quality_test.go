package eval

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dcdit/dcdit/datasets/shapes"
	"github.com/dcdit/dcdit/dit"
	"github.com/dcdit/dcdit/eval/featnet"
)

// stubNet is a feature network with known features: per channel, the mean
// and the mean square of the latent (2·C features); it classifies by the
// sign of the first channel's mean. poison makes every feature NaN.
type stubNet struct {
	c      int
	poison bool
}

func (s stubNet) Dim() int { return 2 * s.c }

func (s stubNet) Features(x []float32, n, c, h, w int) ([]float64, error) {
	hw := h * w
	f := make([]float64, 0, n*2*c)
	for i := range n {
		for ch := range c {
			var m, sq float64
			for _, v := range x[(i*c+ch)*hw : (i*c+ch+1)*hw] {
				m += float64(v)
				sq += float64(v) * float64(v)
			}
			if s.poison {
				m = math.NaN()
			}
			f = append(f, m/float64(hw), sq/float64(hw))
		}
	}
	return f, nil
}

func (s stubNet) Classify(x []float32, n, c, h, w int) ([]int, error) {
	f, _ := s.Features(x, n, c, h, w)
	out := make([]int, n)
	for i := range n {
		if f[i*2*c] > 0 {
			out[i] = 1
		}
	}
	return out, nil
}

// balance replaces the data by class-balanced data: samples i and
// i + len(shapes.Classes) are both of class i, so the reference is the
// data's first NumSamples and the floor's second set the next NumSamples
// (for NumSamples up to the classes).
func (s *setup) balance(t *testing.T) {
	t.Helper()
	g, err := shapes.New(s.data.H, 3)
	if err != nil {
		t.Fatal(err)
	}
	if s.data, err = g.BalancedSet(2 * len(shapes.Classes)); err != nil {
		t.Fatal(err)
	}
}

// TestRunQuality: with a feature network every row, the teacher and the
// Lite-CFG pair carry a Fréchet distance and a class accuracy that are
// those of their samples against the data's first NumSamples samples; the
// floor compares two halves of the data; kept tokens are recorded per
// sampling step; pareto.png is written.
func TestRunQuality(t *testing.T) {
	s := newSetup(t)
	opts := smallOptions()
	opts.NumSamples, opts.GridSamples = 4, 4
	s.balance(t)
	net := stubNet{c: s.m.Config.InChannels}
	opts.Features = net
	r, err := Run(s.m, TeacherOf(dit.Teacher{Model: s.teacher}, nil, 0), s.data, opts)
	if err != nil {
		t.Fatal(err)
	}
	c, h, w := s.data.C, s.data.H, s.data.W
	n := c * h * w
	real := func(lo, hi int) featnet.Moments {
		f, _ := net.Features(s.data.Latents[lo*n:hi*n], hi-lo, c, h, w)
		m, err := featnet.Stats(f, hi-lo, net.Dim())
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	ref := real(0, opts.NumSamples)
	fdOf := func(samples []float32) float64 {
		f, _ := net.Features(samples, opts.NumSamples, c, h, w)
		m, err := featnet.Stats(f, opts.NumSamples, net.Dim())
		if err != nil {
			t.Fatal(err)
		}
		fd, err := featnet.Frechet(m, ref)
		if err != nil {
			t.Fatal(err)
		}
		return fd
	}
	check := func(name string, q Quality, samples []float32) {
		t.Helper()
		if q.FD == nil || q.ClassAccuracy == nil {
			t.Fatalf("%s: FD %v, class accuracy %v: want both", name, q.FD, q.ClassAccuracy)
		}
		if want := fdOf(samples); !(math.Abs(*q.FD-want) <= 1e-9*max(1, want)) {
			t.Errorf("%s: FD %v, want %v", name, *q.FD, want)
		}
		if !(*q.ClassAccuracy >= 0 && *q.ClassAccuracy <= 1) {
			t.Errorf("%s: class accuracy %v", name, *q.ClassAccuracy)
		}
		if want := rms(samples); q.RMS == nil || !(math.Abs(*q.RMS-want) <= 1e-12) {
			t.Errorf("%s: sample RMS %v, want %v", name, q.RMS, want)
		}
	}
	check("teacher", r.Teacher.Quality, r.pics.grid[0])
	for i, row := range r.Rows {
		check(r.GridRows[i+1], row.Quality, r.pics.grid[i+1])
		if len(row.KeptPerStep) != opts.Steps {
			t.Errorf("ρ %v: %d kept counts for %d steps", row.Rho, len(row.KeptPerStep), opts.Steps)
		}
		for _, k := range row.KeptPerStep {
			if !(k > 0 && k <= float64(r.Tokens)) {
				t.Errorf("ρ %v: %v kept tokens of %d at a step", row.Rho, k, r.Tokens)
			}
		}
	}
	check("lite", r.LiteCFG.Quality, r.pics.grid[len(r.pics.grid)-1])
	if len(r.SamplingTimesteps) != opts.Steps || r.SamplingTimesteps[0] <= r.SamplingTimesteps[opts.Steps-1] {
		t.Errorf("sampling timesteps %v: want %d, noisiest first", r.SamplingTimesteps, opts.Steps)
	}

	// The second set: the first samples after the reference whose classes
	// are 0 … NumSamples−1, i.e. indices 10 … 10+NumSamples−1.
	half, second := opts.NumSamples, len(shapes.Classes)
	wantFloor, err := featnet.Frechet(ref, real(second, second+half))
	if err != nil {
		t.Fatal(err)
	}
	if r.DataFDFloor == nil || !(math.Abs(*r.DataFDFloor-wantFloor) <= 1e-9*max(1, wantFloor)) {
		t.Errorf("data FD floor %v, want %v", r.DataFDFloor, wantFloor)
	}
	if r.FeatureNet == nil || r.FeatureNet.FloorSamples != half || !(r.FeatureNet.Accuracy >= 0 && r.FeatureNet.Accuracy <= 1) {
		t.Errorf("feature net stats %+v, want a floor over halves of %d", r.FeatureNet, half)
	}

	dir := t.TempDir()
	files, err := r.WriteFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, ParetoFile)
	if !strings.Contains(strings.Join(files, " "), path) {
		t.Errorf("written %v, want %s among them", files, path)
	}
	decodePNG(t, path)
}

// TestRunQualityRejectsNaNFeatures: a Fréchet distance that meets NaN is
// an error, not a number.
func TestRunQualityRejectsNaNFeatures(t *testing.T) {
	s := newSetup(t)
	opts := tinyOptions()
	opts.Features = stubNet{c: s.m.Config.InChannels, poison: true}
	if _, err := Run(s.m, TeacherOf(dit.Teacher{Model: s.teacher}, nil, 0), s.data, opts); err == nil {
		t.Fatal("NaN features gave a report, want an error")
	}
}

// TestParetoNeedsFD: without a feature network there is nothing to plot,
// and WriteFiles leaves pareto.png out.
func TestParetoNeedsFD(t *testing.T) {
	s := newSetup(t)
	r, err := Run(s.m, TeacherOf(dit.Teacher{Model: s.teacher}, nil, 0), s.data, tinyOptions())
	if err != nil {
		t.Fatal(err)
	}
	if err := r.WriteParetoPNG(filepath.Join(t.TempDir(), ParetoFile)); err == nil {
		t.Error("pareto plot without Fréchet distances: no error")
	}
	dir := t.TempDir()
	if _, err := r.WriteFiles(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, ParetoFile)); !os.IsNotExist(err) {
		t.Errorf("pareto.png written without Fréchet distances (stat: %v)", err)
	}
}

// TestBalancedReferenceNeedsEveryClass: data without enough samples of a
// class the rows are drawn for cannot be the Fréchet distance's
// reference, and the error says which class.
func TestBalancedReferenceNeedsEveryClass(t *testing.T) {
	s := newSetup(t)
	opts := tinyOptions()
	opts.NumSamples = 3
	opts.Features = stubNet{c: s.m.Config.InChannels}
	for i := range s.data.Labels {
		if s.data.Labels[i] == 1 {
			s.data.Labels[i] = 0
		}
	}
	_, err := Run(s.m, TeacherOf(dit.Teacher{Model: s.teacher}, nil, 0), s.data, opts)
	if err == nil || !strings.Contains(err.Error(), "class 1") {
		t.Fatalf("err = %v, want the missing class 1 named", err)
	}
}

package eval

import (
	"math"
	"strings"
	"testing"

	"github.com/dcdit/dcdit/datasets"
	"github.com/dcdit/dcdit/datasets/shapes"
	"github.com/dcdit/dcdit/internal/zimagetest"
	"github.com/dcdit/dcdit/zimage"
)

// A DC model grafted onto a Z-Image, its router keeping every cell, is the
// Z-Image: measured against it on captioned shapes with flow matching, its
// held-out predictions and its samples (unguided and guided, Lite-CFG
// too) are the teacher's, and every row carries FD, class accuracy and
// prompt following. The evaluation conditions, noises, samples and guides
// both models alike.
func TestRunZImage(t *testing.T) {
	const seed, S = 4, 8
	zm, m := zimagetest.Grafted(t, seed, S)
	zimagetest.KeepAll(m)
	zc := zm.Config
	g, err := shapes.New(S, 3)
	if err != nil {
		t.Fatal(err)
	}
	data, err := g.BalancedCaptionedSet(2 * len(shapes.Classes))
	if err != nil {
		t.Fatal(err)
	}
	table := shapes.EmbeddingTable(zc.CapFeatDim, 1)
	for _, cfg := range []float64{0, 3} {
		opts := tinyOptions()
		opts.Rhos, opts.CFG, opts.Steps, opts.NumSamples = []float64{0}, cfg, 4, len(shapes.Classes)
		opts.Lite = &Lite{Cond: 0, Uncond: 0, Scale: 2}
		opts.Features = stubNet{c: zc.InChannels}
		r, err := Run(m, TeacherOf(zimage.Teacher{Model: zm, CaptionLen: shapes.MaxCaptionWords}, table, 3), data, opts)
		if err != nil {
			t.Fatal(err)
		}
		if r.Process != ProcessFlowMatching || len(r.PerTimestep) != 0 || len(r.SamplingTimesteps) != opts.Steps {
			t.Fatalf("cfg %g: process %q, %d probe rows, sampling timesteps %v", cfg, r.Process, len(r.PerTimestep), r.SamplingTimesteps)
		}
		row := r.Rows[0]
		if row.KeptTokens != float64(m.Config.Cells()) {
			t.Fatalf("cfg %g: kept %g of %d cells, want all", cfg, row.KeptTokens, m.Config.Cells())
		}
		for name, q := range map[string]struct {
			mse, psnr float64
			qual      Quality
		}{"row": {row.EpsRelMSE, row.SamplePSNR, row.Quality}, "Lite-CFG": {r.LiteCFG.EpsRelMSE, r.LiteCFG.SamplePSNR, r.LiteCFG.Quality}} {
			if !(q.mse < 1e-9) || !(q.psnr > 80) {
				t.Errorf("cfg %g, %s: rel MSE %g, sample PSNR %g dB against the teacher it is", cfg, name, q.mse, q.psnr)
			}
			if q.qual.PromptFollowing == nil || !(*q.qual.PromptFollowing >= 0 && *q.qual.PromptFollowing <= 1) || q.qual.FD == nil || math.IsNaN(*q.qual.FD) {
				t.Errorf("cfg %g, %s: quality %+v, want FD and prompt following", cfg, name, q.qual)
			}
		}
		if r.Teacher.PromptFollowing == nil || r.Teacher.FD == nil || !(math.Abs(*row.FD-*r.Teacher.FD) <= 1e-3*(1+*r.Teacher.FD)) {
			t.Errorf("cfg %g: FD %v against the teacher's %v, want the same", cfg, *row.FD, optional(r.Teacher.FD, "%g"))
		}
		if !(r.Teacher.GFLOPsPerImage > 0 && row.GFLOPsPerImage > 0) {
			t.Errorf("cfg %g: GFLOPs per image %g, teacher %g", cfg, row.GFLOPsPerImage, r.Teacher.GFLOPsPerImage)
		}
	}
	// More samples per row than captions to draw them for: a named error.
	opts := tinyOptions()
	opts.NumSamples, opts.GridSamples = data.N+1, 1
	if _, err := Run(m, TeacherOf(zimage.Teacher{Model: zm, CaptionLen: shapes.MaxCaptionWords}, table, 3), data, opts); err == nil || !strings.Contains(err.Error(), "samples per row") {
		t.Errorf("err = %v, want the sample count refused", err)
	}
}

// Captions given as encoded prompts (each sample's feature rows, the
// empty prompt's for the unconditional branch) condition both models as
// the same captions read through a word table do: every row's numbers
// match the table run's, and prompt following, which reads the words, is
// left out. Data without what the prompt teacher reads is refused.
func TestRunZImagePrompts(t *testing.T) {
	const seed, S = 4, 8
	zm, m := zimagetest.Grafted(t, seed, S)
	dim := zm.Config.CapFeatDim
	g, err := shapes.New(S, 3)
	if err != nil {
		t.Fatal(err)
	}
	words, err := g.BalancedCaptionedSet(2 * len(shapes.Classes))
	if err != nil {
		t.Fatal(err)
	}
	table := shapes.EmbeddingTable(dim, 1)
	feats, err := shapes.CaptionFeatures(words.Captions, table, dim)
	if err != nil {
		t.Fatal(err)
	}
	prompts := *words
	// The same computation either way: equal up to the sums' rounding.
	same := func(a, b float64) bool { return math.Abs(a-b) <= 1e-9*(1+math.Abs(b)) }
	prompts.Captions, prompts.Vocabulary = nil, nil
	prompts.CaptionFeats, prompts.CaptionDim, prompts.EmptyCaptionFeats = feats, dim, make([]float32, dim)
	for _, cfg := range []float64{0, 3} {
		opts := tinyOptions()
		opts.CFG, opts.Steps, opts.NumSamples = cfg, 3, len(shapes.Classes)
		opts.Features = stubNet{c: zm.Config.InChannels}
		want, err := Run(m, TeacherOf(zimage.Teacher{Model: zm, CaptionLen: shapes.MaxCaptionWords}, table, 3), words, opts)
		if err != nil {
			t.Fatal(err)
		}
		got, err := Run(m, TeacherOf(zimage.Teacher{Model: zm, CaptionLen: shapes.MaxCaptionWords}, nil, 3), &prompts, opts)
		if err != nil {
			t.Fatal(err)
		}
		if len(got.Rows) != len(want.Rows) {
			t.Fatalf("cfg %g: %d rows, want %d", cfg, len(got.Rows), len(want.Rows))
		}
		for i, w := range want.Rows {
			r := got.Rows[i]
			if r.KeptTokens != w.KeptTokens || r.GFLOPsPerImage != w.GFLOPsPerImage || !same(r.EpsRelMSE, w.EpsRelMSE) ||
				!same(r.SamplePSNR, w.SamplePSNR) || r.FD == nil || w.FD == nil || !same(*r.FD, *w.FD) {
				t.Errorf("cfg %g, ρ %g: kept %g, %g GFLOPs, rel MSE %g, PSNR %g dB, FD %v; the word table's run: %g, %g, %g, %g, %v",
					cfg, r.Rho, r.KeptTokens, r.GFLOPsPerImage, r.EpsRelMSE, r.SamplePSNR, optional(r.FD, "%g"),
					w.KeptTokens, w.GFLOPsPerImage, w.EpsRelMSE, w.SamplePSNR, optional(w.FD, "%g"))
			}
			if r.PromptFollowing != nil || w.PromptFollowing == nil {
				t.Errorf("cfg %g, ρ %g: prompt following %v (the table's run %v), want it only for words", cfg, r.Rho, optional(r.PromptFollowing, "%g"), optional(w.PromptFollowing, "%g"))
			}
		}
	}
	for _, tt := range []struct {
		name string
		edit func(s *datasets.Set)
		want string
	}{
		{"words, not features", func(s *datasets.Set) { *s = *words }, "encoded captions"},
		{"another width", func(s *datasets.Set) {
			s.CaptionDim = 2 * dim
			s.EmptyCaptionFeats = make([]float32, 2*dim)
		}, "wide"},
		{"no empty prompt", func(s *datasets.Set) { s.EmptyCaptionFeats = nil }, "empty prompt"},
	} {
		s := prompts
		tt.edit(&s)
		if _, err := Run(m, TeacherOf(zimage.Teacher{Model: zm, CaptionLen: 0}, nil, 3), &s, tinyOptions()); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: err = %v, want one saying %q", tt.name, err, tt.want)
		}
	}
}

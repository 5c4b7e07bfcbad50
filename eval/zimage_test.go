package eval

import (
	"math"
	"strings"
	"testing"

	"github.com/dcdit/dcdit/datasets/shapes"
	"github.com/dcdit/dcdit/internal/zimagetest"
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
		r, err := Run(m, ZImageTeacher(zm, table, 3, shapes.MaxCaptionWords), data, opts)
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
		if r.Teacher.GFLOPsPerImage <= 0 || row.GFLOPsPerImage <= 0 {
			t.Errorf("cfg %g: GFLOPs per image %g, teacher %g", cfg, row.GFLOPsPerImage, r.Teacher.GFLOPsPerImage)
		}
	}
	// More samples per row than captions to draw them for: a named error.
	opts := tinyOptions()
	opts.NumSamples, opts.GridSamples = data.N+1, 1
	if _, err := Run(m, ZImageTeacher(zm, table, 3, shapes.MaxCaptionWords), data, opts); err == nil || !strings.Contains(err.Error(), "samples per row") {
		t.Errorf("err = %v, want the sample count refused", err)
	}
}

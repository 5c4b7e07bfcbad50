package eval

import (
	"bytes"
	"encoding/json"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/dcdit/dcdit/datasets"
	"github.com/dcdit/dcdit/datasets/shapes"
	"github.com/dcdit/dcdit/dc"
	"github.com/dcdit/dcdit/dc/hnet"
	"github.com/dcdit/dcdit/dit"
	"github.com/dcdit/dcdit/internal/dctest"
	"github.com/dcdit/dcdit/internal/testckpt"
	"github.com/dcdit/dcdit/loaders/arch"
)

// teacherConfig is a small DiT/2 for the DC model's latents: its grid,
// channels, classes and learned sigma, read from the fixture's model.
func teacherConfig(m *dc.Model) *arch.DiTConfig {
	c := m.Config
	net := m.Backbone.Spec().Settings()
	return &arch.DiTConfig{Depth: 2, HiddenSize: 64, NumHeads: 4, PatchSize: 2, InChannels: c.InChannels, InputSize: c.GridRows,
		LearnSigma: c.OutChannels == 2*c.InChannels, NumClasses: net.(*hnet.Config).NumClasses, MLPRatio: 2, FrequencySize: 256}
}

type setup struct {
	m       *dc.Model
	teacher *dit.Model
	data    *datasets.Set
}

func newSetup(t *testing.T) setup {
	t.Helper()
	m, _ := dctest.Model(t, dctest.Cases(t)[0])
	if m.Config.InChannels != shapes.Channels {
		t.Fatalf("the fixture model takes %d channels; the shapes data set has %d", m.Config.InChannels, shapes.Channels)
	}
	g, err := shapes.New(m.Config.GridRows, 3)
	if err != nil {
		t.Fatal(err)
	}
	data, err := g.Set(12)
	if err != nil {
		t.Fatal(err)
	}
	return setup{m: m, teacher: testckpt.RandomDiT(t, teacherConfig(m)), data: data}
}

func smallOptions() Options {
	return Options{
		Rhos: []float64{0, 0.3, 0.6}, Lite: &Lite{Cond: 0, Uncond: 0.9, Scale: 1.5},
		NumInputs: 8, NumSamples: 3, Steps: 3, BatchSize: 2, Seed: 5, NumBoundary: 3,
		EdgeTimesteps: []int{100, 300}, BoundaryTimesteps: []int{100, 500, 900},
	}
}

// tinyOptions is the least work that exercises every part.
func tinyOptions() Options {
	return Options{Rhos: []float64{0, 0.5}, NumInputs: 4, NumSamples: 2, Steps: 2, BatchSize: 4, Seed: 5, NumBoundary: 1,
		EdgeTimesteps: []int{200}, BoundaryTimesteps: []int{500}}
}

func TestRun(t *testing.T) {
	s := newSetup(t)
	opts := smallOptions()
	var calls, total int
	opts.Progress = func(done, tot int) { calls, total = done, tot }
	r, err := Run(s.m, TeacherOf(dit.Teacher{Model: s.teacher}, nil, 0), s.data, opts)
	if err != nil {
		t.Fatal(err)
	}
	if calls != total || total == 0 {
		t.Errorf("progress reached %d of %d", calls, total)
	}
	if len(r.Rows) != 3 {
		t.Fatalf("%d rows, want 3", len(r.Rows))
	}
	L := float64(s.m.Config.Tokens())
	for i, row := range r.Rows {
		t.Logf("%+v", row)
		if math.IsNaN(row.SamplePSNR) || math.IsInf(row.SamplePSNR, 0) {
			t.Errorf("ρ %v: PSNR %v", row.Rho, row.SamplePSNR)
		}
		if row.Rho != opts.Rhos[i] {
			t.Errorf("row %d: ρ %v, want %v", i, row.Rho, opts.Rhos[i])
		}
		if !(row.KeptTokens > 0 && row.KeptTokens <= L) {
			t.Errorf("ρ %v: %v kept tokens of %v", row.Rho, row.KeptTokens, L)
		}
		for name, v := range map[string]float64{"gflops": row.GFLOPsPerImage, "ms": row.MsPerImage, "eps": row.EpsRelMSE} {
			if math.IsInf(v, 0) || !(v >= 0) {
				t.Errorf("ρ %v: %s = %v", row.Rho, name, v)
			}
		}
		// A random model's samples can be far off (negative PSNR).
		if !(row.SamplePSNR < MaxPSNR) || row.EpsRelMSE == 0 {
			t.Errorf("ρ %v: PSNR %v, ε MSE %v: the random teacher and model cannot agree", row.Rho, row.SamplePSNR, row.EpsRelMSE)
		}
		if i > 0 {
			prev := r.Rows[i-1]
			if !(row.KeptTokens < prev.KeptTokens && row.GFLOPsPerImage < prev.GFLOPsPerImage) {
				t.Errorf("ρ %v keeps %v tokens at %v GFLOPs, ρ %v kept %v at %v: want strictly fewer", row.Rho, row.KeptTokens, row.GFLOPsPerImage, prev.Rho, prev.KeptTokens, prev.GFLOPsPerImage)
			}
		}
	}
	// ρ = 0's FLOPs are the sampling run's: dc.ForwardFLOPs at each step's
	// mean kept count, averaged over the steps (exact for the linear parts;
	// attention and de-chunk are quadratic, so the mean of per-image costs
	// is at least the cost at the mean).
	var atMean float64
	for _, k := range r.Rows[0].KeptPerStep {
		atMean += s.m.ForwardFLOPs([]int{int(math.Round(k))}).Total() / 1e9 / float64(len(r.Rows[0].KeptPerStep))
	}
	if rel := math.Abs(r.Rows[0].GFLOPsPerImage-atMean) / atMean; !(rel <= 0.05) {
		t.Errorf("ρ 0: %v GFLOPs per image, %v at the mean kept count", r.Rows[0].GFLOPsPerImage, atMean)
	}
	if r.Teacher.Tokens != 64 || !(r.Teacher.GFLOPsPerImage > 0) {
		t.Errorf("teacher row %+v", r.Teacher)
	}
	l := r.LiteCFG
	if l == nil {
		t.Fatal("no Lite-CFG row")
	}
	t.Logf("lite %+v", *l)
	if !(l.KeptTokensUncond < l.KeptTokensCond) || !(l.EpsRelMSE > 0) || l.TeacherGFLOPsPerImage != 2*r.Teacher.GFLOPsPerImage {
		t.Errorf("Lite-CFG row %+v", *l)
	}
	// Both branches: more than one ρ = 0 forward, less than two.
	if !(l.GFLOPsPerImage > r.Rows[0].GFLOPsPerImage && l.GFLOPsPerImage < 2*r.Rows[0].GFLOPsPerImage) {
		t.Errorf("Lite-CFG costs %v GFLOPs, ρ = 0 %v", l.GFLOPsPerImage, r.Rows[0].GFLOPsPerImage)
	}
	if r.EdgeDensityRatio == nil || r.Edges == nil || r.Edges.EdgeCells+r.Edges.FlatCells != 2*8*(256-2) {
		t.Errorf("edges %+v, ratio %v", r.Edges, r.EdgeDensityRatio)
	} else if want := r.Edges.EdgeKeptFraction / r.Edges.FlatKeptFraction; *r.EdgeDensityRatio != want {
		t.Errorf("ratio %v, want %v", *r.EdgeDensityRatio, want)
	}
	if want := []string{"teacher", "rho=0", "rho=0.3", "rho=0.6", "teacher cfg=1.5", "lite cfg=1.5 rho=0/0.9"}; !slices.Equal(r.GridRows, want) {
		t.Errorf("grid rows %q, want %q", r.GridRows, want)
	}
	dir := t.TempDir()
	tile := 16 * CellPixels
	size := func(rows, cols int) (int, int) { return cols*tile + (cols+1)*gap, rows*tile + (rows+1)*gap }
	cases := []struct {
		name       string
		write      func(string) error
		rows, cols int
	}{
		{"boundaries.png", r.WriteBoundaryPNG, opts.NumBoundary, 1 + len(opts.BoundaryTimesteps)},
		{"trajectory.png", r.WriteTrajectoryPNG, opts.NumSamples, opts.Steps},
		{"elastic_grid.png", r.WriteElasticGridPNG, len(r.GridRows), opts.NumSamples},
	}
	for _, c := range cases {
		path := filepath.Join(dir, c.name)
		if err := c.write(path); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := png.DecodeConfig(f)
		f.Close()
		w, h := size(c.rows, c.cols)
		if err != nil || cfg.Width != w || cfg.Height != h {
			t.Errorf("%s: %dx%d (%v), want %dx%d", c.name, cfg.Width, cfg.Height, err, w, h)
		}
	}
	if err := (&Report{}).WriteBoundaryPNG(filepath.Join(dir, "x.png")); err == nil {
		t.Error("an empty report drew a boundary map")
	}

	var table bytes.Buffer
	if err := r.WriteTable(&table); err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + table.String())
	for _, want := range []string{"kept tokens", "0.3", "teacher", "Lite-CFG", "edge density ratio"} {
		if !strings.Contains(table.String(), want) {
			t.Errorf("table lacks %q", want)
		}
	}
}

// TestJSONShape: eval.json's schema, key for key.
func TestJSONShape(t *testing.T) {
	s := newSetup(t)
	opts := tinyOptions()
	r, err := Run(s.m, TeacherOf(dit.Teacher{Model: s.teacher}, nil, 0), s.data, opts)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil {
		t.Fatal(err)
	}
	if _, ok := obj["lite_cfg"]; ok {
		t.Error("lite_cfg present without a Lite-CFG pair")
	}
	var ratio *float64
	if err := json.Unmarshal(obj["edge_density_ratio"], &ratio); err != nil || ratio == nil {
		t.Errorf("edge_density_ratio %s (%v)", obj["edge_density_ratio"], err)
	}
	var rows []map[string]any
	if err := json.Unmarshal(obj["rows"], &rows); err != nil {
		t.Fatal(err)
	}
	// Without a feature network fd and class_accuracy are null, and so
	// are the random router's; kept_per_step is a list of numbers, one
	// per sampling step.
	want := []string{"accuracy_random_router", "class_accuracy", "eps_rel_mse", "fd", "fd_random_router", "gflops_per_image", "kept_per_step", "kept_tokens",
		"ms_per_image", "rho", "sample_psnr_db", "sample_rms"}
	for _, row := range rows {
		var keys []string
		for k, v := range row {
			keys = append(keys, k)
			switch k {
			case "fd", "class_accuracy", "sample_rms", "fd_random_router", "accuracy_random_router":
				if v != nil {
					t.Errorf("%s = %v without a feature network, want null", k, v)
				}
			case "kept_per_step":
				steps, ok := v.([]any)
				if !ok || len(steps) != opts.Steps {
					t.Errorf("%s = %v, want %d numbers", k, v, opts.Steps)
				}
			default:
				if _, ok := v.(float64); !ok {
					t.Errorf("%s = %v, want a number", k, v)
				}
			}
		}
		slices.Sort(keys)
		if !slices.Equal(keys, want) {
			t.Errorf("row keys %v, want %v", keys, want)
		}
	}
	if len(rows) != 2 {
		t.Errorf("%d rows, want 2", len(rows))
	}

	// Without edge masks they are derived from the latents, which for
	// shapes gives the same masks and so the same ratio.
	s.data.Edges = nil
	d, err := Run(s.m, TeacherOf(dit.Teacher{Model: s.teacher}, nil, 0), s.data, opts)
	if err != nil {
		t.Fatal(err)
	}
	if d.Edges == nil || !d.Edges.Derived || r.Edges.Derived || d.EdgeDensityRatio == nil || *d.EdgeDensityRatio != *r.EdgeDensityRatio {
		t.Errorf("derived edges %+v ratio %v; from the data %+v ratio %v", d.Edges, d.EdgeDensityRatio, r.Edges, r.EdgeDensityRatio)
	}
}

// TestDeterministic: everything but the wall time is a function of the
// inputs and the seed, whatever the batch size.
func TestDeterministic(t *testing.T) {
	s := newSetup(t)
	opts := tinyOptions()
	opts.BatchSize = 2
	a, err := Run(s.m, TeacherOf(dit.Teacher{Model: s.teacher}, nil, 0), s.data, opts)
	if err != nil {
		t.Fatal(err)
	}
	opts.BatchSize = 16
	b, err := Run(s.m, TeacherOf(dit.Teacher{Model: s.teacher}, nil, 0), s.data, opts)
	if err != nil {
		t.Fatal(err)
	}
	for i := range a.Rows {
		x, y := a.Rows[i], b.Rows[i]
		if x.KeptTokens != y.KeptTokens || x.GFLOPsPerImage != y.GFLOPsPerImage {
			t.Errorf("ρ %v: kept %v vs %v, GFLOPs %v vs %v", x.Rho, x.KeptTokens, y.KeptTokens, x.GFLOPsPerImage, y.GFLOPsPerImage)
		}
		if !(math.Abs(x.EpsRelMSE-y.EpsRelMSE) <= 1e-4*x.EpsRelMSE) || !(math.Abs(x.SamplePSNR-y.SamplePSNR) <= 1e-2) {
			t.Errorf("ρ %v: ε MSE %v vs %v, PSNR %v vs %v", x.Rho, x.EpsRelMSE, y.EpsRelMSE, x.SamplePSNR, y.SamplePSNR)
		}
	}
	if *a.EdgeDensityRatio != *b.EdgeDensityRatio {
		t.Errorf("edge density ratio %v vs %v", *a.EdgeDensityRatio, *b.EdgeDensityRatio)
	}
	opts.Seed++
	c, err := Run(s.m, TeacherOf(dit.Teacher{Model: s.teacher}, nil, 0), s.data, opts)
	if err != nil {
		t.Fatal(err)
	}
	if c.Rows[0].SamplePSNR == a.Rows[0].SamplePSNR {
		t.Error("another seed gave the same samples")
	}
}

func TestRunRejects(t *testing.T) {
	s := newSetup(t)
	small, _ := shapes.New(8, 0)
	smallData, _ := small.Set(4)
	otherCfg := teacherConfig(s.m)
	otherCfg.InputSize = 8
	other := testckpt.RandomDiT(t, otherCfg)
	eps := teacherConfig(s.m)
	eps.LearnSigma = false
	epsOnly := testckpt.RandomDiT(t, eps)
	untrained, err := dit.Init(teacherConfig(s.m), 7)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name    string
		edit    func(*Options)
		teacher *dit.Model
		data    *datasets.Set
		want    string
	}{
		{"rho 1", func(o *Options) { o.Rhos = []float64{0, 1} }, nil, nil, "ρ = 1"},
		{"rho negative", func(o *Options) { o.Rhos = []float64{-0.1} }, nil, nil, "ρ = -0.1"},
		{"no rho", func(o *Options) { o.Rhos = []float64{} }, nil, nil, "no tail-drop fraction"},
		{"lite scale", func(o *Options) { o.Lite = &Lite{Cond: 0, Uncond: 0.5, Scale: 1} }, nil, nil, "guidance scale 1"},
		{"lite rho", func(o *Options) { o.Lite = &Lite{Cond: 0, Uncond: 1, Scale: 2} }, nil, nil, "Lite-CFG fractions"},
		{"steps", func(o *Options) { o.Steps = 1001 }, nil, nil, "1001 sampling steps"},
		{"timestep", func(o *Options) { o.EdgeTimesteps = []int{1000} }, nil, nil, "timestep 1000"},
		{"teacher size", nil, other, nil, "the teacher takes [4 8 8] latents, the DC model [4 16 16]"},
		{"teacher sigma", nil, epsOnly, nil, "learned-sigma"},
		{"untrained teacher", nil, untrained, nil, "its prediction is 0 on all"},
		{"data size", nil, nil, smallData, "the data set holds [4 8 8] latents"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			opts := smallOptions()
			if c.edit != nil {
				c.edit(&opts)
			}
			teacher, data := s.teacher, s.data
			if c.teacher != nil {
				teacher = c.teacher
			}
			if c.data != nil {
				data = c.data
			}
			_, err := Run(s.m, TeacherOf(dit.Teacher{Model: teacher}, nil, 0), data, opts)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want one containing %q", err, c.want)
			}
		})
	}
}

func TestMetrics(t *testing.T) {
	cases := []struct {
		name        string
		a, b        []float32
		rangeR      float64
		rel, psnrDB float64
	}{
		{"equal", []float32{1, -2, 3}, []float32{1, -2, 3}, 4, 0, MaxPSNR},
		{"double", []float32{2, 2}, []float32{1, 1}, 2, 1, 10 * math.Log10(4)},
		{"zero reference", []float32{1}, []float32{0}, 1, math.Inf(1), 0},
		{"tiny error", []float32{1}, []float32{1 + 1e-7}, 1, 1e-14, MaxPSNR},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := relMSE(c.a, c.b); !(math.Abs(got-c.rel) <= 1e-9*math.Max(1, c.rel)) && !(math.IsInf(got, 1) && math.IsInf(c.rel, 1)) {
				t.Errorf("relMSE = %v, want %v", got, c.rel)
			}
			if got := psnr(c.a, c.b, c.rangeR); !(math.Abs(got-c.psnrDB) <= 1e-6) {
				t.Errorf("psnr = %v, want %v", got, c.psnrDB)
			}
		})
	}
}

// TestGuidedRows: with Options.CFG > 1 the rows and the teacher run both
// branches, and a Lite-CFG pair at the same scale shares the teacher.
func TestGuidedRows(t *testing.T) {
	s := newSetup(t)
	opts := tinyOptions()
	opts.CFG = 1.5
	opts.Lite = &Lite{Cond: 0, Uncond: 0.9, Scale: 1.5}
	r, err := Run(s.m, TeacherOf(dit.Teacher{Model: s.teacher}, nil, 0), s.data, opts)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"teacher cfg=1.5", "rho=0", "rho=0.5", "lite cfg=1.5 rho=0/0.9"}; !slices.Equal(r.GridRows, want) {
		t.Errorf("grid rows %q, want %q", r.GridRows, want)
	}
	if r.Teacher.GFLOPsPerImage != r.LiteCFG.TeacherGFLOPsPerImage {
		t.Errorf("guided teacher row %v GFLOPs, Lite-CFG's teacher %v", r.Teacher.GFLOPsPerImage, r.LiteCFG.TeacherGFLOPsPerImage)
	}
	// ρ = 0 on both branches costs more than Lite-CFG's 0/0.9 and keeps
	// more tokens on average; the conditional branches agree.
	row, l := r.Rows[0], r.LiteCFG
	if !(row.GFLOPsPerImage > l.GFLOPsPerImage) || !(row.KeptTokens > l.KeptTokens) {
		t.Errorf("guided ρ = 0 row %+v vs Lite-CFG %+v", row, *l)
	}
	if row.SamplePSNR == l.SamplePSNR {
		t.Error("Lite-CFG's samples equal the guided ρ = 0 samples")
	}
	raw, _ := json.Marshal(r)
	if !bytes.Contains(raw, []byte(`"cfg":1.5`)) {
		t.Errorf("JSON lacks the rows' guidance scale: %s", raw)
	}
}

// The per-timestep table: one row per probe timestep at the first ρ, the
// three errors finite and consistent with each other (the distance between
// the two predictions obeys the triangle inequality through the noise),
// no x̂0 accuracy without a feature network; none with an empty list.
func TestPerTimestep(t *testing.T) {
	s := newSetup(t)
	opts := tinyOptions()
	opts.Rhos = []float64{0.5}
	opts.ProbeTimesteps = []int{100, 900}
	r, err := Run(s.m, TeacherOf(dit.Teacher{Model: s.teacher}, nil, 0), s.data, opts)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.PerTimestep) != 2 {
		t.Fatalf("%d per-timestep rows, want 2", len(r.PerTimestep))
	}
	for i, p := range r.PerTimestep {
		if p.T != opts.ProbeTimesteps[i] || p.Rho != 0.5 {
			t.Errorf("row %d: t %d ρ %v, want t %d ρ 0.5", i, p.T, p.Rho, opts.ProbeTimesteps[i])
		}
		a, b, d := math.Sqrt(p.EpsMSE), math.Sqrt(p.TeacherEpsMSE), math.Sqrt(p.EpsMSEToTeacher)
		for name, v := range map[string]float64{"eps_mse": p.EpsMSE, "teacher_eps_mse": p.TeacherEpsMSE, "to_teacher": p.EpsMSEToTeacher, "slope": p.EpsSlope} {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				t.Errorf("t %d: %s = %v", p.T, name, v)
			}
		}
		if !(d <= a+b+1e-9 && d >= math.Abs(a-b)-1e-9) || p.EpsMSEToTeacher == 0 {
			t.Errorf("t %d: RMS errors %.4g (DC), %.4g (teacher), %.4g between them: not a triangle", p.T, a, b, d)
		}
		if p.X0ClassAccuracy != nil || p.TeacherX0ClassAccuracy != nil {
			t.Errorf("t %d: x̂0 accuracy without a feature network", p.T)
		}
	}
	var buf bytes.Buffer
	if err := r.WriteTable(&buf); err != nil || !strings.Contains(buf.String(), "one-step error by timestep (ρ = 0.5") {
		t.Errorf("table (%v) lacks the per-timestep block:\n%s", err, buf.String())
	}
	opts.ProbeTimesteps = []int{}
	if r, err = Run(s.m, TeacherOf(dit.Teacher{Model: s.teacher}, nil, 0), s.data, opts); err != nil || len(r.PerTimestep) != 0 {
		t.Errorf("no probe timesteps: %d rows, err %v", len(r.PerTimestep), err)
	}
	opts.ProbeTimesteps = []int{1000}
	if _, err := Run(s.m, TeacherOf(dit.Teacher{Model: s.teacher}, nil, 0), s.data, opts); err == nil || !strings.Contains(err.Error(), "timestep 1000") {
		t.Errorf("timestep 1000: err %v, want it named", err)
	}
}

// CoarseFrom makes every step at or above it drop at least CoarseRho in
// the rows with a budget (ρ > 0): from timestep 1, every step but the last
// of such a row keeps what ρ = CoarseRho keeps, and the ρ 0 row is as
// without; the report records the schedule; a bad fraction is refused.
func TestCoarseFrom(t *testing.T) {
	s := newSetup(t)
	opts := tinyOptions()
	r0, err := Run(s.m, TeacherOf(dit.Teacher{Model: s.teacher}, nil, 0), s.data, opts)
	if err != nil {
		t.Fatal(err)
	}
	const coarseRho = 0.5
	opts.Rhos = []float64{0, 0.05, coarseRho}
	opts.CoarseFrom, opts.CoarseRho = 1, coarseRho
	r, err := Run(s.m, TeacherOf(dit.Teacher{Model: s.teacher}, nil, 0), s.data, opts)
	if err != nil {
		t.Fatal(err)
	}
	if r.CoarseFrom != 1 || r.CoarseRho != coarseRho {
		t.Errorf("report's schedule: coarse from %v at ρ %v, want 1 at %v", r.CoarseFrom, r.CoarseRho, coarseRho)
	}
	// The ρ 0.05 row now samples as the ρ = CoarseRho row, at every step
	// but the last (t = 0, below CoarseFrom), and keeps fewer than ρ 0.
	zero, got, at := r.Rows[0].KeptPerStep, r.Rows[1].KeptPerStep, r.Rows[2].KeptPerStep
	n := len(got)
	if !slices.Equal(got[:n-1], at[:n-1]) || !(zero[0] > got[0]) {
		t.Errorf("ρ 0.05 kept %v with coarse steps, ρ %v kept %v, ρ 0 %v: want the first two equal up to the last step, and fewer than ρ 0",
			got, coarseRho, at, zero)
	}
	if !slices.Equal(zero, r0.Rows[0].KeptPerStep) {
		t.Errorf("ρ 0 kept %v with coarse steps, %v without: want the same", zero, r0.Rows[0].KeptPerStep)
	}
	opts.CoarseRho = 1
	if _, err := Run(s.m, TeacherOf(dit.Teacher{Model: s.teacher}, nil, 0), s.data, opts); err == nil || !strings.Contains(err.Error(), "coarse ρ") {
		t.Errorf("coarse ρ 1: err = %v", err)
	}
}

// DenseBelow runs the steps below it on every cell: above the whole
// diffusion, every step of every row keeps the whole grid (ρ has no say)
// and costs dc.ForwardFLOPs at L tokens; a negative or too large bound is
// refused.
func TestDenseBelow(t *testing.T) {
	s := newSetup(t)
	opts := tinyOptions()
	opts.DenseBelow = TrainSteps
	r, err := Run(s.m, TeacherOf(dit.Teacher{Model: s.teacher}, nil, 0), s.data, opts)
	if err != nil {
		t.Fatal(err)
	}
	L := s.m.Config.Cells()
	want := s.m.ForwardFLOPs([]int{L}).Total() / 1e9
	for _, row := range r.Rows {
		for i, k := range row.KeptPerStep {
			if k != float64(L) {
				t.Errorf("ρ %v, step %d: kept %v, want all %d", row.Rho, i, k, L)
			}
		}
		if !(math.Abs(row.GFLOPsPerImage-want) <= 1e-9*want) {
			t.Errorf("ρ %v: %v GFLOPs per image, want %v (every cell)", row.Rho, row.GFLOPsPerImage, want)
		}
	}
	for _, bad := range []float64{-1, TrainSteps + 1} {
		opts.DenseBelow = bad
		if _, err := Run(s.m, TeacherOf(dit.Teacher{Model: s.teacher}, nil, 0), s.data, opts); err == nil || !strings.Contains(err.Error(), "dense below") {
			t.Errorf("dense below %v: err = %v", bad, err)
		}
	}
}

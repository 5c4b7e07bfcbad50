package eval

import (
	"bytes"
	"encoding/json"
	"image"
	"image/color"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/dcdit/dcdit/dit"
)

// TestRandomRouter: with a feature network every row and the Lite-CFG
// pair carry the random router's FD and class accuracy (in eval.json, the
// table, the card's table and pareto.png), other than the router's and
// the same for a row evaluated alone; the rows' own numbers are those of
// a run without the baseline, bit for bit; NoRandomRouter leaves the
// fields null and the columns out.
func TestRandomRouter(t *testing.T) {
	s := newSetup(t)
	s.balance(t)
	opts := smallOptions()
	opts.Features = stubNet{c: s.m.Config.InChannels}
	var calls, total int
	opts.Progress = func(done, tot int) { calls, total = done, tot }
	teacher := TeacherOf(dit.Teacher{Model: s.teacher}, nil, 0)
	r, err := Run(s.m, teacher, s.data, opts)
	if err != nil {
		t.Fatal(err)
	}
	if calls != total || total == 0 {
		t.Errorf("progress reached %d of %d", calls, total)
	}
	// A row's random draws are its own: alone, it scores the same.
	alone := opts
	alone.Rhos, alone.Lite = opts.Rhos[len(opts.Rhos)-1:], nil
	one, err := Run(s.m, teacher, s.data, alone)
	if err != nil {
		t.Fatal(err)
	}
	if a, b := one.Rows[0].FDRandomRouter, r.Rows[len(r.Rows)-1].FDRandomRouter; a == nil || b == nil || *a != *b {
		t.Errorf("ρ %v alone: random router FD %v, among the other rows %v", alone.Rhos[0], a, b)
	}
	opts.NoRandomRouter = true
	off, err := Run(s.m, teacher, s.data, opts)
	if err != nil {
		t.Fatal(err)
	}

	type scored struct {
		name            string
		learned, random Quality
		rr, offRR       RandomRouter
		gflops, offGF   float64
		offQ            Quality
	}
	var all []scored
	for i, row := range r.Rows {
		all = append(all, scored{r.GridRows[i+1], row.Quality, Quality{FD: row.FDRandomRouter, ClassAccuracy: row.AccuracyRandomRouter},
			row.RandomRouter, off.Rows[i].RandomRouter, row.GFLOPsPerImage, off.Rows[i].GFLOPsPerImage, off.Rows[i].Quality})
	}
	l := r.LiteCFG
	all = append(all, scored{"lite", l.Quality, Quality{FD: l.FDRandomRouter, ClassAccuracy: l.AccuracyRandomRouter},
		l.RandomRouter, off.LiteCFG.RandomRouter, l.GFLOPsPerImage, off.LiteCFG.GFLOPsPerImage, off.LiteCFG.Quality})
	differ := false
	for _, sc := range all {
		fd, acc := sc.rr.FDRandomRouter, sc.rr.AccuracyRandomRouter
		switch {
		case fd == nil || acc == nil || !(*fd >= 0) || math.IsInf(*fd, 0) || !(*acc >= 0 && *acc <= 1):
			t.Errorf("%s: random router FD %v, accuracy %v; want both measured", sc.name, fd, acc)
		case sc.offRR != (RandomRouter{}):
			t.Errorf("%s: NoRandomRouter still reports %+v", sc.name, sc.offRR)
		case *sc.learned.FD != *sc.offQ.FD || *sc.learned.ClassAccuracy != *sc.offQ.ClassAccuracy || sc.gflops != sc.offGF:
			t.Errorf("%s: the baseline moved the row: FD %v, accuracy %v, %v GFLOPs; without it %v, %v, %v", sc.name,
				*sc.learned.FD, *sc.learned.ClassAccuracy, sc.gflops, *sc.offQ.FD, *sc.offQ.ClassAccuracy, sc.offGF)
		default:
			differ = differ || *fd != *sc.learned.FD
		}
	}
	if !differ {
		t.Error("the random router scored as the router in every row: it kept the router's cells")
	}
	if !slices.Equal(r.pics.grid[0], off.pics.grid[0]) || *r.Teacher.FD != *off.Teacher.FD {
		t.Error("the baseline moved the teacher's samples")
	}

	js, err := r.JSON()
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Rows    []map[string]any `json:"rows"`
		LiteCFG map[string]any   `json:"lite_cfg"`
	}
	if err := json.Unmarshal(js, &doc); err != nil {
		t.Fatal(err)
	}
	for i, row := range append(doc.Rows, doc.LiteCFG) {
		for _, key := range []string{"fd_random_router", "accuracy_random_router"} {
			if _, ok := row[key].(float64); !ok {
				t.Errorf("eval.json row %d: %s = %v, want a number", i, key, row[key])
			}
		}
	}

	for _, tc := range []struct {
		rep  *Report
		want bool
	}{{r, true}, {off, false}} {
		var table, card bytes.Buffer
		if err := tc.rep.WriteTable(&table); err != nil {
			t.Fatal(err)
		}
		tc.rep.WriteMarkdown(&card)
		if got := strings.Contains(table.String(), "random FD"); got != tc.want {
			t.Errorf("table has the random FD column: %v, want %v\n%s", got, tc.want, table.String())
		}
		if got := strings.Contains(card.String(), "FD, random router"); got != tc.want {
			t.Errorf("card table has the random router's column: %v, want %v\n%s", got, tc.want, card.String())
		}
		if err := tc.rep.WriteParetoPNG(filepath.Join(t.TempDir(), ParetoFile)); err != nil {
			t.Error(err)
		}
	}
}

// poisonAfter is a stubNet whose features turn NaN from the given call of
// Features on (the calls the wrapper sees: Classify goes to the stub).
type poisonAfter struct {
	stubNet
	from  int
	calls *int
}

func (p poisonAfter) Features(x []float32, n, c, h, w int) ([]float64, error) {
	*p.calls++
	return stubNet{c: p.c, poison: *p.calls >= p.from}.Features(x, n, c, h, w)
}

// TestRandomRouterNaN: a random-router FD that meets NaN fails the run,
// as the rows' own does, and a report carrying one cannot be plotted.
func TestRandomRouterNaN(t *testing.T) {
	s := newSetup(t)
	s.balance(t)
	opts := tinyOptions()
	opts.Rhos = []float64{0.5}
	calls := 0
	// Features sees the data (1), the teacher's samples (2), the row's (3),
	// then the random router's (4).
	opts.Features = poisonAfter{stubNet: stubNet{c: s.m.Config.InChannels}, from: 4, calls: &calls}
	_, err := Run(s.m, TeacherOf(dit.Teacher{Model: s.teacher}, nil, 0), s.data, opts)
	if err == nil || !strings.Contains(err.Error(), "random router") {
		t.Errorf("NaN features of the random router's samples: err = %v, want an error naming the random router", err)
	}

	calls, opts.Features = 0, stubNet{c: s.m.Config.InChannels}
	r, err := Run(s.m, TeacherOf(dit.Teacher{Model: s.teacher}, nil, 0), s.data, opts)
	if err != nil {
		t.Fatal(err)
	}
	nan := math.NaN()
	r.Rows[0].FDRandomRouter = &nan
	err = r.WriteParetoPNG(filepath.Join(t.TempDir(), ParetoFile))
	if err == nil || !strings.Contains(err.Error(), "random router") {
		t.Errorf("pareto plot of a NaN random-router FD: err = %v, want an error naming it", err)
	}
}

// TestLookback: with Lookback every DC row keeps as many tokens at its
// first two sampling steps as without it (the router's count on the same
// latents) but draws other samples (at ρ > 0, where the cells kept are a
// choice), and the report, its JSON and its table say so.
func TestLookback(t *testing.T) {
	s := newSetup(t)
	opts := smallOptions()
	opts.Lite = nil
	teacher := TeacherOf(dit.Teacher{Model: s.teacher}, nil, 0)
	plain, err := Run(s.m, teacher, s.data, opts)
	if err != nil {
		t.Fatal(err)
	}
	opts.Lookback = true
	r, err := Run(s.m, teacher, s.data, opts)
	if err != nil {
		t.Fatal(err)
	}
	differ := false
	for i, row := range r.Rows {
		// The first two steps see the same latents; later ones differ.
		if !slices.Equal(row.KeptPerStep[:2], plain.Rows[i].KeptPerStep[:2]) {
			t.Errorf("ρ %v: kept %v tokens per step, without lookback %v", row.Rho, row.KeptPerStep, plain.Rows[i].KeptPerStep)
		}
		if row.Rho > 0 {
			differ = differ || row.SamplePSNR != plain.Rows[i].SamplePSNR
		}
	}
	if !differ {
		t.Error("lookback drew the same samples as the router at every ρ > 0")
	}
	if !r.Lookback || plain.Lookback {
		t.Errorf("Report.Lookback %v with it, %v without", r.Lookback, plain.Lookback)
	}
	js, err := r.JSON()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(js, []byte(`"lookback": true`)) && !bytes.Contains(js, []byte(`"lookback":true`)) {
		t.Error("eval.json does not say lookback")
	}
	var tab bytes.Buffer
	if err := r.WriteTable(&tab); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(tab.String(), "lookback:") {
		t.Errorf("the table does not say lookback:\n%s", tab.String())
	}
}

// TestSpreadRandom: with SpreadRandom every row and the Lite-CFG pair
// also carry the random router kept apart (eval.json, the table, the
// card), other than the random router's in some row, and leave the rows'
// and the random router's own numbers as they were, bit for bit; a NaN
// in its features fails the run naming it.
func TestSpreadRandom(t *testing.T) {
	s := newSetup(t)
	s.balance(t)
	opts := smallOptions()
	opts.Features = stubNet{c: s.m.Config.InChannels}
	teacher := TeacherOf(dit.Teacher{Model: s.teacher}, nil, 0)
	base, err := Run(s.m, teacher, s.data, opts)
	if err != nil {
		t.Fatal(err)
	}
	opts.SpreadRandom = true
	var calls, total int
	opts.Progress = func(done, tot int) { calls, total = done, tot }
	r, err := Run(s.m, teacher, s.data, opts)
	if err != nil {
		t.Fatal(err)
	}
	if calls != total || total == 0 {
		t.Errorf("progress reached %d of %d", calls, total)
	}
	type pair struct {
		name      string
		on, off   RandomRouter
		onQ, offQ Quality
	}
	var all []pair
	for i := range r.Rows {
		all = append(all, pair{r.GridRows[i+1], r.Rows[i].RandomRouter, base.Rows[i].RandomRouter, r.Rows[i].Quality, base.Rows[i].Quality})
	}
	all = append(all, pair{"lite", r.LiteCFG.RandomRouter, base.LiteCFG.RandomRouter, r.LiteCFG.Quality, base.LiteCFG.Quality})
	differ := false
	for _, p := range all {
		fd, acc := p.on.FDSpreadRandom, p.on.AccuracySpreadRandom
		switch {
		case fd == nil || acc == nil || !(*fd >= 0) || math.IsInf(*fd, 0) || !(*acc >= 0 && *acc <= 1):
			t.Errorf("%s: kept apart FD %v, accuracy %v; want both measured", p.name, fd, acc)
		case p.off.FDSpreadRandom != nil:
			t.Errorf("%s: without SpreadRandom the row reports %v", p.name, *p.off.FDSpreadRandom)
		case *p.on.FDRandomRouter != *p.off.FDRandomRouter || *p.onQ.FD != *p.offQ.FD:
			t.Errorf("%s: SpreadRandom moved the random router (%v, without %v) or the row (%v, without %v)", p.name,
				*p.on.FDRandomRouter, *p.off.FDRandomRouter, *p.onQ.FD, *p.offQ.FD)
		default:
			differ = differ || *fd != *p.on.FDRandomRouter
		}
	}
	if !differ {
		t.Error("kept apart, the random router scored as drawn uniformly in every row")
	}
	js, err := r.JSON()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(js, []byte(`"fd_spread_random"`)) {
		t.Error("eval.json has no fd_spread_random")
	}
	if js, err = base.JSON(); err != nil || bytes.Contains(js, []byte(`"fd_spread_random"`)) {
		t.Errorf("eval.json without SpreadRandom names fd_spread_random (err %v)", err)
	}
	var table, card bytes.Buffer
	if err := r.WriteTable(&table); err != nil {
		t.Fatal(err)
	}
	r.WriteMarkdown(&card)
	if !strings.Contains(table.String(), "apart FD") || !strings.Contains(card.String(), "random kept apart") {
		t.Errorf("the tables lack the kept-apart column:\n%s\n%s", table.String(), card.String())
	}
	// pareto.png draws it in its own colour, which nothing else uses.
	for _, tc := range []struct {
		rep  *Report
		want bool
	}{{r, true}, {base, false}} {
		path := filepath.Join(t.TempDir(), ParetoFile)
		if err := tc.rep.WriteParetoPNG(path); err != nil {
			t.Fatal(err)
		}
		if got := hasColour(t, path, plotApart); got != tc.want {
			t.Errorf("pareto.png draws the kept-apart curve: %v, want %v", got, tc.want)
		}
	}
	nan := math.NaN()
	r.Rows[0].FDSpreadRandom = &nan
	if err := r.WriteParetoPNG(filepath.Join(t.TempDir(), ParetoFile)); err == nil || !strings.Contains(err.Error(), "kept apart") {
		t.Errorf("pareto plot of a NaN kept-apart FD: err = %v, want an error naming it", err)
	}

	// Features sees the data (1), the teacher's samples (2), the row's (3),
	// the random router's (4), then the random router's kept apart (5).
	n := 0
	opts = tinyOptions()
	opts.Rhos, opts.SpreadRandom = []float64{0.5}, true
	opts.Features = poisonAfter{stubNet: stubNet{c: s.m.Config.InChannels}, from: 5, calls: &n}
	if _, err := Run(s.m, teacher, s.data, opts); err == nil || !strings.Contains(err.Error(), "kept apart") {
		t.Errorf("NaN features of the kept-apart samples: err = %v, want an error naming them", err)
	}
}

// hasColour reports whether the PNG at path has a pixel of colour c.
func hasColour(t *testing.T, path string, c color.RGBA) bool {
	t.Helper()
	img := decodePNG(t, path)
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			if color.RGBAModel.Convert(img.At(x, y)).(color.RGBA) == c {
				return true
			}
		}
	}
	return false
}

// decodePNG reads the PNG at path, failing the test when it is not one.
func decodePNG(t *testing.T, path string) image.Image {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return img
}

package eval

import (
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"io"
	"math"

	"golang.org/x/image/font"
	"golang.org/x/image/font/basicfont"
	"golang.org/x/image/math/fixed"

	"github.com/dcdit/dcdit/loaders/atomicfile"
)

// ParetoFile is the name of the Fréchet distance against compute plot.
const ParetoFile = "pareto.png"

// Plot layout, in pixels.
const (
	plotW, plotH         = 640, 420
	plotLeft, plotRight  = 70, 20
	plotTop, plotBottom  = 30, 72
	markerRadius         = 4
	paretoTicks          = 5
	paretoMarginFraction = 0.08
	paretoLabelOffset    = 7
	paretoLegendGap      = 24 // between one legend entry's text and the next marker
	paretoLegendLine     = 16 // between the legend's lines
	paretoDash           = 5  // on and off pixels of a dashed line
	glyphWidth           = 7  // basicfont.Face7x13's advance
	glyphLine            = 13 // and its line height
)

var (
	plotBG      = color.RGBA{255, 255, 255, 255}
	plotAxis    = color.RGBA{40, 40, 40, 255}
	plotGrid    = color.RGBA{225, 225, 225, 255}
	plotDC      = color.RGBA{31, 119, 180, 255}
	plotTeacher = color.RGBA{214, 39, 40, 255}
	plotLite    = color.RGBA{44, 160, 44, 255}
	plotApart   = color.RGBA{127, 127, 127, 255} // the random router kept apart
	// The step-cache sweep's curves.
	plotTeacherCache = color.RGBA{255, 127, 14, 255}
	plotDCCache      = color.RGBA{148, 103, 189, 255}
)

// paretoPoint is one model setting on the plot.
type paretoPoint struct {
	x, y  float64
	label string
}

// WriteParetoPNG plots the Fréchet distance of each row's samples against
// its GFLOPs per image (the paper's Pareto plot): the DC model as a curve
// across ρ (blue, each point labelled with its ρ; the bitmap font is
// ASCII, so labels spell it "rho"), the teacher as a red
// square and Lite-CFG as a green triangle. The random router, when the
// report has it, is a dashed curve of rings at the same FLOPs (it keeps
// as many cells), and for Lite-CFG a green ring joined to its triangle by
// a dashed line; the random router kept apart (Options.SpreadRandom) is a
// grey dashed curve of rings, and a grey ring for Lite-CFG. A TeaCache sweep adds the teacher + TeaCache as an
// orange curve from the teacher through each threshold (labelled "T=…")
// and, for each ρ, DC + TeaCache as a purple curve from that ρ's point
// through the thresholds, named at its far end. It needs an evaluation with a feature network.
func (r *Report) WriteParetoPNG(path string) error {
	var dc, random, apart []paretoPoint
	for _, row := range r.Rows {
		if row.FD == nil {
			return errors.New("eval: the report has no Fréchet distances (no feature network)")
		}
		dc = append(dc, paretoPoint{row.GFLOPsPerImage, *row.FD, fmt.Sprintf("rho=%g", row.Rho)})
		if row.FDRandomRouter != nil {
			random = append(random, paretoPoint{row.GFLOPsPerImage, *row.FDRandomRouter, fmt.Sprintf("random router at rho=%g", row.Rho)})
		}
		if row.FDSpreadRandom != nil {
			apart = append(apart, paretoPoint{row.GFLOPsPerImage, *row.FDSpreadRandom, fmt.Sprintf("random router kept apart at rho=%g", row.Rho)})
		}
	}
	if len(dc) == 0 || r.Teacher.FD == nil {
		return errors.New("eval: the report has no Fréchet distances (no feature network)")
	}
	teacher := paretoPoint{r.Teacher.GFLOPsPerImage, *r.Teacher.FD, "teacher"}
	all := append(append(append([]paretoPoint{teacher}, dc...), random...), apart...)
	var lite, liteRandom, liteApart *paretoPoint
	if l := r.LiteCFG; l != nil && l.FD != nil {
		lite = &paretoPoint{l.GFLOPsPerImage, *l.FD, "Lite-CFG"}
		all = append(all, *lite)
		if l.FDRandomRouter != nil {
			liteRandom = &paretoPoint{l.GFLOPsPerImage, *l.FDRandomRouter, "Lite-CFG's random router"}
			all = append(all, *liteRandom)
		}
		if l.FDSpreadRandom != nil {
			liteApart = &paretoPoint{l.GFLOPsPerImage, *l.FDSpreadRandom, "Lite-CFG's random router kept apart"}
			all = append(all, *liteApart)
		}
	}
	teacherCache, dcCache, err := r.teaCacheCurves(teacher, dc)
	if err != nil {
		return err
	}
	all = append(all, teacherCache...)
	for _, c := range dcCache {
		all = append(all, c...)
	}
	for _, p := range all {
		if math.IsNaN(p.x) || math.IsInf(p.x, 0) || math.IsNaN(p.y) || math.IsInf(p.y, 0) {
			return fmt.Errorf("eval: pareto plot: %s at (%v GFLOPs, FD %v) is not finite", p.label, p.x, p.y)
		}
	}
	xlo, xhi := span(all, func(p paretoPoint) float64 { return p.x })
	_, yhi := span(all, func(p paretoPoint) float64 { return p.y })
	// FD is a distance: its axis starts at 0 (span's margin would take it
	// below, to values no FD can have).
	ylo := 0.0

	type entry struct {
		name   string
		c      color.RGBA
		marker func(*image.RGBA, int, int, color.RGBA)
	}
	legend := []entry{{"DC model across rho", plotDC, disc}}
	if len(random) > 0 {
		legend = append(legend, entry{"random router", plotDC, ring})
	}
	if len(apart) > 0 {
		legend = append(legend, entry{"random, kept apart", plotApart, ring})
	}
	legend = append(legend, entry{"teacher (fixed patches)", plotTeacher, square})
	if len(teacherCache) > 0 {
		legend = append(legend, entry{"teacher + TeaCache", plotTeacherCache, square}, entry{"DC + TeaCache", plotDCCache, triangle})
	}
	if lite != nil {
		legend = append(legend, entry{"Lite-CFG", plotLite, triangle})
	}
	// The legend sits under the axis title, where no point can fall, in
	// as many lines as it needs.
	var legendAt []image.Point
	lx, lines := plotLeft, 1
	for _, l := range legend {
		w := 10 + glyphWidth*len(l.name)
		if lx > plotLeft && lx+w > plotW {
			lx, lines = plotLeft, lines+1
		}
		legendAt = append(legendAt, image.Point{lx, lines})
		lx += w + paretoLegendGap
	}
	height := plotH + (lines-1)*paretoLegendLine

	img := image.NewRGBA(image.Rect(0, 0, plotW, height))
	draw.Draw(img, img.Bounds(), &image.Uniform{plotBG}, image.Point{}, draw.Src)
	x0, x1, y0, y1 := plotLeft, plotW-plotRight, plotTop, plotH-plotBottom
	px := func(v float64) int { return x0 + int(math.Round((v-xlo)/(xhi-xlo)*float64(x1-x0))) }
	py := func(v float64) int { return y1 - int(math.Round((v-ylo)/(yhi-ylo)*float64(y1-y0))) }
	for i := range paretoTicks + 1 {
		f := float64(i) / paretoTicks
		gx, gy := x0+int(f*float64(x1-x0)), y1-int(f*float64(y1-y0))
		line(img, gx, y0, gx, y1, plotGrid)
		line(img, x0, gy, x1, gy, plotGrid)
		text(img, gx-12, y1+16, fmt.Sprintf("%.3g", xlo+f*(xhi-xlo)), plotAxis)
		text(img, 8, gy+4, fmt.Sprintf("%.3g", ylo+f*(yhi-ylo)), plotAxis)
	}
	line(img, x0, y1, x1, y1, plotAxis)
	line(img, x0, y0, x0, y1, plotAxis)
	text(img, (x0+x1)/2-60, y1+32, "GFLOPs per image", plotAxis)
	text(img, 8, 18, "Frechet distance to held-out data (lower is better)", plotAxis)

	for _, c := range dcCache {
		for i := 1; i < len(c); i++ {
			line(img, px(c[i-1].x), py(c[i-1].y), px(c[i].x), py(c[i].y), plotDCCache)
			triangle(img, px(c[i].x), py(c[i].y), plotDCCache)
		}
		// Each curve is named at its far end, the largest threshold.
		end := c[len(c)-1]
		text(img, px(end.x)-glyphWidth*len(c[0].label)-paretoLabelOffset, py(end.y)-paretoLabelOffset, c[0].label, plotDCCache)
	}
	for i := 1; i < len(teacherCache); i++ {
		p := teacherCache[i]
		line(img, px(teacherCache[i-1].x), py(teacherCache[i-1].y), px(p.x), py(p.y), plotTeacherCache)
		square(img, px(p.x), py(p.y), plotTeacherCache)
		text(img, px(p.x)+paretoLabelOffset, py(p.y)+2*paretoLabelOffset, p.label, plotTeacherCache)
	}
	for i := 1; i < len(random); i++ {
		dashed(img, px(random[i-1].x), py(random[i-1].y), px(random[i].x), py(random[i].y), plotDC)
	}
	for _, p := range random {
		ring(img, px(p.x), py(p.y), plotDC)
	}
	for i := 1; i < len(apart); i++ {
		dashed(img, px(apart[i-1].x), py(apart[i-1].y), px(apart[i].x), py(apart[i].y), plotApart)
	}
	for _, p := range apart {
		ring(img, px(p.x), py(p.y), plotApart)
	}
	for i := 1; i < len(dc); i++ {
		line(img, px(dc[i-1].x), py(dc[i-1].y), px(dc[i].x), py(dc[i].y), plotDC)
	}
	// A label that would run into the one before it (two ρ a few
	// GFLOPs apart) goes under its point instead.
	var prev image.Rectangle
	for _, p := range dc {
		disc(img, px(p.x), py(p.y), plotDC)
		x, y := px(p.x)+paretoLabelOffset, py(p.y)-paretoLabelOffset
		box := image.Rect(x, y-glyphLine, x+glyphWidth*len(p.label), y)
		if box.Overlaps(prev) {
			y += 3 * paretoLabelOffset
			box = box.Add(image.Pt(0, 3*paretoLabelOffset))
		}
		text(img, x, y, p.label, plotDC)
		prev = box
	}
	square(img, px(teacher.x), py(teacher.y), plotTeacher)
	text(img, px(teacher.x)+paretoLabelOffset, py(teacher.y)+2*paretoLabelOffset, teacher.label, plotTeacher)
	if lite != nil {
		if liteRandom != nil {
			dashed(img, px(lite.x), py(lite.y), px(liteRandom.x), py(liteRandom.y), plotLite)
			ring(img, px(liteRandom.x), py(liteRandom.y), plotLite)
		}
		if liteApart != nil {
			ring(img, px(liteApart.x), py(liteApart.y), plotApart)
		}
		triangle(img, px(lite.x), py(lite.y), plotLite)
		text(img, px(lite.x)+paretoLabelOffset, py(lite.y)+2*paretoLabelOffset, lite.label, plotLite)
	}
	for i, l := range legend {
		x, y := legendAt[i].X, plotH-10+(legendAt[i].Y-1)*paretoLegendLine
		l.marker(img, x, y-4, l.c)
		text(img, x+10, y, l.name, l.c)
	}
	return atomicfile.Write(path, func(w io.Writer) error { return png.Encode(w, img) })
}

// teaCacheCurves are the sweep's curves: the teacher's from the uncached
// teacher through the thresholds, and one per ρ from that ρ's uncached
// point (dc, in the rows' order).
func (r *Report) teaCacheCurves(teacher paretoPoint, dc []paretoPoint) ([]paretoPoint, [][]paretoPoint, error) {
	if len(r.TeaCache) == 0 {
		return nil, nil, nil
	}
	tc := []paretoPoint{teacher}
	dcc := make([][]paretoPoint, len(dc))
	for i, p := range dc {
		dcc[i] = []paretoPoint{p}
	}
	for _, run := range r.TeaCache {
		if run.Teacher.FD == nil || len(run.Rows) != len(dc) {
			return nil, nil, fmt.Errorf("eval: pareto plot: the TeaCache run at %g has no Fréchet distances or not one row per ρ", run.Threshold)
		}
		tc = append(tc, paretoPoint{run.Teacher.GFLOPsPerImage, *run.Teacher.FD, fmt.Sprintf("T=%g", run.Threshold)})
		for i, row := range run.Rows {
			if row.FD == nil {
				return nil, nil, fmt.Errorf("eval: pareto plot: the TeaCache run at %g has no Fréchet distances", run.Threshold)
			}
			dcc[i] = append(dcc[i], paretoPoint{row.GFLOPsPerImage, *row.FD, fmt.Sprintf("rho=%g T=%g", *row.Rho, run.Threshold)})
		}
	}
	return tc, dcc, nil
}

// span is the range of a coordinate over the points with a margin on both
// sides (a unit span around a single value).
func span(ps []paretoPoint, v func(paretoPoint) float64) (float64, float64) {
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, p := range ps {
		lo, hi = min(lo, v(p)), max(hi, v(p))
	}
	d := hi - lo
	if d <= 0 {
		d = max(math.Abs(hi), 1)
	}
	return lo - paretoMarginFraction*d, hi + paretoMarginFraction*d
}

// line draws a one-pixel line (DDA).
func line(img *image.RGBA, xa, ya, xb, yb int, c color.RGBA) { stroke(img, xa, ya, xb, yb, c, 0) }

// dashed draws a one-pixel line of paretoDash pixels on, paretoDash off.
func dashed(img *image.RGBA, xa, ya, xb, yb int, c color.RGBA) {
	stroke(img, xa, ya, xb, yb, c, paretoDash)
}

// stroke draws a line, dashed with dash pixels on and off (0: solid).
func stroke(img *image.RGBA, xa, ya, xb, yb int, c color.RGBA, dash int) {
	n := max(abs(xb-xa), abs(yb-ya), 1)
	for i := 0; i <= n; i++ {
		if dash == 0 || (i/dash)%2 == 0 {
			img.SetRGBA(xa+(xb-xa)*i/n, ya+(yb-ya)*i/n, c)
		}
	}
}

func abs(v int) int {
	if v < 0 {
		return -v
	}
	return v
}

// ring is a disc's outline.
func ring(img *image.RGBA, cx, cy int, c color.RGBA) {
	inner := (markerRadius - 1) * (markerRadius - 1)
	for y := -markerRadius; y <= markerRadius; y++ {
		for x := -markerRadius; x <= markerRadius; x++ {
			if d := x*x + y*y; d <= markerRadius*markerRadius && d > inner {
				img.SetRGBA(cx+x, cy+y, c)
			}
		}
	}
}

func disc(img *image.RGBA, cx, cy int, c color.RGBA) {
	for y := -markerRadius; y <= markerRadius; y++ {
		for x := -markerRadius; x <= markerRadius; x++ {
			if x*x+y*y <= markerRadius*markerRadius {
				img.SetRGBA(cx+x, cy+y, c)
			}
		}
	}
}

func square(img *image.RGBA, cx, cy int, c color.RGBA) {
	for y := -markerRadius; y <= markerRadius; y++ {
		for x := -markerRadius; x <= markerRadius; x++ {
			img.SetRGBA(cx+x, cy+y, c)
		}
	}
}

func triangle(img *image.RGBA, cx, cy int, c color.RGBA) {
	r := markerRadius + 1
	for y := -r; y <= r; y++ {
		half := (y + r) / 2
		for x := -half; x <= half; x++ {
			img.SetRGBA(cx+x, cy+y, c)
		}
	}
}

// text writes s with its baseline at (x, y) in the 7×13 bitmap font.
func text(img *image.RGBA, x, y int, s string, c color.RGBA) {
	d := font.Drawer{Dst: img, Src: &image.Uniform{c}, Face: basicfont.Face7x13, Dot: fixed.P(x, y)}
	d.DrawString(s)
}

package eval

import (
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"io"

	"github.com/dcdit/dcdit/loaders/atomicfile"
	"github.com/dcdit/dcdit/preview"
)

// Picture layout.
const (
	// CellPixels is the side of one latent cell in the pictures (the VAE's
	// factor 8).
	CellPixels = 8
	// gap separates the tiles.
	gap = 4
	// dim is the brightness left to cells the router dropped.
	dim = 0.3
	// maxTrajectoryColumns bounds the trajectory picture's steps.
	maxTrajectoryColumns = 10
	// maxTrajectoryRows bounds its samples.
	maxTrajectoryRows = 4
)

var background = color.RGBA{24, 24, 24, 255}

// fit returns the latent-to-RGB map for the report's channels (none when
// a renderer draws the latents).
func (r *Report) fit() (preview.Fit, error) {
	if r.pics.render != nil {
		return preview.Fit{}, nil
	}
	return preview.ForChannels(r.pics.c)
}

// tile renders one latent [C, H, W]. With kept ([H·W]) given, the cells
// the router dropped are dimmed to 30% and the kept ones carry a 2×2 dot
// at their centre (white on dark cells, black on light ones), so the map
// reads on any colour.
func (r *Report) tile(f preview.Fit, latent []float32, kept []bool) (*image.RGBA, error) {
	var img *image.RGBA
	var err error
	cell := CellPixels
	if r.pics.render != nil {
		img, err = r.pics.render.Render(latent, r.pics.c, r.pics.h, r.pics.w)
		if err == nil {
			cell = img.Bounds().Dx() / r.pics.w
		}
	} else {
		img, err = f.Image(latent, r.pics.h, r.pics.w, CellPixels)
	}
	if err != nil {
		return nil, err
	}
	if kept == nil {
		return img, nil
	}
	for i := range r.pics.h {
		for j := range r.pics.w {
			x0, y0 := j*cell, i*cell
			c := img.RGBAAt(x0, y0)
			if kept[i*r.pics.w+j] {
				dot := color.RGBA{255, 255, 255, 255}
				if 299*int(c.R)+587*int(c.G)+114*int(c.B) > 128*1000 {
					dot = color.RGBA{0, 0, 0, 255}
				}
				m := cell/2 - 1
				for y := y0 + m; y < y0+m+2; y++ {
					for x := x0 + m; x < x0+m+2; x++ {
						img.SetRGBA(x, y, dot)
					}
				}
				continue
			}
			d := color.RGBA{uint8(float64(c.R) * dim), uint8(float64(c.G) * dim), uint8(float64(c.B) * dim), 255}
			for y := y0; y < y0+cell; y++ {
				for x := x0; x < x0+cell; x++ {
					img.SetRGBA(x, y, d)
				}
			}
		}
	}
	return img, nil
}

// writeTiles lays tiles out in rows (rows may differ in length) on a dark
// background and writes the PNG atomically.
func writeTiles(path string, tiles [][]*image.RGBA) error {
	rows, cols := len(tiles), 0
	var tw, th int
	for _, row := range tiles {
		cols = max(cols, len(row))
		for _, t := range row {
			tw, th = t.Bounds().Dx(), t.Bounds().Dy()
		}
	}
	if rows == 0 || cols == 0 {
		return errors.New("eval: nothing to draw")
	}
	canvas := image.NewRGBA(image.Rect(0, 0, cols*tw+(cols+1)*gap, rows*th+(rows+1)*gap))
	draw.Draw(canvas, canvas.Bounds(), &image.Uniform{background}, image.Point{}, draw.Src)
	for i, row := range tiles {
		for j, t := range row {
			x, y := gap+j*(tw+gap), gap+i*(th+gap)
			draw.Draw(canvas, image.Rect(x, y, x+tw, y+th), t, t.Bounds().Min, draw.Src)
		}
	}
	return atomicfile.Write(path, func(w io.Writer) error { return png.Encode(w, canvas) })
}

// WriteBoundaryPNG draws where the router kept tokens at ρ = 0 on noisy
// data: one row per boundary sample; the first column is the clean
// latent, then one column per BoundaryTimesteps entry (increasing noise):
// the clean latent with the kept cells dotted and the dropped ones dimmed.
func (r *Report) WriteBoundaryPNG(path string) error {
	p := &r.pics
	if len(p.boundaryKept) == 0 {
		return errors.New("eval: the report has no boundary maps")
	}
	f, err := r.fit()
	if err != nil {
		return fmt.Errorf("eval: boundary map: %w", err)
	}
	n, hw := p.c*p.h*p.w, p.h*p.w
	k := len(p.boundaryX0) / n
	var tiles [][]*image.RGBA
	for i := range k {
		x0 := p.boundaryX0[i*n : (i+1)*n]
		clean, err := r.tile(f, x0, nil)
		if err != nil {
			return err
		}
		row := []*image.RGBA{clean}
		for _, kept := range p.boundaryKept {
			t, err := r.tile(f, x0, kept[i*hw:(i+1)*hw])
			if err != nil {
				return err
			}
			row = append(row, t)
		}
		tiles = append(tiles, row)
	}
	return writeTiles(path, tiles)
}

// WriteTrajectoryPNG draws where the router kept tokens along the first
// row's sampling run: one row per sample (at most 4), one column per
// sampling step from the noisiest (at most 10 steps, evenly chosen), each
// the final sample with the cells kept at that step dotted and the dropped
// ones dimmed.
func (r *Report) WriteTrajectoryPNG(path string) error {
	p := &r.pics
	steps := len(p.trajT)
	if steps == 0 || len(p.trajKept) != steps {
		return errors.New("eval: the report has no sampling trajectory")
	}
	f, err := r.fit()
	if err != nil {
		return fmt.Errorf("eval: trajectory: %w", err)
	}
	n, hw := p.c*p.h*p.w, p.h*p.w
	samples := min(len(p.trajFinal)/n, maxTrajectoryRows)
	cols := min(steps, maxTrajectoryColumns)
	var tiles [][]*image.RGBA
	for i := range samples {
		x := p.trajFinal[i*n : (i+1)*n]
		var row []*image.RGBA
		for c := range cols {
			s := c * (steps - 1) / max(cols-1, 1)
			t, err := r.tile(f, x, p.trajKept[s][i*hw:(i+1)*hw])
			if err != nil {
				return err
			}
			row = append(row, t)
		}
		tiles = append(tiles, row)
	}
	return writeTiles(path, tiles)
}

// WriteElasticGridPNG draws the samples of every row (GridRows: the
// teacher, each ρ, then the guided teacher and Lite-CFG when evaluated),
// one column per sample; the same column is the same noise and label.
func (r *Report) WriteElasticGridPNG(path string) error {
	p := &r.pics
	if len(p.grid) == 0 {
		return errors.New("eval: the report has no samples")
	}
	f, err := r.fit()
	if err != nil {
		return fmt.Errorf("eval: elastic grid: %w", err)
	}
	n := p.c * p.h * p.w
	var tiles [][]*image.RGBA
	for _, smp := range p.grid {
		var row []*image.RGBA
		for i := range len(smp) / n {
			t, err := r.tile(f, smp[i*n:(i+1)*n], nil)
			if err != nil {
				return err
			}
			row = append(row, t)
		}
		tiles = append(tiles, row)
	}
	return writeTiles(path, tiles)
}

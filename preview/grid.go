package preview

import (
	"fmt"
	"image"
	"image/draw"
	"image/png"
	"io"

	"github.com/dcdit/dcdit/loaders/atomicfile"
)

// WriteGridPNG tiles the batch ([B, C, H, W]) into a grid cols samples wide,
// filled row by row (sample i at row i/cols, column i%cols), and writes it
// as one PNG at path, atomically. Cells past the last sample stay
// transparent.
func (f Fit) WriteGridPNG(path string, batch []float32, b, cols, h, w, scale int) error {
	c := len(f.Coef)
	if b < 1 || cols < 1 || h < 1 || w < 1 {
		return fmt.Errorf("preview: grid of %d samples, %d columns, %d×%d latents: want all ≥ 1", b, cols, h, w)
	}
	if len(batch) != b*c*h*w {
		return fmt.Errorf("preview: batch has %d values, want %d×%d×%d×%d", len(batch), b, c, h, w)
	}
	scale = max(scale, 1)
	cols = min(cols, b)
	rows := (b + cols - 1) / cols
	cw, ch := w*scale, h*scale
	canvas := image.NewRGBA(image.Rect(0, 0, cols*cw, rows*ch))
	for i := range b {
		img, err := f.Image(batch[i*c*h*w:(i+1)*c*h*w], h, w, scale)
		if err != nil {
			return err
		}
		x, y := i%cols*cw, i/cols*ch
		draw.Draw(canvas, image.Rect(x, y, x+cw, y+ch), img, image.Point{}, draw.Src)
	}
	return atomicfile.Write(path, func(out io.Writer) error { return png.Encode(out, canvas) })
}

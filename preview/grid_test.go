package preview

import (
	"image/png"
	"os"
	"path/filepath"
	"testing"
)

func TestWriteGridPNG(t *testing.T) {
	// Five 2×3 SD latents whose channel 0 is the sample index / 4, so each
	// cell has its own grey-ish colour.
	const b, h, w, scale = 5, 2, 3, 2
	batch := make([]float32, b*4*h*w)
	for i := range b {
		for p := range h * w {
			batch[i*4*h*w+p] = float32(i) / 4
		}
	}
	cases := []struct {
		cols, wantW, wantH int
	}{
		{2, 2 * w * scale, 3 * h * scale}, // 3 rows, the last half empty
		{5, 5 * w * scale, h * scale},
		{9, 5 * w * scale, h * scale}, // more columns than samples: one row
	}
	for _, c := range cases {
		path := filepath.Join(t.TempDir(), "grid.png")
		if err := SD.WriteGridPNG(path, batch, b, c.cols, h, w, scale); err != nil {
			t.Fatal(err)
		}
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		img, err := png.Decode(f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		if r := img.Bounds(); r.Dx() != c.wantW || r.Dy() != c.wantH {
			t.Fatalf("cols %d: size %dx%d, want %dx%d", c.cols, r.Dx(), r.Dy(), c.wantW, c.wantH)
		}
		cols := min(c.cols, b)
		for i := range b {
			want, _ := SD.Image(batch[i*4*h*w:(i+1)*4*h*w], h, w, scale)
			x, y := i%cols*w*scale, i/cols*h*scale
			r1, g1, b1, _ := img.At(x+1, y+1).RGBA()
			r2, g2, b2, _ := want.At(1, 1).RGBA()
			if r1 != r2 || g1 != g2 || b1 != b2 {
				t.Errorf("cols %d: sample %d at (%d,%d) = %d,%d,%d, want %d,%d,%d", c.cols, i, x, y, r1>>8, g1>>8, b1>>8, r2>>8, g2>>8, b2>>8)
			}
		}
	}
	if err := SD.WriteGridPNG(filepath.Join(t.TempDir(), "x.png"), batch[:10], b, 2, h, w, scale); err == nil {
		t.Error("a short batch was accepted")
	}
}

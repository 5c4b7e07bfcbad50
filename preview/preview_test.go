package preview

import (
	"image/png"
	"os"
	"path/filepath"
	"testing"
)

func TestWritePNG(t *testing.T) {
	// Two 1×2 SD latents: channel 0 = 1 everywhere gives RGB (0.3512, 0.2297, 0.3227).
	batch := make([]float32, 2*4*1*2)
	batch[0], batch[1] = 1, 1
	path := filepath.Join(t.TempDir(), "p.png")
	if err := SD.WritePNG(path, batch, 2, 1, 2, 3); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	if b := img.Bounds(); b.Dx() != 12 || b.Dy() != 3 {
		t.Fatalf("size %v, want 12×3 (2 samples × 2 columns × scale 3)", b)
	}
	cases := []struct {
		x       int
		r, g, b uint32
	}{
		{0, 172, 157, 169}, // (1+0.3512)/2·255 = 172.3, …
		{6, 128, 128, 128}, // second sample is all zeros: mid grey
	}
	for _, c := range cases {
		r, g, b, _ := img.At(c.x, 1).RGBA()
		if r>>8 != c.r || g>>8 != c.g || b>>8 != c.b {
			t.Errorf("pixel %d = %d,%d,%d, want %d,%d,%d", c.x, r>>8, g>>8, b>>8, c.r, c.g, c.b)
		}
	}
	if _, err := ForChannels(7); err == nil {
		t.Error("a 7-channel latent got a fit")
	}
}

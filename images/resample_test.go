package images

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// splitmixBytes is the generator the PIL reference scripts share with the
// tests: the top byte of splitmix64 outputs 1..n from state seed.
func splitmixBytes(seed uint64, n int) []uint8 {
	out := make([]uint8, n)
	for i := range out {
		z := seed + uint64(i+1)*0x9E3779B97F4A7C15
		z = (z ^ z>>30) * 0xBF58476D1CE4E5B9
		z = (z ^ z>>27) * 0x94D049BB133111EB
		out[i] = uint8((z ^ z>>31) >> 56)
	}
	return out
}

// testImage builds the reference scripts' input images: "noise" (every
// byte drawn) or "blocks" (noise drawn per 4×4 block).
func testImage(t testing.TB, kind string, w, h int, seed uint64) *RGB {
	t.Helper()
	switch kind {
	case "noise":
		return &RGB{W: w, H: h, Pix: splitmixBytes(seed, 3*w*h)}
	case "blocks":
		bw, bh := (w+3)/4, (h+3)/4
		small := splitmixBytes(seed, 3*bw*bh)
		m := NewRGB(w, h)
		for y := range h {
			for x := range w {
				copy(m.Pix[3*(y*w+x):3*(y*w+x)+3], small[3*(y/4*bw+x/4):])
			}
		}
		return m
	}
	t.Fatalf("unknown test image kind %q", kind)
	return nil
}

func digest(m *RGB) string {
	s := sha256.Sum256(m.Pix)
	return hex.EncodeToString(s[:])
}

// resampleRef is testdata/resample.json (see testdata/README.md).
type resampleRef struct {
	PIL    string `json:"pil"`
	Resize []struct {
		Kind   string
		W, H   int
		Seed   uint64
		Filter string
		OutW   int `json:"out_w"`
		OutH   int `json:"out_h"`
		SHA256 string
	}
	CenterCropArr []struct {
		Kind   string
		W, H   int
		Seed   uint64
		Size   int
		SHA256 string
	} `json:"center_crop_arr"`
}

func loadResampleRef(t *testing.T) resampleRef {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", "resample.json"))
	if err != nil {
		t.Fatal(err)
	}
	var ref resampleRef
	if err := json.Unmarshal(raw, &ref); err != nil {
		t.Fatalf("testdata/resample.json: %v", err)
	}
	if len(ref.Resize) == 0 || len(ref.CenterCropArr) == 0 {
		t.Fatalf("testdata/resample.json: %d resize and %d crop cases, want some of each", len(ref.Resize), len(ref.CenterCropArr))
	}
	return ref
}

// Resize matches PIL's Image.resize bit for bit on every reference case.
func TestResizeMatchesPIL(t *testing.T) {
	ref := loadResampleRef(t)
	filters := map[string]Filter{"BOX": Box, "BILINEAR": Bilinear, "BICUBIC": Bicubic}
	for _, c := range ref.Resize {
		name := fmt.Sprintf("%s/%s_%dx%d_to_%dx%d", c.Filter, c.Kind, c.W, c.H, c.OutW, c.OutH)
		t.Run(name, func(t *testing.T) {
			f, ok := filters[c.Filter]
			if !ok {
				t.Fatalf("unknown filter %q", c.Filter)
			}
			got, err := Resize(testImage(t, c.Kind, c.W, c.H, c.Seed), c.OutW, c.OutH, f)
			if err != nil {
				t.Fatal(err)
			}
			if got.W != c.OutW || got.H != c.OutH {
				t.Fatalf("got %d×%d, want %d×%d", got.W, got.H, c.OutW, c.OutH)
			}
			if d := digest(got); d != c.SHA256 {
				t.Errorf("pixels differ from PIL %s's (sha256 %s, want %s)", ref.PIL, d, c.SHA256)
			}
		})
	}
}

// CenterCrop matches ADM's center_crop_arr under PIL bit for bit.
func TestCenterCropMatchesADM(t *testing.T) {
	ref := loadResampleRef(t)
	for _, c := range ref.CenterCropArr {
		t.Run(fmt.Sprintf("%s_%dx%d_crop%d", c.Kind, c.W, c.H, c.Size), func(t *testing.T) {
			got, err := CenterCrop(testImage(t, c.Kind, c.W, c.H, c.Seed), c.Size, CropOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if got.W != c.Size || got.H != c.Size {
				t.Fatalf("got %d×%d, want %d×%d", got.W, got.H, c.Size, c.Size)
			}
			if d := digest(got); d != c.SHA256 {
				t.Errorf("pixels differ from center_crop_arr under PIL %s (sha256 %s, want %s)", ref.PIL, d, c.SHA256)
			}
		})
	}
}

package images

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// torchRef is testdata/torch.json (see testdata/README.md).
type torchRef struct {
	Torch, Torchvision string
	Quantize           struct{ X, Want string }
	ToUnit             string `json:"to_unit"`
	Grid               struct {
		Images string
		H, W   int
		Cases  []struct {
			N, Cols, Pad, W, H int
			RGB                string
		}
	}
}

func loadTorchRef(t *testing.T) torchRef {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", "torch.json"))
	if err != nil {
		t.Fatal(err)
	}
	var ref torchRef
	if err := json.Unmarshal(raw, &ref); err != nil {
		t.Fatalf("testdata/torch.json: %v", err)
	}
	return ref
}

func unhex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func float32s(t *testing.T, s string) []float32 {
	t.Helper()
	b := unhex(t, s)
	out := make([]float32, len(b)/4)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return out
}

// Quantize gives torch's clamp(127.5·x + 128, 0, 255).to(uint8) on values
// at every byte boundary and beyond the range.
func TestQuantizeMatchesTorch(t *testing.T) {
	ref := loadTorchRef(t)
	x, want := float32s(t, ref.Quantize.X), unhex(t, ref.Quantize.Want)
	if len(x) == 0 || len(x) != len(want) {
		t.Fatalf("testdata/torch.json: %d inputs, %d outputs", len(x), len(want))
	}
	got := Quantize(x)
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("x = %g (%#08x): got %d, torch %s %d", x[i], math.Float32bits(x[i]), got[i], ref.Torch, want[i])
		}
	}
	if q := Quantize([]float32{float32(math.NaN())}); q[0] != 0 {
		t.Errorf("NaN: got %d, want 0", q[0])
	}
}

// ToUnit is ToTensor's u/255 to the bit.
func TestToUnitMatchesTorchvision(t *testing.T) {
	ref := loadTorchRef(t)
	want := float32s(t, ref.ToUnit)
	if len(want) != 256 {
		t.Fatalf("testdata/torch.json: %d to_unit values, want 256", len(want))
	}
	for u := range 256 {
		if got := ToUnit(uint8(u)); math.Float32bits(got) != math.Float32bits(want[u]) {
			t.Errorf("ToUnit(%d) = %g, torchvision %g", u, got, want[u])
		}
	}
}

// Grid lays images out as make_grid does.
func TestGridMatchesMakeGrid(t *testing.T) {
	ref := loadTorchRef(t)
	pix := unhex(t, ref.Grid.Images)
	size := 3 * ref.Grid.W * ref.Grid.H
	var ims []*RGB
	for i := 0; i+size <= len(pix); i += size {
		ims = append(ims, &RGB{W: ref.Grid.W, H: ref.Grid.H, Pix: pix[i : i+size]})
	}
	for _, c := range ref.Grid.Cases {
		g, err := Grid(ims[:c.N], c.Cols, c.Pad)
		if err != nil {
			t.Fatal(err)
		}
		if g.W != c.W || g.H != c.H || !bytes.Equal(g.Pix, unhex(t, c.RGB)) {
			t.Errorf("%d images, %d columns, padding %d: got %d×%d, make_grid %d×%d, or the pixels differ", c.N, c.Cols, c.Pad, g.W, g.H, c.W, c.H)
		}
	}
	bad := []struct {
		name      string
		ims       []*RGB
		cols, pad int
	}{
		{"none", nil, 2, 1},
		{"no columns", ims, 0, 1},
		{"negative padding", ims, 2, -1},
		{"sizes differ", []*RGB{ims[0], NewRGB(2, 2)}, 2, 1},
		{"malformed", []*RGB{ims[0], {W: 3, H: 4, Pix: make([]uint8, 5)}}, 2, 1},
		{"nil", []*RGB{ims[0], nil}, 2, 1},
	}
	for _, c := range bad {
		if _, err := Grid(c.ims, c.cols, c.pad); err == nil {
			t.Errorf("%s: no error", c.name)
		}
	}
}

func TestFlipH(t *testing.T) {
	m := &RGB{W: 3, H: 2, Pix: []uint8{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18}}
	got, err := FlipH(m)
	if err != nil {
		t.Fatal(err)
	}
	want := []uint8{7, 8, 9, 4, 5, 6, 1, 2, 3, 16, 17, 18, 13, 14, 15, 10, 11, 12}
	if !bytes.Equal(got.Pix, want) {
		t.Errorf("got %v, want %v", got.Pix, want)
	}
	if _, err := FlipH(&RGB{W: 2, H: 2, Pix: make([]uint8, 3)}); err == nil {
		t.Error("malformed image: no error")
	}
}

// WritePNG writes what Decode reads back, and leaves no temporary file.
func TestWritePNG(t *testing.T) {
	dir := t.TempDir()
	m := testImage(t, "noise", 13, 7, 99)
	path := filepath.Join(dir, "out.png")
	if err := WritePNG(path, m); err != nil {
		t.Fatal(err)
	}
	back, err := Decode(path)
	if err != nil {
		t.Fatal(err)
	}
	if back.W != m.W || back.H != m.H || !bytes.Equal(back.Pix, m.Pix) {
		t.Error("read back different pixels")
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if raw[25] != 2 {
		t.Errorf("colour type %d, want 2 (RGB)", raw[25])
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 {
		t.Errorf("%d files in the folder, want only out.png", len(entries))
	}
	if err := WritePNG(filepath.Join(dir, "bad.png"), &RGB{W: 2, H: 2}); err == nil || !strings.Contains(err.Error(), "bad.png") {
		t.Errorf("malformed image: error %v, want one naming the file", err)
	}
	if err := WritePNG(filepath.Join(dir, "missing", "x.png"), m); err == nil {
		t.Error("missing folder: no error")
	}
}

// ADM upscales images smaller than the crop; NoUpscale refuses them.
func TestCenterCropSmall(t *testing.T) {
	m := testImage(t, "noise", 40, 30, 5)
	if got, err := CenterCrop(m, 32, CropOptions{}); err != nil || got.W != 32 || got.H != 32 {
		t.Fatalf("upscaling crop: %v", err)
	}
	_, err := CenterCrop(m, 32, CropOptions{NoUpscale: true})
	if !errors.Is(err, ErrTooSmall) || !strings.Contains(err.Error(), "40×30") {
		t.Errorf("error %v, want ErrTooSmall naming 40×30", err)
	}
	if _, err := CenterCrop(m, 30, CropOptions{NoUpscale: true}); err != nil {
		t.Errorf("shorter side equal to the crop: %v", err)
	}
	path := filepath.Join("testdata", "decode", "rgb_40x30.png")
	_, err = LoadCrop(path, 64, CropOptions{NoUpscale: true})
	if !errors.Is(err, ErrTooSmall) || !strings.Contains(err.Error(), path) {
		t.Errorf("LoadCrop: error %v, want ErrTooSmall naming %s", err, path)
	}
	if got, err := LoadCrop(path, 16, CropOptions{}); err != nil || got.W != 16 {
		t.Errorf("LoadCrop: %v", err)
	}
	for _, size := range []int{0, -3} {
		if _, err := CenterCrop(m, size, CropOptions{}); err == nil {
			t.Errorf("crop %d: no error", size)
		}
	}
}

func TestResizeErrors(t *testing.T) {
	m := testImage(t, "noise", 4, 4, 1)
	cases := []struct {
		name string
		m    *RGB
		w, h int
		f    Filter
	}{
		{"zero width", m, 0, 3, Box},
		{"negative height", m, 3, -1, Bicubic},
		{"unknown filter", m, 3, 3, Filter(9)},
		{"malformed", &RGB{W: 4, H: 4, Pix: make([]uint8, 47)}, 3, 3, Box},
		{"nil", nil, 3, 3, Box},
		{"too large", m, 1 << 20, 1 << 20, Box},
	}
	for _, c := range cases {
		if _, err := Resize(c.m, c.w, c.h, c.f); err == nil {
			t.Errorf("%s: no error", c.name)
		}
	}
}

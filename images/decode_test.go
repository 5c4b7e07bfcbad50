package images

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"hash/crc32"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// decodeRef is testdata/decode.json (see testdata/README.md).
type decodeRef struct {
	PIL   string
	Cases []struct {
		File string
		W, H int
		// Kind is "exact" (PIL's pixels as RGB, in hex, or their sha256),
		// "jpeg" (PIL's pixels in the PNG named PIL) or "refused" (Decode
		// must fail, saying Note).
		Kind   string
		RGB    string
		SHA256 string
		PIL    string
		Note   string
	}
}

// The difference that Go's inverse DCT leaves against libjpeg's islow on
// the reference JPEGs (quality 90): the largest single difference, and the
// share of samples that differ at all (below 5% except on a 5×9 picture,
// all edge).
const (
	jpegMaxDiff   = 3
	jpegDiffShare = 0.12
)

// Decode gives the pixels of PIL's Image.open(f).convert("RGB"): exactly for
// lossless formats and for JPEGs whose blocks hold only a DC term, within
// the inverse DCT's rounding for other JPEGs.
func TestDecodeMatchesPIL(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("testdata", "decode.json"))
	if err != nil {
		t.Fatal(err)
	}
	var ref decodeRef
	if err := json.Unmarshal(raw, &ref); err != nil {
		t.Fatalf("testdata/decode.json: %v", err)
	}
	if len(ref.Cases) == 0 {
		t.Fatal("testdata/decode.json: no cases")
	}
	for _, c := range ref.Cases {
		t.Run(c.File, func(t *testing.T) {
			got, err := Decode(filepath.Join("testdata", "decode", c.File))
			if c.Kind == "refused" {
				if err == nil || !strings.Contains(err.Error(), c.Note) {
					t.Fatalf("error %v, want one saying %q", err, c.Note)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.W != c.W || got.H != c.H {
				t.Fatalf("decoded %d×%d, PIL %d×%d", got.W, got.H, c.W, c.H)
			}
			switch {
			case c.Kind == "exact" && c.RGB != "":
				want, err := hex.DecodeString(c.RGB)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got.Pix, want) {
					t.Errorf("pixels differ from PIL %s's (%s)\n got % x\nwant % x", ref.PIL, c.Note, got.Pix, want)
				}
			case c.Kind == "exact":
				if d := digest(got); d != c.SHA256 {
					t.Errorf("pixels differ from PIL %s's (%s): sha256 %s, want %s", ref.PIL, c.Note, d, c.SHA256)
				}
			case c.Kind == "jpeg":
				want, err := Decode(filepath.Join("testdata", "decode", c.PIL))
				if err != nil {
					t.Fatal(err)
				}
				maxDiff, differ := 0, 0
				for i, g := range got.Pix {
					d := int(g) - int(want.Pix[i])
					d = max(d, -d)
					maxDiff = max(maxDiff, d)
					if d != 0 {
						differ++
					}
				}
				share := float64(differ) / float64(len(got.Pix))
				t.Logf("against PIL %s: max |diff| %d, %.2f%% of samples differ", ref.PIL, maxDiff, 100*share)
				if maxDiff > jpegMaxDiff || !(share <= jpegDiffShare) {
					t.Errorf("max |diff| %d (bound %d), %.2f%% of samples differ (bound %.0f%%)", maxDiff, jpegMaxDiff, 100*share, 100*jpegDiffShare)
				}
			default:
				t.Fatalf("unknown case kind %q", c.Kind)
			}
		})
	}
}

// Every file the decoder refuses is named, with what was wrong.
func TestDecodeErrors(t *testing.T) {
	read := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join("testdata", "decode", name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	png := read("rgb_40x30.png")
	jpg := read("photo_420.jpg")
	// An IHDR claiming 4000×3000 pixels over the 40×30 image's data,
	// with its CRC fixed so that only the size lies.
	lying := append([]byte(nil), png...)
	copy(lying[16:24], []byte{0, 0, 0x0f, 0xa0, 0, 0, 0x0b, 0xb8})
	fixCRC(lying[8:])
	zero := append([]byte(nil), png...)
	copy(zero[16:24], []byte{0, 0, 0, 0, 0, 0, 0, 30})
	fixCRC(zero[8:])
	cases := []struct {
		name string
		data []byte
		want string
	}{
		{"empty.png", nil, "empty file"},
		{"truncated.png", png[:len(png)/2], "PNG"},
		{"lying.png", lying, "PNG"},
		{"zero.png", zero, "0×30"},
		{"truncated.jpg", jpg[:len(jpg)/2], "JPEG"},
		{"header_only.jpg", jpg[:20], "JPEG"},
		{"anim.gif", []byte("GIF89a\x01\x00\x01\x00\x00\x00\x00;"), "unsupported image format GIF"},
		{"text.jpg", []byte("hello, world"), "unknown image format"},
		{"ascii.ppm", []byte("P3 1 1 255 1 2 3"), "PNM variant P3"},
		{"deep.pgm", []byte("P5 1 1 65535\n\x00\x01"), "maxval 65535"},
		{"short.ppm", []byte("P6 2 2 255\n\x00\x01\x02"), "truncated"},
		{"bomb.pgm", []byte("P5 100000 100000 255\n"), "decompression-bomb"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), c.name)
			if err := os.WriteFile(path, c.data, 0o644); err != nil {
				t.Fatal(err)
			}
			m, err := Decode(path)
			if err == nil {
				t.Fatalf("decoded %d×%d, want an error", m.W, m.H)
			}
			if msg := err.Error(); !strings.Contains(msg, path) || !strings.Contains(msg, c.want) {
				t.Errorf("error %q: want it to name %s and say %q", msg, path, c.want)
			}
			if _, err := DecodeBytes(c.data); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("DecodeBytes: error %v, want one saying %q", err, c.want)
			}
		})
	}
	if _, err := Decode(filepath.Join(t.TempDir(), "missing.png")); err == nil || !strings.Contains(err.Error(), "missing.png") {
		t.Errorf("missing file: error %v, want one naming it", err)
	}
}

// fixCRC rewrites the CRC of the chunk that p starts with.
func fixCRC(p []byte) {
	n := int(p[0])<<24 | int(p[1])<<16 | int(p[2])<<8 | int(p[3])
	c := crc32.ChecksumIEEE(p[4 : 8+n])
	p[8+n], p[9+n], p[10+n], p[11+n] = byte(c>>24), byte(c>>16), byte(c>>8), byte(c)
}

// A PNG cut just before its IEND chunk decodes, as PIL decodes it.
func TestDecodeWithoutIEND(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "decode", "rgb_40x30.png"))
	if err != nil {
		t.Fatal(err)
	}
	whole, err := DecodeBytes(data)
	if err != nil {
		t.Fatal(err)
	}
	cut, err := DecodeBytes(data[:len(data)-12])
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(whole.Pix, cut.Pix) {
		t.Error("pixels differ without IEND")
	}
}

// DecodeReader reads the same pixels as Decode.
func TestDecodeReader(t *testing.T) {
	path := filepath.Join("testdata", "decode", "rgb_40x30.png")
	a, err := Decode(path)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b, err := DecodeReader(f)
	if err != nil {
		t.Fatal(err)
	}
	if a.W != b.W || a.H != b.H || !bytes.Equal(a.Pix, b.Pix) {
		t.Error("DecodeReader and Decode disagree")
	}
}

// FuzzDecode: no input makes the decoder panic, hang or return an image
// whose fields disagree.
func FuzzDecode(f *testing.F) {
	entries, err := os.ReadDir(filepath.Join("testdata", "decode"))
	if err != nil {
		f.Fatal(err)
	}
	for _, e := range entries {
		if info, err := e.Info(); err == nil && info.Size() < 4096 {
			b, err := os.ReadFile(filepath.Join("testdata", "decode", e.Name()))
			if err != nil {
				f.Fatal(err)
			}
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := DecodeBytes(data)
		if err != nil {
			return
		}
		if err := m.check(); err != nil {
			t.Fatal(err)
		}
	})
}

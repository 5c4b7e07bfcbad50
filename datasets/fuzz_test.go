package datasets

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzRead reads arbitrary bytes as a data-set file: no panic; a
// rejection is one bounded line naming the file; an accepted set is
// consistent (Validate) and every latent is finite and within
// ±MaxAbsLatent.
func FuzzRead(f *testing.F) {
	dir := f.TempDir()
	for i, edit := range []func(*Set){
		func(*Set) {},
		func(s *Set) { s.Edges = nil },
		func(s *Set) { s.Classes, s.NumClasses = nil, 5 },
		func(s *Set) { withCaptionFeats(s) },
	} {
		s := tinySet()
		edit(s)
		path := filepath.Join(dir, "seed.safetensors")
		if err := Write(path, s); err != nil {
			f.Fatal(err)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
		if i == 0 {
			// The same bytes with an outlier: the reader must refuse it.
			bad := append([]byte(nil), b...)
			copy(bad[len(bad)-4-8*3-18:], []byte{0xff, 0xff, 0x7f, 0x7f})
			f.Add(bad)
		}
	}
	path := filepath.Join(dir, "fuzz.safetensors")
	f.Fuzz(func(t *testing.T, data []byte) {
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		s, err := Read(path)
		if err != nil {
			msg := err.Error()
			if !strings.Contains(msg, path) || strings.Contains(msg, "\n") || len(msg) > 2048 {
				t.Fatalf("error is not one bounded line naming the file: %.300q", msg)
			}
			return
		}
		if err := s.Validate(); err != nil {
			t.Fatalf("Read accepted a set that Validate refuses: %v", err)
		}
		for i, x := range s.Latents {
			if v := float64(x); !(math.Abs(v) <= MaxAbsLatent) {
				t.Fatalf("accepted latent %d = %v", i, x)
			}
		}
	})
}

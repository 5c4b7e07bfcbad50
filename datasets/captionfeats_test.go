package datasets

import (
	"math"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// withCaptionFeats gives tinySet encoded captions of 2, 1 and 3 rows of
// width 2 and a 2-row empty prompt.
func withCaptionFeats(s *Set) *Set {
	s.CaptionDim = 2
	s.CaptionFeats = [][]float32{{1, 2, 3, 4}, {-5, 6}, {0.5, 0.25, 7, 8, 9, -10}}
	s.EmptyCaptionFeats = []float32{0.1, 0.2, 0.3, 0.4}
	return s
}

func TestCaptionFeatsRoundTrip(t *testing.T) {
	for _, empty := range []bool{true, false} {
		s := withCaptionFeats(tinySet())
		if !empty {
			s.EmptyCaptionFeats = nil
		}
		path := filepath.Join(t.TempDir(), "d.safetensors")
		if err := Write(path, s); err != nil {
			t.Fatal(err)
		}
		got, err := Read(path)
		if err != nil {
			t.Fatal(err)
		}
		if got.CaptionDim != s.CaptionDim || !reflect.DeepEqual(got.CaptionFeats, s.CaptionFeats) || !reflect.DeepEqual(got.EmptyCaptionFeats, s.EmptyCaptionFeats) {
			t.Fatalf("empty prompt %v: read dim %d, %v, empty %v; wrote dim %d, %v, empty %v", empty,
				got.CaptionDim, got.CaptionFeats, got.EmptyCaptionFeats, s.CaptionDim, s.CaptionFeats, s.EmptyCaptionFeats)
		}
	}
}

func TestCaptionFeatsValidate(t *testing.T) {
	nan := float32(math.NaN())
	for _, c := range []struct {
		name string
		edit func(*Set)
		want string
	}{
		{"count", func(s *Set) { s.CaptionFeats = s.CaptionFeats[:2] }, "2 encoded captions for 3 samples"},
		{"empty caption", func(s *Set) { s.CaptionFeats[1] = nil }, "sample 1 has 0 values"},
		{"ragged", func(s *Set) { s.CaptionFeats[0] = s.CaptionFeats[0][:3] }, "sample 0 has 3 values, want a positive multiple of 2"},
		{"nan", func(s *Set) { s.CaptionFeats[2][3] = nan }, "sample 2, row 1, column 1: value NaN"},
		{"empty prompt nan", func(s *Set) { s.EmptyCaptionFeats[0] = nan }, "empty prompt's features, row 0, column 0"},
		{"no width", func(s *Set) { s.CaptionDim = 0 }, "0 wide"},
		{"empty prompt alone", func(s *Set) { s.CaptionFeats = nil }, "without caption features"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := withCaptionFeats(tinySet())
			c.edit(s)
			err := Write(filepath.Join(t.TempDir(), "d.safetensors"), s)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want an error containing %q", err, c.want)
			}
		})
	}
}

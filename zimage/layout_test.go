package zimage

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
)

func TestPadTo(t *testing.T) {
	for _, m := range []int{SeqMultiOf, 8, 1} {
		for _, tc := range []struct{ n, want int }{{1, m}, {m - 1, m}, {m, m}, {m + 1, 2 * m}} {
			if tc.n < 1 {
				continue
			}
			if got := padTo(tc.n, m); got != tc.want {
				t.Errorf("padTo(%d, %d) = %d, want %d", tc.n, m, got, tc.want)
			}
		}
	}
}

// Unpatchify inverts Patchify for frame and spatial patch sizes alike.
func TestPatchifyRoundTrip(t *testing.T) {
	for _, tc := range []struct{ c, f, h, w, pf, p int }{{1, 1, 2, 2, 1, 2}, {3, 2, 4, 6, 1, 2}, {2, 4, 2, 2, 2, 1}} {
		x := make([]float32, tc.c*tc.f*tc.h*tc.w)
		for i := range x {
			x[i] = float32(i)
		}
		tok := Patchify(nil, x, tc.c, tc.f, tc.h, tc.w, tc.pf, tc.p)
		if len(tok) != len(x) {
			t.Fatalf("%+v: %d token values for %d latent values", tc, len(tok), len(x))
		}
		back := make([]float32, len(x))
		Unpatchify(back, tok, tc.c, tc.f, tc.h, tc.w, tc.pf, tc.p)
		if !reflect.DeepEqual(back, x) {
			t.Errorf("%+v: Unpatchify(Patchify(x)) != x", tc)
		}
	}
}

// The unified stream is [image ; caption] per item, and the output rows
// are each item's real image tokens.
func TestLayoutUnified(t *testing.T) {
	for _, m := range []int{SeqMultiOf, 4} {
		t.Run(fmt.Sprint(m), func(t *testing.T) { testLayoutUnified(t, m) })
	}
}

func testLayoutUnified(t *testing.T, multiple int) {
	l, err := NewLayout([][3]int{{1, 1, 2}, {1, 1, 1}}, []int{1, multiple + 1}, multiple)
	if err != nil {
		t.Fatal(err)
	}
	if want := []int{multiple, multiple}; !reflect.DeepEqual(l.ImagePadded, want) {
		t.Errorf("image sequences padded to %v, want %v", l.ImagePadded, want)
	}
	if want := []int{multiple, 2 * multiple}; !reflect.DeepEqual(l.CaptionPadded, want) {
		t.Errorf("caption sequences padded to %v, want %v", l.CaptionPadded, want)
	}
	img0, img1 := l.ImagePadded[0], l.ImagePadded[1]
	cap0, cap1 := l.CaptionPadded[0], l.CaptionPadded[1]
	if want := []int{0, img0 + cap0, img0 + cap0 + img1 + cap1}; !reflect.DeepEqual(l.UnifiedOffsets, want) {
		t.Fatalf("unified offsets %v, want %v", l.UnifiedOffsets, want)
	}
	nImg := img0 + img1
	if l.UnifiedRows[0] != 0 || l.UnifiedRows[img0] != nImg || l.UnifiedRows[img0+cap0] != img0 {
		t.Errorf("unified rows start %v, want image rows then caption rows per item", l.UnifiedRows[:3])
	}
	if want := []int{0, 1, img0 + cap0}; !reflect.DeepEqual(l.OutputRows, want) {
		t.Errorf("output rows %v, want %v", l.OutputRows, want)
	}
	// Image ids start after the item's padded caption; pad ids are zero.
	if got := l.ImagePos[:6]; !reflect.DeepEqual(got, []float64{float64(cap0 + 1), 0, 0, float64(cap0 + 1), 0, 1}) {
		t.Errorf("image ids of item 0 start %v", got)
	}
	if got := l.ImagePos[6:9]; !reflect.DeepEqual(got, []float64{0, 0, 0}) {
		t.Errorf("first image pad id %v, want (0, 0, 0)", got)
	}
}

func TestLayoutErrors(t *testing.T) {
	for _, tc := range []struct {
		name  string
		grids [][3]int
		caps  []int
		want  string
	}{
		{"count mismatch", [][3]int{{1, 1, 1}}, []int{1, 2}, "1 images but 2 captions"},
		{"empty grid", [][3]int{{1, 0, 1}}, []int{1}, "token grid [1 0 1]"},
		{"empty caption", [][3]int{{1, 1, 1}}, []int{0}, "empty caption"},
		{"no multiple", [][3]int{{1, 1, 1}}, []int{1}, "multiples of 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := SeqMultiOf
			if tc.name == "no multiple" {
				m = 0
			}
			_, err := NewLayout(tc.grids, tc.caps, m)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want one mentioning %q", err, tc.want)
			}
		})
	}
}

func TestPrepareErrors(t *testing.T) {
	cfg := tinyConfig(true)
	m := newModel(cfg)
	lat := Latent{Data: make([]float32, cfg.InChannels*1*2*2), F: 1, H: 2, W: 2}
	okCap := make([]float32, 2*cfg.CapFeatDim)
	for _, tc := range []struct {
		name string
		x    []Latent
		t    []float32
		caps [][]float32
		want string
	}{
		{"lengths", []Latent{lat}, []float32{0, 1}, [][]float32{okCap}, "1 latents, 2 times and 1 captions"},
		{"odd height", []Latent{{Data: make([]float32, cfg.InChannels*3*2), F: 1, H: 3, W: 2}}, []float32{0}, [][]float32{okCap}, "do not split into 1×2×2 patches (item 0)"},
		{"latent size", []Latent{{Data: make([]float32, 3), F: 1, H: 2, W: 2}}, []float32{0}, [][]float32{okCap}, "item 0 has 3 latent values"},
		{"caption width", []Latent{lat}, []float32{0}, [][]float32{okCap[:3]}, "not a multiple of cap_feat_dim"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := m.Prepare(tc.x, tc.t, tc.caps)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want one mentioning %q", err, tc.want)
			}
		})
	}
}

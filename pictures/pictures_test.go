package pictures

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dcdit/dcdit/images"
)

func TestInceptionScore(t *testing.T) {
	const k = 4
	onehot := func(n int) []float32 {
		p := make([]float32, n*k)
		for i := range n {
			p[i*k+i%k] = 1
		}
		return p
	}
	uniform := make([]float32, 8*k)
	for i := range uniform {
		uniform[i] = 1.0 / k
	}
	cases := []struct {
		name  string
		probs []float32
		n     int
		want  float64
	}{
		{"uniform predictions", uniform, 8, 1},
		{"confident and balanced", onehot(8), 8, k},
		{"no pictures", nil, 0, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := inceptionScore(c.probs, c.n); !(math.Abs(got-c.want) <= 1e-6) {
				t.Errorf("IS = %v, want %v", got, c.want)
			}
		})
	}
	// ADM's splits: 2·ISSplit confident pictures of one class per split
	// score 1 in each split.
	n := 2 * ISSplit
	p := make([]float32, n*k)
	for i := range n {
		p[i*k+i/ISSplit] = 1
	}
	if got := inceptionScore(p, n); !(math.Abs(got-1) <= 1e-9) {
		t.Errorf("IS over splits of one class each = %v, want 1", got)
	}
}

func TestSoftmax(t *testing.T) {
	got := appendSoftmax(nil, []float32{0, 0, 1000, 1000}, 2)
	want := []float32{0.5, 0.5, 0.5, 0.5}
	for i := range want {
		if !(math.Abs(float64(got[i]-want[i])) <= 1e-7) {
			t.Fatalf("softmax = %v, want %v", got, want)
		}
	}
}

func TestMemorySetBatches(t *testing.T) {
	var pics []*images.RGB
	for i := range 5 {
		m := images.NewRGB(2, 3)
		m.Pix[0] = uint8(i)
		pics = append(pics, m)
	}
	var sizes, firsts []int
	err := memorySet{name: "m", pics: pics}.Each(2, func(pix []uint8, n, h, w int) error {
		if h != 3 || w != 2 || len(pix) != n*h*w*3 {
			t.Errorf("batch of %d: %d×%d, %d bytes", n, h, w, len(pix))
		}
		sizes = append(sizes, n)
		firsts = append(firsts, int(pix[0]))
		return nil
	})
	if err != nil || len(sizes) != 3 || sizes[2] != 1 || firsts[1] != 2 || firsts[2] != 4 {
		t.Errorf("batches %v starting with %v, err %v", sizes, firsts, err)
	}
}

// A Save that fails part-way leaves no .npz and no grid behind.
func TestSaveStreamErrors(t *testing.T) {
	pic := func() *images.RGB { return images.NewRGB(4, 4) }
	cases := []struct {
		name    string
		produce func(emit func(int, *images.RGB) error) error
		want    string
	}{
		{"short", func(emit func(int, *images.RGB) error) error { return emit(0, pic()) }, "1 of 2 pictures"},
		{"out of order", func(emit func(int, *images.RGB) error) error { return emit(1, pic()) }, "arrived where 0"},
		{"other size", func(emit func(int, *images.RGB) error) error { return emit(0, images.NewRGB(5, 4)) }, "want 4×4"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			s := Save{NPZ: filepath.Join(dir, "s.npz"), Grid: filepath.Join(dir, "g.png")}
			err := s.Stream(2, 4, 4, c.produce)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want %q", err, c.want)
			}
			entries, _ := os.ReadDir(dir)
			if len(entries) != 0 {
				t.Errorf("a failed save left %d files", len(entries))
			}
		})
	}
}

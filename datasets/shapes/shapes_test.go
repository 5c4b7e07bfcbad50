package shapes

import (
	"encoding/binary"
	"hash/fnv"
	"math"
	"testing"

	"github.com/dcdit/dcdit/datasets"
	"github.com/dcdit/dcdit/preview"
)

// digest hashes samples 0..n−1 (latent bits, label, edges).
func digest(g *Generator, n int) uint64 {
	h := fnv.New64a()
	var b [4]byte
	for i := range n {
		s := g.Sample(i)
		for _, v := range s.Latent {
			binary.LittleEndian.PutUint32(b[:], math.Float32bits(v))
			h.Write(b[:])
		}
		h.Write([]byte{byte(s.Label)})
		for _, e := range s.Edges {
			if e {
				h.Write([]byte{1})
			} else {
				h.Write([]byte{0})
			}
		}
	}
	return h.Sum64()
}

// TestGolden pins the samples of a few (seed, size) pairs: a change means
// every machine's data changed, which needs a new Version.
func TestGolden(t *testing.T) {
	cases := []struct {
		size int
		seed uint64
		want uint64
	}{
		{16, 0, 0x333519cbf96cfdc9},
		{16, 1, 0xc64e0d3d390941e6},
		{8, 7, 0x8892f5414cb4f8d0},
		{32, 1, 0xac1326b34bf218a1},
	}
	for _, c := range cases {
		g, err := New(c.size, c.seed)
		if err != nil {
			t.Fatal(err)
		}
		if got := digest(g, 32); got != c.want {
			t.Errorf("size %d seed %d: digest %#x, want %#x (the generator changed: bump Version and update)", c.size, c.seed, got, c.want)
		}
	}
}

// TestDeterministic: the same (seed, index) gives the same sample, in any
// order of generation; other seeds and indices give other samples.
func TestDeterministic(t *testing.T) {
	g, _ := New(16, 3)
	a := g.Sample(5)
	for i := range 5 {
		g.Sample(i)
	}
	b := g.Sample(5)
	if !equal(a.Latent, b.Latent) || a.Label != b.Label {
		t.Fatal("sample 5 differs between two draws")
	}
	g2, _ := New(16, 4)
	if c := g2.Sample(5); equal(a.Latent, c.Latent) {
		t.Error("seeds 3 and 4 give the same sample 5")
	}
	if c := g.Sample(6); equal(a.Latent, c.Latent) {
		t.Error("samples 5 and 6 are equal")
	}
	lab, err := g.SampleOf(5, a.Label)
	if err != nil || !equal(lab.Latent, a.Latent) {
		t.Errorf("SampleOf(5, its own label) differs from Sample(5) (err %v)", err)
	}
	if _, err := g.SampleOf(0, len(Classes)); err == nil {
		t.Error("SampleOf accepted an out-of-range label")
	}
}

func equal(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return false
		}
	}
	return true
}

// TestSampleStructure: two flat regions, edges exactly where the regions
// meet, values in [−2, 2], the shape inside the grid, every class
// present, and each class's masks distinct from every other class's for
// the same stream.
func TestSampleStructure(t *testing.T) {
	for _, size := range []int{8, 16, 24} {
		g, _ := New(size, 11)
		seen := map[int]int{}
		for i := range 200 {
			s := g.Sample(i)
			seen[s.Label]++
			n := size * size
			fgCells, edgeCells := 0, 0
			for l := range n {
				region := s.Mask[l]
				if region {
					fgCells++
				}
				if s.Edges[l] {
					edgeCells++
				}
				r, c := l/size, l%size
				if region && (r == 0 || c == 0 || r == size-1 || c == size-1) {
					t.Fatalf("size %d sample %d: shape touches the border at (%d, %d)", size, i, r, c)
				}
				for ch := range Channels {
					v := s.Latent[ch*n+l]
					if !(v >= -2 && v <= 2) {
						t.Fatalf("size %d sample %d: value %v outside [−2, 2]", size, i, v)
					}
					// Flat: every cell of a region has the region's value.
					ref := s.Latent[ch*n+firstOf(s.Mask, region)]
					if v != ref {
						t.Fatalf("size %d sample %d: region not flat (%v vs %v)", size, i, v, ref)
					}
				}
			}
			if fgCells == 0 || fgCells == n || edgeCells == 0 {
				t.Fatalf("size %d sample %d (%s): %d shape cells, %d edge cells", size, i, Classes[s.Label], fgCells, edgeCells)
			}
			if s.Background == s.Foreground {
				t.Fatalf("size %d sample %d: one colour for shape and background", size, i)
			}
		}
		if len(seen) != len(Classes) {
			t.Errorf("size %d: 200 samples cover %d of %d classes", size, len(seen), len(Classes))
		}
	}
}

func firstOf(mask []bool, v bool) int {
	for i, m := range mask {
		if m == v {
			return i
		}
	}
	return -1
}

// TestClassesDiffer: the same stream (size, position) drawn
// as each class gives a different shape mask every time.
func TestClassesDiffer(t *testing.T) {
	g, _ := New(16, 5)
	for i := range 20 {
		masks := make([][]bool, len(Classes))
		for c := range Classes {
			s, err := g.SampleOf(i, c)
			if err != nil {
				t.Fatal(err)
			}
			masks[c] = s.Mask
			for d := range c {
				if sameMask(masks[c], masks[d]) {
					t.Errorf("sample %d: %s and %s have the same mask", i, Classes[c], Classes[d])
				}
			}
		}
	}
}

func sameMask(a, b []bool) bool {
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestEdgeMask(t *testing.T) {
	cases := []struct {
		name       string
		mask, want string // rows of 4, '#' set
	}{
		{"empty", "........ ........", "........ ........"},
		{"corner", "#... .... .... ....", "##.. #... .... ...."},
		{"centre", ".... .##. .##. ....", ".##. #### #### .##."},
		{"full", "#### #### #### ####", ".... .... .... ...."},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			mask, h, w := parse(c.mask)
			want, _, _ := parse(c.want)
			got := make([]bool, h*w)
			EdgeMask(got, mask, h, w)
			if !sameMask(got, want) {
				t.Errorf("edges of %q = %v, want %q", c.mask, got, c.want)
			}
		})
	}
}

func parse(s string) (cells []bool, h, w int) {
	row := 0
	for _, r := range s {
		switch r {
		case ' ':
			h++
			w, row = row, 0
			continue
		case '#':
			cells = append(cells, true)
		default:
			cells = append(cells, false)
		}
		row++
	}
	return cells, h + 1, row
}

// TestPaletteRendersAsNamed: through preview.SD each palette colour is
// near its intended RGB and the colours are far apart in latent space.
func TestPaletteRendersAsNamed(t *testing.T) {
	target := [][3]float32{{0.8, -0.6, -0.6}, {0.8, 0.1, -0.7}, {0.7, 0.7, -0.7}, {-0.6, 0.6, -0.6}, {-0.6, 0.5, 0.6},
		{-0.5, -0.5, 0.7}, {0.7, -0.6, 0.6}, {0.8, 0.8, 0.8}, {-0.8, -0.8, -0.8}}
	if len(target) != len(Palette) || len(paletteLatent) != len(Palette) {
		t.Fatal("palette tables differ in length")
	}
	for k, v := range paletteLatent {
		for ch := range 3 {
			var got float32
			for c := range Channels {
				got += v[c] * preview.SD.Coef[c][ch]
			}
			if want := 0.85 * target[k][ch]; !(math.Abs(float64(got-want)) <= 0.005) {
				t.Errorf("%s: RGB channel %d renders %.3f, want %.3f", Palette[k], ch, got, want)
			}
		}
		for j := range k {
			var d float64
			for c := range Channels {
				d += float64((v[c] - paletteLatent[j][c]) * (v[c] - paletteLatent[j][c]))
			}
			if !(math.Sqrt(d) >= 1.2) {
				t.Errorf("%s and %s are %.2f apart in latent space, want ≥ 1.2", Palette[k], Palette[j], math.Sqrt(d))
			}
		}
	}
}

// TestStatistics: over a data set the values look like VAE latents:
// per-channel standard deviation within [0.6, 1.6] and mean within ±0.6.
func TestStatistics(t *testing.T) {
	g, _ := New(16, 1)
	s, err := g.Set(400)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Validate(); err != nil {
		t.Fatal(err)
	}
	n := s.H * s.W
	for c := range Channels {
		var sum, sq float64
		for i := range s.N {
			for _, v := range s.Latents[(i*Channels+c)*n : (i*Channels+c+1)*n] {
				sum += float64(v)
				sq += float64(v) * float64(v)
			}
		}
		cnt := float64(s.N * n)
		mean := sum / cnt
		std := math.Sqrt(sq/cnt - mean*mean)
		t.Logf("channel %d: mean %.3f std %.3f", c, mean, std)
		if !(math.Abs(mean) <= 0.6 && std >= 0.6 && std <= 1.6) {
			t.Errorf("channel %d: mean %.3f std %.3f, want |mean| ≤ 0.6 and std in [0.6, 1.6]", c, mean, std)
		}
	}
}

func TestNewRejectsSizes(t *testing.T) {
	for _, size := range []int{-1, 0, 7, 5000} {
		if _, err := New(size, 0); err == nil {
			t.Errorf("New(%d) accepted", size)
		}
	}
	g, _ := New(16, 0)
	if _, err := g.Set(0); err == nil {
		t.Error("Set(0) accepted")
	}
}

// TestDerivedEdgesMatch: edges derived from the latents at the evaluation's
// threshold equal the generator's masks (regions differ by more than it).
func TestDerivedEdgesMatch(t *testing.T) {
	g, _ := New(16, 2)
	s, err := g.Set(300)
	if err != nil {
		t.Fatal(err)
	}
	lo, hi := s.Range()
	got := s.DeriveEdges(datasets.DeriveEdgesFraction * float64(hi-lo))
	for i := range got {
		if got[i] != s.Edges[i] {
			t.Fatalf("sample %d cell %d: derived %v, generated %v", i/256, i%256, got[i], s.Edges[i])
		}
	}
}

// TestBalancedSet: sample i is class i mod the class count, drawn as
// SampleOf draws it.
func TestBalancedSet(t *testing.T) {
	g, _ := New(16, 4)
	s, err := g.BalancedSet(23)
	if err != nil {
		t.Fatal(err)
	}
	per := Channels * 16 * 16
	for i, l := range s.Labels {
		if l != i%len(Classes) {
			t.Fatalf("sample %d: class %d, want %d", i, l, i%len(Classes))
		}
		want, _ := g.SampleOf(i, l)
		for j, v := range want.Latent {
			if s.Latents[i*per+j] != v {
				t.Fatalf("sample %d differs from SampleOf at value %d", i, j)
			}
		}
	}
}

package optim

import (
	"slices"
	"strings"
	"testing"
)

func TestMask(t *testing.T) {
	cases := []struct {
		name       string
		make       func() (*Mask, error)
		trainable  []Range
		frozen     []Range
		wantErr    string
		frozenIdxs []int
	}{
		{"all", func() (*Mask, error) { return AllTrainable(10), nil }, []Range{{0, 10}}, nil, "", nil},
		{"empty buffer", func() (*Mask, error) { return AllTrainable(0), nil }, nil, nil, "", nil},
		{"freeze nothing", func() (*Mask, error) { return FreezeMask(10) }, []Range{{0, 10}}, nil, "", nil},
		{"freeze overlapping unsorted", func() (*Mask, error) {
			return FreezeMask(20, Range{8, 12}, Range{2, 4}, Range{3, 5}, Range{12, 13}, Range{6, 6})
		},
			[]Range{{0, 2}, {5, 8}, {13, 20}}, []Range{{2, 5}, {8, 13}}, "", []int{2, 4, 8, 12}},
		{"freeze edges", func() (*Mask, error) { return FreezeMask(10, Range{0, 2}, Range{9, 10}) }, []Range{{2, 9}}, []Range{{0, 2}, {9, 10}}, "", []int{0, 1, 9}},
		{"train only", func() (*Mask, error) { return TrainMask(10, Range{4, 6}, Range{6, 7}) }, []Range{{4, 7}}, []Range{{0, 4}, {7, 10}}, "", []int{0, 3, 7, 9}},
		{"train nothing", func() (*Mask, error) { return TrainMask(5) }, nil, []Range{{0, 5}}, "", []int{0, 4}},
		{"past the end", func() (*Mask, error) { return FreezeMask(10, Range{5, 11}) }, nil, nil, "not within a buffer of 10", nil},
		{"negative", func() (*Mask, error) { return TrainMask(10, Range{-1, 3}) }, nil, nil, "[-1,3)", nil},
		{"reversed", func() (*Mask, error) { return TrainMask(10, Range{5, 3}) }, nil, nil, "[5,3)", nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m, err := c.make()
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := m.Trainable(); !slices.Equal(got, c.trainable) {
				t.Errorf("Trainable() = %v, want %v", got, c.trainable)
			}
			if got := m.Frozen(); !slices.Equal(got, c.frozen) {
				t.Errorf("Frozen() = %v, want %v", got, c.frozen)
			}
			if got, want := m.NumTrainable(), total(c.trainable); got != want {
				t.Errorf("NumTrainable() = %d, want %d", got, want)
			}
			for i := range m.Len() {
				want := slices.Contains(c.frozenIdxs, i) || !inRanges(i, c.trainable)
				if got := m.IsFrozen(i); got != want {
					t.Errorf("IsFrozen(%d) = %v, want %v", i, got, want)
				}
			}
		})
	}
}

func inRanges(i int, rs []Range) bool {
	for _, r := range rs {
		if i >= r.Lo && i < r.Hi {
			return true
		}
	}
	return false
}

func TestMaskGatherScatter(t *testing.T) {
	m, err := FreezeMask(8, Range{1, 3}, Range{5, 6})
	if err != nil {
		t.Fatal(err)
	}
	full := []float32{0, 1, 2, 3, 4, 5, 6, 7}
	compact := make([]float32, m.NumTrainable())
	m.Gather(compact, full)
	if want := []float32{0, 3, 4, 6, 7}; !slices.Equal(compact, want) {
		t.Fatalf("Gather = %v, want %v", compact, want)
	}
	out := []float32{-1, -1, -1, -1, -1, -1, -1, -1}
	m.Scatter(out, compact)
	if want := []float32{0, -1, -1, 3, 4, -1, 6, 7}; !slices.Equal(out, want) {
		t.Fatalf("Scatter = %v, want %v", out, want)
	}
	defer func() {
		if r := recover(); r == nil || !strings.Contains(r.(string), "Mask.Gather") {
			t.Errorf("Gather with a short buffer: recover() = %v", r)
		}
	}()
	m.Gather(compact[:2], full)
}

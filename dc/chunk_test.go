package dc

import (
	"slices"
	"strings"
	"testing"
)

func TestTailDrop(t *testing.T) {
	// Two samples of 5 tokens; ties in probability drop the lower index first.
	prob := []float32{1, 0.6, 0.7, 0.6, 1, 1, 0.4, 0.9, 0.8, 1}
	natural := []bool{true, true, true, true, true, true, false, true, true, true}
	for _, tc := range []struct {
		frac []float32
		want []bool
	}{
		{nil, natural},
		{[]float32{0}, natural},
		// n = 5 → floor(5·0.4) = 2 dropped: the two 0.6s (indices 1, 3).
		// n = 4 → floor(4·0.4) = 1 dropped: 0.8 (index 8).
		{[]float32{0.4}, []bool{true, false, true, false, true, true, false, true, false, true}},
		// Per sample: floor(5·0.2) = 1 (the 0.6 at index 1), none in sample 1.
		{[]float32{0.2, 0.2}, []bool{true, false, true, true, true, true, false, true, true, true}},
		{[]float32{0.5, 0}, []bool{true, false, true, false, true, true, false, true, true, true}},
		// Dense keeps every cell of its sample, the one the router left out too.
		{[]float32{0.4, Dense}, []bool{true, false, true, false, true, true, true, true, true, true}},
	} {
		got, err := TailDrop(prob, natural, 2, tc.frac)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("frac %v: kept %v, want %v", tc.frac, got, tc.want)
		}
	}
	for _, tc := range []struct {
		frac []float32
		msg  string
	}{
		{[]float32{1}, "want 0 ≤ ρ < 1"},
		{[]float32{-0.1}, "want 0 ≤ ρ < 1"},
		{[]float32{0.1, 0.2, 0.3}, "3 drop fractions for a batch of 2"},
	} {
		if _, err := TailDrop(prob, natural, 2, tc.frac); err == nil || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("frac %v: error %v, want one mentioning %q", tc.frac, err, tc.msg)
		}
	}
	if _, err := TailDrop(prob, natural[:9], 2, nil); err == nil {
		t.Error("mismatched lengths accepted")
	}
}

func TestChunk(t *testing.T) {
	// One 3×3 grid keeping tokens 0, 4 and 8 (the diagonal), and a second
	// keeping 2 and 6.
	g := grid{batch: 2, rows: 3, cols: 3}
	kept := make([]bool, 18)
	for _, i := range []int{0, 4, 8, 9 + 2, 9 + 6} {
		kept[i] = true
	}
	c, err := chunk(kept, g)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(c.NumKept, []int{3, 2}) || !slices.Equal(c.Offsets, []int{0, 3, 5}) {
		t.Fatalf("counts %v offsets %v", c.NumKept, c.Offsets)
	}
	if !slices.Equal(c.Index, []int{0, 4, 8, 11, 15}) {
		t.Errorf("index %v", c.Index)
	}
	if !slices.Equal(c.Pos, []float64{0, 0, 1, 1, 2, 2, 0, 2, 2, 0}) {
		t.Errorf("pos %v", c.Pos)
	}
	// Sample 0: (0,1) is 1 from (0,0) and 1 from (1,1): tie → j = 0;
	// (1,2) is 1 from (1,1) and (2,2): tie → j = 1.
	// Sample 1: (1,1) and (2,2) are equidistant from (0,2) and (2,0): j = 0.
	want := []int{
		0, 0, 1, 0, 1, 1, 1, 1, 2,
		0, 0, 0, 1, 0, 0, 1, 1, 0,
	}
	if !slices.Equal(c.PlugBack, want) {
		t.Errorf("plug-back %v, want %v", c.PlugBack, want)
	}
	if rows := c.plugBackRows(); rows[9+3] != 4 || rows[8] != 2 {
		t.Errorf("plug-back rows %v", rows)
	}
	if _, err := chunk(make([]bool, 18), g); err == nil || !strings.Contains(err.Error(), "keeps no token") {
		t.Errorf("empty sample: error %v", err)
	}
}

func TestFracAt(t *testing.T) {
	for _, tt := range []struct{ rho, t, below, want float32 }{
		{0.4, 900, 800, 0.4}, {0.4, 799, 800, Dense}, {0.4, 800, 800, 0.4}, {0.3, 0, 0, 0.3},
	} {
		if got := FracAt(tt.rho, tt.t, tt.below); got != tt.want {
			t.Errorf("FracAt(%v, %v, %v) = %v, want %v", tt.rho, tt.t, tt.below, got, tt.want)
		}
	}
}

func TestScheduleFrac(t *testing.T) {
	s := Schedule{DenseBelow: 500, CoarseFrom: 800, CoarseRho: 0.9}
	for _, tt := range []struct {
		name   string
		s      Schedule
		rho, t float32
		want   float32
	}{
		{"dense below", s, 0.3, 499, Dense},
		{"routed", s, 0.3, 500, 0.3},
		{"coarse from", s, 0.3, 800, 0.9},
		{"coarse keeps a larger drop", s, 0.95, 999, 0.95},
		{"no coarse step at ρ 0", s, 0, 999, 0},
		{"coarse at a small ρ", s, 0.05, 999, 0.9},
		{"no coarse steps", Schedule{DenseBelow: 500, CoarseRho: 0.9}, 0.3, 999, 0.3},
		{"dense wins over coarse", Schedule{DenseBelow: 900, CoarseFrom: 800, CoarseRho: 0.9}, 0.3, 850, Dense},
		{"zero schedule", Schedule{}, 0.2, 0, 0.2},
	} {
		if got := tt.s.Frac(tt.rho, tt.t); got != tt.want {
			t.Errorf("%s: %+v.Frac(%v, %v) = %v, want %v", tt.name, tt.s, tt.rho, tt.t, got, tt.want)
		}
	}
}

func TestLayoutRoundTrip(t *testing.T) {
	// Latent (b=1, channel 1, row 2, column 3) of [2, 3, 4, 6] latents.
	x := make([]float32, 2*3*4*6)
	for i := range x {
		x[i] = float32(i)
	}
	want := x[((1*3+1)*4+2)*6+3]
	for _, tt := range []struct {
		patch int
		at    int // where the cell layout puts that latent
	}{
		{1, (1*24+2*6+3)*3 + 1},
		// Cell (b=1, r=1, c=1) of the 2×3 grid; offset (0, 1) in it; 12 values per cell.
		{2, (1*6+1*3+1)*12 + (1*2+0)*2 + 1},
	} {
		tok := ToTokens(x, 2, 3, 4, 6, tt.patch)
		if got := tok[tt.at]; got != want {
			t.Errorf("patch %d: cell layout holds %v, want %v", tt.patch, got, want)
		}
		if back := FromTokens(tok, 2, 3, 4, 6, tt.patch); !slices.Equal(back, x) {
			t.Errorf("patch %d: FromTokens(ToTokens(x)) != x", tt.patch)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	good := Config{InChannels: 4, OutChannels: 8, GridRows: 4, GridCols: 4, EncDecDim: 32, ModelDim: 64, CondDim: 64, RouterDim: 16,
		EncoderBlocks: 2, DecoderBlocks: 2, NormGroups: 32, RouterGroups: 8, Sigma: 1, TargetN: 4}
	if err := good.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		edit func(*Config)
		msg  string
	}{
		{func(c *Config) { c.EncDecDim = 48 }, "multiples of norm_groups"},
		{func(c *Config) { c.RouterDim = 12 }, "router_groups"},
		{func(c *Config) { c.Sigma = 0 }, "dechunk_sigma"},
		{func(c *Config) { c.TargetN = 1 }, "target_n"},
		{func(c *Config) { c.DecoderBlocks = 0 }, "decoder_blocks"},
	} {
		c := good
		tc.edit(&c)
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("error %v, want one mentioning %q", err, tc.msg)
		}
	}
	// The shapes of a config round-trip through InferConfig.
	shapes := ScaffoldShapes(&good)
	got, err := InferConfig(shapes, Settings{Sigma: 1, TargetN: 4}, 4, 4)
	if err != nil {
		t.Fatal(err)
	}
	if *got != good {
		t.Errorf("inferred %+v, want %+v", *got, good)
	}
	delete(shapes, "hnet.residual_proj.weight")
	if _, err := InferConfig(shapes, Settings{Sigma: 1, TargetN: 4}, 4, 4); err == nil || !strings.Contains(err.Error(), "residual_proj") {
		t.Errorf("missing tensor: error %v", err)
	}
}

func TestNewParamsReportsAll(t *testing.T) {
	exp := map[string][]int{"a": {2, 3}, "b": {4}, "c": {1}}
	ts := map[string]Tensor{"a": {Shape: []int{3, 2}, Data: make([]float32, 6)}, "b": {Shape: []int{4}, Data: make([]float32, 4)}}
	_, err := NewParams(ts, exp, "test")
	if err == nil || !strings.Contains(err.Error(), "a has shape [3 2], want [2 3]") || !strings.Contains(err.Error(), "missing c") {
		t.Errorf("error %v", err)
	}
}

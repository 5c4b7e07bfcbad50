package adaln

import (
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/nlpodyssey/spago/mat"

	"github.com/dcdit/dcdit/internal/fixtures"
	"github.com/dcdit/dcdit/ops"
	"github.com/dcdit/dcdit/params"
)

const (
	gD, gHidden, gHeads = 16, 24, 4
	gPrefix             = "layers.1."
)

// gatedArena is a block with width routers: random block weights, the
// routers at their start (every gate on) unless biases are given, then
// head and channel router biases set to them.
func gatedArena(t *testing.T, headBias, groupBias []float32, weightScale float64) *params.Set {
	t.Helper()
	shapes := BlockShapes(gD, gHidden)
	maps.Copy(shapes, RouterShapes(gD, gHeads))
	set := arena(t, gPrefix, shapes)
	rng := rand.New(rand.NewPCG(7, 8))
	for name, sh := range RouterShapes(gD, gHeads) {
		v := set.Get(gPrefix + name).Values()
		copy(v, RouterInit(name, len(v)))
		if len(sh) == 2 {
			for i := range v {
				v[i] = float32(weightScale * rng.NormFloat64())
			}
		}
	}
	if headBias != nil {
		copy(set.Get(gPrefix+RouterPrefix+"head_router.bias").Values(), headBias)
		copy(set.Get(gPrefix+RouterPrefix+"channel_router.bias").Values(), groupBias)
	}
	return set
}

func same(t *testing.T, what string, got, want mat.Tensor) {
	t.Helper()
	g, w := mat.Data[float32](got.Value()), mat.Data[float32](want.Value())
	for i := range w {
		if math.Float32bits(g[i]) != math.Float32bits(w[i]) {
			t.Fatalf("%s: value %d is %g, want %g bit for bit", what, i, g[i], w[i])
		}
	}
}

// With every gate on the gated block is the block, bit for bit, whether
// it masks (training) or slices (inference).
func TestGatedBlockAllOnIsTheBlock(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 1))
	offsets := []int{0, 3, 7}
	x, c, temb := dense(rng, 7, gD), dense(rng, 2, gD), dense(rng, 2, gD)
	for _, train := range []bool{true, false} {
		set := gatedArena(t, nil, nil, 0)
		set.SetRequiresGrad(train)
		g := BlockGates(set, gPrefix, temb)
		if h, q := g.On(); !slices.Equal(h, []int{gHeads, gHeads}) || !slices.Equal(q, []int{gHeads, gHeads}) {
			t.Fatalf("gates at the start: heads %v and groups %v on, want all %d", h, q, gHeads)
		}
		same(t, "gated block", ApplyGatedBlock(set, gPrefix, gHeads, x, c, offsets, &g), ApplyBlock(set, gPrefix, gHeads, x, c, offsets))
	}
}

// Inference leaves out the heads and groups that are off: the result is
// the masked computation's, up to the order of the sums; head 0 and
// group 0 stay on whatever their routers say.
func TestGatedBlockSkipsWhatIsOff(t *testing.T) {
	rng := rand.New(rand.NewPCG(2, 2))
	offsets := []int{0, 5, 9}
	x, c, temb := dense(rng, 9, gD), dense(rng, 2, gD), dense(rng, 2, gD)
	set := gatedArena(t, []float32{-3, 1, -1, 2}, []float32{-2, -1, 3, -4}, 0)
	masked := func() mat.Tensor {
		set.SetRequiresGrad(true)
		g := BlockGates(set, gPrefix, temb)
		return ApplyGatedBlock(set, gPrefix, gHeads, x, c, offsets, &g)
	}()
	set.SetRequiresGrad(false)
	g := BlockGates(set, gPrefix, temb)
	heads, groups := g.On()
	if !slices.Equal(heads, []int{3, 3}) || !slices.Equal(groups, []int{2, 2}) {
		t.Fatalf("heads %v and groups %v on, want 3 (head 0 forced, 1, 3) and 2 (group 0 forced, 2)", heads, groups)
	}
	skipped := ApplyGatedBlock(set, gPrefix, gHeads, x, c, offsets, &g)
	if !g.constant(weightsOf(set, gPrefix)) || len(g.runs()) != 2 {
		t.Fatal("shared gates without gradients: want the sliced path")
	}
	if d := fixtures.RelErr(mat.Data[float32](skipped.Value()), mat.Data[float32](masked.Value())); !(d <= 1e-5) {
		t.Errorf("sliced block differs from the masked one by %g (relative)", d)
	}
	ungated := ApplyBlock(set, gPrefix, gHeads, x, c, offsets)
	if d := fixtures.RelErr(mat.Data[float32](skipped.Value()), mat.Data[float32](ungated.Value())); !(d > 1e-3) {
		t.Errorf("gates off changed the block by only %g", d)
	}
}

// Samples at different timesteps get gates of their own: the block runs
// each with its own, as each runs alone, and as it masks them in training.
func TestGatedBlockPerSample(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 3))
	offsets := []int{0, 4, 10}
	x, c, temb := dense(rng, 10, gD), dense(rng, 2, gD), dense(rng, 2, gD)
	set := gatedArena(t, make([]float32, gHeads), make([]float32, gHeads), 1)
	set.SetRequiresGrad(false)
	g := BlockGates(set, gPrefix, temb)
	if len(g.runs()) != 3 {
		t.Fatalf("the test wants two samples with different gates, runs %v", g.runs())
	}
	both := mat.Data[float32](ApplyGatedBlock(set, gPrefix, gHeads, x, c, offsets, &g).Value())
	set.SetRequiresGrad(true)
	gm := BlockGates(set, gPrefix, temb)
	if d := fixtures.RelErr(mat.Data[float32](ApplyGatedBlock(set, gPrefix, gHeads, x, c, offsets, &gm).Value()), both); !(d <= 1e-5) {
		t.Errorf("masked in training, the batch differs from inference by %g", d)
	}
	set.SetRequiresGrad(false)
	for s := range 2 {
		rows := offsets[s+1] - offsets[s]
		xs := mat.NewDense[float32](mat.WithShape(rows, gD), mat.WithBacking(slices.Clone(mat.Data[float32](x)[offsets[s]*gD:offsets[s+1]*gD])))
		gs := BlockGates(set, gPrefix, SampleRows(temb, s, s+1))
		alone := ApplyGatedBlock(set, gPrefix, gHeads, xs, SampleRows(c, s, s+1), []int{0, rows}, &gs)
		if d := fixtures.RelErr(mat.Data[float32](alone.Value()), both[offsets[s]*gD:offsets[s+1]*gD]); !(d <= 1e-5) {
			t.Errorf("sample %d: alone it differs from the batch by %g", s, d)
		}
	}
}

// GatedFLOPs counts PackedFLOPs with each block's attention and MLP
// scaled by its gates, plus the routers; WidthRatio is the share of the
// gated parts' FLOPs the gates leave, and its gradient reaches the
// routers.
func TestGatedFLOPsAndWidthRatio(t *testing.T) {
	s := Sizes{Width: gD, Depth: 2, Heads: gHeads, MLPHidden: gHidden, FrequencySize: 8}
	lengths := []int{5, 9}
	all := [][]int{{4, 4}, {4, 4}}
	got, err := GatedFLOPs(s, lengths, all, all)
	if err != nil {
		t.Fatal(err)
	}
	if want := PackedFLOPs(s, lengths) + RouterFLOPs(s, 2); got != want {
		t.Errorf("all gates on: %g FLOPs, want %g (ungated + routers)", got, want)
	}
	heads, groups := [][]int{{1, 4}, {2, 3}}, [][]int{{4, 1}, {2, 2}}
	got, err = GatedFLOPs(s, lengths, heads, groups)
	if err != nil {
		t.Fatal(err)
	}
	var want, gatedAll, gatedOn float64
	D, hid := float64(gD), float64(gHidden)
	for b := range s.Depth {
		for i, l := range lengths {
			L, h, q := float64(l), float64(heads[b][i]), float64(groups[b][i])
			dh := D / gHeads
			attn := 2*L*D*3*h*dh + 2*L*h*dh*D + h*L*L*(4*dh+3)
			mlp := 2*L*D*q*hid/gHeads + 2*L*q*hid/gHeads*D
			want += attn + mlp
			gatedOn += attn + mlp
			gatedAll += 2*L*D*3*D + 2*L*D*D + gHeads*L*L*(4*dh+3) + 4*L*D*hid
		}
	}
	want += PackedFLOPs(s, lengths) - gatedAll + RouterFLOPs(s, 2)
	if !fixtures.Within(math.Abs(got-want), 1e-12*want) {
		t.Errorf("gated FLOPs %g, want %g", got, want)
	}
	if _, err := GatedFLOPs(s, lengths, heads[:1], groups); err == nil {
		t.Error("gates of one block for two: no error")
	}

	// The ratio from gate tensors with those counts on.
	gate := func(on []int) *mat.Dense[float32] {
		v := make([]float32, len(on)*gHeads)
		for i, n := range on {
			for h := range n {
				v[i*gHeads+h] = 1
			}
		}
		d := mat.NewDense[float32](mat.WithShape(len(on), gHeads), mat.WithBacking(v))
		d.SetRequiresGrad(true)
		return d
	}
	gates := []Gates{{gate(heads[0]), gate(groups[0])}, {gate(heads[1]), gate(groups[1])}}
	r, err := WidthRatio(s, lengths, gates)
	if err != nil {
		t.Fatal(err)
	}
	if v := float64(mat.Data[float32](r.Value())[0]); !fixtures.Within(math.Abs(v-gatedOn/gatedAll), 1e-6) {
		t.Errorf("width ratio %g, want %g", v, gatedOn/gatedAll)
	}
	if err := ops.Backward(r); err != nil {
		t.Fatal(err)
	}
	for b, g := range gates {
		if !g.Heads.HasGrad() || !g.Groups.HasGrad() {
			t.Errorf("block %d: the gates received no gradient", b)
		}
	}
}

// The routers are in the block's groups and in width_router.
func TestRouterParamGroups(t *testing.T) {
	for name := range RouterShapes(8, 2) {
		got := BlockParamGroups("b.3."+name, "b.")
		if !slices.Equal(got, []string{params.GroupBackbone, params.GroupWidthRouter}) {
			t.Errorf("%s: groups %v", name, got)
		}
	}
}

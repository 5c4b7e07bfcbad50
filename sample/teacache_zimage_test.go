package sample

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/dcdit/dcdit/cond"
	"github.com/dcdit/dcdit/diffusion"
	"github.com/dcdit/dcdit/internal/zimagetest"
	"github.com/dcdit/dcdit/zimage"
)

// trajectory calls a guided model at steps model times from 0 to 1,
// moving x by each output's conditional half (an Euler-like run), and
// returns every output.
func trajectory(t *testing.T, model diffusion.Model, x []float32, steps int) [][]float32 {
	t.Helper()
	x = slices.Clone(x)
	var outs [][]float32
	for i := range steps {
		tm := float32(i) / float32(steps)
		out, err := model(slices.Concat(x, x), []float32{tm, tm}, true)
		if err != nil {
			t.Fatal(err)
		}
		outs = append(outs, out)
		for j := range x {
			x[j] += out[j] / float32(steps)
		}
	}
	return outs
}

// TeaCache on a Z-Image teacher and on a DC model grafted onto one: at
// threshold 0 every output is the uncached one, bit for bit; a huge
// threshold skips the middle steps.
func TestTeaCacheZImage(t *testing.T) {
	const side, steps = 8, 5
	teacher, m := zimagetest.Grafted(t, 3, side)
	m.Params.SetRequiresGrad(false)
	m.Backbone.Parameters().SetRequiresGrad(false)
	rng := rand.New(rand.NewPCG(1, 2))
	caption := func(n int) cond.Caption {
		return cond.Caption{Features: normal(rng, n*teacher.Config.CapFeatDim), Len: n}
	}
	c := Conditions{Captions: []cond.Caption{caption(3)}, Negative: []cond.Caption{caption(1)}}
	x := normal(rng, teacher.Config.InChannels*side*side)
	zt := zimage.Teacher{Model: teacher}
	dcModel := func(cache *TeaCache) diffusion.Model {
		return (&DC{Model: m, Rho: 0.3, RhoUncond: 0.5, Cache: cache}).Denoiser(c)
	}
	for _, tt := range []struct {
		name   string
		plain  diffusion.Model
		cached func(*TeaCache) diffusion.Model
	}{
		{"teacher", Teacher(zt, c, side, side), func(tc *TeaCache) diffusion.Model { return tc.Teacher(zt, c, side, side) }},
		{"DC", dcModel(nil), dcModel},
	} {
		want := trajectory(t, tt.plain, x, steps)
		zero, err := NewTeaCache(0, testPoly, steps)
		if err != nil {
			t.Fatal(err)
		}
		for i, out := range trajectory(t, tt.cached(zero), x, steps) {
			if !slices.Equal(out, want[i]) {
				t.Errorf("%s: threshold 0: step %d differs from the uncached output", tt.name, i)
			}
		}
		big, err := NewTeaCache(1e9, testPoly, steps)
		if err != nil {
			t.Fatal(err)
		}
		trajectory(t, tt.cached(big), x, steps)
		if s, n := big.Skipped(); s != n-4 {
			t.Errorf("%s: a huge threshold skipped %d of %d branch steps, want all but the first and last", tt.name, s, n)
		}
	}
}

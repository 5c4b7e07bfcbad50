package upcycle

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/dcdit/dcdit/cond"
	"github.com/dcdit/dcdit/dc"
	"github.com/dcdit/dcdit/internal/fixtures"
	"github.com/dcdit/dcdit/internal/testckpt"
	"github.com/dcdit/dcdit/zimage"
)

// A Z-Image graft with the patch prior starts its encoder as Z-Image's
// patch embedding: with cells of the model's patch every cell's encoding
// is its patch's image token, with cells of one latent the encoding at
// each patch's top-left latent is; and the grafted model runs on captions
// of different lengths at a tail-drop fraction.
func TestGraftZImage(t *testing.T) {
	for _, cell := range []int{1, 2} {
		t.Run(fmt.Sprintf("cells of %d×%d latents", cell, cell), func(t *testing.T) {
			zm := testckpt.RandomZImage(t, 11)
			zc := zm.Config
			p, C, D, S := zc.PatchSize, zc.InChannels, zc.Dim, 8
			w := append([]float32(nil), zm.Params.Get("x_embedder.weight").Values()...)
			b := append([]float32(nil), zm.Params.Get("x_embedder.bias").Values()...)
			s := DefaultScaffold()
			s.NormGroups, s.RouterGroups, s.WidthFactor = 8, 4, 2
			s.PatchSize, s.EncoderInit, s.NoEncoderNorm = cell, "patch", true
			m, err := GraftZImage(zm, s, S, S, 3)
			if err != nil {
				t.Fatal(err)
			}
			if _, ok := m.Backbone.Parameters().Lookup(dc.BackbonePrefix + "x_embedder.weight"); !ok {
				t.Fatalf("the backbone's tensors are not under %q", dc.BackbonePrefix)
			}
			rng := rand.New(rand.NewPCG(7, 8))
			x := make([]float32, 2*C*S*S)
			for i := range x {
				x[i] = float32(rng.NormFloat64())
			}
			caps := []cond.Caption{{Features: make([]float32, 3*zc.CapFeatDim), Len: 3}, {Features: make([]float32, 9*zc.CapFeatDim), Len: 9}}
			for _, c := range caps {
				for i := range c.Features {
					c.Features[i] = float32(rng.NormFloat64())
				}
			}
			out, res, err := m.Predict(x, cond.Input{T: []float32{0.3, 0.8}, Captions: caps}, []float32{0.5})
			if err != nil {
				t.Fatal(err)
			}
			if len(out) != len(x) {
				t.Fatalf("prediction of %d values for %d latents", len(out), len(x))
			}
			// The first sample's patches, (dy, dx, c) with c fastest.
			patches := zimage.Patchify(nil, x[:C*S*S], C, 1, S, S, 1, p)
			enc := data(res.Encoded)
			for i := range (S / p) * (S / p) {
				r, c := i/(S/p)*p, i%(S/p)*p // the patch's top-left latent
				want := make([]float32, D)
				for d := range D {
					v := float64(b[d])
					for k := range C * p * p {
						v += float64(w[d*C*p*p+k]) * float64(patches[i*C*p*p+k])
					}
					want[d] = float32(v)
				}
				row := (r/cell)*(S/cell) + c/cell
				if err := fixtures.RelErr(enc[row*D:(row+1)*D], want); !fixtures.Within(err, 1e-5) {
					t.Fatalf("patch at (%d, %d): encoding off the image token by %.2g", r, c, err)
				}
			}
		})
	}
}

func TestGraftZImageRefuses(t *testing.T) {
	tests := []struct {
		name string
		edit func(*Scaffold)
		want string
	}{
		{"wide head", func(s *Scaffold) { s.WideHead = true }, "no wide head"},
		{"latent skip", func(s *Scaffold) { s.LatentSkip = true }, "no latent skip"},
		{"unknown encoder init", func(s *Scaffold) { s.EncoderInit = "teacher" }, `encoder init "teacher"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := DefaultScaffold()
			s.NormGroups, s.RouterGroups = 8, 4
			tt.edit(&s)
			_, err := GraftZImage(testckpt.RandomZImage(t, 1), s, 8, 8, 3)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want it to say %q", err, tt.want)
			}
		})
	}
}

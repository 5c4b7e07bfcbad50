package flops

import (
	"math"
	"path/filepath"
	"testing"

	"github.com/dcdit/dcdit/internal/fixtures"
	"github.com/dcdit/dcdit/internal/testckpt"
	"github.com/dcdit/dcdit/zimage"
)

// Z-Image presets and checkpoints: the count is zimage.ForwardFLOPs at
// the resolution's latent and the caption length, times the steps (the
// model's own unless --steps is given), doubled by --cfg; the parts add
// up to the forward.
func TestZImage(t *testing.T) {
	turbo := zimage.TurboConfig()
	tiny := testckpt.TinyZImage()
	cases := []struct {
		name          string
		args          []string
		tokens, capL  int
		steps         int
		cfg           bool
		forwardGFLOPs float64
	}{
		{"turbo defaults", []string{"Z-Image-Turbo"}, 4096, 128, 8, false, zimage.ForwardFLOPs(turbo, 4096, 128).Total() / 1e9},
		{"turbo case and steps", []string{"z-image-turbo", "--steps", "4", "--caption-len", "77", "--resolution", "512"}, 1024, 77, 4, false,
			zimage.ForwardFLOPs(turbo, 1024, 77).Total() / 1e9},
		{"base with guidance", []string{"Z-Image", "--cfg"}, 4096, 128, 50, true, zimage.ForwardFLOPs(turbo, 4096, 128).Total() / 1e9},
		{"diffusers checkpoint", []string{filepath.Join(testdata, "checkpoints", "zimage-diffusers"), "--resolution", "64", "--caption-len", "7"}, 16, 7, 8, false,
			zimage.ForwardFLOPs(tiny, 16, 7).Total() / 1e9},
		{"comfy checkpoint", []string{filepath.Join(testdata, "checkpoints", "zimage-comfy.safetensors")}, 4096, 128, 8, false,
			zimage.ForwardFLOPs(tiny, 4096, 128).Total() / 1e9},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res, err := runJSON(t, c.args...)
			if err != nil {
				t.Fatal(err)
			}
			if res.Architecture != "zimage" || res.Tokens != c.tokens || res.CaptionTokens != c.capL || res.Steps != c.steps || res.CFG != c.cfg {
				t.Errorf("result %+v", res)
			}
			if !fixtures.Within(math.Abs(res.ForwardGFLOPs-c.forwardGFLOPs), 1e-12*c.forwardGFLOPs) {
				t.Errorf("%v GFLOPs per forward, want %v", res.ForwardGFLOPs, c.forwardGFLOPs)
			}
			per := float64(c.steps) * c.forwardGFLOPs / 1e3
			if c.cfg {
				per *= 2
			}
			if !fixtures.Within(math.Abs(res.TFLOPsPerImage-per), 1e-12*per) {
				t.Errorf("%v TFLOPs per image, want %v", res.TFLOPsPerImage, per)
			}
			b := res.Budgets[0]
			if sum := sumParts(b.Parts); !fixtures.Within(math.Abs(sum-b.ForwardGFLOPs), 1e-9*sum) {
				t.Errorf("parts sum to %v, forward %v", sum, b.ForwardGFLOPs)
			}
		})
	}
}

// Z-Image-Turbo at 1024² with 128 caption tokens, by hand: 4096 image
// tokens and 128 caption tokens (no padding), 4224 in the unified
// sequence. A block's linears cost 2·3840·(4·3840 + 3·10240) = 353894400
// per row and its adaLN 2·256·15360 = 7864320; attention costs
// 30·L²·(4·128 + 3) = 15450·L².
func TestZImageTurboByHand(t *testing.T) {
	res, err := runJSON(t, "Z-Image-Turbo")
	if err != nil {
		t.Fatal(err)
	}
	parts := map[string]float64{}
	for _, p := range res.Budgets[0].Parts {
		parts[p.Name] = p.GFLOPs * 1e9
	}
	want := map[string]float64{
		"layers":    30 * (7864320 + 4224*353894400.0),
		"refiners":  2*(7864320+4096*353894400.0) + 2*128*353894400.0,
		"attention": 15450 * (2*(4096*4096+128*128) + 30*4224*4224.0),
	}
	for name, w := range want {
		if !fixtures.Within(math.Abs(parts[name]-w), 1e-12*w) {
			t.Errorf("%s: %v FLOPs, want %v", name, parts[name], w)
		}
	}
}

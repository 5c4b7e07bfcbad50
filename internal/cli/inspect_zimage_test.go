package cli

import (
	"encoding/json"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dcdit/dcdit/dc/checkpoint"
	"github.com/dcdit/dcdit/internal/testckpt"
	"github.com/dcdit/dcdit/internal/zimagetest"
	"github.com/dcdit/dcdit/zimage"
)

// inspect reports a Z-Image checkpoint's FLOPs per image at a latent grid
// (default 128×128) and caption length (default zimage.TypicalCaptionLen),
// over Z-Image-Turbo's 8 steps.
func TestInspectZImageFLOPs(t *testing.T) {
	ckpt := filepath.Join(testdata, "checkpoints", "zimage-diffusers")
	cfg := testckpt.TinyZImage()
	cases := []struct {
		name         string
		args         []string
		size         string
		tokens, capL int
	}{
		{"defaults", nil, "128x128", 4096, zimage.TypicalCaptionLen},
		{"size and caption", []string{"--size", "8x6", "--caption-len", "45"}, "8x6", 12, 45},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, out, errOut := run(t, append([]string{"inspect", "--json", ckpt}, c.args...)...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			var res struct {
				FLOPs struct {
					Tokens         int     `json:"tokens"`
					LatentSize     string  `json:"latent_size"`
					CaptionTokens  int     `json:"caption_tokens"`
					ForwardFLOPs   float64 `json:"forward_flops"`
					Steps          int     `json:"steps"`
					TFLOPsPerImage float64 `json:"tflops_per_image"`
				} `json:"flops"`
			}
			if err := json.Unmarshal([]byte(out), &res); err != nil {
				t.Fatal(err)
			}
			f := res.FLOPs
			want := zimage.ForwardFLOPs(cfg, c.tokens, c.capL).Total()
			if f.Tokens != c.tokens || f.LatentSize != c.size || f.CaptionTokens != c.capL || f.Steps != zimage.TurboSteps ||
				f.ForwardFLOPs != want || f.TFLOPsPerImage != want*zimage.TurboSteps/1e12 {
				t.Errorf("flops %+v, want %d tokens at %s, %d caption tokens, %v per forward over %d steps", f, c.tokens, c.size, c.capL, want, zimage.TurboSteps)
			}
		})
	}
	code, out, _ := run(t, "inspect", ckpt, "--size", "8x6")
	if code != 0 || !strings.Contains(out, "8x6 latent: 12 image tokens, 128 caption tokens") {
		t.Errorf("exit %d, table %q lacks the Z-Image FLOPs line", code, out)
	}
	for _, c := range []struct {
		args []string
		msg  string
	}{
		{[]string{"--size", "7x8"}, "multiples of 2"},
		{[]string{"--size", "big"}, `--size "big"`},
		{[]string{"--caption-len", "-3"}, "--caption-len -3"},
	} {
		code, _, errOut := run(t, append([]string{"inspect", ckpt}, c.args...)...)
		if code != 2 || !strings.Contains(errOut, c.msg) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", c.args, code, errOut, c.msg)
		}
	}
}

// inspect prices a DC-Z-Image's budgets over Z-Image-Turbo's 8 steps, a
// DC-DiT's over DiT's 250.
func TestInspectDCZImageSteps(t *testing.T) {
	_, m := zimagetest.Grafted(t, 3, 8)
	path := filepath.Join(t.TempDir(), "dc.safetensors")
	if err := checkpoint.Save(path, m, checkpoint.Info{}); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := run(t, "inspect", "--json", path)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var res struct {
		FLOPsPerRho []checkpoint.RhoFLOPs `json:"flops_per_rho"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatal(err)
	}
	if len(res.FLOPsPerRho) == 0 {
		t.Fatalf("no FLOPs per ρ in %.300s", out)
	}
	for _, r := range res.FLOPsPerRho {
		if want := r.GFLOPs * zimage.TurboSteps / 1e3; !(math.Abs(r.TFLOPsPerImage-want) <= 1e-9*want) {
			t.Errorf("ρ %g: %g TFLOPs per image for %g GFLOPs a forward, want %d steps' %g", r.Rho, r.TFLOPsPerImage, r.GFLOPs, zimage.TurboSteps, want)
		}
	}
}

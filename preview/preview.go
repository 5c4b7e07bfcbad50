// Package preview turns latents into small RGB pictures without a VAE, by
// the linear latent-to-RGB fits that ComfyUI uses for its previews: a
// quick look at what a sampler produced, not a decode.
package preview

import (
	"fmt"
	"image"
	"image/color"
	"image/png"
	"io"
	"math"

	"github.com/dcdit/dcdit/loaders/atomicfile"
)

// Fit is a linear map from latent channels to RGB in [−1, 1].
type Fit struct {
	Name string
	// Coef[c] is the RGB contribution of latent channel c.
	Coef [][3]float32
	Bias [3]float32
}

// SD is the fit for Stable Diffusion 1.x VAE latents, the latent space of
// DiT (ComfyUI's SD15 latent format; model-space latents, i.e. ×0.18215).
var SD = Fit{Name: "sd", Coef: [][3]float32{
	{0.3512, 0.2297, 0.3227}, {0.3250, 0.4974, 0.2350}, {-0.2829, 0.1762, 0.2721}, {-0.2120, -0.2616, -0.7177},
}}

// Flux is the fit for the 16-channel Flux VAE latents that Z-Image uses
// (ComfyUI's Flux latent format).
var Flux = Fit{Name: "flux", Coef: [][3]float32{
	{-0.0346, 0.0244, 0.0681}, {0.0034, 0.0210, 0.0687}, {0.0275, -0.0668, -0.0433}, {-0.0174, 0.0160, 0.0617},
	{0.0859, 0.0721, 0.0329}, {0.0004, 0.0383, 0.0115}, {0.0405, 0.0861, 0.0915}, {-0.0236, -0.0185, -0.0259},
	{-0.0245, 0.0250, 0.1180}, {0.1008, 0.0755, -0.0421}, {-0.0515, 0.0201, 0.0011}, {0.0428, -0.0012, -0.0036},
	{0.0817, 0.0765, 0.0749}, {-0.1264, -0.0522, -0.1103}, {-0.0280, -0.0881, -0.0499}, {-0.1262, -0.0982, -0.0778},
}, Bias: [3]float32{-0.0329, -0.0718, -0.0851}}

// ForChannels picks the fit for a latent channel count (4: SD, 16: Flux).
func ForChannels(c int) (Fit, error) {
	for _, f := range []Fit{SD, Flux} {
		if len(f.Coef) == c {
			return f, nil
		}
	}
	return Fit{}, fmt.Errorf("preview: no latent-to-RGB fit for %d channels (have 4 for SD/DiT, 16 for Flux/Z-Image)", c)
}

// Image renders one latent ([C, H, W] row-major, C = len(f.Coef)) as an
// RGB image, each latent pixel becoming a scale×scale block.
func (f Fit) Image(latent []float32, h, w, scale int) (*image.RGBA, error) {
	c := len(f.Coef)
	if len(latent) != c*h*w {
		return nil, fmt.Errorf("preview: latent has %d values, want %d×%d×%d", len(latent), c, h, w)
	}
	scale = max(scale, 1)
	img := image.NewRGBA(image.Rect(0, 0, w*scale, h*scale))
	for i := range h {
		for j := range w {
			var rgb [3]float32
			for k := range 3 {
				rgb[k] = f.Bias[k]
				for ch := range c {
					rgb[k] += latent[ch*h*w+i*w+j] * f.Coef[ch][k]
				}
			}
			px := color.RGBA{toByte(rgb[0]), toByte(rgb[1]), toByte(rgb[2]), 255}
			for y := i * scale; y < (i+1)*scale; y++ {
				for x := j * scale; x < (j+1)*scale; x++ {
					img.SetRGBA(x, y, px)
				}
			}
		}
	}
	return img, nil
}

// toByte maps [−1, 1] to [0, 255], clamping.
func toByte(v float32) uint8 {
	u := (float64(v) + 1) / 2
	return uint8(math.Round(math.Min(math.Max(u, 0), 1) * 255))
}

// WritePNG tiles the batch ([B, C, H, W]) side by side into one PNG at
// path, written atomically.
func (f Fit) WritePNG(path string, batch []float32, b, h, w, scale int) error {
	c := len(f.Coef)
	if len(batch) != b*c*h*w {
		return fmt.Errorf("preview: batch has %d values, want %d×%d×%d×%d", len(batch), b, c, h, w)
	}
	scale = max(scale, 1)
	canvas := image.NewRGBA(image.Rect(0, 0, b*w*scale, h*scale))
	for i := range b {
		img, err := f.Image(batch[i*c*h*w:(i+1)*c*h*w], h, w, scale)
		if err != nil {
			return err
		}
		for y := range h * scale {
			for x := range w * scale {
				canvas.SetRGBA(i*w*scale+x, y, img.RGBAAt(x, y))
			}
		}
	}
	return atomicfile.Write(path, func(out io.Writer) error { return png.Encode(out, canvas) })
}

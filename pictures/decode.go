package pictures

import (
	"fmt"
	"image"
	"math"

	"github.com/dcdit/dcdit/images"
	"github.com/dcdit/dcdit/vae"
)

// Codec couples a VAE with the latent convention of the model whose
// latents it decodes and encodes: raw = scaled/Scaling + Shift.
type Codec struct {
	VAE *vae.Model
	// Scaling and Shift default (zero Scaling) to the VAE's
	// scaling_factor and shift_factor.
	Scaling, Shift float64
	// Batch bounds the samples per VAE call (default 1: the decoder's
	// activations at 1024² are the memory that counts).
	Batch int
}

// convention returns the config whose Scale and Unscale apply c's
// convention.
func (c *Codec) convention() *vae.Config {
	cfg := c.VAE.Config
	if c.Scaling != 0 {
		cfg.ScalingFactor, cfg.ShiftFactor = c.Scaling, c.Shift
	}
	return &cfg
}

func (c *Codec) batch() int { return max(c.Batch, 1) }

// CheckLatents reports latents of channels the VAE cannot decode.
func (c *Codec) CheckLatents(channels int) error {
	if want := c.VAE.Config.LatentChannels; channels != want {
		return fmt.Errorf("pictures: the latents have %d channels but the VAE decodes %d (a DiT model pairs with a 4-channel SD VAE, a Z-Image model with the 16-channel FLUX.1 VAE)", channels, want)
	}
	return nil
}

// Decode turns n scaled latents z [n, C, H, W] into 8-bit pictures: undo
// the scaling, run the decoder, quantise as DiT's sample_ddp.py does
// (images.Quantize). each is called with every picture in order; it may
// keep them.
func (c *Codec) Decode(z []float32, n, ch, h, w int, each func(i int, m *images.RGB) error) error {
	if err := c.CheckLatents(ch); err != nil {
		return err
	}
	if n < 0 || len(z) != n*ch*h*w {
		return fmt.Errorf("pictures: decode: %d values for %d latents of %d×%d×%d", len(z), n, ch, h, w)
	}
	if c.VAE.Config.OutChannels != 3 {
		return fmt.Errorf("pictures: the VAE writes %d image channels, want 3 (RGB)", c.VAE.Config.OutChannels)
	}
	conv := c.convention()
	per := ch * h * w
	bs := c.batch()
	nhwc := make([]float32, bs*per)
	for lo := 0; lo < n; lo += bs {
		b := min(bs, n-lo)
		x := nhwc[:b*per]
		for s := range b {
			src := z[(lo+s)*per : (lo+s+1)*per]
			dst := x[s*per : (s+1)*per]
			for k := range ch {
				for p := range h * w {
					dst[p*ch+k] = src[k*h*w+p]
				}
			}
		}
		conv.Unscale(x)
		out, err := c.VAE.Decode(x, b, h, w)
		if err != nil {
			return err
		}
		ih, iw := c.VAE.ImageSize(h), c.VAE.ImageSize(w)
		ipix := ih * iw * 3
		for s := range b {
			img := out[s*ipix : (s+1)*ipix]
			for _, v := range img {
				if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
					return fmt.Errorf("pictures: the VAE decoded sample %d to non-finite pixels (its weights or the latents are broken)", lo+s)
				}
			}
			if err := each(lo+s, &images.RGB{W: iw, H: ih, Pix: images.Quantize(img)}); err != nil {
				return err
			}
		}
	}
	return nil
}

// DecodeAll decodes every sample of l and returns the pictures.
func (c *Codec) DecodeAll(l *Latents) ([]*images.RGB, error) {
	out := make([]*images.RGB, 0, l.N)
	err := c.Decode(l.Data, l.N, l.C, l.H, l.W, func(_ int, m *images.RGB) error {
		out = append(out, m)
		return nil
	})
	return out, err
}

// Render decodes one scaled latent [c, h, w] into a picture (for the
// pictures `eval` and `upcycle` draw).
func (c *Codec) Render(latent []float32, ch, h, w int) (*image.RGBA, error) {
	var out *image.RGBA
	err := c.Decode(latent, 1, ch, h, w, func(_ int, m *images.RGB) error {
		out = image.NewRGBA(image.Rect(0, 0, m.W, m.H))
		for i := range m.W * m.H {
			copy(out.Pix[4*i:4*i+3], m.Pix[3*i:3*i+3])
			out.Pix[4*i+3] = 255
		}
		return nil
	})
	return out, err
}

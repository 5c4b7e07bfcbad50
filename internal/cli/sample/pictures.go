package sample

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/dcdit/dcdit/images"
	"github.com/dcdit/dcdit/pictures"
	"github.com/dcdit/dcdit/preview"
	"github.com/dcdit/dcdit/vae"
)

// pictureOut draws the samples into --png: decoded by the VAE that --vae
// names, or else by the model repository's vae/, else through the linear
// latent-to-RGB preview.
type pictureOut struct {
	fit   preview.Fit
	codec *pictures.Codec
}

// newPictureOut prepares --png for latents of the given channels; nil
// when no --png is asked for.
func newPictureOut(opts *Options, channels int) (*pictureOut, error) {
	if opts.PNG == "" {
		return nil, nil
	}
	path := opts.VAE
	if path == "" {
		path = repoVAE(opts.Checkpoint)
	}
	if path != "" {
		m, err := vae.Open(path)
		if err != nil {
			return nil, err
		}
		c := &pictures.Codec{VAE: m}
		if err := c.CheckLatents(channels); err != nil {
			return nil, fmt.Errorf("--vae %s for %s: %w", path, opts.Checkpoint, err)
		}
		return &pictureOut{codec: c}, nil
	}
	fit, err := preview.ForChannels(channels)
	if err != nil {
		return nil, fmt.Errorf("--png %s: %w", opts.PNG, err)
	}
	return &pictureOut{fit: fit}, nil
}

// write draws the n latents x [n, C, h, w], cols to a row, into path.
func (p *pictureOut) write(path string, x []float32, n, cols, h, w int) error {
	if p == nil {
		return nil
	}
	if p.codec == nil {
		return p.fit.WriteGridPNG(path, x, n, cols, h, w, previewScale)
	}
	pics := make([]*images.RGB, 0, n)
	err := p.codec.Decode(x, n, p.codec.VAE.Config.LatentChannels, h, w, func(_ int, m *images.RGB) error {
		pics = append(pics, m)
		return nil
	})
	if err != nil {
		return err
	}
	g, err := images.Grid(pics, cols, 2)
	if err != nil {
		return err
	}
	return images.WritePNG(path, g)
}

// repoVAE returns the vae/ folder of the model repository the checkpoint
// at path belongs to (path itself, or its parent when path is the
// repository's transformer/ folder or a file in it), or "".
func repoVAE(path string) string {
	dir := path
	if st, err := os.Stat(path); err == nil && !st.IsDir() {
		dir = filepath.Dir(path)
	}
	for _, root := range []string{dir, filepath.Dir(dir)} {
		v := filepath.Join(root, "vae")
		if st, err := os.Stat(filepath.Join(v, "config.json")); err == nil && !st.IsDir() {
			return v
		}
	}
	return ""
}

// describe says what write drew, for the summary line.
func (p *pictureOut) describe() string {
	if p.codec != nil {
		return "pictures decoded by the VAE"
	}
	return fmt.Sprintf("linear latent-to-RGB preview (%s fit), not a VAE decode (give --vae for pictures)", p.fit.Name)
}

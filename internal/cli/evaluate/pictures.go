package evaluate

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/dcdit/dcdit/eval"
	"github.com/dcdit/dcdit/inception"
	"github.com/dcdit/dcdit/internal/cli/progress"
	"github.com/dcdit/dcdit/pictures"
	"github.com/dcdit/dcdit/vae"
)

// SamplesDir is the folder under --out that receives each row's decoded
// samples as an .npz sample batch.
const SamplesDir = "samples"

// pictureOptions sets eo's renderer (--vae) and FID scorer (--inception,
// --ref), reading the reference's statistics first.
func pictureOptions(opts *Options, eo *eval.Options) error {
	if opts.VAE == "" {
		return nil
	}
	m, err := vae.Open(opts.VAE)
	if err != nil {
		return fmt.Errorf("--vae: %w", err)
	}
	codec := &pictures.Codec{VAE: m}
	eo.Renderer = codec
	if opts.Inception == "" {
		return nil
	}
	net, err := inception.Load(opts.Inception)
	if err != nil {
		return fmt.Errorf("--inception: %w", err)
	}
	side, err := pictures.OpenSide(opts.Ref, nil)
	if err != nil {
		return fmt.Errorf("--ref: %w", err)
	}
	sc := &pictures.Scorer{Net: net}
	if side.Set != nil && !opts.Quiet {
		bar := progress.New(opts.IO.Err, "reference "+opts.Ref, side.Set.Len())
		sc.Progress = func(done, _ int) { bar.Set(done) }
		defer bar.Finish()
	}
	ref, err := sc.SideStats(side)
	if err != nil {
		return fmt.Errorf("--ref: %w", err)
	}
	rs := &pictures.RowScorer{Codec: codec, Scorer: &pictures.Scorer{Net: net}, Ref: ref.Stats}
	if opts.Out != "" {
		rs.Dir = filepath.Join(opts.Out, SamplesDir)
		if err := os.MkdirAll(rs.Dir, 0o755); err != nil {
			return fmt.Errorf("--out: %w", err)
		}
	}
	eo.Pictures = rs
	return nil
}

package pipeline

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/dcdit/dcdit/dc/checkpoint"
	"github.com/dcdit/dcdit/family"
	"github.com/dcdit/dcdit/loaders"
	"github.com/dcdit/dcdit/loaders/arch"
	"github.com/dcdit/dcdit/recipes"
	"github.com/dcdit/dcdit/upcycle"
)

// GraftOnly writes the DC checkpoint that the recipe r grafts, before any
// stage trains it, into the folder out (r's save.dir when empty) and
// returns its path. A base whose family streams its grafts
// (family.Streamable: a Z-Image, base.latent_size sizing the grid of one
// that takes any grid) is streamed into the sharded folder out/model by
// upcycle.StreamGraft: the model is never in memory, so a full-size
// Z-Image grafts on a small machine. Any other base is grafted as Run
// grafts it and saved as out/model.safetensors (a DiT fits in memory at
// any size). progress, when set, is called as a streamed graft's bytes
// are written. An existing model at the destination is refused.
func GraftOnly(r *recipes.Recipe, out string, progress func(done, total int64)) (string, error) {
	if r.Base == nil || r.Scaffold == nil {
		return "", fmt.Errorf("pipeline: %s: grafting needs [base] and [scaffold]", r.File)
	}
	if out == "" {
		out = r.Save.Dir
	}
	ck, err := loaders.Open(r.BasePath())
	if err != nil {
		return "", fmt.Errorf("pipeline: base.path: %w", err)
	}
	rep := arch.Detect(ck.ArchInput(r.Base.NumHeads))
	ck.Close()
	if err := os.MkdirAll(out, 0o755); err != nil {
		return "", fmt.Errorf("pipeline: output folder: %w", err)
	}
	base, err := checkpoint.DescribeBase(r.BasePath(), false)
	if err != nil {
		return "", err
	}
	info := checkpoint.Info{Recipe: r.Text, Base: base}
	if b, f, ok := family.BaseOf(rep); ok {
		if _, streams := f.(family.Streamable); streams {
			rows := b.Grid
			if b.AnyGrid {
				if r.Base.LatentSize < 1 {
					return "", fmt.Errorf("pipeline: %s: base.latent_size is missing: the base takes any latent grid, so the recipe says the side to graft for (128 for 1024² images through an 8× VAE)", r.File)
				}
				rows = r.Base.LatentSize
			}
			path := filepath.Join(out, "model")
			_, err := upcycle.StreamGraft(r.BasePath(), r.Scaffold.Upcycle(), path, upcycle.StreamOptions{
				Rows: rows, Cols: rows, Seed: uint64(r.Seed), Info: info, Progress: progress})
			return path, err
		}
	}
	path := filepath.Join(out, "model.safetensors")
	if _, err := os.Lstat(path); err == nil {
		return "", fmt.Errorf("pipeline: %s already exists; remove it or choose another output", path)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("pipeline: %w", err)
	}
	if err := unsupported(r); err != nil {
		return "", err
	}
	teacher, err := loadBase(r)
	if err != nil {
		return "", err
	}
	m, err := buildModel(r, teacher, uint64(r.Seed))
	if err != nil {
		return "", err
	}
	dt, err := saveDType(r.Save.DType)
	if err != nil {
		return "", err
	}
	info.DType = dt
	return path, checkpoint.Save(path, m.dc, info)
}

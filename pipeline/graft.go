package pipeline

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/dcdit/dcdit/dc/checkpoint"
	"github.com/dcdit/dcdit/loaders"
	"github.com/dcdit/dcdit/loaders/arch"
	"github.com/dcdit/dcdit/recipes"
	"github.com/dcdit/dcdit/upcycle"
)

// GraftOnly writes the DC checkpoint that the recipe r grafts, before any
// stage trains it, into the folder out (r's save.dir when empty) and
// returns its path. A DiT base is grafted as Run grafts it and saved as
// out/model.safetensors (the model fits in memory at any DiT size). A
// Z-Image base (base.latent_size sizing the grid) is streamed into the
// sharded folder out/model by upcycle.StreamGraftZImage: the model is
// never in memory, so a full-size Z-Image grafts on a small machine.
// progress, when set, is called as a streamed graft's bytes are written.
// An existing model at the destination is refused.
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
	if rep.Architecture == arch.ZImage {
		if r.Base.LatentSize < 1 {
			return "", fmt.Errorf("pipeline: %s: base.latent_size is missing: a Z-Image has no fixed resolution, so the recipe says the latent grid side to graft for (128 for 1024² images)", r.File)
		}
		path := filepath.Join(out, "model")
		_, err := upcycle.StreamGraftZImage(r.BasePath(), r.Scaffold.Upcycle(), path, upcycle.StreamOptions{
			Rows: r.Base.LatentSize, Cols: r.Base.LatentSize, Seed: uint64(r.Seed), Info: info, Progress: progress})
		return path, err
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

package vae

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/dcdit/dcdit/loaders"
)

// The weight files of a diffusers VAE folder, in order of preference.
var folderWeights = []string{"diffusion_pytorch_model.safetensors", "diffusion_pytorch_model.safetensors.index.json", "diffusion_pytorch_model.fp16.safetensors"}

// Open loads a VAE from path, which is one of:
//
//   - a diffusers VAE folder (config.json beside
//     diffusion_pytorch_model.safetensors, its sharded index, or the .fp16.safetensors
//     variant when it is the only one): a standalone VAE repository or
//     the vae/ folder of a pipeline;
//   - a pipeline folder holding such a vae/ folder;
//   - a single checkpoint file (safetensors, or a PyTorch file that
//     package loaders reads) in the diffusers naming or the LDM naming,
//     with or without LDMPrefix (a full Stable Diffusion checkpoint, whose
//     other models' tensors are ignored, or FLUX.1's ae.safetensors).
//
// Without a config.json the configuration is inferred from the tensors'
// shapes (InferConfig). Weights stored as F32, F16 or BF16 are decoded to
// float32. Every tensor the configuration implies must be present with
// its shape and no other VAE tensor may be: the error lists each problem
// by the name the file uses.
func Open(path string) (*Model, error) { return OpenWithConfig(path, nil) }

// OpenWithConfig is Open with the configuration given by the caller: cfg,
// when not nil, replaces a folder's config.json and what a single file's
// shapes imply (use it for a single-file VAE whose norm_num_groups or
// scaling differ from the defaults InferConfig assumes, e.g. SDXL's).
func OpenWithConfig(path string, cfg *Config) (*Model, error) {
	file, cfgPath, err := resolve(path)
	if err != nil {
		return nil, err
	}
	ck, err := loaders.Open(file)
	if err != nil {
		return nil, fmt.Errorf("vae: %w", err)
	}
	defer ck.Close()
	specs := make([]TensorSpec, len(ck.Tensors))
	for i, t := range ck.Tensors {
		specs[i] = TensorSpec{Name: t.Name, Shape: t.Shape}
	}
	src, err := DetectNaming(specs)
	if err != nil {
		return nil, fmt.Errorf("vae: %s: %w", file, err)
	}
	byName := make(map[string]Rename, len(src.Tensors))
	shapes := make(map[string][]int64, len(src.Tensors))
	for _, t := range src.Tensors {
		byName[t.To], shapes[t.To] = t, t.ToShape
	}
	if cfg == nil && cfgPath != "" {
		if cfg, err = ReadConfig(cfgPath); err != nil {
			return nil, err
		}
	}
	if cfg == nil {
		if cfg, err = InferConfig(shapes); err != nil {
			return nil, fmt.Errorf("vae: %s: %w", file, err)
		}
	}
	want, err := ExpectedTensors(cfg)
	if err != nil {
		return nil, err
	}
	if err := checkTensors(file, src, cfg, want, byName); err != nil {
		return nil, err
	}
	b := builder{load: func(name string, n int) ([]float32, error) {
		t, _ := ck.Tensor(byName[name].From)
		v := make([]float32, n)
		if err := t.DecodeFloat32(v); err != nil {
			return nil, fmt.Errorf("vae: %w", err)
		}
		return v, nil
	}}
	m := b.build(cfg)
	if b.err != nil {
		return nil, b.err
	}
	m.Source = fmt.Sprintf("%s (%s naming", file, src.Naming)
	if src.Prefix != "" {
		m.Source += ", prefix " + strconv.Quote(src.Prefix)
	}
	m.Source += ")"
	return m, nil
}

// resolve finds the weight file and config.json (empty when none) that
// path designates.
func resolve(path string) (file, cfgPath string, err error) {
	st, err := os.Stat(path)
	if err != nil {
		return "", "", fmt.Errorf("vae: %w", err)
	}
	if !st.IsDir() {
		return path, "", nil
	}
	dir := path
	if sub := filepath.Join(path, "vae"); isDir(sub) {
		dir = sub
	}
	if c := filepath.Join(dir, "config.json"); isFile(c) {
		cfgPath = c
	}
	for _, name := range folderWeights {
		if f := filepath.Join(dir, name); isFile(f) {
			return f, cfgPath, nil
		}
	}
	return "", "", fmt.Errorf("vae: %s: no %s", dir, strings.Join(folderWeights, " or "))
}

func isDir(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.IsDir()
}

func isFile(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular()
}

// checkTensors compares the file's VAE tensors (by diffusers name) with
// those cfg implies and reports every missing, mis-shaped and unexpected
// tensor under the name the file uses (or would use).
func checkTensors(file string, src *Source, cfg *Config, want []TensorSpec, have map[string]Rename) error {
	var problems []string
	expected := make(map[string]bool, len(want))
	for _, w := range want {
		expected[w.Name] = true
		shape := w.Shape
		if src.Naming == LDM && AttentionProjection(w.Name) {
			shape = append(slices.Clone(shape), 1, 1)
		}
		t, ok := have[w.Name]
		if !ok {
			problems = append(problems, fmt.Sprintf("tensor %q missing (want shape %v)", fileName(src, w.Name, cfg.NumBlocks()), shape))
			continue
		}
		if !slices.Equal(t.ToShape, w.Shape) {
			problems = append(problems, fmt.Sprintf("tensor %q: shape %v, want %v", t.From, t.FromShape, shape))
		}
	}
	var extra []string
	for _, t := range src.Tensors {
		if !expected[t.To] {
			extra = append(extra, fmt.Sprintf("%q %v", t.From, t.FromShape))
		}
	}
	if len(extra) > 0 {
		problems = append(problems, "unexpected tensors "+capped(extra, ", ", 8))
	}
	if len(problems) == 0 {
		return nil
	}
	return fmt.Errorf("vae: %s: %s", file, capped(problems, "; ", 8))
}

// fileName is the name a diffusers-named tensor has in the file's naming.
func fileName(src *Source, name string, numBlocks int) string {
	if src.Naming == LDM {
		if ldm, ok := DiffusersToLDM(name, numBlocks); ok {
			return src.Prefix + ldm
		}
	}
	return src.Prefix + name
}

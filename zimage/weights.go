package zimage

import (
	"fmt"
	"strings"

	"github.com/dcdit/dcdit/loaders"
	"github.com/dcdit/dcdit/loaders/arch"
)

// Param is one parameter tensor in float32.
type Param = loaders.Dense

// Weights are a Z-Image transformer's parameters in the package's one
// internal layout, whatever naming the checkpoint used, with the
// configuration they imply. The internal names are ComfyUI's without its
// prefix (arch.ExpectedZImage with arch.Comfy): the attention projections
// are one fused qkv = cat(to_q, to_k, to_v), which is the [q | k | v]
// layout ops.Attention reads.
type Weights struct {
	Config *arch.ZImageConfig
	Params map[string]*Param
	// Source describes where the weights came from (path and naming).
	Source string
	// Warnings carry over from detection.
	Warnings []string
}

// LoadOptions adjust loading.
type LoadOptions struct {
	// Config is a parsed config.json (diffusers' transformer/config.json,
	// or any object with its keys). It supplies what tensor shapes cannot
	// tell: the head count when there are no q/k norms, axes_dims,
	// axes_lens, rope_theta, t_scale, norm_eps. A model folder's own
	// config.json is used when Config is nil.
	Config map[string]any
}

// Load reads a Z-Image transformer checkpoint in the diffusers/Tongyi
// naming or the ComfyUI naming (fused attention.qkv, attention.out,
// q_norm/k_norm, x_embedder/final_layer, optionally under
// "model.diffusion_model."), and returns its parameters in the internal
// layout. Missing, unexpected and mis-shaped tensors are reported
// together, by name.
func Load(path string, opts LoadOptions) (*Weights, error) {
	ck, err := loaders.Open(path)
	if err != nil {
		return nil, fmt.Errorf("zimage: %w", err)
	}
	defer ck.Close()
	in := arch.Input{Metadata: ck.Metadata, Config: ck.Config}
	if opts.Config != nil {
		in.Config = opts.Config
	}
	for _, t := range ck.Tensors {
		in.Tensors = append(in.Tensors, arch.TensorMeta{Name: t.Name, DType: t.DType, Shape: t.Shape})
	}
	rep := arch.Detect(in)
	if rep.Architecture != arch.ZImage {
		return nil, fmt.Errorf("zimage: %s holds a %s checkpoint, not a Z-Image transformer", path, rep.Architecture)
	}
	var problems []string
	if len(rep.Missing) > 0 {
		problems = append(problems, "missing "+arch.JoinCapped(rep.Missing, ", ", 8))
	}
	if len(rep.Unexpected) > 0 {
		problems = append(problems, "unexpected "+arch.JoinCapped(rep.Unexpected, ", ", 8))
	}
	for _, m := range rep.Mismatched {
		problems = append(problems, fmt.Sprintf("tensor %s has shape %v, want %v", m.Name, m.Found, m.Expected))
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("zimage: %s (%s naming): %s", path, rep.Layout, strings.Join(problems, "; "))
	}
	cfg := rep.Config.(*arch.ZImageConfig)
	if err := CheckConfig(cfg); err != nil {
		return nil, fmt.Errorf("zimage: %s: %w", path, err)
	}
	w := &Weights{Config: cfg, Params: map[string]*Param{}, Source: fmt.Sprintf("%s (%s naming)", path, rep.Layout), Warnings: rep.Warnings}
	read := func(name string) (*Param, error) {
		t, ok := ck.Tensor(rep.Prefix + name)
		if !ok {
			return nil, fmt.Errorf("zimage: %s: tensor %q missing", path, rep.Prefix+name)
		}
		v, err := t.Float32()
		if err != nil {
			return nil, fmt.Errorf("zimage: %s: %w", path, err)
		}
		shape := make([]int, len(t.Shape))
		for i, d := range t.Shape {
			shape[i] = int(d)
		}
		// Copy: the view may alias a read-only map that Close releases.
		return &Param{Shape: shape, Data: append([]float32(nil), v...)}, nil
	}
	for _, name := range arch.ExpectedZImage(cfg, arch.Comfy).Names() {
		if rep.Layout == arch.Comfy {
			if w.Params[name], err = read(name); err != nil {
				return nil, err
			}
			continue
		}
		var parts []*Param
		for _, src := range arch.ZImageDiffusersKey(name, cfg).Others {
			p, err := read(src)
			if err != nil {
				return nil, err
			}
			parts = append(parts, p)
		}
		w.Params[name] = loaders.ConcatRows(parts)
	}
	return w, nil
}

// CheckConfig rejects configurations the model cannot run, naming the
// field: detection fills what it can and leaves the rest zero.
func CheckConfig(c *arch.ZImageConfig) error {
	if c.SeqMultiOf < 0 || c.SeqMultiOf > 1024 {
		return fmt.Errorf("seq_multi_of %d, want 1 to 1024 (0: the reference's %d)", c.SeqMultiOf, arch.DefaultSeqMultiOf)
	}
	if c.NHeads < 1 || c.Dim%c.NHeads != 0 {
		return fmt.Errorf("dim %d does not split into %d heads", c.Dim, c.NHeads)
	}
	if c.NKVHeads != c.NHeads {
		// The reference attention (and diffusers, which ignores
		// n_kv_heads) uses as many key/value heads as query heads.
		return fmt.Errorf("n_kv_heads %d differs from n_heads %d; grouped key/value heads are not supported", c.NKVHeads, c.NHeads)
	}
	if len(c.AxesDims) != 3 {
		// Positions are (frame or caption index, row, column).
		return fmt.Errorf("axes_dims %v: want the widths of the 3 RoPE axes (give LoadOptions.Config a config.json with axes_dims when the checkpoint does not imply them)", c.AxesDims)
	}
	sum := 0
	for i, d := range c.AxesDims {
		if d <= 0 || d%2 != 0 {
			return fmt.Errorf("axes_dims[%d] = %d, want a positive even width", i, d)
		}
		sum += int(d)
	}
	if sum != c.HeadDim() {
		return fmt.Errorf("axes_dims %v sum to %d, want the head width %d", c.AxesDims, sum, c.HeadDim())
	}
	if c.PatchSize < 1 || c.FPatchSize < 1 {
		return fmt.Errorf("patch sizes %d (height/width) and %d (frames) must be positive", c.PatchSize, c.FPatchSize)
	}
	if !(c.NormEps >= 0) {
		return fmt.Errorf("norm_eps %v, want ≥ 0", c.NormEps)
	}
	return nil
}

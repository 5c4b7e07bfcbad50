package convert

import (
	"encoding/json"
	"fmt"
	"maps"

	"github.com/dcdit/dcdit/loaders/arch"
	"github.com/dcdit/dcdit/vae"
)

// vaePlan plans the conversion of an AutoencoderKL between the diffusers
// naming (--layout diffusers) and the original LDM one (--layout
// original, unprefixed as FLUX.1's ae.safetensors and diffusers'
// from_single_file take it). Each tensor is renamed, its values unchanged;
// the mid attention's projections change shape between a Linear weight
// [C, C] and a 1×1 conv weight [C, C, 1, 1], the same bytes. A full
// Stable Diffusion checkpoint's other tensors (UNet, text encoder) are
// dropped, which extracts its VAE. ok is false when in is not a VAE.
func vaePlan(in arch.Input, opts Options) (p *Plan, ok bool, err error) {
	specs := make([]vae.TensorSpec, len(in.Tensors))
	for i, t := range in.Tensors {
		specs[i] = vae.TensorSpec{Name: t.Name, Shape: t.Shape}
	}
	src, err := vae.DetectNaming(specs)
	if err != nil {
		return nil, false, nil
	}
	from := arch.Diffusers
	if src.Naming == vae.LDM {
		from = arch.Original
	}
	var to vae.Naming
	switch opts.Layout {
	case arch.Diffusers:
		to = vae.Diffusers
	case arch.Original:
		to = vae.LDM
	default:
		return nil, true, fmt.Errorf("convert: a VAE has no %s layout: it converts between diffusers and original (LDM)", opts.Layout)
	}
	renames, err := vae.ConvertNames(specs, to, "")
	if err != nil {
		return nil, true, fmt.Errorf("convert: %w", err)
	}
	meta := make(map[string]arch.TensorMeta, len(in.Tensors))
	for _, t := range in.Tensors {
		meta[t.Name] = t
	}
	p = &Plan{Architecture: arch.VAE, From: from, To: opts.Layout, AllowOverflow: opts.AllowOverflow}
	used := map[string]bool{}
	for _, r := range renames {
		t := meta[r.From]
		used[r.From] = true
		dt := opts.DType
		if dt == 0 {
			dt = t.DType
		}
		transform := "rename"
		switch {
		case r.From == r.To:
			transform = "copy"
		case len(r.FromShape) != len(r.ToShape):
			transform = "rename, reshape"
		}
		p.Outputs = append(p.Outputs, Output{Name: r.To, DType: dt, Shape: r.ToShape, Transform: transform,
			Parts: []Part{{Name: r.From, DType: t.DType, Shape: t.Shape}}})
	}
	for _, t := range in.Tensors {
		if !used[t.Name] {
			p.Dropped = append(p.Dropped, Dropped{Name: t.Name, Reason: "not the VAE's (under " + vae.LDMPrefix + " only the VAE is kept)"})
		}
	}
	for i := range p.Outputs {
		o := &p.Outputs[i]
		if pt := o.Parts[0]; pt.DType != o.DType {
			if !castable(pt.DType) {
				return nil, true, fmt.Errorf("convert: tensor %s is %s; only F32, BF16, F16 and F64 tensors can be cast", pt.Name, pt.DType)
			}
			o.Transform += fmt.Sprintf(", cast %s→%s", pt.DType, o.DType)
		}
	}
	p.Metadata = map[string]string{}
	maps.Copy(p.Metadata, in.Metadata)
	p.Metadata["format"] = "pt"
	cfg, err := vaeConfig(in, src)
	if err != nil {
		p.Warnings = append(p.Warnings, fmt.Sprintf("the VAE configuration is unknown (%v): only a single .safetensors output can be written", err))
		return p, true, nil
	}
	text, err := cfg.JSON()
	if err != nil {
		return nil, true, err
	}
	if err := json.Unmarshal(text, &p.Config); err != nil {
		return nil, true, err
	}
	return p, true, nil
}

// vaeConfig is in's config.json, or the configuration its shapes imply.
func vaeConfig(in arch.Input, src *vae.Source) (*vae.Config, error) {
	if in.Config != nil {
		text, err := json.Marshal(in.Config)
		if err != nil {
			return nil, err
		}
		return vae.ParseConfig(text)
	}
	shapes := make(map[string][]int64, len(src.Tensors))
	for _, t := range src.Tensors {
		shapes[t.To] = t.ToShape
	}
	return vae.InferConfig(shapes)
}

package dit

import (
	"fmt"
	"strings"

	"github.com/dcdit/dcdit/loaders"
	"github.com/dcdit/dcdit/loaders/arch"
)

// Param is one parameter tensor in float32.
type Param = loaders.Dense

// Weights are a DiT's parameters under the original (facebookresearch)
// names, whatever naming the checkpoint used, with the configuration they
// imply.
type Weights struct {
	Config *arch.DiTConfig
	Params map[string]*Param
	// Source describes where the weights came from (path and layout).
	Source string
	// Warnings carry over from detection (assumed head count, diffusers
	// differences, ...).
	Warnings []string
}

// LoadOptions adjust loading.
type LoadOptions struct {
	// NumHeads overrides the head count, which DiT checkpoints do not store.
	NumHeads int
}

// Load reads a DiT checkpoint in the original or the diffusers naming and
// returns its parameters under the original names: diffusers' separate
// to_q/to_k/to_v become one qkv, the per-block embedder copies are read
// from block 0 (the others are checked to be identical), and a missing
// pos_embed is computed. Missing, unexpected and mis-shaped tensors are
// reported together, by name.
func Load(path string, opts LoadOptions) (*Weights, error) {
	ck, err := loaders.Open(path)
	if err != nil {
		return nil, err
	}
	defer ck.Close()
	in := arch.Input{Metadata: ck.Metadata, Config: ck.Config, NumHeads: opts.NumHeads}
	if ck.Training != nil {
		in.Args = ck.Training.Args
	}
	for _, t := range ck.Tensors {
		in.Tensors = append(in.Tensors, arch.TensorMeta{Name: t.Name, DType: t.DType, Shape: t.Shape})
	}
	rep := arch.Detect(in)
	if rep.Architecture != arch.DiT {
		return nil, fmt.Errorf("dit: %s holds a %s checkpoint, not a DiT", path, rep.Architecture)
	}
	var problems []string
	if len(rep.Missing) > 0 {
		problems = append(problems, "missing "+strings.Join(rep.Missing, ", "))
	}
	if len(rep.Unexpected) > 0 && !(rep.Layout == arch.Diffusers && len(rep.Unexpected) == 1 && rep.Unexpected[0] == "pos_embed") {
		problems = append(problems, "unexpected "+strings.Join(rep.Unexpected, ", "))
	}
	for _, m := range rep.Mismatched {
		problems = append(problems, fmt.Sprintf("%s has shape %v, want %v", m.Name, m.Found, m.Expected))
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("dit: %s (%s naming): %s", path, rep.Layout, strings.Join(problems, "; "))
	}
	cfg := rep.Config.(*arch.DiTConfig)
	w := &Weights{Config: cfg, Params: map[string]*Param{}, Source: fmt.Sprintf("%s (%s naming)", path, rep.Layout), Warnings: rep.Warnings}
	read := func(name string) (*Param, error) {
		t, ok := ck.Tensor(name)
		if !ok {
			return nil, fmt.Errorf("dit: %s: tensor %q missing", path, name)
		}
		v, err := t.Float32()
		if err != nil {
			return nil, err
		}
		shape := make([]int, len(t.Shape))
		for i, d := range t.Shape {
			shape[i] = int(d)
		}
		// Copy: the view may alias a read-only map that Close releases.
		return &Param{Shape: shape, Data: append([]float32(nil), v...)}, nil
	}
	if rep.Layout == arch.Original {
		for _, name := range arch.ExpectedDiT(cfg, arch.Original).Names() {
			if name == "pos_embed" {
				continue
			}
			if w.Params[name], err = read(name); err != nil {
				return nil, err
			}
		}
	} else if err := w.fromDiffusers(cfg, read); err != nil {
		return nil, fmt.Errorf("dit: %s: %w", path, err)
	}
	// The position table is fixed; compute it rather than trust a stored
	// copy (diffusers files do not store it at all).
	grid := cfg.InputSize / cfg.PatchSize
	pos := &Param{Shape: []int{1, grid * grid, cfg.HiddenSize}, Data: make([]float32, grid*grid*cfg.HiddenSize)}
	PosEmbedGrid(pos.Data, grid, cfg.HiddenSize)
	w.Params["pos_embed"] = pos
	return w, nil
}

// diffusersNames maps original names (with %d for the block) to diffusers
// names, for tensors that are only renamed.
var diffusersNames = [][2]string{
	{"x_embedder.proj.weight", "pos_embed.proj.weight"},
	{"x_embedder.proj.bias", "pos_embed.proj.bias"},
	{"blocks.%d.adaLN_modulation.1.weight", "transformer_blocks.%d.norm1.linear.weight"},
	{"blocks.%d.adaLN_modulation.1.bias", "transformer_blocks.%d.norm1.linear.bias"},
	{"blocks.%d.attn.proj.weight", "transformer_blocks.%d.attn1.to_out.0.weight"},
	{"blocks.%d.attn.proj.bias", "transformer_blocks.%d.attn1.to_out.0.bias"},
	{"blocks.%d.mlp.fc1.weight", "transformer_blocks.%d.ff.net.0.proj.weight"},
	{"blocks.%d.mlp.fc1.bias", "transformer_blocks.%d.ff.net.0.proj.bias"},
	{"blocks.%d.mlp.fc2.weight", "transformer_blocks.%d.ff.net.2.weight"},
	{"blocks.%d.mlp.fc2.bias", "transformer_blocks.%d.ff.net.2.bias"},
	{"final_layer.adaLN_modulation.1.weight", "proj_out_1.weight"},
	{"final_layer.adaLN_modulation.1.bias", "proj_out_1.bias"},
	{"final_layer.linear.weight", "proj_out_2.weight"},
	{"final_layer.linear.bias", "proj_out_2.bias"},
}

// embedderNames maps the shared embedders to their per-block diffusers copies.
var embedderNames = [][2]string{
	{"t_embedder.mlp.0.weight", "transformer_blocks.%d.norm1.emb.timestep_embedder.linear_1.weight"},
	{"t_embedder.mlp.0.bias", "transformer_blocks.%d.norm1.emb.timestep_embedder.linear_1.bias"},
	{"t_embedder.mlp.2.weight", "transformer_blocks.%d.norm1.emb.timestep_embedder.linear_2.weight"},
	{"t_embedder.mlp.2.bias", "transformer_blocks.%d.norm1.emb.timestep_embedder.linear_2.bias"},
	{"y_embedder.embedding_table.weight", "transformer_blocks.%d.norm1.emb.class_embedder.embedding_table.weight"},
}

func (w *Weights) fromDiffusers(cfg *arch.DiTConfig, read func(string) (*Param, error)) error {
	for _, pair := range diffusersNames {
		if !strings.Contains(pair[0], "%d") {
			p, err := read(pair[1])
			if err != nil {
				return err
			}
			w.Params[pair[0]] = p
			continue
		}
		for i := range cfg.Depth {
			p, err := read(fmt.Sprintf(pair[1], i))
			if err != nil {
				return err
			}
			w.Params[fmt.Sprintf(pair[0], i)] = p
		}
	}
	for _, pair := range embedderNames {
		p, err := read(fmt.Sprintf(pair[1], 0))
		if err != nil {
			return err
		}
		// Every block carries the same copy; a difference means the
		// checkpoint was trained in diffusers with untied embedders,
		// which the original architecture cannot represent.
		for i := 1; i < cfg.Depth; i++ {
			q, err := read(fmt.Sprintf(pair[1], i))
			if err != nil {
				return err
			}
			for k := range p.Data {
				if p.Data[k] != q.Data[k] {
					return fmt.Errorf("%s differs from block 0's copy (element %d: %g vs %g); per-block embedders cannot be mapped to DiT", fmt.Sprintf(pair[1], i), k, q.Data[k], p.Data[k])
				}
			}
		}
		w.Params[pair[0]] = p
	}
	// diffusers splits timm's fused qkv (rows [q; k; v]) into three linears.
	for i := range cfg.Depth {
		for _, kind := range []string{"weight", "bias"} {
			var parts []*Param
			for _, n := range []string{"q", "k", "v"} {
				p, err := read(fmt.Sprintf("transformer_blocks.%d.attn1.to_%s.%s", i, n, kind))
				if err != nil {
					return err
				}
				parts = append(parts, p)
			}
			w.Params[fmt.Sprintf("blocks.%d.attn.qkv.%s", i, kind)] = loaders.ConcatRows(parts)
		}
	}
	return nil
}

package dit

import (
	"fmt"
	"strings"

	"github.com/dcdit/dcdit/loaders"
	"github.com/dcdit/dcdit/loaders/arch"
	"github.com/dcdit/dcdit/posembed"
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
	in := ck.ArchInput(opts.NumHeads)
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
	posembed.SinCosGrid(pos.Data, grid, cfg.HiddenSize)
	w.Params["pos_embed"] = pos
	return w, nil
}

func (w *Weights) fromDiffusers(cfg *arch.DiTConfig, read func(string) (*Param, error)) error {
	for _, km := range arch.DiTDiffusersKeys(cfg) {
		var parts []*Param
		for _, name := range km.Others {
			p, err := read(name)
			if err != nil {
				return err
			}
			parts = append(parts, p)
			if km.Kind == arch.Replicated {
				// Block 0's copy is used; the others are only compared.
				break
			}
		}
		if km.Kind == arch.Replicated {
			if err := checkCopies(parts[0], km.Others, read); err != nil {
				return err
			}
		}
		// A fused qkv is timm's rows [q; k; v]; one part is returned as is.
		w.Params[km.Name] = loaders.ConcatRows(parts)
	}
	return nil
}

// checkCopies compares every block's copy of an embedder with block 0's.
// A difference means the checkpoint was trained in diffusers with untied
// embedders, which the original architecture cannot represent.
func checkCopies(first *Param, copies []string, read func(string) (*Param, error)) error {
	for _, name := range copies[1:] {
		q, err := read(name)
		if err != nil {
			return err
		}
		for k := range first.Data {
			if first.Data[k] != q.Data[k] {
				return fmt.Errorf("%s differs from block 0's copy (element %d: %g vs %g); per-block embedders cannot be mapped to DiT", name, k, q.Data[k], first.Data[k])
			}
		}
	}
	return nil
}

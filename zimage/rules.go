package zimage

import (
	"fmt"

	"github.com/dcdit/dcdit/family"
	"github.com/dcdit/dcdit/loaders/arch"
)

var _ family.ModelRules = Family{}

// ModelKeys are the [model] keys of a caption-conditioned Z-Image: its
// refiner blocks, its caption features' width (the embedding table that
// stands in for the text encoder) and the multiple its sequences are
// padded to.
func (Family) ModelKeys() []family.ModelKey {
	return []family.ModelKey{
		{Key: "refiner_depth", Default: 1}, {Key: "caption_dim", Default: 32},
		{Key: "seq_multi_of", Default: arch.DefaultSeqMultiOf},
	}
}

// ModelPreset is false: a Z-Image trained from scratch has no presets.
func (Family) ModelPreset(string) (family.ModelSettings, bool) { return family.ModelSettings{}, false }

// ModelTraining is flow matching on captions.
func (Family) ModelTraining() family.ModelTraining {
	return family.ModelTraining{Process: family.ProcessFlowMatching, Captions: true}
}

// CheckModel refuses sizes RoPE cannot split, a scaffold (a DC-Z-Image is
// upcycled, not trained from scratch), a saved type other than F32 (the
// model folder's weights are F32), and stages or stage keys that only a
// DDPM model with class labels reads.
func (Family) CheckModel(r family.ModelRecipe) []family.RecipeProblem {
	var out []family.RecipeProblem
	bad := func(key string, found any, expected string) {
		out = append(out, family.RecipeProblem{Key: key, Found: found, Expected: expected})
	}
	s := r.Settings
	for _, f := range []struct {
		key string
		v   int
	}{{"model.refiner_depth", s.RefinerDepth}, {"model.caption_dim", s.CaptionWidth}, {"model.seq_multi_of", s.SeqMultiple}} {
		if f.v < 1 {
			bad(f.key, f.v, "an integer ≥ 1")
		}
	}
	if s.Width > 0 && s.Heads > 0 && s.Width%s.Heads == 0 && (s.Width/s.Heads)%8 != 0 {
		bad("model.num_heads", s.Heads, fmt.Sprintf("a head width hidden_size/num_heads that is a multiple of 8 (its three RoPE axes), found %d", s.Width/s.Heads))
	}
	if r.Scaffold {
		out = append(out, family.RecipeProblem{Key: "scaffold", Msg: fmt.Sprintf("found with model.kind = %q, expected none: a DC-Z-Image is not trained from scratch; upcycle a trained Z-Image instead ([base], recipes/toy-zimage.toml)", r.Kind)})
	}
	if r.SaveDType != "f32" {
		bad("save.dtype", r.SaveDType, fmt.Sprintf("\"f32\" with model.kind = %q (a trained Z-Image is saved in F32)", Kind))
	}
	for i, k := range r.StageKinds {
		stage := fmt.Sprintf("stage[%d]", i)
		if k != "train" {
			bad(stage+".kind", k, fmt.Sprintf("%q with model.kind = %q (a Z-Image trains from scratch; a DC-Z-Image is upcycled from a [base] with diffusion.process = %q)", "train", Kind, family.ProcessFlowMatching))
		}
		for _, key := range []string{"loss", "p2_gamma", "p2_k", "class_embedder_lr_scale", "trainable", "frozen"} {
			if r.Written(stage + "." + key) {
				out = append(out, family.RecipeProblem{Key: stage + "." + key, Msg: fmt.Sprintf("found with model.kind = %q, expected it only with a DiT: a Z-Image trains every parameter with flow matching's loss and has no class embedder", Kind)})
			}
		}
	}
	return out
}

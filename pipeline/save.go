package pipeline

import (
	"encoding/json"
	"fmt"
	"slices"

	"github.com/dcdit/dcdit/datasets/shapes"
	"github.com/dcdit/dcdit/dc/checkpoint"
	"github.com/dcdit/dcdit/family"
	"github.com/dcdit/dcdit/loaders/dtype"
	"github.com/dcdit/dcdit/recipes"
)

// save writes the final model with its recipe.
func (m *model) save(path string, r *recipes.Recipe) error {
	// The text the run was loaded from, not the file as it is now: it may
	// have been edited while the stages ran.
	text := r.Text
	dt, err := saveDType(r.Save.DType)
	if err != nil {
		return err
	}
	if m.fixed != nil {
		// In its family's own format, with the recipe and any caption
		// table in the metadata: a base of later recipes.
		meta := map[string]string{"dcdit.recipe": text}
		if m.captions != nil {
			ct, err := json.Marshal(m.captions.info)
			if err != nil {
				return err
			}
			meta[shapes.CaptionTableKey] = string(ct)
		}
		return m.fixed.(family.Saver).SaveModel(path, meta, dt)
	}
	info := checkpoint.Info{Recipe: text, TrainedRhos: trainedRhos(r), DType: dt}
	if m.captions != nil {
		// A DC-Z-Image's sampler turns prompts into the features it was
		// trained on, as its base's does. One trained on encoded prompts
		// records none: its prompts go through the text encoder, and a
		// table would let --prompt without one read the wrong features.
		ct, err := json.Marshal(m.captions.info)
		if err != nil {
			return err
		}
		info.Extra = map[string]string{shapes.CaptionTableKey: string(ct)}
	}
	if r.Base != nil {
		b, err := checkpoint.DescribeBase(r.BasePath(), false)
		if err != nil {
			return err
		}
		info.Base = b
		// A DC model with a base is evaluated against it: it samples as
		// the evaluation did.
		info.Sampling = sampling(r)
	}
	return checkpoint.Save(path, m.dc, info)
}

// sampling is the recipe's [eval] sampling settings as a checkpoint
// records them.
func sampling(r *recipes.Recipe) *checkpoint.Sampling {
	s := &checkpoint.Sampling{Process: checkpoint.ProcessDDPM, DenseBelow: r.Eval.DenseBelow, CFG: r.Eval.CFG, Steps: r.Eval.SamplingSteps,
		CoarseFrom: r.Eval.CoarseFrom, CoarseRho: r.Eval.CoarseRho}
	if r.Diffusion.Process == recipes.ProcessFlowMatching {
		s.Process, s.Shift = checkpoint.ProcessFlowMatching, r.Diffusion.Shift
	}
	return s
}

// fileName is the final model's name in the output folder: a DC
// checkpoint's file, or what a fixed-patch model's family names it (a
// Z-Image's is a folder: weights and config.json).
func (m *model) fileName() string {
	if m.fixed != nil {
		return m.fixed.(family.Saver).ModelFile()
	}
	return "model.safetensors"
}

// saveDType maps save.dtype onto the stored tensor type.
func saveDType(name string) (dtype.DType, error) {
	switch name {
	case "f32":
		return dtype.F32, nil
	case "bf16":
		return dtype.BF16, nil
	case "f16":
		return dtype.F16, nil
	}
	return dtype.Invalid, fmt.Errorf("pipeline: save.dtype %q, want f32, bf16 or f16", name)
}

// trainedRhos gathers the ρ values the stages trained at.
func trainedRhos(r *recipes.Recipe) []float64 {
	seen := map[float64]bool{}
	var out []float64
	for _, st := range r.Stages {
		for _, v := range st.Rho {
			if !seen[v] {
				seen[v] = true
				out = append(out, v)
			}
		}
	}
	slices.Sort(out)
	return out
}

package pipeline

import (
	"fmt"

	"github.com/BurntSushi/toml"

	"github.com/dcdit/dcdit/loaders"
	"github.com/dcdit/dcdit/recipes"
)

// ditTrainSteps is the diffusion DiT's released checkpoints were trained
// with.
const ditTrainSteps = 1000

// checkBaseSchedule refuses a diffusion.steps the base was not trained
// with: distillation feeds the teacher timesteps on the recipe's schedule
// and the teacher reads them on its own, so the two must agree. A base
// trained by dcdit carries its recipe (dcdit.recipe) and with it its
// schedule; any other base is taken to have DiT's 1000 steps, the only
// schedule such a file can have come from, since it does not record one.
func checkBaseSchedule(r *recipes.Recipe) error {
	c, err := loaders.Open(r.BasePath())
	if err != nil {
		return fmt.Errorf("pipeline: %w", err)
	}
	defer c.Close()
	want, from := ditTrainSteps, "DiT's schedule; the file records no other"
	if text, ok := c.Metadata["dcdit.recipe"]; ok {
		var base struct {
			Diffusion struct {
				Steps int `toml:"steps"`
			} `toml:"diffusion"`
		}
		if _, err := toml.Decode(text, &base); err != nil {
			return fmt.Errorf("pipeline: %s: its dcdit.recipe metadata does not decode: %v", r.BasePath(), err)
		}
		want, from = ditTrainSteps, "its recipe's default"
		if base.Diffusion.Steps != 0 {
			want, from = base.Diffusion.Steps, "as its recipe says"
		}
	}
	if r.Diffusion.Steps != want {
		return fmt.Errorf("pipeline: %s: diffusion.steps: found %d, expected %d, the schedule the base %s was trained with (%s)",
			r.File, r.Diffusion.Steps, want, r.BasePath(), from)
	}
	return nil
}

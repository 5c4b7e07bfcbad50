package distill

import "github.com/dcdit/dcdit/family"

// Teacher is the frozen model a DC model is distilled onto
// (family.Teacher): its raw prediction for a batch of noisy latents, in
// the diffusion process's own terms (DDPM: ε and the variance value; flow
// matching: the velocity as the network emits it), and its guidance
// rule. DCObjective never looks behind this interface; a model family
// provides it.
type Teacher = family.Teacher

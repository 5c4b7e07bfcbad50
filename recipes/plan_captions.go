package recipes

import (
	"fmt"

	"github.com/dcdit/dcdit/datasets/shapes"
)

// planCaptioned plans a recipe whose base is conditioned on captions (a
// Z-Image): the scaffold around it on its grid (as upcycle.GraftTeacher
// builds it), its parameters, its FLOPs per ρ with a caption of the
// length planBase chose (the family's typical, or the few words of the
// shapes captions when the base was trained on them), and each stage's
// cost and memory. The FLOPs count the dense and coarse steps of the
// flow-matching schedule the evaluation samples with.
func planCaptioned(p *problems, r *Recipe, pl *Plan, m *planned) {
	if r.Scaffold == nil {
		return // upcycle's check names the missing [scaffold]
	}
	c := dcConfigs(p, r, pl, m)
	if c == nil {
		return
	}
	pl.DC = c
	pl.Data = DataInfo{Source: r.Data.Source, Samples: r.Data.Samples}
	pl.Params = modelParams(pl, m, true, r.Scaffold)
	addWidthRouters(p, r, pl)
	countParams(pl, m, true)

	// FLOPs: the teacher on its patch grid, the DC model at each ρ.
	steps, guided := r.Eval.SamplingSteps, r.Eval.CFG > 1
	branches := 1
	if guided {
		branches = 2
	}
	f := &pl.FLOPs
	f.Convention, f.SamplingSteps, f.CFG = FLOPsConvention, steps, r.Eval.CFG
	f.KeptTokens = fmt.Sprintf("assumed: the router marks ⌊L/N⌋ = ⌊%d/%g⌋ = %d boundaries, tail dropping removes ⌊n·ρ⌋; captions of %d tokens", c.Cells(), c.TargetN, keptTokens(c, 0), m.captionLen)
	perImage := stepKinds(r, c, f, steps)
	baseFwd := pl.forward(m.cfg, m.grid, m.grid, m.captionLen)
	f.Rows = append(f.Rows, FLOPsRow{Model: "base", Tokens: m.Tokens, Kept: m.Tokens, GFLOPsPerForward: baseFwd / 1e9,
		TFLOPsPerImage: float64(steps*branches) * baseFwd / 1e12})
	f.Rows = append(f.Rows, pl.dcRows(r, perImage, branches)...)
	for i := range f.Rows {
		f.Rows[i].RelativeToBase = f.Rows[i].TFLOPsPerImage / f.Rows[0].TFLOPsPerImage
	}

	// Stages: what trains, the compute and the memory (the backbone's
	// activations at the family's typical caption).
	for i := range r.Stages {
		st := &r.Stages[i]
		sp := newStagePlan(p, pl, i, st, true)
		var fwd float64
		for _, rho := range st.Rho {
			fwd += pl.sampledForward(keptTokens(c, rho)).Total() / float64(len(st.Rho))
		}
		sp.setCompute(st, fwd, baseFwd)
		sp.Memory = memoryWith(pl, st, sp.Trainable, activationFloats(pl, m, st.Rho[0], pl.base.CaptionLen))
		pl.Stages = append(pl.Stages, sp)
	}
}

// toyCaptionLen is the caption length a caption-conditioned model trained
// on the shapes captions is planned for: the longest caption (the model
// pads it to its family's multiple).
const toyCaptionLen = shapes.MaxCaptionWords

// planCaptionedModel plans a caption-conditioned model trained from
// scratch ([model]): its parameters, its FLOPs per image along its
// sampling run, and each stage's compute and memory.
func planCaptionedModel(p *problems, r *Recipe, pl *Plan, m *planned) {
	pl.Params = modelParams(pl, m, false, nil)
	countParams(pl, m, false)
	pl.Data = DataInfo{Source: r.Data.Source, Samples: r.Data.Samples}

	fwd := pl.forward(m.cfg, m.grid, m.grid, m.captionLen)
	steps := r.Eval.SamplingSteps
	f := &pl.FLOPs
	f.Convention, f.SamplingSteps, f.CFG = FLOPsConvention, steps, r.Eval.CFG
	f.KeptTokens = fmt.Sprintf("every patch; captions of %d words padded to a multiple of %d tokens", m.captionLen, max(m.CaptionPad, 1))
	f.Rows = append(f.Rows, FLOPsRow{Model: m.kind, Tokens: m.Tokens, Kept: m.Tokens, GFLOPsPerForward: fwd / 1e9,
		TFLOPsPerImage: fwd * float64(steps) / 1e12, RelativeToBase: 1})
	for i := range r.Stages {
		st := &r.Stages[i]
		sp := newStagePlan(p, pl, i, st, false)
		sp.Loss = r.Diffusion.Process
		sp.setCompute(st, fwd, 0)
		sp.Memory = memoryWith(pl, st, sp.Trainable, activationFloats(pl, m, 0, 0))
		pl.Stages = append(pl.Stages, sp)
	}
}

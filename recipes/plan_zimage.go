package recipes

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/dcdit/dcdit/datasets/shapes"
	"github.com/dcdit/dcdit/dc"
	"github.com/dcdit/dcdit/family"
	"github.com/dcdit/dcdit/loaders/arch"
)

// planZImage plans a recipe whose base is a Z-Image: the scaffold around
// it on the base.latent_size grid (as upcycle.GraftTeacher builds it), its
// parameters, its FLOPs per ρ with a caption of the family's typical length
// (family.Base.CaptionLen) (the few words of the shapes captions when the base was trained
// on them), and each stage's cost and memory.
func planZImage(p *problems, r *Recipe, pl *Plan) {
	zc := pl.Backbone.ZImage
	L := r.Base.LatentSize
	if L < 1 {
		p.add("base.latent_size", "missing, expected the latent grid side to graft a Z-Image for (it has no fixed resolution: 128 for 1024² images through its 8× VAE)")
		return
	}
	if r.Diffusion.Process != ProcessFlowMatching {
		p.add("diffusion.process", "found %q with a Z-Image base, expected %q (Z-Image is trained with flow matching)", r.Diffusion.Process, ProcessFlowMatching)
	}
	if r.Scaffold == nil {
		return // upcycle's check names the missing [scaffold]
	}
	s := r.Scaffold
	if !scaffoldDivides(p, s, zc.Dim) {
		return
	}
	// A base trained on the shapes captions reads a few words; a real
	// Z-Image a prompt in its chat template.
	captionLen := pl.base.CaptionLen
	if pl.Backbone.ShapesCaptions {
		captionLen = toyCaptionLen
	}
	g, ok := pl.costs.(family.GraftSpecer)
	if !ok {
		p.add("base.path", "the base's family does not describe its grafts (family.GraftSpecer)")
		return
	}
	spec, err := g.GraftSpec(zc, L, L, captionLen)
	if err != nil {
		p.add("base.path", "%v", err)
		return
	}
	c, err := s.Upcycle().Config(zc.InChannels, zc.InChannels, L, L, spec.Width(), spec.CondWidth())
	if err != nil {
		p.add("scaffold", "%v", strings.TrimPrefix(err.Error(), "upcycle: "))
		return
	}
	pl.DC = c
	pl.Data = DataInfo{Source: r.Data.Source, Samples: r.Data.Samples}
	if r.Eval.DenseBelow > 0 {
		pl.Warnings = append(pl.Warnings, fmt.Sprintf("eval.dense_below = %g: the FLOPs assume every step at its ρ (the dense steps below it are not counted)", r.Eval.DenseBelow))
	}

	// Parameters: the scaffold's (new), the backbone's (copied), whose
	// patch embedding and final layer the scaffold replaces.
	shapes := dc.ScaffoldShapes(c)
	for _, name := range slices.Sorted(maps.Keys(shapes)) {
		pl.Params = append(pl.Params, newParam(name, shapes[name], dc.ParamGroups(name, spec.ParamGroups)))
	}
	exp := arch.ExpectedZImage(zc, arch.Comfy)
	for i, name := range exp.Names() {
		prm := newParam(dc.BackbonePrefix+name, ints(exp.Shape(i)), dc.ParamGroups(dc.BackbonePrefix+name, spec.ParamGroups))
		prm.From = name
		pl.Params = append(pl.Params, prm)
	}
	countParams(pl, nil, nil)
	ps := &pl.Parameters
	dropped := map[string]bool{}
	for i, name := range exp.Names() {
		n := Param{Shape: ints(exp.Shape(i))}.Numel()
		ps.Base += n
		if root := strings.SplitN(name, ".", 2)[0]; root == "x_embedder" || root == "final_layer" {
			ps.Dropped += n
			dropped[root] = true
		}
	}
	for k := range dropped {
		ps.DroppedNames = append(ps.DroppedNames, k)
	}
	sort.Strings(ps.DroppedNames)

	// FLOPs: the teacher on its patch grid, the DC model at each ρ.
	steps, guided := r.Eval.SamplingSteps, r.Eval.CFG > 1
	branches := 1.0
	if guided {
		branches = 2
	}
	f := &pl.FLOPs
	f.Convention, f.SamplingSteps, f.CFG = FLOPsConvention, steps, r.Eval.CFG
	f.KeptTokens = fmt.Sprintf("assumed: the router marks ⌊L/N⌋ = ⌊%d/%g⌋ = %d boundaries, tail dropping removes ⌊n·ρ⌋; captions of %d tokens", c.Cells(), c.TargetN, keptTokens(c, 0), captionLen)
	patches := (L / zc.PatchSize) * (L / zc.PatchSize)
	baseFwd := pl.forward(zc, L, L, captionLen)
	f.Rows = append(f.Rows, FLOPsRow{Model: "base", Tokens: patches, Kept: patches, GFLOPsPerForward: baseFwd / 1e9,
		TFLOPsPerImage: baseFwd * float64(steps) * branches / 1e12})
	at := func(kept ...int) dc.FLOPs { return dc.ConfigFLOPs(c, spec, kept) }
	for _, rho := range r.Eval.Rho {
		k := keptTokens(c, rho)
		parts := at(k)
		fwd := parts.Total()
		f.Rows = append(f.Rows, FLOPsRow{Model: "dc", Rho: rho, Tokens: c.Cells(), Kept: k, GFLOPsPerForward: fwd / 1e9,
			TFLOPsPerImage: fwd * float64(steps) * branches / 1e12, Parts: &parts})
	}
	if len(r.Eval.LiteCFG) == 2 {
		rc, ru := r.Eval.LiteCFG[0], r.Eval.LiteCFG[1]
		parts := at(keptTokens(c, rc), keptTokens(c, ru))
		fwd := parts.Total()
		f.Rows = append(f.Rows, FLOPsRow{Model: "dc-lite-cfg", Rho: rc, RhoUncond: &ru, Tokens: c.Cells(), Kept: keptTokens(c, rc),
			GFLOPsPerForward: fwd / 1e9, TFLOPsPerImage: fwd * float64(steps) / 1e12, Parts: &parts})
	}
	for i := range f.Rows {
		f.Rows[i].RelativeToBase = f.Rows[i].TFLOPsPerImage / f.Rows[0].TFLOPsPerImage
	}

	// Stages: what trains, the compute and the memory.
	for i := range r.Stages {
		st := &r.Stages[i]
		sp := newStagePlan(p, pl, st, indexKey("stage", i), true)
		var fwd float64
		for _, rho := range st.Rho {
			fwd += at(keptTokens(c, rho)).Total() / float64(len(st.Rho))
		}
		sp.setCompute(st, fwd, baseFwd)
		sp.Memory = memoryWith(pl, st, sp.Trainable, zimageActivationFloats(c, zc, keptTokens(c, st.Rho[0]), pl.base.CaptionLen))
		pl.Stages = append(pl.Stages, sp)
	}
}

// zimageActivationFloats estimates the float32 values one sample keeps
// for the backward pass of a DC model around a Z-Image, as
// activationFloats does for DiT: the scaffold per grid position, then the
// noise refiner over the M kept tokens and the main layers over them and
// the caption (SwiGLU: three hidden-width tensors per block).
func zimageActivationFloats(c *dc.Config, zc *arch.ZImageConfig, M, captionLen int) int64 {
	D, H, ffn := int64(zc.Dim), int64(zc.NHeads), int64(zc.FFNHidden)
	block := func(tokens int64) int64 { return tokens*(12*D+3*ffn) + H*tokens*tokens }
	m, joint := int64(M), int64(M+captionLen)
	return int64(c.Cells())*scaffoldFloats(c) + int64(zc.NRefinerLayers)*block(m) + int64(zc.NLayers)*block(joint)
}

// toyCaptionLen is the caption length a Z-Image trained on the shapes
// captions is planned for: the longest caption (the model pads it to its
// SeqMultiple).
const toyCaptionLen = shapes.MaxCaptionWords

// planZImageModel plans a Z-Image trained from scratch ([model] kind
// "zimage"): its parameters, its FLOPs per image along flow matching's
// sampling run, and each stage's compute and memory.
func planZImageModel(p *problems, r *Recipe, pl *Plan, zc *arch.ZImageConfig) {
	L := r.Model.InputSize
	g, ok := pl.costs.(family.GraftSpecer)
	if !ok {
		p.add("model.kind", "the %q family does not describe its models' tensors (family.GraftSpecer)", r.Model.Kind)
		return
	}
	spec, err := g.GraftSpec(zc, L, L, toyCaptionLen)
	if err == nil {
		err = spec.Validate()
	}
	if err != nil {
		p.add("model", "%v", err)
		return
	}
	pl.Backbone = BackboneInfo{Architecture: arch.ZImage, Source: "model", ZImage: zc}
	exp := arch.ExpectedZImage(zc, arch.Comfy)
	for i, name := range exp.Names() {
		pl.Params = append(pl.Params, newParam(name, ints(exp.Shape(i)), spec.ParamGroups(arch.DCBackbonePrefix+name)))
	}
	countParams(pl, nil, nil)
	pl.Data = DataInfo{Source: r.Data.Source, Samples: r.Data.Samples}

	patches := (L / zc.PatchSize) * (L / zc.PatchSize)
	fwd := pl.forward(zc, L, L, toyCaptionLen)
	steps := r.Eval.SamplingSteps
	f := &pl.FLOPs
	f.Convention, f.SamplingSteps, f.CFG = FLOPsConvention, steps, r.Eval.CFG
	pad := zc.SeqMultiple()
	f.KeptTokens = fmt.Sprintf("every patch; captions of %d words padded to a multiple of %d tokens", toyCaptionLen, pad)
	f.Rows = append(f.Rows, FLOPsRow{Model: "zimage", Tokens: patches, Kept: patches, GFLOPsPerForward: fwd / 1e9,
		TFLOPsPerImage: fwd * float64(steps) / 1e12, RelativeToBase: 1})

	D, H, ffn := int64(zc.Dim), int64(zc.NHeads), int64(zc.FFNHidden)
	block := func(tokens int64) int64 { return tokens*(12*D+3*ffn) + H*tokens*tokens }
	img, capt := int64(pad*((patches+pad-1)/pad)), int64(pad*((toyCaptionLen+pad-1)/pad))
	acts := int64(zc.NRefinerLayers)*(block(img)+block(capt)) + int64(zc.NLayers)*block(img+capt)
	for i := range r.Stages {
		st := &r.Stages[i]
		sp := newStagePlan(p, pl, st, indexKey("stage", i), false)
		sp.Loss = ProcessFlowMatching
		sp.setCompute(st, fwd, 0)
		sp.Memory = memoryWith(pl, st, sp.Trainable, acts)
		pl.Stages = append(pl.Stages, sp)
	}
}

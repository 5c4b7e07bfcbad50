package bench

import (
	"fmt"
	"slices"

	"github.com/nlpodyssey/spago/mat"

	"github.com/dcdit/dcdit/cond"
	"github.com/dcdit/dcdit/dc"
	"github.com/dcdit/dcdit/family"
	"github.com/dcdit/dcdit/ops"
	"github.com/dcdit/dcdit/optim"
	"github.com/dcdit/dcdit/params"
	"github.com/dcdit/dcdit/upcycle"
)

// dcSpec sizes a DC-DiT bench model: the preset's main network and
// scaffold on a side×side latent grid, batch samples.
type dcSpec struct {
	preset      dc.Preset
	side, batch int
}

// dcDiTS is DC-DiT-S as shared/bench/README.md measures it:
// D 384, 6 heads, 12 blocks, encoder/decoder width 96, batch 8 of
// 32×32×4 latents.
func dcDiTS() dcSpec {
	p, _ := dc.LookupPreset("DC-DiT-S")
	return dcSpec{preset: p, side: 32, batch: modelBatch}
}

// dcKeep is the fraction of tokens the router is set to keep (about a
// quarter of the 1024, as in the reference's measurement).
const dcKeep = 0.25

var dcRhos = []struct {
	name string
	rho  float32
}{{"0", 0}, {"0.3", 0.3}, {"0.6", 0.6}}

// dcCases are the DC-DiT-S forward and training-step cases, forward first.
func dcCases() []benchCase {
	var cs []benchCase
	for _, train := range []bool{false, true} {
		for _, r := range dcRhos {
			name := "dcdit_s_forward_rho" + r.name
			if train {
				name = "dcdit_s_train_step_rho" + r.name
			}
			cs = append(cs, benchCase{name: name, setup: dcCase(dcDiTS(), r.rho, train), reps: halfReps})
		}
	}
	return cs
}

// dcModel is a DC-DiT with random weights: the main network adopted from
// a DiT of its sizes at patch 1 (upcycle.Graft), initialised by the DiT
// cases' family, the scaffold as the official DC-DiT initialises it, in
// one parameter arena, with the router's last bias shifted so that dcKeep
// of the benchmark batch's tokens are boundaries (random weights give an
// arbitrary logit scale).
type dcModel struct {
	m      *dc.Model
	params *params.Set
	x      mat.Tensor // token-major latents [B·L, C]
	t      []float32
	y      []int
}

func newDCModel(s dcSpec) *dcModel {
	p := s.preset
	f := ditS2().Family
	conf, ok := f.(family.Configurer)
	if !ok {
		panic(fmt.Sprintf("bench: the family of %s sizes no model from settings", ditPreset))
	}
	tc, err := conf.ModelConfig(family.ModelSettings{Depth: p.Depth, Width: p.Width, Heads: p.Heads, Patch: 1,
		InChannels: 4, InputSize: s.side, Classes: 1000, LearnSigma: true, MLPRatio: 4})
	if err != nil {
		panic(err) // a fixed, valid configuration
	}
	teacher := initModel(f, tc)
	sc := upcycle.DefaultScaffold()
	sc.RatioBatchSize = 0 // a batch of 8 is less than the reference's groups of 16
	g, err := upcycle.NewGrafted(teacher, sc, s.side, s.side, 2)
	if err != nil {
		panic(err)
	}
	cfg := g.Model.Config
	d := &dcModel{m: g.Model, params: g.Params}
	x := randn(11, s.batch*cfg.CellIn()*cfg.Cells())
	d.t, d.y = drawTimesLabels(s.batch, teacher.Conditioning().Classes)
	d.x = mat.NewDense[float32](mat.WithShape(s.batch*cfg.Cells(), cfg.CellIn()),
		mat.WithBacking(dc.ToTokens(x, s.batch, cfg.InChannels, cfg.GridRows, cfg.GridCols, cfg.Patch())))

	// Calibrate: the dcKeep quantile of the logits becomes the threshold.
	g.Params.SetRequiresGrad(false)
	res := d.forward(nil)
	logits := slices.Clone(mat.Data[float32](res.Routing.Logit.Value()))
	slices.Sort(logits)
	q := logits[int(float64(len(logits))*(1-dcKeep))]
	g.Params.Get("hnet.routing_module.residual_scorer.3.bias").Values()[0] -= q
	return d
}

// forward runs the whole model (conditioning included) at ρ.
func (d *dcModel) forward(frac []float32) *dc.Result {
	c, err := d.m.Backbone.Condition(cond.Input{T: d.t, Labels: d.y})
	if err != nil {
		panic(fmt.Sprintf("bench: %v", err))
	}
	res, err := d.m.Forward(d.x, c, frac)
	if err != nil {
		panic(fmt.Sprintf("bench: %v", err))
	}
	return res
}

// dcCase times DC-DiT-S at tail-drop fraction rho: the inference forward
// (no gradients kept), or one training step as dit_s2_train_step does it
// (MSE of the output against a fixed target plus 0.03 × the ratio loss,
// backward, global-norm clipping at 1, AdamW with lr 1e-4 and no weight
// decay over all parameters), each run from the same weights. The FLOPs
// are those of the forward the case runs, with its actual kept counts (the
// same every run: the inputs and weights are fixed), three times that for
// a training step.
func dcCase(s dcSpec, rho float32, train bool) func() workload {
	return func() workload {
		w, _ := dcWorkload(s, rho, train)
		return w
	}
}

// dcWorkload builds a dcCase workload and returns its model.
func dcWorkload(s dcSpec, rho float32, train bool) (workload, *dcModel) {
	d := newDCModel(s)
	frac := []float32{rho}
	d.params.SetRequiresGrad(false)
	kept := d.forward(frac).Chunks.NumKept
	fwd := d.m.ForwardFLOPs(kept).Total()
	if !train {
		return workload{run: func() { d.forward(frac) }, flops: fwd}, d
	}
	d.params.SetRequiresGrad(true)
	cfg := d.m.Config
	rows := s.batch * cfg.Tokens()
	target := mat.NewDense[float32](mat.WithShape(rows, cfg.CellOut()), mat.WithBacking(randn(14, rows*cfg.CellOut())))
	h := optim.DefaultHyper()
	h.LR, h.WeightDecay = 1e-4, 0
	mask := optim.AllTrainable(d.params.Len())
	opt, err := optim.NewAdamW(mask, h)
	if err != nil {
		panic(err) // fixed, valid hyperparameters
	}
	clip := optim.NewGradClipper(mask, 1)
	// Each run starts from the calibrated weights: a step moves the router
	// (and the encoder before it), and with them the kept tokens and the
	// work of the next run.
	initial := slices.Clone(d.params.Data)
	return workload{
		reset: func() { copy(d.params.Data, initial) },
		run: func() {
			d.params.ZeroGrad()
			res := d.forward(frac)
			ratio, err := res.RatioLoss(cfg.TargetN, cfg.RatioBatchSize)
			if err != nil {
				panic(fmt.Sprintf("bench: %v", err))
			}
			loss := ops.Add(ops.MSE(res.Out, target), ops.Scale(ratio, cfg.RatioLossWeight))
			if err := ops.Backward(loss); err != nil {
				panic(err)
			}
			ops.Release(loss)
			if _, err := clip.Clip(d.params.Grad); err != nil {
				panic(fmt.Sprintf("bench: %v", err))
			}
			opt.Step(d.params.Data, d.params.Grad)
		},
		flops: 3 * fwd,
	}, d
}

package tinydit_test

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/dcdit/dcdit/cond"
	"github.com/dcdit/dcdit/datasets/shapes"
	"github.com/dcdit/dcdit/dc/checkpoint"
	"github.com/dcdit/dcdit/diffusion"
	"github.com/dcdit/dcdit/diffusion/ddpm"
	"github.com/dcdit/dcdit/distill"
	"github.com/dcdit/dcdit/examples/tinydit"
	"github.com/dcdit/dcdit/upcycle"
)

// Example takes a family of one's own from a fresh teacher to an elastic
// DC model: pretrain a TinyDiT/2 on the procedural shapes data, graft the
// DC scaffold onto its backbone, distil the DC model onto the frozen
// teacher at two tail-drop fractions ρ, save it as a DC checkpoint of kind
// "tinydit", load it back (importing this package is what lets
// checkpoint.Load rebuild the backbone) and run it at each ρ.
func Example() {
	dir, err := os.MkdirTemp("", "tinydit")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)

	// 40 samples of 8×8 4-channel latents, ten classes.
	g, err := shapes.New(8, 1)
	if err != nil {
		panic(err)
	}
	set, err := g.Set(40)
	if err != nil {
		panic(err)
	}
	data, err := distill.NewDataset(set.Latents, set.Labels, set.C, set.H, set.W)
	if err != nil {
		panic(err)
	}
	stage := func(name string, tr *distill.Trainer) {
		tr.Data, tr.Dir = data, filepath.Join(dir, name)
		tr.Config.Stage, tr.Config.Steps, tr.Config.BatchSize, tr.Config.Seed = name, 30, 8, 2
		tr.Config.LabelDropout, tr.Config.NullClass = 0.1, len(shapes.Classes)
		if _, err := tr.Run(); err != nil {
			panic(err)
		}
	}

	// The teacher: TinyDiT on 2×2 patches, trained with DDPM's hybrid loss.
	teacher, err := tinydit.NewTeacher(&tinydit.TeacherConfig{
		Backbone: tinydit.Config{Width: 64, Depth: 2, Heads: 4, MLPHidden: 128, FrequencySize: 32,
			NumClasses: len(shapes.Classes), GridSize: 8, NormEps: 1e-5},
		InChannels: shapes.Channels, PatchSize: 2,
	}, 1)
	if err != nil {
		panic(err)
	}
	sched := ddpm.Linear(1000)
	stage("pretrain", &distill.Trainer{Config: distill.Config{LR: 3e-3}, Params: teacher.Parameters(),
		Objective: &distill.Diffusion{Model: teacher, Process: &diffusion.DDPM{Schedule: sched}}})
	teacher.Parameters().SetRequiresGrad(false)

	// The graft: the paper's scaffold, its group counts lowered for the
	// narrow convolutions (E = D/4 = 16), the router starting as a
	// predictability prior and the encoder as the teacher's patch
	// embedding.
	s := upcycle.DefaultScaffold()
	s.NormGroups, s.RouterGroups = 4, 4
	s.RouterInit, s.EncoderInit = "predictability", "patch"
	m, err := upcycle.GraftTeacher(teacher, s, teacher.Config.Backbone.GridSize, teacher.Config.Backbone.GridSize, 3)
	if err != nil {
		panic(err)
	}
	joint, err := upcycle.JoinParams(m)
	if err != nil {
		panic(err)
	}
	rhos := []float64{0, 0.5}
	stage("distill", &distill.Trainer{Config: distill.Config{LR: 1e-3}, Params: joint,
		Objective: &distill.DCObjective{Model: m, Teacher: teacher, Schedule: sched, NullClass: len(shapes.Classes),
			Loss: distill.DistillL2, Budget: distill.Budget{Rhos: rhos}, RatioWeight: m.Config.RatioLossWeight}})

	path := filepath.Join(dir, "model.safetensors")
	if err := checkpoint.Save(path, m, checkpoint.Info{TrainedRhos: rhos}); err != nil {
		panic(err)
	}
	loaded, meta, err := checkpoint.Load(path)
	if err != nil {
		panic(err)
	}
	fmt.Printf("kind %s, %d scaffold + %d backbone parameters\n",
		meta.Backbone.Kind, len(loaded.Params.Data), len(loaded.Backbone.Parameters().Data))

	// Inference keeps no graph.
	loaded.Params.SetRequiresGrad(false)
	loaded.Backbone.Parameters().SetRequiresGrad(false)
	// Two training latents as if at timestep 500.
	in := cond.Input{T: []float32{500, 500}, Labels: set.Labels[:2]}
	x := set.Latents[:2*set.C*set.H*set.W]
	for _, rho := range rhos {
		_, res, err := loaded.Predict(x, in, []float32{float32(rho)})
		if err != nil {
			panic(err)
		}
		// The backbone runs on the kept tokens only: that is the saving.
		fmt.Printf("ρ = %.1f: kept %v of %d tokens, backbone %.2f MFLOPs\n",
			rho, res.Chunks.NumKept, loaded.Config.Cells(), loaded.ForwardFLOPs(res.Chunks.NumKept).Backbone/1e6)
	}
	// Output:
	// kind tinydit, 51849 scaffold + 107200 backbone parameters
	// ρ = 0.0: kept [12 17] of 64 tokens, backbone 4.20 MFLOPs
	// ρ = 0.5: kept [6 9] of 64 tokens, backbone 2.19 MFLOPs
}

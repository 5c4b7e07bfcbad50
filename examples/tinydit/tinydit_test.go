package tinydit_test

import (
	"encoding/json"
	"math"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/dcdit/dcdit/cond"
	"github.com/dcdit/dcdit/datasets"
	"github.com/dcdit/dcdit/datasets/shapes"
	"github.com/dcdit/dcdit/dc"
	"github.com/dcdit/dcdit/dc/checkpoint"
	"github.com/dcdit/dcdit/diffusion"
	"github.com/dcdit/dcdit/diffusion/ddpm"
	"github.com/dcdit/dcdit/distill"
	"github.com/dcdit/dcdit/eval"
	"github.com/dcdit/dcdit/eval/featnet"
	"github.com/dcdit/dcdit/examples/tinydit"
	"github.com/dcdit/dcdit/family"
	"github.com/dcdit/dcdit/internal/cli"
	"github.com/dcdit/dcdit/internal/cli/iostreams"
	"github.com/dcdit/dcdit/loaders/safetensors"
	"github.com/dcdit/dcdit/params"
	"github.com/dcdit/dcdit/upcycle"
)

// The toy setting: 16×16 shapes latents (the side the bundled feature
// network was trained on: at 8×8 it classifies a fifth of the real data
// right, and the Fréchet distance sees no shapes), a TinyDiT/2 teacher, and the scaffold at the paper's settings with the
// group counts lowered for its narrow convolutions (E = D/4 = 16).
const (
	gridSide       = 16
	trainSamples   = 40
	diffusionSteps = 1000
	dataSeed       = 11
	modelSeed      = 5
	pretrainSteps  = 40
	distillSteps   = 40
	batchSize      = 8
)

var trainedRhos = []float64{0, 0.5}

// The evaluation's settings: a held-out class-balanced shapes set of
// another seed, twice the samples per row so that the data's Fréchet
// floor has a second half, the Lite-CFG pair at a guiding scale.
const (
	evalInputs                      = 16
	evalSamples                     = 20
	evalSteps                       = 10
	evalSeed                        = 3
	evalDataSeed                    = dataSeed + 1
	liteCond, liteUncond, liteScale = 0, 0.8, 2
)

// featnetPath is the bundled feature network.
var featnetPath = filepath.Join("..", "..", "testdata", "featnet", "model.safetensors")

func teacherConfig() *tinydit.TeacherConfig {
	return &tinydit.TeacherConfig{
		Backbone: tinydit.Config{Width: 64, Depth: 2, Heads: 4, MLPHidden: 128, FrequencySize: 32,
			NumClasses: len(shapes.Classes), GridSize: gridSide, NormEps: 1e-5},
		InChannels: shapes.Channels, PatchSize: 2,
	}
}

func scaffold() upcycle.Scaffold {
	s := upcycle.DefaultScaffold()
	s.NormGroups, s.RouterGroups = 4, 4
	s.RouterInit, s.EncoderInit = "predictability", "patch"
	return s
}

// trainingData is the procedural shapes set as the trainer reads it.
func trainingData(t *testing.T) *distill.Dataset {
	t.Helper()
	g, err := shapes.New(gridSide, dataSeed)
	if err != nil {
		t.Fatal(err)
	}
	set, err := g.Set(trainSamples)
	if err != nil {
		t.Fatal(err)
	}
	data, err := distill.NewDataset(set.Latents, set.Labels, set.C, set.H, set.W)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// train runs one stage through distill.Trainer and returns its per-step
// losses, each of which must be finite.
func train(t *testing.T, stage string, p *params.Set, obj distill.Objective, data *distill.Dataset, steps int, lr float64) []float64 {
	t.Helper()
	var losses []float64
	tr := &distill.Trainer{
		Config: distill.Config{Stage: stage, Steps: steps, BatchSize: batchSize, LR: lr, Seed: modelSeed,
			LabelDropout: 0.1, NullClass: len(shapes.Classes), ClipNorm: 1},
		Params: p, Objective: obj, Data: data, Dir: filepath.Join(t.TempDir(), stage),
		OnStep: func(pr distill.Progress) { losses = append(losses, pr.Metrics.Loss) },
	}
	res, err := tr.Run()
	if err != nil {
		t.Fatal(err)
	}
	if res.Steps != steps || len(losses) != steps {
		t.Fatalf("%s: %d steps run, %d losses, want %d", stage, res.Steps, len(losses), steps)
	}
	for i, l := range losses {
		if math.IsNaN(l) || math.IsInf(l, 0) {
			t.Fatalf("%s step %d: loss %v", stage, i+1, l)
		}
	}
	return losses
}

// meanOf is the mean of v.
func meanOf(v []float64) float64 {
	var s float64
	for _, x := range v {
		s += x
	}
	return s / float64(len(v))
}

// probe is a fixed noisy batch: latents at mid-range timesteps, one per
// class in turn.
type probe struct {
	xt []float32
	in cond.Input
}

func newProbe(t *testing.T, data *distill.Dataset) probe {
	t.Helper()
	n := batchSize
	per := data.C * data.H * data.W
	x0 := data.Latents[:n*per]
	sched := ddpm.Linear(diffusionSteps)
	in := cond.Input{T: make([]float32, n), Labels: slices.Clone(data.Labels[:n])}
	xt := make([]float32, len(x0))
	for i := range n {
		step := (i + 1) * diffusionSteps / (n + 2)
		in.T[i] = float32(step)
		a, s := float32(sched.SqrtAlphasCumprod[step]), float32(sched.SqrtOneMinusAlphasCumprod[step])
		for j := i * per; j < (i+1)*per; j++ {
			// A fixed pattern stands in for the noise: the probe must not
			// change between calls.
			xt[j] = a*x0[j] + s*float32(math.Sin(float64(j)))
		}
	}
	return probe{xt: xt, in: in}
}

// gap is Σ(student − teacher)² / Σ teacher² over the probe, the student at
// tail-drop fraction rho.
func gap(t *testing.T, m *dc.Model, joint *params.Set, teacher *tinydit.Teacher, pb probe, rho float32) float64 {
	t.Helper()
	joint.SetRequiresGrad(false)
	defer joint.SetRequiresGrad(true)
	got, _, err := m.Predict(pb.xt, pb.in, []float32{rho})
	if err != nil {
		t.Fatal(err)
	}
	want, err := teacher.Predict(pb.xt, pb.in, gridSide, gridSide)
	if err != nil {
		t.Fatal(err)
	}
	var num, den float64
	for i := range want {
		d := float64(got[i] - want[i])
		num += d * d
		den += float64(want[i]) * float64(want[i])
	}
	return num / den
}

// runCLI runs dcdit in-process with args and returns its exit code and
// output.
func runCLI(args ...string) (code int, stdout, stderr string) {
	ios, _, out, errOut := iostreams.Test()
	code = cli.Main(args, ios)
	return code, out.String(), errOut.String()
}

// The example family end to end, through the calls the CLI and the
// pipelines make: pretrain a TinyDiT teacher, save it in its own file and
// open it back through the family registry, graft a DC model onto its
// backbone (package upcycle), distil it (package distill), save and load
// it (package checkpoint), then inspect, list and sample it with dcdit's
// own commands, which know the kind only through the registry, and
// evaluate it against the teacher file through package eval and through
// `dcdit eval`.
func TestLifecycle(t *testing.T) {
	data := trainingData(t)
	pb := newProbe(t, data)

	// A teacher of its own, pretrained with DDPM's hybrid loss.
	teacher, err := tinydit.NewTeacher(teacherConfig(), modelSeed)
	if err != nil {
		t.Fatal(err)
	}
	pre := train(t, "pretrain", teacher.Parameters(), &distill.Diffusion{Model: teacher,
		Process: &diffusion.DDPM{Schedule: ddpm.Linear(diffusionSteps)}}, data, pretrainSteps, 3e-3)
	third := pretrainSteps / 3
	first, last := meanOf(pre[:third]), meanOf(pre[len(pre)-third:])
	t.Logf("pretraining loss: %.4g over the first %d steps, %.4g over the last", first, third, last)
	if !(last < first) {
		t.Errorf("pretraining loss %.4g over the first %d steps, %.4g over the last: want a fall", first, third, last)
	}
	teacher.Parameters().SetRequiresGrad(false)

	// Its file, opened as `dcdit eval --teacher` opens one.
	teacherPath := filepath.Join(t.TempDir(), "teacher.safetensors")
	if err := teacher.Save(teacherPath); err != nil {
		t.Fatal(err)
	}
	opened := openTeacher(t, teacherPath, teacher, pb)

	// Graft.
	m, err := upcycle.GraftTeacher(teacher, scaffold(), teacher.Config.Backbone.GridSize, teacher.Config.Backbone.GridSize, modelSeed)
	if err != nil {
		t.Fatal(err)
	}
	joint, err := upcycle.JoinParams(m)
	if err != nil {
		t.Fatal(err)
	}
	if k := kindOf(m); k != tinydit.Kind {
		t.Fatalf("grafted backbone kind %q, want %q", k, tinydit.Kind)
	}

	// Distil onto the frozen teacher at the trained budgets.
	before := gap(t, m, joint, teacher, pb, 0)
	obj := &distill.DCObjective{Model: m, Teacher: teacher, Schedule: ddpm.Linear(diffusionSteps), NullClass: len(shapes.Classes),
		Loss: distill.DistillL2, Budget: distill.Budget{Rhos: trainedRhos}, RatioWeight: m.Config.RatioLossWeight}
	train(t, "distill", joint, obj, data, distillSteps, 1e-3)
	after := gap(t, m, joint, teacher, pb, 0)
	t.Logf("student vs teacher at ρ 0, relative squared error: %.4g grafted, %.4g distilled", before, after)
	if !(after < before) {
		t.Errorf("distillation left the student %.4g from the teacher (grafted: %.4g): want closer", after, before)
	}

	// Save and load back: the same parameters, bit for bit, and the same
	// predictions.
	path := filepath.Join(t.TempDir(), "model.safetensors")
	if err := checkpoint.Save(path, m, checkpoint.Info{TrainedRhos: trainedRhos}); err != nil {
		t.Fatal(err)
	}
	loaded, meta, err := checkpoint.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if meta.Backbone.Kind != tinydit.Kind || !slices.Equal(meta.TrainedRhos, trainedRhos) || len(meta.Warnings) != 0 {
		t.Errorf("loaded kind %q, trained ρ %v, warnings %v", meta.Backbone.Kind, meta.TrainedRhos, meta.Warnings)
	}
	checkSameParams(t, joint, loaded)
	for _, rho := range trainedRhos {
		want, _, err := m.Predict(pb.xt, pb.in, []float32{float32(rho)})
		if err != nil {
			t.Fatal(err)
		}
		got, _, err := loaded.Predict(pb.xt, pb.in, []float32{float32(rho)})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(bitsOf(got), bitsOf(want)) {
			t.Errorf("ρ %g: the loaded model predicts differently from the saved one", rho)
		}
	}

	t.Run("inspect", func(t *testing.T) { checkInspect(t, path, m) })
	t.Run("families", checkFamilies)
	t.Run("sample", func(t *testing.T) { checkSample(t, path, m.Config.Cells()) })
	t.Run("eval", func(t *testing.T) { checkEval(t, loaded, opened, path, teacherPath) })
}

// openTeacher opens the teacher file through the registry and checks that
// it is the saved teacher: frozen, with no warnings, the same config, and
// the same predictions bit for bit.
func openTeacher(t *testing.T, path string, saved *tinydit.Teacher, pb probe) family.Teacher {
	t.Helper()
	opened, warnings, err := family.OpenTeacher(path, family.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(warnings) != 0 || opened.Describe() != saved.Describe() || opened.Parameters().RequiresGrad() {
		t.Errorf("opened %s (trainable %v) with warnings %v, want the frozen %s", opened.Describe(), opened.Parameters().RequiresGrad(), warnings, saved.Describe())
	}
	want, err := saved.Predict(pb.xt, pb.in, gridSide, gridSide)
	if err != nil {
		t.Fatal(err)
	}
	got, err := opened.Predict(pb.xt, pb.in, gridSide, gridSide)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(bitsOf(got), bitsOf(want)) {
		t.Error("the opened teacher predicts differently from the saved one")
	}
	return opened
}

// kindOf is a model's backbone kind.
func kindOf(m *dc.Model) string { return m.Backbone.Spec().Kind() }

func bitsOf(v []float32) []uint32 {
	out := make([]uint32, len(v))
	for i, x := range v {
		out[i] = math.Float32bits(x)
	}
	return out
}

// checkSameParams compares every parameter of the saved model's arena with
// the loaded model's, bit for bit.
func checkSameParams(t *testing.T, saved *params.Set, loaded *dc.Model) {
	t.Helper()
	n := len(loaded.Params.List()) + len(loaded.Backbone.Parameters().List())
	if n != len(saved.List()) {
		t.Errorf("loaded %d tensors, saved %d", n, len(saved.List()))
	}
	for _, p := range saved.List() {
		q, ok := loaded.Params.Lookup(p.Name)
		if !ok {
			q, ok = loaded.Backbone.Parameters().Lookup(p.Name)
		}
		if !ok {
			t.Errorf("tensor %q not loaded", p.Name)
			continue
		}
		if !slices.Equal(bitsOf(q.Values()), bitsOf(p.Values())) {
			t.Errorf("tensor %q differs after loading", p.Name)
		}
	}
}

// checkInspect: `dcdit inspect` reports the kind, accounts for every
// tensor, and costs each trained ρ as the model itself does.
func checkInspect(t *testing.T, path string, m *dc.Model) {
	code, out, errOut := runCLI("inspect", path)
	if code != 0 || !strings.Contains(out, "backbone") || !strings.Contains(out, tinydit.Kind+":") {
		t.Errorf("inspect: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	code, out, errOut = runCLI("inspect", "--json", path)
	if code != 0 {
		t.Fatalf("inspect --json: exit %d: %s", code, errOut)
	}
	var res struct {
		Config struct {
			Backbone struct {
				Kind   string         `json:"kind"`
				Config tinydit.Config `json:"config"`
			} `json:"backbone"`
		} `json:"config"`
		Missing, Unexpected, Warnings []string
		Mismatched                    []any
		FLOPsPerRho                   []checkpoint.RhoFLOPs `json:"flops_per_rho"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("inspect --json: %v\n%s", err, out)
	}
	bb := res.Config.Backbone
	if want := m.Backbone.Spec().Settings().(*tinydit.Config); bb.Kind != tinydit.Kind || bb.Config != *want {
		t.Errorf("inspect --json: backbone %s %+v, want %s %+v", bb.Kind, bb.Config, tinydit.Kind, *want)
	}
	if len(res.Missing)+len(res.Unexpected)+len(res.Mismatched)+len(res.Warnings) != 0 {
		t.Errorf("inspect --json: missing %v, unexpected %v, mismatched %v, warnings %v", res.Missing, res.Unexpected, res.Mismatched, res.Warnings)
	}
	if len(res.FLOPsPerRho) != len(trainedRhos) {
		t.Fatalf("inspect --json: FLOPs at %d ρ, want the %d trained", len(res.FLOPsPerRho), len(trainedRhos))
	}
	for i, r := range res.FLOPsPerRho {
		want := m.ForwardFLOPs([]int{r.KeptTokens}).Total() / 1e9
		if r.Rho != trainedRhos[i] || !(math.Abs(r.GFLOPs-want) <= 1e-9*want) {
			t.Errorf("inspect --json: ρ %g: %.6g GFLOPs at %d kept tokens, the model counts %.6g", r.Rho, r.GFLOPs, r.KeptTokens, want)
		}
		if i > 0 && !(r.KeptTokens < res.FLOPsPerRho[i-1].KeptTokens && r.GFLOPs < res.FLOPsPerRho[i-1].GFLOPs) {
			t.Errorf("inspect --json: ρ %g costs %v, ρ %g %v: want fewer tokens and FLOPs", r.Rho, r, res.FLOPsPerRho[i-1].Rho, res.FLOPsPerRho[i-1])
		}
	}
}

// checkFamilies: importing the package is what registers the kind.
func checkFamilies(t *testing.T) {
	code, out, errOut := runCLI("families")
	if code != 0 || !strings.Contains(out, tinydit.Kind+" ") {
		t.Errorf("families: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	code, out, errOut = runCLI("families", "--json")
	var kinds map[string]string
	if code != 0 || json.Unmarshal([]byte(out), &kinds) != nil || kinds[tinydit.Kind] != (tinydit.Family{}).Describe() {
		t.Errorf("families --json: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}

// checkSample: `dcdit sample` at several ρ writes finite latents, and
// keeps fewer tokens and spends fewer FLOPs as ρ grows.
func checkSample(t *testing.T, path string, cells int) {
	var prevKept, prevFLOPs float64
	for i, rho := range []float64{0, 0.5, 0.8} {
		out := filepath.Join(t.TempDir(), "latents.safetensors")
		code, stdout, errOut := runCLI("sample", path, "--out", out, "--rho", strconv.FormatFloat(rho, 'g', -1, 64),
			"--steps", "4", "--class", "1,2", "--seed", "7", "--quiet")
		if code != 0 {
			t.Fatalf("sample --rho %g: exit %d: %s%s", rho, code, stdout, errOut)
		}
		f, err := safetensors.Open(out)
		if err != nil {
			t.Fatal(err)
		}
		tn, ok := f.Tensor("latents")
		if !ok {
			f.Close()
			t.Fatalf("%s has no latents", out)
		}
		x, err := tn.Float32()
		// The values may alias the file's memory map.
		x, md := slices.Clone(x), f.Metadata()
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		if want := []int64{2, shapes.Channels, gridSide, gridSide}; !slices.Equal(tn.Shape, want) {
			t.Errorf("sample --rho %g: latents %v, want %v", rho, tn.Shape, want)
		}
		for j, v := range x {
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				t.Fatalf("sample --rho %g: latents[%d] = %v", rho, j, v)
			}
		}
		var kept []float64
		for _, s := range strings.Split(md["dcdit.kept_per_step"], ",") {
			k, err := strconv.ParseFloat(s, 64)
			if err != nil || !(k >= 1 && k <= float64(cells)) {
				t.Fatalf("sample --rho %g: kept_per_step %q: want 1 … %d tokens per step", rho, md["dcdit.kept_per_step"], cells)
			}
			kept = append(kept, k)
		}
		flops, err := strconv.ParseFloat(md["dcdit.flops_per_image"], 64)
		if err != nil || !(flops > 0) {
			t.Fatalf("sample --rho %g: flops_per_image %q", rho, md["dcdit.flops_per_image"])
		}
		t.Logf("ρ %g: kept %.1f of %d tokens per step on average, %.4g MFLOP per image", rho, meanOf(kept), cells, flops/1e6)
		if i > 0 && !(meanOf(kept) < prevKept && flops < prevFLOPs) {
			t.Errorf("sample --rho %g kept %.2f tokens for %.4g FLOPs, the lower ρ %.2f for %.4g: want fewer", rho, meanOf(kept), flops, prevKept, prevFLOPs)
		}
		prevKept, prevFLOPs = meanOf(kept), flops
	}
}

// checkEval evaluates the DC model against the teacher file on held-out
// data, through package eval and through `dcdit eval`: both give a row
// per ρ with finite FLOPs, falling with ρ, and a finite Fréchet distance,
// and the same numbers.
func checkEval(t *testing.T, m *dc.Model, teacher family.Teacher, modelPath, teacherPath string) {
	g, err := shapes.New(gridSide, evalDataSeed)
	if err != nil {
		t.Fatal(err)
	}
	held, err := g.BalancedSet(2 * evalSamples)
	if err != nil {
		t.Fatal(err)
	}
	dataPath := filepath.Join(t.TempDir(), "held-out.safetensors")
	if err := datasets.Write(dataPath, held); err != nil {
		t.Fatal(err)
	}
	net, err := featnet.Load(featnetPath)
	if err != nil {
		t.Fatal(err)
	}
	rhos := []float64{0, 0.5, 0.8}
	lib, err := eval.Run(m, eval.TeacherOf(teacher, nil, 0), held, eval.Options{
		Rhos: rhos, NumInputs: evalInputs, NumSamples: evalSamples, Steps: evalSteps, Seed: evalSeed, Features: net,
		Lite: &eval.Lite{Cond: liteCond, Uncond: liteUncond, Scale: liteScale},
	})
	if err != nil {
		t.Fatal(err)
	}
	checkReport(t, "eval.Run", lib, rhos, m, teacher)

	code, out, errOut := runCLI("eval", modelPath, "--teacher", teacherPath, "--data", dataPath, "--features", featnetPath,
		"--rho", joinFloats(rhos), "--lite", joinFloats([]float64{liteCond, liteUncond}), "--lite-cfg", strconv.FormatFloat(liteScale, 'g', -1, 64),
		"--num", strconv.Itoa(evalInputs), "--samples", strconv.Itoa(evalSamples), "--steps", strconv.Itoa(evalSteps),
		"--seed", strconv.Itoa(evalSeed), "--json", "-q")
	if code != 0 {
		t.Fatalf("dcdit eval: exit %d: %s", code, errOut)
	}
	var cli eval.Report
	if err := json.Unmarshal([]byte(out), &cli); err != nil {
		t.Fatalf("dcdit eval --json: %v\n%s", err, out)
	}
	checkReport(t, "dcdit eval", &cli, rhos, m, teacher)
	for i := range min(len(cli.Rows), len(lib.Rows)) {
		a, b := cli.Rows[i], lib.Rows[i]
		if a.GFLOPsPerImage != b.GFLOPsPerImage || a.EpsRelMSE != b.EpsRelMSE || !finiteScore(a.FD) || !finiteScore(b.FD) || *a.FD != *b.FD ||
			!finiteScore(a.FDRandomRouter) || !finiteScore(b.FDRandomRouter) || *a.FDRandomRouter != *b.FDRandomRouter {
			t.Errorf("ρ %g: dcdit eval gives %.6g GFLOPs, ε rel MSE %.6g, FD %v, random router's %v; eval.Run %.6g, %.6g, %v, %v",
				a.Rho, a.GFLOPsPerImage, a.EpsRelMSE, a.FD, a.FDRandomRouter, b.GFLOPsPerImage, b.EpsRelMSE, b.FD, b.FDRandomRouter)
		}
	}
	if t.Failed() {
		return // the log below reads every score
	}
	for _, r := range lib.Rows {
		t.Logf("ρ %g: %.1f of %d tokens kept, %.4g MFLOP per image, ε rel MSE %.3g, sample PSNR %.1f dB, FD %.1f, class accuracy %.2f, sample RMS %.3g",
			r.Rho, r.KeptTokens, lib.Tokens, r.GFLOPsPerImage*1e3, r.EpsRelMSE, r.SamplePSNR, *r.FD, *r.ClassAccuracy, *r.RMS)
	}
	l := lib.LiteCFG
	t.Logf("Lite-CFG ρ %g/%g at scale %g: %.4g MFLOP per image, FD %.2f; the teacher at that scale: FD %.2f",
		l.RhoCond, l.RhoUncond, l.Scale, l.GFLOPsPerImage*1e3, *l.FD, *l.TeacherQuality.FD)
	t.Logf("teacher: %d tokens, %.4g MFLOP per image, FD %.1f, class accuracy %.2f, sample RMS %.3g; data: FD floor %.2f at %d samples, RMS %.3g, feature net accuracy %.2f",
		lib.Teacher.Tokens, lib.Teacher.GFLOPsPerImage*1e3, *lib.Teacher.FD, *lib.Teacher.ClassAccuracy, *lib.Teacher.RMS, *lib.DataFDFloor,
		lib.FeatureNet.FloorSamples, lib.FeatureNet.DataRMS, lib.FeatureNet.Accuracy)
}

// checkReport: one row per ρ, each with finite FLOPs (fewer as ρ grows)
// and finite Fréchet distances (the random router's too); the teacher costed as it counts itself;
// the Lite-CFG row guided through the teacher's rule.
func checkReport(t *testing.T, who string, r *eval.Report, rhos []float64, m *dc.Model, teacher family.Teacher) {
	t.Helper()
	if r.Process != family.ProcessDDPM || len(r.Rows) != len(rhos) {
		t.Fatalf("%s: process %q, %d rows; want %q, one per ρ %v", who, r.Process, len(r.Rows), family.ProcessDDPM, rhos)
	}
	cells := m.Config.Cells()
	for i, row := range r.Rows {
		switch {
		case row.Rho != rhos[i]:
			t.Errorf("%s: row %d is ρ %g, want %g", who, i, row.Rho, rhos[i])
		case !(row.GFLOPsPerImage > 0 && finite(row.GFLOPsPerImage)):
			t.Errorf("%s: ρ %g: %v GFLOPs per image", who, row.Rho, row.GFLOPsPerImage)
		case !(row.KeptTokens >= 1 && row.KeptTokens <= float64(cells)):
			t.Errorf("%s: ρ %g: %v kept tokens, want 1 … %d", who, row.Rho, row.KeptTokens, cells)
		case !(row.EpsRelMSE >= 0 && finite(row.EpsRelMSE)) || !finite(row.SamplePSNR):
			t.Errorf("%s: ρ %g: ε rel MSE %v, sample PSNR %v", who, row.Rho, row.EpsRelMSE, row.SamplePSNR)
		case !finiteScore(row.FD) || !finiteScore(row.FDRandomRouter):
			t.Errorf("%s: ρ %g: FD %v, random router's %v; want finite distances", who, row.Rho, row.FD, row.FDRandomRouter)
		case i > 0 && !(row.GFLOPsPerImage < r.Rows[i-1].GFLOPsPerImage):
			t.Errorf("%s: ρ %g costs %.6g GFLOPs, ρ %g %.6g: want fewer", who, row.Rho, row.GFLOPsPerImage, r.Rows[i-1].Rho, r.Rows[i-1].GFLOPsPerImage)
		}
	}
	tr := r.Teacher
	want := teacher.ForwardFLOPs(gridSide, gridSide) / 1e9
	if tr.Tokens != teacher.Tokens(gridSide, gridSide) || !(math.Abs(tr.GFLOPsPerImage-want) <= 1e-12*want) || !finiteScore(tr.FD) {
		t.Errorf("%s: teacher row %d tokens, %v GFLOPs, FD %v; want %d tokens, %v GFLOPs, a finite FD", who, tr.Tokens, tr.GFLOPsPerImage, tr.FD,
			teacher.Tokens(gridSide, gridSide), want)
	}
	if l := r.LiteCFG; l == nil || !(l.GFLOPsPerImage > 0 && finite(l.GFLOPsPerImage)) || !finiteScore(l.FD) || !finiteScore(l.TeacherQuality.FD) || !finiteScore(l.FDRandomRouter) {
		t.Errorf("%s: Lite-CFG row %+v, want finite FLOPs and FDs", who, l)
	}
	if r.DataFDFloor == nil || !(*r.DataFDFloor >= 0 && finite(*r.DataFDFloor)) {
		t.Errorf("%s: data FD floor %v", who, r.DataFDFloor)
	}
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// finiteScore says whether a distance was measured and is finite.
func finiteScore(v *float64) bool { return v != nil && *v >= 0 && finite(*v) }

func joinFloats(v []float64) string {
	parts := make([]string, len(v))
	for i, x := range v {
		parts[i] = strconv.FormatFloat(x, 'g', -1, 64)
	}
	return strings.Join(parts, ",")
}

package distill

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/dcdit/dcdit/diffusion"
	"github.com/dcdit/dcdit/diffusion/ddpm"
	"github.com/dcdit/dcdit/dit"
	"github.com/dcdit/dcdit/internal/fixtures"
	"github.com/dcdit/dcdit/loaders/arch"
)

func tinyDiT(t *testing.T, seed uint64) *dit.Model {
	t.Helper()
	cfg := &arch.DiTConfig{Depth: 1, HiddenSize: 32, NumHeads: 2, PatchSize: 2, InChannels: 4, InputSize: 8,
		LearnSigma: true, NumClasses: 3, MLPRatio: 2, FrequencySize: 64}
	m, err := dit.Init(cfg, seed)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func randomData(t *testing.T, n, c, s int) *Dataset {
	t.Helper()
	rng := rand.New(rand.NewPCG(11, 12))
	x, y := make([]float32, n*c*s*s), make([]int, n)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	for i := range y {
		y[i] = i % 3
	}
	d, err := NewDataset(x, y, c, s, s)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func ditTrainer(t *testing.T, dir string, steps int) *Trainer {
	m := tinyDiT(t, 1)
	return &Trainer{
		Config: Config{Stage: "train", Steps: steps, BatchSize: 3, LR: 1e-3, Warmup: 2, ClipNorm: 1, EMADecay: 0.9,
			Seed: 7, LabelDropout: 0.2, NullClass: 3, SaveEvery: 2, Keep: 2},
		Params:    m.Params,
		Objective: &Diffusion{Model: dit.Teacher{Model: m}, Process: &diffusion.DDPM{Schedule: ddpm.Linear(1000)}},
		Data:      randomData(t, 5, 4, 8),
		Dir:       dir,
	}
}

func logSteps(t *testing.T, dir string) []int {
	t.Helper()
	text, err := os.ReadFile(filepath.Join(dir, "metrics.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var steps []int
	for line := range bytes.Lines(text) {
		var rec struct{ Step int }
		if err := json.Unmarshal(line, &rec); err != nil {
			t.Fatalf("metrics line %q: %v", line, err)
		}
		steps = append(steps, rec.Step)
	}
	return steps
}

// A run interrupted after a checkpoint (and killed while writing the next
// one) resumes to exactly the parameters, EMA and log of an uninterrupted
// run.
func TestResumeIsExact(t *testing.T) {
	full := ditTrainer(t, t.TempDir(), 6)
	if _, err := full.Run(); err != nil {
		t.Fatal(err)
	}

	dir := t.TempDir()
	first := ditTrainer(t, dir, 6)
	if _, err := first.Run(); err != nil {
		t.Fatal(err)
	}
	// Roll the folder back to step 4 as a kill would leave it: the
	// manifest still names step 4's checkpoint, step 6's file is a torn
	// write that was never named.
	var m manifest
	text, _ := os.ReadFile(filepath.Join(dir, manifestName))
	if err := json.Unmarshal(text, &m); err != nil {
		t.Fatal(err)
	}
	if m.Step != 6 || len(m.Checkpoints) != 2 || m.Checkpoints[0] != "state-00000004.safetensors" {
		t.Fatalf("manifest %+v, want steps 4 and 6 kept", m)
	}
	m.Step, m.Checkpoints = 4, m.Checkpoints[:1]
	text, _ = json.Marshal(m)
	os.WriteFile(filepath.Join(dir, manifestName), text, 0o644)
	os.WriteFile(filepath.Join(dir, "state-00000006.safetensors"), []byte("torn"), 0o644)
	if _, err := os.Stat(filepath.Join(dir, "state-00000002.safetensors")); err == nil {
		t.Fatal("Keep = 2 left step 2's checkpoint behind")
	}

	again := ditTrainer(t, dir, 6) // a new process: fresh model
	res, err := again.Run()
	if err != nil {
		t.Fatal(err)
	}
	if res.Resumed != 4 {
		t.Fatalf("resumed from step %d, want 4", res.Resumed)
	}
	if !equal(again.Params.Data, full.Params.Data) || !equal(again.EMAWeights(), full.EMAWeights()) {
		t.Fatal("resumed run differs from the uninterrupted one")
	}
	if got := logSteps(t, dir); len(got) != 6 || got[0] != 1 || got[5] != 6 {
		t.Fatalf("metrics log steps %v, want 1..6 once each", got)
	}
	// A finished stage runs nothing.
	res, err = ditTrainer(t, dir, 6).Run()
	if err != nil || !res.Complete {
		t.Fatalf("re-run of a finished stage: %+v, %v", res, err)
	}
}

func TestResumeRefusesAnotherRun(t *testing.T) {
	dir := t.TempDir()
	if _, err := ditTrainer(t, dir, 2).Run(); err != nil {
		t.Fatal(err)
	}
	other := ditTrainer(t, dir, 2)
	other.Config.LR = 5e-4
	if _, err := other.Run(); err == nil || !strings.Contains(err.Error(), "holds another run") {
		t.Fatalf("err = %v, want a refusal", err)
	}
}

// nanAfter returns a finite loss for n steps and NaN after.
type nanAfter struct {
	inner Objective
	n     int
}

func (o *nanAfter) Step(step int, b *Batch, rng *rand.Rand) (Metrics, error) {
	m, err := o.inner.Step(step, b, rng)
	if step >= o.n {
		m.Loss = math.NaN()
	}
	return m, err
}

// Settings forwards the wrapped objective's, so that the NaN run and its
// resume share a fingerprint.
func (o *nanAfter) Settings() map[string]string { return o.inner.(Describer).Settings() }

func TestNaNStopsAndKeepsTheCheckpoint(t *testing.T) {
	dir := t.TempDir()
	tr := ditTrainer(t, dir, 6)
	tr.Objective = &nanAfter{inner: tr.Objective, n: 3}
	_, err := tr.Run()
	if err == nil || !strings.Contains(err.Error(), "step 4: loss NaN") || !strings.Contains(err.Error(), "state-00000002.safetensors (step 2)") {
		t.Fatalf("err = %v, want the NaN step and the last good checkpoint", err)
	}
	again := ditTrainer(t, dir, 6)
	res, err := again.Run()
	if err != nil || res.Resumed != 2 {
		t.Fatalf("resume after NaN: %+v, %v", res, err)
	}
}

func TestConfigErrors(t *testing.T) {
	tests := []struct {
		name string
		edit func(c *Config)
		want string
	}{
		{"steps", func(c *Config) { c.Steps = 0 }, "steps 0"},
		{"lr", func(c *Config) { c.LR = 0 }, "learning rate 0"},
		{"ema", func(c *Config) { c.EMADecay = 1 }, "EMA decay 1"},
		{"frozen", func(c *Config) { c.Frozen = func(string) bool { return true } }, "every parameter is frozen"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := ditTrainer(t, t.TempDir(), 2)
			tt.edit(&tr.Config)
			if _, err := tr.Run(); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want %q", err, tt.want)
			}
		})
	}
}

// Frozen parameters never move and get no gradient.
func TestFrozen(t *testing.T) {
	tr := ditTrainer(t, t.TempDir(), 2)
	tr.Config.Frozen = func(name string) bool { return strings.HasPrefix(name, "t_embedder.") }
	p := tr.Params.Get("t_embedder.mlp.0.weight")
	before := append([]float32(nil), p.Values()...)
	if _, err := tr.Run(); err != nil {
		t.Fatal(err)
	}
	if !equal(before, p.Values()) {
		t.Fatal("a frozen parameter moved")
	}
	for _, g := range p.Gradient() {
		if g != 0 {
			t.Fatal("a frozen parameter got a gradient")
		}
	}
}

// A parameter that one stage freezes trains again in the next stage over
// the same parameter set, whether that stage freezes something else or
// nothing at all.
func TestFrozenInOneStageOnly(t *testing.T) {
	for _, next := range []struct {
		name   string
		frozen func(string) bool
	}{
		{"others frozen", func(name string) bool { return strings.HasPrefix(name, "y_embedder.") }},
		{"nothing frozen", nil},
	} {
		t.Run(next.name, func(t *testing.T) {
			tr := ditTrainer(t, t.TempDir(), 2)
			tr.Config.Frozen = func(name string) bool { return strings.HasPrefix(name, "t_embedder.") }
			if _, err := tr.Run(); err != nil {
				t.Fatal(err)
			}
			p := tr.Params.Get("t_embedder.mlp.0.weight")
			before := append([]float32(nil), p.Values()...)
			tr2 := ditTrainer(t, t.TempDir(), 2)
			tr2.Params, tr2.Objective = tr.Params, tr.Objective
			tr2.Config.Stage, tr2.Config.Frozen = "second", next.frozen
			if _, err := tr2.Run(); err != nil {
				t.Fatal(err)
			}
			if equal(before, p.Values()) {
				t.Fatal("the parameter the first stage froze did not train in the second")
			}
		})
	}
}

func TestBatchIsAFunctionOfTheStep(t *testing.T) {
	d := randomData(t, 5, 1, 2)
	caps := [][]int{{0}, {1, 2}, {3, 4, 5}, {6}, {7, 7}}
	if err := d.WithCaptions(caps, 8); err != nil {
		t.Fatal(err)
	}
	per := 4
	seen := map[int]int{}
	newBatch := func() *Batch {
		return &Batch{X0: make([]float32, 3*per), Labels: make([]int, 3), Captions: make([][]int, 3)}
	}
	for step := range 5 { // 5 steps of 3 = 3 epochs of 5
		b := newBatch()
		d.Batch(b, 1, step)
		fresh := newDatasetMust(t, d)
		if err := fresh.WithCaptions(caps, 8); err != nil {
			t.Fatal(err)
		}
		b2 := newBatch()
		fresh.Batch(b2, 1, step)
		if !equal(b.X0, b2.X0) || !slices.Equal(b.Labels, b2.Labels) {
			t.Fatalf("step %d: batch depends on history", step)
		}
		for i := range b.Labels {
			j := firstIndex(d, b.X0[i*per:(i+1)*per])
			seen[j]++
			if !slices.Equal(b.Captions[i], caps[j]) || !slices.Equal(b2.Captions[i], caps[j]) {
				t.Fatalf("step %d, sample %d (data %d): captions %v and %v, want %v", step, i, j, b.Captions[i], b2.Captions[i], caps[j])
			}
		}
	}
	for i := range 5 {
		if seen[i] != 3 {
			t.Fatalf("sample %d seen %d times in 3 epochs, want 3", i, seen[i])
		}
	}
}

// WithCaptions refuses captions that do not fit the data set, and the
// captions are part of the data's identity (a run folder refuses other
// captions on resume).
func TestWithCaptions(t *testing.T) {
	d := randomData(t, 2, 1, 2)
	plain := d.identity()
	cases := []struct {
		caps [][]int
		err  string
	}{
		{[][]int{{0}}, "1 captions for 2 samples"},
		{[][]int{{0}, {}}, "caption 1 is empty"},
		{[][]int{{0}, {3, 8}}, "caption 1 has word 8, outside the vocabulary of 8"},
		{[][]int{{0}, {-1}}, "caption 1 has word -1"},
	}
	for _, c := range cases {
		if err := d.WithCaptions(c.caps, 8); err == nil || !strings.Contains(err.Error(), c.err) {
			t.Errorf("WithCaptions(%v) = %v, want an error containing %q", c.caps, err, c.err)
		}
	}
	if err := d.WithCaptions([][]int{{0}, {1}}, 8); err != nil {
		t.Fatal(err)
	}
	one := d.identity()
	if err := d.WithCaptions([][]int{{0}, {2}}, 8); err != nil {
		t.Fatal(err)
	}
	if two := d.identity(); one == plain || two == one {
		t.Errorf("identities without captions, with one set, with another: %s, %s, %s; want three", plain, one, two)
	}
}

func newDatasetMust(t *testing.T, d *Dataset) *Dataset {
	t.Helper()
	n, err := NewDataset(d.Latents, d.Labels, d.C, d.H, d.W)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func firstIndex(d *Dataset, x []float32) int {
	per := d.C * d.H * d.W
	for j := range d.Len() {
		if equal(d.Latents[j*per:(j+1)*per], x) {
			return j
		}
	}
	return -1
}

func equal(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// Two warm-up steps, then steps 2 … 9 span the decay from lr 1 to 0.1.
func TestLRSchedules(t *testing.T) {
	tests := []struct {
		sched string
		step  int
		want  float64
	}{
		{"constant", 0, 0.5}, {"constant", 1, 1}, {"constant", 9, 1},
		{"cosine", 2, 1}, {"cosine", 5, 0.1 + 0.45*(1+math.Cos(3*math.Pi/7))}, {"cosine", 9, 0.1},
		{"linear", 1, 1}, {"linear", 5, 1 - 0.9*3/7}, {"linear", 9, 0.1},
	}
	for _, tt := range tests {
		c := Config{Steps: 10, LR: 1, MinLR: 0.1, Warmup: 2, Schedule: tt.sched}
		if got := c.lr(tt.step); !(math.Abs(got-tt.want) <= 1e-12) {
			t.Errorf("%s lr(%d) = %g, want %g", tt.sched, tt.step, got, tt.want)
		}
	}
}

// A learning-rate group moves its parameters by its own rate: Adam's first
// step changes every parameter with a gradient by about lr.
func TestLRGroups(t *testing.T) {
	tr := ditTrainer(t, t.TempDir(), 1)
	tr.Config.Warmup, tr.Config.EMADecay = 0, 0
	tr.Config.Groups = []LRGroup{
		{Name: "fast", Match: func(n string) bool { return strings.HasPrefix(n, "t_embedder.") }, Scale: 10},
		{Name: "none", Match: func(n string) bool { return n == "no such parameter" }, Scale: 3},
	}
	rng := rand.New(rand.NewPCG(8, 8))
	for i := range tr.Params.Data {
		tr.Params.Data[i] = float32(0.1 * rng.NormFloat64()) // no adaLN-Zero: every gradient flows
	}
	before := append([]float32(nil), tr.Params.Data...)
	if _, err := tr.Run(); err != nil {
		t.Fatal(err)
	}
	step := func(name string) float64 {
		lo, hi, _ := tr.Params.Range(name)
		m := 0.0
		for i := lo; i < hi; i++ {
			m = max(m, math.Abs(float64(tr.Params.Data[i]-before[i])))
		}
		return m
	}
	fast, slow := step("t_embedder.mlp.0.weight"), step("blocks.0.mlp.fc1.weight")
	if !(math.Abs(fast-1e-2) <= 1e-4 && math.Abs(slow-1e-3) <= 1e-5) {
		t.Fatalf("largest first-step change: grouped %g (want 1e-2), others %g (want 1e-3)", fast, slow)
	}
}

// A folder written before run.json recorded its settings resumes when its
// old fingerprint matches, is refused when it does not, and gets its
// settings at the next save.
func TestResumeLegacyManifest(t *testing.T) {
	tests := []struct {
		name   string
		edit   func(c *Config)
		refuse bool
	}{
		{"same run", func(*Config) {}, false},
		{"another lr", func(c *Config) { c.LR = 5e-4 }, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			first := ditTrainer(t, dir, 4)
			first.Config.Steps = 2 // stop at step 2 of a 4-step run
			first.Config.SaveEvery = 2
			if _, err := first.Run(); err != nil {
				t.Fatal(err)
			}
			// Rewrite run.json as an older dcdit wrote it: no settings, the
			// fingerprint of the 4-step run's string.
			var m manifest
			text, _ := os.ReadFile(filepath.Join(dir, manifestName))
			if err := json.Unmarshal(text, &m); err != nil {
				t.Fatal(err)
			}
			legacy := ditTrainer(t, dir, 4)
			legacy.Config.validate()
			m.Settings = nil
			m.Fingerprint = (&runFolder{legacy: legacy.legacyFingerprint()}).legacyHash()
			text, _ = json.Marshal(m)
			os.WriteFile(filepath.Join(dir, manifestName), text, 0o644)

			again := ditTrainer(t, dir, 4)
			tt.edit(&again.Config)
			res, err := again.Run()
			if tt.refuse {
				if err == nil || !strings.Contains(err.Error(), "written by an older dcdit") {
					t.Fatalf("err = %v, want a refusal", err)
				}
				return
			}
			if err != nil || res.Resumed != 2 {
				t.Fatalf("resume: %+v, %v", res, err)
			}
			text, _ = os.ReadFile(filepath.Join(dir, manifestName))
			if !strings.Contains(string(text), `"trainer.lr": "0.001"`) {
				t.Fatalf("the next save did not record the settings:\n%s", text)
			}
		})
	}
}

// TestResumeRefusesCheckpointPaths: a run.json whose checkpoint list names
// a path outside the folder is refused before anything is read or
// removed.
func TestResumeRefusesCheckpointPaths(t *testing.T) {
	for _, name := range []string{"../victim.safetensors", "/tmp/x", "state-1.safetensors", "state-00000002.safetensors/../../x"} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			if _, err := ditTrainer(t, dir, 2).Run(); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(dir, manifestName)
			raw, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			var m map[string]any
			if err := json.Unmarshal(raw, &m); err != nil {
				t.Fatal(err)
			}
			m["checkpoints"] = []string{name, "state-00000002.safetensors"}
			raw, _ = json.Marshal(m)
			if err := os.WriteFile(path, raw, 0o644); err != nil {
				t.Fatal(err)
			}
			_, err = ditTrainer(t, dir, 3).Run()
			if err == nil || !strings.Contains(err.Error(), "want a name state-NNNNNNNN.safetensors") {
				t.Fatalf("err = %v, want the checkpoint name refused", err)
			}
		})
	}
}

// P2 weighting scales each sample's ε term by 1/(1 + SNR) ≤ 1 and leaves
// the variance term and the reported MSE alone; the zero value is DiT's
// uniform loss.
func TestDiTDiffusionP2(t *testing.T) {
	m := tinyDiT(t, 1)
	data := randomData(t, 4, 4, 8)
	b := &Batch{X0: make([]float32, 4*4*8*8), C: data.C, H: data.H, W: data.W, Labels: make([]int, 4)}
	data.Batch(b, 1, 0)
	step := func(p P2) Metrics {
		m.Params.ZeroGrad()
		got, err := (&Diffusion{Model: dit.Teacher{Model: m}, Process: &diffusion.DDPM{Schedule: ddpm.Linear(1000), P2: diffusion.P2{K: p.K, Gamma: p.Gamma}}}).Step(0, b, rand.New(rand.NewPCG(3, 4)))
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	plain, p2 := step(P2{}), step(P2{K: 1, Gamma: 1})
	if !fixtures.Within(math.Abs(plain.Loss-(plain.MSE+plain.VB)), 1e-6) {
		t.Errorf("uniform: loss %g ≠ mse %g + vb %g", plain.Loss, plain.MSE, plain.VB)
	}
	if plain.MSE != p2.MSE || plain.VB != p2.VB {
		t.Errorf("P2 changed the reported terms: mse %g → %g, vb %g → %g", plain.MSE, p2.MSE, plain.VB, p2.VB)
	}
	if eps := p2.Loss - p2.VB; !(eps > 0 && eps < plain.MSE) {
		t.Errorf("P2's weighted ε term %g, want in (0, uniform %g)", eps, plain.MSE)
	}
	if _, err := (&Diffusion{Model: dit.Teacher{Model: m}, Process: &diffusion.DDPM{Schedule: ddpm.Linear(1000), P2: diffusion.P2{K: 0, Gamma: 1}}}).Step(0, b, rand.New(rand.NewPCG(3, 4))); err == nil {
		t.Error("P2 with k = 0 ran")
	}
}

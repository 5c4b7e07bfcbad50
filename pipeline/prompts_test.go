package pipeline

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dcdit/dcdit/datasets"
	"github.com/dcdit/dcdit/dc/checkpoint"
	"github.com/dcdit/dcdit/internal/zimagetest"
)

// A DC-Z-Image upcycle on the teacher's own samples for a prompts file:
// the prompts are encoded by the repository's text encoder, the samples
// and the features cached at data.path, the model trained on them and
// evaluated against the teacher on them, a second run reuses the cache,
// and another prompts file draws anew.
func TestUpcycleZImageOnPromptSamples(t *testing.T) {
	transformer := filepath.Join(zimagetest.Repo(t, filepath.Join("..", "testdata")), "transformer")
	dir := t.TempDir()
	prompts := []string{"a red disc", "a large blue square on green", "a small yellow triangle", "stripes", "a cyan ring on the left", "a magenta cross"}
	if err := os.WriteFile(filepath.Join(dir, "prompts.txt"), []byte(strings.Join(prompts, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	secs := []section{
		{"", []string{`name = "dcz-prompts"`}},
		{"[base]", []string{`path = "` + transformer + `"`, `latent_size = 8`}},
		{"[diffusion]", []string{`process = "flow_matching"`}},
		{"[scaffold]", []string{`patch_size = 2`, `width_factor = 2`, `norm_groups = 4`, `encoder_init = "patch"`, `encoder_norm = "none"`}},
		{"[scaffold.router]", []string{`groups = 4`, `ratio_batch_size = 1`}},
		{"[data]", []string{`source = "teacher"`, `path = "samples.safetensors"`, `prompts = "prompts.txt"`, `samples = 6`, `sampling_steps = 2`, `cfg = 2.0`}},
		{"[eval]", []string{`samples = 2`, `held_out = 2`, `sampling_steps = 2`, `rho = [0.0]`, `lite_cfg = []`}},
		{"[[stage]]", []string{`kind = "distill"`, `steps = 2`, `batch_size = 2`, `trainable = ["scaffold"]`, `class_dropout = 0.5`}},
		{"[[stage]]", []string{`kind = "finetune"`, `steps = 1`, `batch_size = 2`, `class_dropout = 0.5`, `rho = [0.0]`}},
	}
	path := filepath.Join(dir, "samples.safetensors")
	run := func(secs []section, out string) (*datasets.Set, string) {
		t.Helper()
		var log strings.Builder
		sum, err := Run(parseSections(t, dir, secs), Options{Out: filepath.Join(dir, out), Log: &log})
		if err != nil {
			t.Fatal(err)
		}
		if len(sum.Stages) != 2 {
			t.Fatalf("%d stages ran, want 2", len(sum.Stages))
		}
		_, meta, err := checkpoint.Load(sum.Model)
		if err != nil {
			t.Fatal(err)
		}
		// It samples as the evaluation did: flow matching at the recipe's
		// shift.
		r := parseSections(t, dir, secs)
		want := checkpoint.Sampling{Process: checkpoint.ProcessFlowMatching, DenseBelow: r.Eval.DenseBelow, CFG: r.Eval.CFG, Steps: r.Eval.SamplingSteps, Shift: r.Diffusion.Shift}
		if meta.Sampling == nil || *meta.Sampling != want {
			t.Errorf("sampling record %+v, want %+v", meta.Sampling, want)
		}
		if sum.Eval == nil || len(sum.Eval.Rows) != 1 || !(sum.Eval.Rows[0].SamplePSNR > 0) || sum.Eval.Rows[0].PromptFollowing != nil {
			t.Fatalf("evaluation %+v: want one row with a sample PSNR and no prompt following", sum.Eval)
		}
		set, err := datasets.Read(path)
		if err != nil {
			t.Fatal(err)
		}
		return set, log.String()
	}
	set, log := run(secs, "run")
	if set.N != 6 || set.C != 4 || set.H != 8 || set.CaptionDim != 32 || len(set.CaptionFeats) != 6 || set.EmptyCaptionFeats == nil || set.Captions != nil {
		t.Fatalf("%d samples of %d×%d×%d, %d encoded captions of width %d (empty prompt %v): want 6 of 4×8×8 with 6 captions 32 wide and the empty prompt's",
			set.N, set.C, set.H, set.W, len(set.CaptionFeats), set.CaptionDim, set.EmptyCaptionFeats != nil)
	}
	for i, v := range set.Latents {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			t.Fatalf("latent value %d is %v", i, v)
		}
	}
	for _, want := range []string{"encoding 6 prompts", "sampling 6 latents", "evaluating against the teacher"} {
		if !strings.Contains(log, want) {
			t.Errorf("the log lacks %q:\n%s", want, log)
		}
	}
	before, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	again, log := run(setKey(secs, "stage[0].steps", "1"), "run2")
	after, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if !after.ModTime().Equal(before.ModTime()) || !strings.Contains(log, "reusing 6 teacher samples") || strings.Contains(log, "encoding") {
		t.Errorf("a second run with the same prompts drew the samples again:\n%s", log)
	}
	for i := range set.Latents {
		if again.Latents[i] != set.Latents[i] {
			t.Fatalf("the reused samples differ at value %d", i)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "prompts.txt"), []byte(strings.Join(prompts[:3], "\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	if other, _ := run(secs, "run3"); other.Metadata["dcdit.generated_by"] == set.Metadata["dcdit.generated_by"] {
		t.Error("another prompts file reused the samples")
	}
}

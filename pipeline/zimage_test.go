package pipeline

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/dcdit/dcdit/datasets"
	"github.com/dcdit/dcdit/datasets/shapes"
	"github.com/dcdit/dcdit/loaders"
	"github.com/dcdit/dcdit/zimage"
)

// A Z-Image recipe trains from scratch with flow matching on captioned
// shapes and writes a model folder that zimage.Load reads, recording its
// recipe and its caption table (rebuilt bit for bit from the metadata),
// and a card; running it again resumes the finished stage.
func TestTrainZImage(t *testing.T) {
	dir := t.TempDir()
	r := parseSections(t, dir, setKey(keyWalkZImage, "stage[0].class_dropout", `0.5`))
	out := filepath.Join(dir, "run")
	sum, err := Run(r, Options{Out: out})
	if err != nil {
		t.Fatal(err)
	}
	if sum.Model != filepath.Join(out, "model") {
		t.Errorf("model at %s, want the folder %s", sum.Model, filepath.Join(out, "model"))
	}
	w, err := zimage.Load(sum.Model, zimage.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if c := w.Config; c.Dim != 32 || c.NLayers != 1 || c.NHeads != 2 || c.CapFeatDim != 8 || c.InChannels != 4 {
		t.Errorf("config %+v, want the recipe's sizes", c)
	}
	m, err := zimage.New(w)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Forward([]zimage.Latent{{Data: make([]float32, 4*8*8), F: 1, H: 8, W: 8}}, []float32{0.5}, [][]float32{make([]float32, 8)}); err != nil {
		t.Fatal(err)
	}
	ck, err := loaders.Open(sum.Model)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	if ck.Metadata["dcdit.recipe"] != r.Text {
		t.Error("the model does not record its recipe")
	}
	var info shapes.CaptionTable
	if err := json.Unmarshal([]byte(ck.Metadata[shapes.CaptionTableKey]), &info); err != nil {
		t.Fatalf("%s: %v", shapes.CaptionTableKey, err)
	}
	if info.Dim != 8 || !slices.Equal(info.Vocabulary, shapes.Vocabulary) {
		t.Errorf("caption table %+v, want width 8 over the shapes vocabulary", info)
	}
	card, err := os.ReadFile(filepath.Join(out, CardFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"z-image", "flow matching", "`model`", "dcdit.captions", "--prompt", "--shift 3"} {
		if !strings.Contains(string(card), want) {
			t.Errorf("the card lacks %q", want)
		}
	}
	again, err := Run(r, Options{Out: out})
	if err != nil {
		t.Fatal(err)
	}
	if !again.Stages[0].Complete {
		t.Error("running again retrained the finished stage")
	}
}

// What a Z-Image recipe refuses, each naming its key.
func TestZImageRecipeRefusals(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		name  string
		secs  []section
		parts []string
	}{
		{"a scaffold", append(slices.Clone(keyWalkZImage), section{"[scaffold]", []string{`norm_groups = 8`}}), []string{"scaffold", "upcycle a trained Z-Image"}},
		{"DDPM", setKey(keyWalkZImage, "diffusion.process", `"ddpm"`), []string{"diffusion.process", "flow matching"}},
		{"a DiT key", setKey(keyWalkZImage, "model.num_classes", `10`), []string{"model.num_classes", `model.kind = "dit"`}},
		{"no captions", setKey(keyWalkZImage, "data.captions", `false`), []string{"data.captions", "trains on captions"}},
		{"p2", setKey(keyWalkZImage, "stage[0].p2_gamma", `1.0`), []string{"stage[0].p2_gamma"}},
		{"bf16", setKey(keyWalkZImage, "save.dtype", `"bf16"`), []string{"save.dtype", "F32"}},
		{"a finetune stage", setKey(keyWalkZImage, "stage[0].kind", `"finetune"`), []string{"stage[0].kind", "trains from scratch"}},
		{"a head width off RoPE's axes", setKey(keyWalkZImage, "model.num_heads", `8`), []string{"model.num_heads", "multiple of 8"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := parse(dir, render(c.secs))
			if err == nil {
				t.Fatal("accepted")
			}
			for _, p := range c.parts {
				if !strings.Contains(err.Error(), p) {
					t.Errorf("%v: want %q in it", err, p)
				}
			}
		})
	}
}

// A DC-Z-Image upcycle on data sampled from its Z-Image teacher: the
// samples are drawn for balanced captions of the shapes vocabulary,
// cached at data.path with the settings that made them, reused by a
// second run and redrawn when a setting changes; a DiT-only key is
// refused.
func TestUpcycleZImageOnTeacherSamples(t *testing.T) {
	dir := t.TempDir()
	base, err := Run(parseSections(t, dir, keyWalkZImage), Options{Out: filepath.Join(dir, "base")})
	if err != nil {
		t.Fatal(err)
	}
	secs := []section{
		{"", []string{`name = "dcz"`}},
		{"[base]", []string{`path = "` + base.Model + `"`, `latent_size = 8`}},
		{"[diffusion]", []string{`process = "flow_matching"`}},
		{"[scaffold]", []string{`patch_size = 2`, `width_factor = 2`, `norm_groups = 4`, `encoder_init = "patch"`, `encoder_norm = "none"`}},
		{"[scaffold.router]", []string{`groups = 4`, `ratio_batch_size = 1`}},
		{"[data]", []string{`source = "teacher"`, `path = "samples.safetensors"`, `samples = 6`, `sampling_steps = 2`, `cfg = 2.0`}},
		{"[[stage]]", []string{`kind = "distill"`, `steps = 1`, `batch_size = 2`, `trainable = ["scaffold"]`}},
		{"[eval]", []string{`samples = 2`, `held_out = 2`, `sampling_steps = 2`, `rho = [0.0]`, `lite_cfg = []`}},
	}
	path := filepath.Join(dir, "samples.safetensors")
	run := func(secs []section, out string) *datasets.Set {
		t.Helper()
		if _, err := Run(parseSections(t, dir, secs), Options{Out: filepath.Join(dir, out)}); err != nil {
			t.Fatal(err)
		}
		set, err := datasets.Read(path)
		if err != nil {
			t.Fatal(err)
		}
		return set
	}
	set := run(secs, "run")
	if set.N != 6 || set.C != 4 || set.H != 8 || len(set.Captions) != 6 || !slices.Equal(set.Vocabulary, shapes.Vocabulary) {
		t.Fatalf("%d samples of %d×%d×%d, %d captions over %d words: want 6 of 4×8×8 with captions of the shapes vocabulary",
			set.N, set.C, set.H, set.W, len(set.Captions), len(set.Vocabulary))
	}
	for i, y := range set.Labels {
		if y != i%len(shapes.Classes) {
			t.Errorf("sample %d of class %d, want the balanced %d", i, y, i%len(shapes.Classes))
		}
	}
	for _, v := range set.Latents {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			t.Fatal("a sample is not finite")
		}
	}
	// The data's captions, not the data's pictures.
	g, err := shapes.New(8, 0)
	if err != nil {
		t.Fatal(err)
	}
	real, err := g.BalancedCaptionedSet(6)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.EqualFunc(real.Captions, set.Captions, slices.Equal) || slices.Equal(real.Latents, set.Latents) {
		t.Error("want the data's captions with the teacher's samples")
	}
	before, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	again := run(setKey(secs, "stage[0].steps", "2"), "run2")
	after, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if !after.ModTime().Equal(before.ModTime()) || !slices.Equal(again.Latents, set.Latents) {
		t.Error("a second run with the same data settings drew the samples again")
	}
	if other := run(setKey(secs, "data.cfg", "1.0"), "run3"); other.Metadata["dcdit.generated_by"] == set.Metadata["dcdit.generated_by"] {
		t.Errorf("another guidance scale reused the samples made by %q", set.Metadata["dcdit.generated_by"])
	}
	if _, err := parse(dir, render(setKey(secs, "data.classes", "[1, 2]"))); err == nil || !strings.Contains(err.Error(), "data.classes") {
		t.Errorf("data.classes with a Z-Image teacher: err = %v, want it named", err)
	}
}

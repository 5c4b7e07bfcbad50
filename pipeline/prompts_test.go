package pipeline

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dcdit/dcdit/datasets"
	"github.com/dcdit/dcdit/internal/fixtures"
	"github.com/dcdit/dcdit/loaders/dtype"
	"github.com/dcdit/dcdit/loaders/safetensors"
)

// zimageRepo lays the bundled toy Z-Image teacher out as a Z-Image
// repository: transformer/, the real Qwen3 tokenizer (from the fixtures)
// and a tiny random Qwen3 text encoder as wide as the teacher's caption
// features. It returns the transformer folder.
func zimageRepo(t *testing.T) string {
	t.Helper()
	root := os.Getenv(fixtures.EnvVar)
	if root == "" {
		t.Skipf("the Qwen3 tokenizer.json is not in testdata: set %s=../shared/fixtures to run this test", fixtures.EnvVar)
	}
	cases, err := fixtures.Discover(root, "qwen3-tokenizer")
	if err != nil || len(cases) == 0 {
		t.Fatalf("no qwen3-tokenizer fixture under %s (%v)", root, err)
	}
	repo := t.TempDir()
	copyFile := func(src, dst string) {
		t.Helper()
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	teacher := filepath.Join("..", "testdata", "zimage-teacher", "model")
	copyFile(filepath.Join(teacher, "model.safetensors"), filepath.Join(repo, "transformer", "diffusion_pytorch_model.safetensors"))
	copyFile(filepath.Join(teacher, "config.json"), filepath.Join(repo, "transformer", "config.json"))
	for _, f := range []string{"tokenizer.json", "tokenizer_config.json"} {
		copyFile(filepath.Join(cases[0].Dir, f), filepath.Join(repo, "tokenizer", f))
	}
	var cfg struct {
		CapFeatDim int `json:"cap_feat_dim"`
	}
	raw, err := os.ReadFile(filepath.Join(teacher, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &cfg); err != nil || cfg.CapFeatDim < 1 {
		t.Fatalf("%s: no cap_feat_dim (%v)", teacher, err)
	}
	writeQwen3(t, filepath.Join(repo, "text_encoder"), 151936, cfg.CapFeatDim)
	return filepath.Join(repo, "transformer")
}

// writeQwen3 writes a tiny random Qwen3 text encoder of the given
// vocabulary and width (BF16, as real ones ship) with its config.json.
func writeQwen3(t *testing.T, dir string, vocab, hidden int) {
	t.Helper()
	const layers, heads, kv, headDim, inter = 2, 2, 1, 16, 64
	rng := rand.New(rand.NewPCG(7, 8))
	var ts []safetensors.WriteTensor
	add := func(name string, scale float64, offset float32, shape ...int64) {
		n := int64(1)
		for _, d := range shape {
			n *= d
		}
		v := make([]float32, n)
		for i := range v {
			v[i] = offset + float32(rng.NormFloat64()*scale)
		}
		raw := make([]byte, 2*n)
		if err := dtype.EncodeFloat32(raw, v, dtype.BF16); err != nil {
			t.Fatal(err)
		}
		ts = append(ts, safetensors.WriteTensor{Name: name, DType: dtype.BF16, Shape: shape, Data: raw})
	}
	h := int64(hidden)
	in := 1 / math.Sqrt(float64(hidden))
	add("model.embed_tokens.weight", 1, 0, int64(vocab), h)
	for l := range layers {
		p := fmt.Sprintf("model.layers.%d.", l)
		add(p+"input_layernorm.weight", 0.1, 1, h)
		add(p+"post_attention_layernorm.weight", 0.1, 1, h)
		add(p+"self_attn.q_proj.weight", in, 0, heads*headDim, h)
		add(p+"self_attn.k_proj.weight", in, 0, kv*headDim, h)
		add(p+"self_attn.v_proj.weight", in, 0, kv*headDim, h)
		add(p+"self_attn.o_proj.weight", 1/math.Sqrt(heads*headDim), 0, h, heads*headDim)
		add(p+"self_attn.q_norm.weight", 0.1, 1, headDim)
		add(p+"self_attn.k_norm.weight", 0.1, 1, headDim)
		add(p+"mlp.gate_proj.weight", in, 0, inter, h)
		add(p+"mlp.up_proj.weight", in, 0, inter, h)
		add(p+"mlp.down_proj.weight", 1/math.Sqrt(inter), 0, h, inter)
	}
	add("model.norm.weight", 0.1, 1, h)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := safetensors.Write(filepath.Join(dir, "model.safetensors"), ts, nil); err != nil {
		t.Fatal(err)
	}
	cfg := map[string]any{"model_type": "qwen3", "vocab_size": vocab, "hidden_size": hidden, "intermediate_size": inter,
		"num_hidden_layers": layers, "num_attention_heads": heads, "num_key_value_heads": kv, "head_dim": headDim,
		"rope_theta": 1e6, "rms_norm_eps": 1e-6, "tie_word_embeddings": true, "hidden_act": "silu"}
	raw, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), raw, 0o644); err != nil {
		t.Fatal(err)
	}
}

// A DC-Z-Image upcycle on the teacher's own samples for a prompts file:
// the prompts are encoded by the repository's text encoder, the samples
// and the features cached at data.path, the model trained on them and
// evaluated against the teacher on them, a second run reuses the cache,
// and another prompts file draws anew.
func TestUpcycleZImageOnPromptSamples(t *testing.T) {
	transformer := zimageRepo(t)
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
		if _, err := os.Stat(sum.Model); err != nil {
			t.Fatal(err)
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

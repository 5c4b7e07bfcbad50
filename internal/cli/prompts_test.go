package cli

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dcdit/dcdit/internal/fixtures"
	"github.com/dcdit/dcdit/loaders/dtype"
	"github.com/dcdit/dcdit/loaders/safetensors"
	"github.com/dcdit/dcdit/textenc"
)

// tokenizerDir is the qwen3-tokenizer fixture's folder, whose 11 MB
// tokenizer.json only the shared fixtures hold: the test skips, naming
// what to set, when DCDIT_FIXTURES does not lead to it.
func tokenizerDir(t *testing.T) string {
	t.Helper()
	root := os.Getenv(fixtures.EnvVar)
	if root == "" {
		t.Skipf("the Qwen3 tokenizer.json is not in testdata: set %s=../shared/fixtures to run this test", fixtures.EnvVar)
	}
	cases, err := fixtures.Discover(root, "qwen3-tokenizer")
	if err != nil || len(cases) == 0 {
		t.Fatalf("no qwen3-tokenizer fixture under %s (%v)", root, err)
	}
	return cases[0].Dir
}

// writeTextEncoder writes a tiny random Qwen3 text encoder (BF16 weights,
// as real ones ship) of the given vocabulary and width into dir, with its
// config.json.
func writeTextEncoder(t *testing.T, dir string, vocab, hidden int) {
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
	add("model.embed_tokens.weight", 1, 0, int64(vocab), int64(hidden))
	for l := range layers {
		p := fmt.Sprintf("model.layers.%d.", l)
		add(p+"input_layernorm.weight", 0.1, 1, int64(hidden))
		add(p+"post_attention_layernorm.weight", 0.1, 1, int64(hidden))
		add(p+"self_attn.q_proj.weight", 1/math.Sqrt(float64(hidden)), 0, heads*headDim, int64(hidden))
		add(p+"self_attn.k_proj.weight", 1/math.Sqrt(float64(hidden)), 0, kv*headDim, int64(hidden))
		add(p+"self_attn.v_proj.weight", 1/math.Sqrt(float64(hidden)), 0, kv*headDim, int64(hidden))
		add(p+"self_attn.o_proj.weight", 1/math.Sqrt(heads*headDim), 0, int64(hidden), heads*headDim)
		add(p+"self_attn.q_norm.weight", 0.1, 1, headDim)
		add(p+"self_attn.k_norm.weight", 0.1, 1, headDim)
		add(p+"mlp.gate_proj.weight", 1/math.Sqrt(float64(hidden)), 0, inter, int64(hidden))
		add(p+"mlp.up_proj.weight", 1/math.Sqrt(float64(hidden)), 0, inter, int64(hidden))
		add(p+"mlp.down_proj.weight", 1/math.Sqrt(inter), 0, int64(hidden), inter)
	}
	add("model.norm.weight", 0.1, 1, int64(hidden))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := safetensors.Write(filepath.Join(dir, "model.safetensors"), ts, nil); err != nil {
		t.Fatal(err)
	}
	cfg := map[string]any{"model_type": "qwen3", "vocab_size": vocab, "hidden_size": hidden, "intermediate_size": inter,
		"num_hidden_layers": layers, "num_attention_heads": heads, "num_key_value_heads": kv, "head_dim": headDim,
		"rope_theta": 1e6, "rms_norm_eps": 1e-6, "tie_word_embeddings": true, "hidden_act": "silu"}
	raw, _ := json.Marshal(cfg)
	if err := os.WriteFile(filepath.Join(dir, "config.json"), raw, 0o644); err != nil {
		t.Fatal(err)
	}
}

// toyZImageRepo lays the bundled toy Z-Image teacher out as Z-Image-Turbo's
// repository: transformer/, a tiny random text_encoder/ of the teacher's
// caption width and the real tokenizer's vocabulary, and tokenizer/.
func toyZImageRepo(t *testing.T) string {
	t.Helper()
	tokSrc := tokenizerDir(t)
	repo := t.TempDir()
	copyFile := func(src, dst string) {
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
	teacher := filepath.Join(testdata, "zimage-teacher", "model")
	copyFile(filepath.Join(teacher, "model.safetensors"), filepath.Join(repo, "transformer", "diffusion_pytorch_model.safetensors"))
	copyFile(filepath.Join(teacher, "config.json"), filepath.Join(repo, "transformer", "config.json"))
	for _, f := range []string{"tokenizer.json", "tokenizer_config.json"} {
		copyFile(filepath.Join(tokSrc, f), filepath.Join(repo, "tokenizer", f))
	}
	var cfg struct {
		CapFeatDim int `json:"cap_feat_dim"`
	}
	raw, _ := os.ReadFile(filepath.Join(teacher, "config.json"))
	if err := json.Unmarshal(raw, &cfg); err != nil || cfg.CapFeatDim < 1 {
		t.Fatalf("%s: no cap_feat_dim (%v)", teacher, err)
	}
	writeTextEncoder(t, filepath.Join(repo, "text_encoder"), 151936, cfg.CapFeatDim)
	v := vaeFolder(t, "vae-sd-tiny")
	for _, f := range []string{"config.json", "diffusion_pytorch_model.safetensors"} {
		copyFile(filepath.Join(v.dir, f), filepath.Join(repo, "vae", f))
	}
	return repo
}

// A Z-Image repository samples from --prompt through its text encoder, and
// encode-prompts writes the captions file that gives the same latents.
func TestSamplePromptWithTextEncoder(t *testing.T) {
	repo := toyZImageRepo(t)
	dir := t.TempDir()
	common := []string{"--size", "8x8", "--steps", "2", "--cfg", "2", "--seed", "3", "-q"}
	byPrompt := filepath.Join(dir, "p.safetensors")
	png := filepath.Join(dir, "p.png")
	args := append([]string{"sample", repo, "--prompt", "a red disc", "--prompt", "a large blue square on green", "--out", byPrompt, "--png", png}, common[:len(common)-1]...)
	code, stdout, stderr := run(t, args...)
	if code != 0 {
		t.Fatalf("sample --prompt: exit %d: %s", code, stderr)
	}
	// The repository's vae/ decodes the grid without --vae.
	if !strings.Contains(stdout, "pictures decoded by the VAE") {
		t.Errorf("stdout = %q", stdout)
	}
	prompts := filepath.Join(dir, "prompts.txt")
	os.WriteFile(prompts, []byte("a red disc\r\na large blue square on green\n"), 0o644)
	caps := filepath.Join(dir, "caps.safetensors")
	code, stdout, stderr = run(t, "encode-prompts", prompts, "--text-encoder", repo, "--out", caps)
	if code != 0 || !strings.Contains(stdout, "2 prompts") {
		t.Fatalf("encode-prompts: exit %d: %s %s", code, stdout, stderr)
	}
	f, err := safetensors.Open(caps)
	if err != nil {
		t.Fatal(err)
	}
	feats, _ := f.Tensor(textenc.CapFeatsKey)
	lens, _ := f.Tensor(textenc.CapLensKey)
	if feats == nil || lens == nil || len(feats.Shape) != 3 || feats.Shape[0] != 2 || lens.Shape[0] != 2 {
		t.Fatalf("captions file: %v", f.Tensors())
	}
	f.Close()
	// The same prompts through a captions file, guidance against the empty
	// prompt's features: the same latents.
	enc, err := textenc.Open(filepath.Join(repo, "text_encoder"), filepath.Join(repo, "tokenizer"))
	if err != nil {
		t.Fatal(err)
	}
	empty, err := enc.Encode([]string{""}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	neg := filepath.Join(dir, "neg.safetensors")
	if err := textenc.WriteCaptions(neg, empty, enc.Dim(), nil); err != nil {
		t.Fatal(err)
	}
	byFile := filepath.Join(dir, "f.safetensors")
	args = append([]string{"sample", filepath.Join(repo, "transformer"), "--captions", caps, "--negative", neg, "--out", byFile}, common...)
	if code, _, stderr := run(t, args...); code != 0 {
		t.Fatalf("sample --captions: exit %d: %s", code, stderr)
	}
	_, a, _ := readLatents(t, byPrompt)
	_, b, _ := readLatents(t, byFile)
	if string(a) != string(b) {
		t.Error("--prompt and --captions from encode-prompts gave different latents")
	}
}

func TestEncodePromptsErrors(t *testing.T) {
	repo := toyZImageRepo(t)
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		os.WriteFile(p, []byte(text), 0o644)
		return p
	}
	good := write("good.txt", "a red disc\n")
	wide := filepath.Join(dir, "wide")
	writeTextEncoder(t, filepath.Join(wide, "text_encoder"), 151936, 24)
	cases := []struct {
		name string
		args []string
		code int
		want []string
	}{
		{"no encoder", []string{"encode-prompts", good}, 2, []string{"--text-encoder is required"}},
		{"bad utf-8", []string{"encode-prompts", write("bad.txt", "ok\n\xff\xfe\n"), "--text-encoder", repo, "--out", filepath.Join(dir, "o.safetensors")}, 1, []string{"bad.txt:2", "UTF-8"}},
		{"empty line", []string{"encode-prompts", write("empty.txt", "ok\n\nalso\n"), "--text-encoder", repo, "--out", filepath.Join(dir, "o.safetensors")}, 1, []string{"empty.txt:2", "empty prompt"}},
		{"no tokenizer", []string{"encode-prompts", good, "--text-encoder", filepath.Join(wide, "text_encoder"), "--out", filepath.Join(dir, "o.safetensors")}, 1, []string{"tokenizer"}},
		{"width differs", []string{"sample", repo, "--prompt", "a red disc", "--text-encoder", filepath.Join(wide, "text_encoder"), "--tokenizer", filepath.Join(repo, "tokenizer"), "--size", "8x8", "--steps", "1", "--out", filepath.Join(dir, "s.safetensors")}, 1, []string{"24 wide", "cap_feat_dim"}},
		{"negative prompt alone", []string{"sample", repo, "--negative-prompt", "x", "--captions", "c.safetensors", "--out", filepath.Join(dir, "s.safetensors")}, 1, []string{"--negative-prompt goes with --prompt"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, stdout, stderr := run(t, c.args...)
			if code != c.code || stdout != "" {
				t.Errorf("exit %d, want %d; stdout %q; stderr %q", code, c.code, stdout, stderr)
			}
			for _, w := range c.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr %q lacks %q", stderr, w)
				}
			}
		})
	}
	if _, err := os.Stat(filepath.Join(dir, "o.safetensors")); err == nil {
		t.Error("a failed encode-prompts wrote its output")
	}
}

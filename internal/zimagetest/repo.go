package zimagetest

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/dcdit/dcdit/internal/fixtures"
	"github.com/dcdit/dcdit/loaders/dtype"
	"github.com/dcdit/dcdit/loaders/safetensors"
)

// TokenizerDir is the qwen3-tokenizer fixture's folder, whose 11 MB
// tokenizer.json only the shared fixtures hold: the test skips, naming
// what to set, when DCDIT_FIXTURES does not lead to it.
func TokenizerDir(tb testing.TB) string {
	tb.Helper()
	root := os.Getenv(fixtures.EnvVar)
	if root == "" {
		tb.Skipf("the Qwen3 tokenizer.json is not in testdata: set %s=../shared/fixtures to run this test", fixtures.EnvVar)
	}
	cases, err := fixtures.Discover(root, "qwen3-tokenizer")
	if err != nil || len(cases) == 0 {
		tb.Fatalf("no qwen3-tokenizer fixture under %s (%v)", root, err)
	}
	return cases[0].Dir
}

// CopyFile copies src to dst, creating dst's folder.
func CopyFile(tb testing.TB, src, dst string) {
	tb.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		tb.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(dst, b, 0o644); err != nil {
		tb.Fatal(err)
	}
}

// Repo lays the bundled toy Z-Image teacher (testdata/zimage-teacher/model
// under the testdata folder given) out as Z-Image-Turbo's repository:
// transformer/, a tiny random text_encoder/ as wide as the teacher's
// caption features with the real tokenizer's vocabulary, and tokenizer/
// (TokenizerDir). It returns the repository's folder.
func Repo(tb testing.TB, testdata string) string {
	tb.Helper()
	tok := TokenizerDir(tb)
	repo := tb.TempDir()
	teacher := filepath.Join(testdata, "zimage-teacher", "model")
	CopyFile(tb, filepath.Join(teacher, "model.safetensors"), filepath.Join(repo, "transformer", "diffusion_pytorch_model.safetensors"))
	CopyFile(tb, filepath.Join(teacher, "config.json"), filepath.Join(repo, "transformer", "config.json"))
	for _, f := range []string{"tokenizer.json", "tokenizer_config.json"} {
		CopyFile(tb, filepath.Join(tok, f), filepath.Join(repo, "tokenizer", f))
	}
	var cfg struct {
		CapFeatDim int `json:"cap_feat_dim"`
	}
	raw, err := os.ReadFile(filepath.Join(teacher, "config.json"))
	if err != nil {
		tb.Fatal(err)
	}
	if err := json.Unmarshal(raw, &cfg); err != nil || cfg.CapFeatDim < 1 {
		tb.Fatalf("%s: no cap_feat_dim (%v)", teacher, err)
	}
	WriteTextEncoder(tb, filepath.Join(repo, "text_encoder"), 151936, cfg.CapFeatDim)
	return repo
}

// WriteTextEncoder writes a tiny random Qwen3 text encoder (BF16 weights,
// as real ones ship, under Qwen3ForCausalLM's model. names) of the given
// vocabulary and width into dir, with its config.json.
func WriteTextEncoder(tb testing.TB, dir string, vocab, hidden int) {
	tb.Helper()
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
			tb.Fatal(err)
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
		tb.Fatal(err)
	}
	if err := safetensors.Write(filepath.Join(dir, "model.safetensors"), ts, nil); err != nil {
		tb.Fatal(err)
	}
	cfg := map[string]any{"model_type": "qwen3", "vocab_size": vocab, "hidden_size": hidden, "intermediate_size": inter,
		"num_hidden_layers": layers, "num_attention_heads": heads, "num_key_value_heads": kv, "head_dim": headDim,
		"rope_theta": 1e6, "rms_norm_eps": 1e-6, "tie_word_embeddings": true, "hidden_act": "silu"}
	raw, err := json.Marshal(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), raw, 0o644); err != nil {
		tb.Fatal(err)
	}
}

package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dcdit/dcdit/internal/zimagetest"
	"github.com/dcdit/dcdit/loaders/safetensors"
	"github.com/dcdit/dcdit/textenc"
)

// toyZImageRepo is zimagetest.Repo with the VAE fixture as its vae/.
func toyZImageRepo(t *testing.T) string {
	t.Helper()
	repo := zimagetest.Repo(t, testdata)
	v := vaeFolder(t, "vae-sd-tiny")
	for _, f := range []string{"config.json", "diffusion_pytorch_model.safetensors"} {
		zimagetest.CopyFile(t, filepath.Join(v.dir, f), filepath.Join(repo, "vae", f))
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
	zimagetest.WriteTextEncoder(t, filepath.Join(wide, "text_encoder"), 151936, 24)
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

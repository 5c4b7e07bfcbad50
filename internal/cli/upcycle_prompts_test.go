package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/dcdit/dcdit/datasets/shapes"
	"github.com/dcdit/dcdit/eval"
	"github.com/dcdit/dcdit/loaders/safetensors"
)

// stripCaptionTable rewrites the safetensors file at path without the
// caption table's metadata key, as a real Z-Image ships.
func stripCaptionTable(t *testing.T, path string) {
	t.Helper()
	f, err := safetensors.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	md := map[string]string{}
	for k, v := range f.Metadata() {
		if k != shapes.CaptionTableKey {
			md[k] = v
		}
	}
	if len(md) == len(f.Metadata()) {
		t.Fatalf("%s: no %q metadata to remove", path, shapes.CaptionTableKey)
	}
	var ts []safetensors.WriteTensor
	for _, info := range f.Tensors() {
		tn, _ := f.Tensor(info.Name)
		raw, err := tn.Bytes()
		if err != nil {
			t.Fatal(err)
		}
		// A copy: the file's bytes are mapped, and go when it closes.
		ts = append(ts, safetensors.WriteTensor{Name: info.Name, DType: info.DType, Shape: info.Shape, Data: slices.Clone(raw)})
	}
	f.Close()
	if err := safetensors.Write(path, ts, md); err != nil {
		t.Fatal(err)
	}
}

// A Z-Image base without the toy's caption table (as a real Z-Image-Turbo
// is) upcycles on its own samples for data.prompts, the caption width
// coming from the transformer's cap_feat_dim; the evaluation runs on the
// prompt data; the DC-Z-Image records no caption table, and samples from
// --prompt through the repository's text encoder. Without data.prompts
// such a base is refused, the message naming data.prompts.
func TestUpcyclePromptsWithoutCaptionTable(t *testing.T) {
	repo := toyZImageRepo(t)
	stripCaptionTable(t, filepath.Join(repo, "transformer", "diffusion_pytorch_model.safetensors"))
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "prompts.txt"), []byte("a red disc\na large blue square on green\na small yellow triangle\nstripes\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	recipe := func(data string) string {
		return `name = "dcz-real"
[base]
path = "` + filepath.Join(repo, "transformer") + `"
latent_size = 8
[diffusion]
process = "flow_matching"
[scaffold]
patch_size = 2
width_factor = 2
norm_groups = 4
encoder_init = "patch"
encoder_norm = "none"
[scaffold.router]
groups = 4
ratio_batch_size = 1
[data]
source = "teacher"
path = "samples.safetensors"
samples = 4
sampling_steps = 2
cfg = 2.0
` + data + `
[eval]
samples = 2
held_out = 2
sampling_steps = 2
rho = [0.0, 0.5]
lite_cfg = []
[[stage]]
kind = "distill"
steps = 2
batch_size = 2
trainable = ["scaffold"]
class_dropout = 0.5
`
	}
	tests := []struct {
		name, data string
		wantErr    string // "" for a run that upcycles
	}{
		{"prompts", `prompts = "prompts.txt"`, ""},
		{"shapes captions", "", "data.prompts"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(dir, tt.name+".toml")
			if err := os.WriteFile(path, []byte(recipe(tt.data)), 0o644); err != nil {
				t.Fatal(err)
			}
			out := filepath.Join(dir, tt.name)
			code, _, stderr := run(t, "upcycle", path, "--out", out, "-q")
			if tt.wantErr != "" {
				if code == 0 || !strings.Contains(stderr, "records no caption table") || !strings.Contains(stderr, tt.wantErr) {
					t.Fatalf("exit %d: %s; want the base refused, naming %s", code, stderr, tt.wantErr)
				}
				return
			}
			if code != 0 {
				t.Fatalf("upcycle: exit %d: %s", code, stderr)
			}
			model := filepath.Join(out, "model.safetensors")
			f, err := safetensors.Open(model)
			if err != nil {
				t.Fatal(err)
			}
			_, table := f.Metadata()[shapes.CaptionTableKey]
			f.Close()
			if table {
				t.Errorf("%s records a caption table (%q); a model trained on prompts reads its text encoder's features", model, shapes.CaptionTableKey)
			}
			raw, err := os.ReadFile(filepath.Join(out, eval.JSONFile))
			if err != nil {
				t.Fatal(err)
			}
			var rep eval.Report
			if err := json.Unmarshal(raw, &rep); err != nil {
				t.Fatal(err)
			}
			if len(rep.Rows) != 2 {
				t.Fatalf("the evaluation has %d rows, want one per ρ (2)", len(rep.Rows))
			}
			for _, r := range rep.Rows {
				if !(r.KeptTokens > 0) || !(r.GFLOPsPerImage > 0) || !(r.EpsRelMSE >= 0) || !(r.SamplePSNR > 0) || r.PromptFollowing != nil {
					t.Errorf("ρ %g: kept %g, %g GFLOPs, ε rel MSE %g, PSNR %g dB, prompt following %v: want finite measures and no prompt following",
						r.Rho, r.KeptTokens, r.GFLOPsPerImage, r.EpsRelMSE, r.SamplePSNR, r.PromptFollowing)
				}
			}
			card, err := os.ReadFile(filepath.Join(out, "README.md"))
			if err != nil || !strings.Contains(string(card), "--text-encoder") {
				t.Errorf("the model card does not say to sample with --text-encoder (%v)", err)
			}
			// --prompt without a text encoder has no table to read.
			if code, _, stderr := run(t, "sample", model, "--prompt", "a red disc", "--steps", "2", "--out", filepath.Join(dir, "none.safetensors"), "-q"); code == 0 || !strings.Contains(stderr, "--text-encoder") {
				t.Errorf("sample --prompt without --text-encoder: exit %d: %s; want it refused, naming --text-encoder", code, stderr)
			}
			samples := filepath.Join(dir, "s.safetensors")
			code, _, stderr = run(t, "sample", model, "--prompt", "a red disc", "--text-encoder", repo, "--steps", "2", "--out", samples, "-q")
			if code != 0 {
				t.Fatalf("sample --prompt --text-encoder: exit %d: %s", code, stderr)
			}
			if _, err := os.Stat(samples); err != nil {
				t.Fatal(err)
			}
		})
	}
}

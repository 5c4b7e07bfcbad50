package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dcdit/dcdit/internal/cli/iostreams"
	"github.com/dcdit/dcdit/internal/testckpt"
	"github.com/dcdit/dcdit/loaders/arch"
	"github.com/dcdit/dcdit/loaders/dtype"
)

const testdata = "../../testdata"

func run(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	ios, _, out, errOut := iostreams.Test()
	code = Main(args, ios)
	return code, out.String(), errOut.String()
}

func TestInspectJSON(t *testing.T) {
	cases := []struct {
		path, arch, layout string
		configKeys         []string
		groups             []string
	}{
		{"dit-original.safetensors", "dit", "original", []string{"depth", "hidden_size", "num_heads", "patch_size", "in_channels", "input_size", "learn_sigma", "num_classes"}, []string{"embedders", "blocks", "final_layer"}},
		{"dit-train.pt", "dit", "original", []string{"depth", "input_size"}, []string{"blocks"}},
		{"dit-diffusers", "dit", "diffusers", []string{"depth", "num_heads"}, []string{"embedders", "blocks", "final_layer"}},
		{"zimage-diffusers", "zimage", "diffusers", []string{"dim", "n_layers", "n_refiner_layers", "n_heads", "in_channels", "patch_size", "cap_feat_dim"}, []string{"embedders", "blocks", "final_layer"}},
		{"zimage-comfy-full.safetensors", "zimage", "comfy", []string{"dim", "n_heads"}, []string{"blocks", "other"}},
	}
	for _, c := range cases {
		t.Run(c.path, func(t *testing.T) {
			code, out, errOut := run(t, "inspect", "--json", filepath.Join(testdata, "checkpoints", c.path))
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			var res map[string]any
			if err := json.Unmarshal([]byte(out), &res); err != nil {
				t.Fatalf("output is not one JSON object: %v\n%s", err, out)
			}
			for _, field := range []string{"architecture", "layout", "config", "parameters", "tensors", "dtypes", "shards", "metadata", "warnings"} {
				if _, ok := res[field]; !ok {
					t.Errorf("field %q missing", field)
				}
			}
			if f, _ := res["flops"].(map[string]any); c.arch == "dit" && (f == nil || !(f["tflops_per_image"].(float64) > 0)) {
				t.Errorf("flops = %v, want a positive tflops_per_image for a DiT", res["flops"])
			}
			if res["architecture"] != c.arch || res["layout"] != c.layout {
				t.Errorf("architecture/layout = %v/%v, want %s/%s", res["architecture"], res["layout"], c.arch, c.layout)
			}
			cfg, _ := res["config"].(map[string]any)
			for _, k := range c.configKeys {
				if _, ok := cfg[k]; !ok {
					t.Errorf("config.%s missing: %v", k, cfg)
				}
			}
			groups, _ := res["parameters_by_group"].(map[string]any)
			var sum float64
			for _, k := range c.groups {
				if n, _ := groups[k].(float64); !(n > 0) {
					t.Errorf("parameters_by_group.%s = %v", k, groups[k])
				}
			}
			for _, n := range groups {
				sum += n.(float64)
			}
			if sum != res["parameters"].(float64) {
				t.Errorf("groups sum to %v, parameters = %v", sum, res["parameters"])
			}
		})
	}
}

func TestInspectTableAndTensorList(t *testing.T) {
	code, out, errOut := run(t, "inspect", "--tensors", "--filter", `^blocks\.1\.mlp`, filepath.Join(testdata, "checkpoints", "dit-original-f16.safetensors"))
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{"dit (original naming)", "F16 ×", "blocks.1.mlp.fc1.weight", "blocks.1.mlp.fc2.bias", "stored as F16", "--num-heads"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "blocks.0.mlp") || strings.Contains(out, "blocks.1.attn") {
		t.Errorf("--filter let other tensors through:\n%s", out)
	}
}

// Every broken input ends with exit 1 and one line naming the file.
func TestInspectBadInputs(t *testing.T) {
	for _, c := range testckpt.BadCases() {
		t.Run(c.Path, func(t *testing.T) {
			code, out, errOut := run(t, "inspect", filepath.Join(testdata, "bad", c.Path))
			if code != 1 {
				t.Errorf("exit code %d, want 1", code)
			}
			if out != "" {
				t.Errorf("wrote to stdout: %q", out)
			}
			lines := strings.Split(strings.TrimSpace(errOut), "\n")
			if len(lines) != 1 || !strings.HasPrefix(lines[0], "dcdit: ") {
				t.Errorf("stderr is not one 'dcdit: ' line: %q", errOut)
			}
			if !strings.Contains(errOut, filepath.Base(c.Path)) || strings.Contains(errOut, "goroutine") || strings.Contains(errOut, "internal error") {
				t.Errorf("stderr = %q", errOut)
			}
		})
	}
}

func TestUsageErrors(t *testing.T) {
	cases := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"inspect"}, 2, "inspect takes 1 argument(s), the checkpoint PATH; got 0"},
		{[]string{"inspect", "--bogus", "x"}, 2, "unknown flag: --bogus"},
		{[]string{"inspect", "--filter", "(", filepath.Join(testdata, "checkpoints", "dit-original.safetensors")}, 2, "--filter"},
		{[]string{"inspect", "/nonexistent/model.safetensors"}, 1, "/nonexistent/model.safetensors"},
		{[]string{"frobnicate"}, 2, `unknown command "frobnicate"`},
		{[]string{"version", "extra"}, 2, "version takes 0 argument(s)"},
	}
	for _, c := range cases {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			code, _, errOut := run(t, c.args...)
			if code != c.code || !strings.Contains(errOut, c.want) {
				t.Errorf("exit %d, stderr %q; want exit %d mentioning %q", code, errOut, c.code, c.want)
			}
		})
	}
}

func TestVersionAndCompletion(t *testing.T) {
	if code, out, _ := run(t, "version"); code != 0 || !strings.HasPrefix(out, "dcdit ") {
		t.Errorf("version: exit %d, %q", code, out)
	}
	for _, shell := range []string{"bash", "zsh", "fish", "powershell"} {
		if code, out, errOut := run(t, "completion", shell); code != 0 || !strings.Contains(out, "dcdit") {
			t.Errorf("completion %s: exit %d, stderr %q", shell, code, errOut)
		}
	}
}

// inspect at full Z-Image-Turbo scale (3 shards, 24.6 GB of holes) reads
// headers only.
func BenchmarkInspectFullSizeZImage(b *testing.B) {
	dir := filepath.Join(b.TempDir(), "transformer")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	exp := arch.ExpectedZImage(testckpt.ZImageTurbo(), arch.Diffusers)
	if _, err := testckpt.WriteSparseSharded(dir, "diffusion_pytorch_model", exp, dtype.F32, 10_000_000_000); err != nil {
		b.Fatal(err)
	}
	ios, _, _, _ := iostreams.Test()
	b.ResetTimer()
	for b.Loop() {
		if code := Main([]string{"inspect", "--json", filepath.Dir(dir)}, ios); code != 0 {
			b.Fatal("inspect failed")
		}
	}
}

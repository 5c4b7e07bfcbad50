package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dcdit/dcdit/internal/testckpt"
	"github.com/dcdit/dcdit/loaders/arch"
	"github.com/dcdit/dcdit/loaders/dtype"
)

// `dcdit recipe validate|plan`: exit 0 when the recipe is sound, 1 with one
// line per problem when it is not, 2 for usage mistakes.
func TestRecipeCommandExitCodes(t *testing.T) {
	c, _ := testckpt.DiTPreset("DiT-B/2", 32)
	base := filepath.Join(t.TempDir(), "dit-b.safetensors")
	if err := testckpt.WriteSparseFile(base, arch.ExpectedDiT(c, arch.Original), dtype.F32); err != nil {
		t.Fatal(err)
	}
	recipe := filepath.Join("..", "..", "recipes", "dit-b-2-256.toml")
	cases := []struct {
		args   []string
		code   int
		stdout string // fragment
		stderr string // fragment
	}{
		{[]string{"recipe", "validate", recipe, "--base", base}, 0, "ok: dit-b-2-256", ""},
		{[]string{"recipe", "plan", recipe, "--base", base}, 0, "dc-lite-cfg", ""},
		{[]string{"recipe", "plan", recipe, "--base", base, "--json"}, 0, `"main_network"`, ""},
		{[]string{"recipe", "validate", recipe}, 1, "", "base.path: the base checkpoint ../checkpoints/DiT-B-2-256x256.pt"},
		{[]string{"recipe", "plan", recipe}, 1, "", "dcdit: " + recipe + ": 1 problem\n"},
		{[]string{"recipe", "validate"}, 2, "", "takes 1 argument"},
		{[]string{"recipe", "validate", recipe, "--json"}, 2, "", "unknown flag"},
		{[]string{"recipe", "frobnicate"}, 2, "", ""},
	}
	for i, c := range cases {
		t.Run(fmt.Sprintf("%d-%s", i, c.args[1]), func(t *testing.T) {
			code, out, errOut := run(t, c.args...)
			if code != c.code || !strings.Contains(out, c.stdout) || !strings.Contains(errOut, c.stderr) {
				t.Errorf("exit %d (want %d)\nstdout: %.400s\nstderr: %s", code, c.code, out, errOut)
			}
			if c.code == 0 && strings.Contains(strings.Join(c.args, " "), "--json") {
				var v map[string]any
				if err := json.Unmarshal([]byte(out), &v); err != nil {
					t.Errorf("--json output is not one object: %v", err)
				}
			}
		})
	}
}

// `dcdit recipe plan` on a Z-Image base (a full-size Turbo, headers
// only) prints its backbone, the DC rows and the stages, and its
// summary line.
func TestRecipePlanZImage(t *testing.T) {
	dir := t.TempDir()
	if _, err := testckpt.WriteSparseSharded(dir, "diffusion_pytorch_model", arch.ExpectedZImage(testckpt.ZImageTurbo(), arch.Diffusers), dtype.F32, 10_000_000_000); err != nil {
		t.Fatal(err)
	}
	recipe := filepath.Join(t.TempDir(), "z.toml")
	text := "[base]\npath = " + fmt.Sprintf("%q", dir) + "\nlatent_size = 128\n[diffusion]\nprocess = \"flow_matching\"\n[scaffold]\n[data]\nsource = \"shapes\"\ncaptions = true\n[[stage]]\nkind = \"distill\"\nsteps = 10\n"
	if err := os.WriteFile(recipe, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ verb, want string }{
		{"plan", "Z-Image from base: dim 3840"},
		{"plan", "captions of 128 tokens"},
		{"validate", "ok: z (" + recipe + "): upcycle Z-Image (dim 3840"},
	} {
		code, out, errOut := run(t, "recipe", c.verb, recipe)
		if code != 0 || !strings.Contains(out+errOut, c.want) {
			t.Errorf("recipe %s: exit %d\nstdout: %.600s\nstderr: %s\nwant %q", c.verb, code, out, errOut, c.want)
		}
	}
}

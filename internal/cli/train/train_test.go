package train

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dcdit/dcdit/internal/cli/iostreams"
)

const scratch = `
[model]
depth = 1
hidden_size = 32
num_heads = 2
input_size = 8
num_classes = 10
[data]
source = "shapes"
samples = 4
[[stage]]
kind = "train"
steps = 2
batch_size = 2
`

// Each command refuses the other's recipes with a line that says which
// command to use, and a broken recipe fails before any work.
func TestWrongRecipe(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "scratch.toml")
	if err := os.WriteFile(path, []byte(scratch), 0o644); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(dir, "bad.toml")
	os.WriteFile(bad, []byte(scratch+"\nlearning_rate = 1\n"), 0o644)
	tests := []struct {
		name    string
		upcycle bool
		recipe  string
		want    string
	}{
		{"upcycle from scratch", true, path, "use 'dcdit train'"},
		{"unknown key", false, bad, "learning_rate"},
		{"missing", false, filepath.Join(dir, "nope.toml"), "nope.toml"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ios, _, _, _ := iostreams.Test()
			err := Run(&Options{IO: ios, Recipe: tt.recipe, Out: filepath.Join(dir, "out"), upcycle: tt.upcycle, Quiet: true})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want %q", err, tt.want)
			}
		})
	}
}

// `dcdit train` runs a recipe and prints where the model went.
func TestTrainRuns(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "scratch.toml")
	os.WriteFile(path, []byte(scratch), 0o644)
	ios, _, out, _ := iostreams.Test()
	cmd := NewTrainCmd(ios, nil)
	cmd.SetArgs([]string{path, "--out", filepath.Join(dir, "run"), "-q"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), filepath.Join(dir, "run", "model.safetensors")) {
		t.Fatalf("output %q does not name the model", out.String())
	}
}

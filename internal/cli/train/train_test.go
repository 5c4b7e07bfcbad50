package train

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/dcdit/dcdit/dc/checkpoint"
	_ "github.com/dcdit/dcdit/families" // the pipeline opens bases through the registry
	"github.com/dcdit/dcdit/internal/cli/iostreams"
	"github.com/dcdit/dcdit/internal/testckpt"
	"github.com/dcdit/dcdit/loaders/dtype"
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

// `dcdit upcycle --graft-only` writes the grafted, untrained checkpoint
// and stops: a DiT base in memory (DC-DiT's main network), a Z-Image base
// streamed into a sharded folder; both load, record their base and
// recipe, and a second run into the same place is refused.
func TestGraftOnly(t *testing.T) {
	dir := t.TempDir()
	zbase := filepath.Join(dir, "zimage")
	if err := testckpt.WriteZImageFolder(zbase, testckpt.SmallZImageConfig(), dtype.F32, 20_000, 1); err != nil {
		t.Fatal(err)
	}
	teacher, err := filepath.Abs("../../../testdata/teacher/model.safetensors")
	if err != nil {
		t.Fatal(err)
	}
	stage := "[data]\nsource = \"shapes\"\nsamples = 16\n[[stage]]\nkind = \"distill\"\nsteps = 1\nbatch_size = 16\n"
	tests := []struct {
		name, recipe, model, kind string
		grid                      int
	}{
		{"DiT", "[base]\npath = " + strconv.Quote(teacher) + "\n[scaffold]\nnorm_groups = 8\n" + stage, "model.safetensors", checkpoint.KindHNet, 16},
		// The recipe's base.path is replaced by --base.
		{"Z-Image", "[base]\npath = \"no-such-folder\"\nlatent_size = 8\n[scaffold]\nwidth_factor = 2\nnorm_groups = 8\nencoder_init = \"patch\"\nencoder_norm = \"none\"\n[scaffold.router]\ngroups = 4\n" + stage, "model", checkpoint.KindZImage, 8},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(dir, tt.name+".toml")
			if err := os.WriteFile(path, []byte(tt.recipe), 0o644); err != nil {
				t.Fatal(err)
			}
			out := filepath.Join(dir, tt.name+"-run")
			ios, _, stdout, _ := iostreams.Test()
			cmd := NewUpcycleCmd(ios, nil)
			args := []string{path, "--graft-only", "--out", out, "-q"}
			if tt.kind == checkpoint.KindZImage {
				args = append(args, "--base", zbase)
			}
			cmd.SetArgs(args)
			if err := cmd.Execute(); err != nil {
				t.Fatal(err)
			}
			model := filepath.Join(out, tt.model)
			if !strings.Contains(stdout.String(), model) {
				t.Fatalf("output %q does not name %s", stdout.String(), model)
			}
			if _, err := os.Stat(filepath.Join(out, "stages")); err == nil {
				t.Fatal("a stage ran")
			}
			m, meta, err := checkpoint.Load(model)
			if err != nil {
				t.Fatal(err)
			}
			if meta.Backbone.Kind != tt.kind || meta.Base == nil || meta.Recipe != tt.recipe || len(meta.TrainedRhos) != 0 || m.Config.GridRows != tt.grid {
				t.Fatalf("backbone %s, base %v, trained ρ %v, grid %d: want %s, the base, the recipe, untrained, %d rows", meta.Backbone.Kind, meta.Base, meta.TrainedRhos, m.Config.GridRows, tt.kind, tt.grid)
			}
			cmd = NewUpcycleCmd(ios, nil)
			cmd.SetArgs(args)
			if err := cmd.Execute(); err == nil || !strings.Contains(err.Error(), "already exists") {
				t.Fatalf("second graft: err = %v, want a refusal", err)
			}
		})
	}
	// Training one with DDPM is refused, naming the process Z-Image takes.
	ios, _, _, _ := iostreams.Test()
	err = Run(&Options{IO: ios, Recipe: filepath.Join(dir, "Z-Image.toml"), Out: filepath.Join(dir, "train"), upcycle: true, Quiet: true, Base: zbase})
	if err == nil || !strings.Contains(err.Error(), "flow_matching") {
		t.Fatalf("training a Z-Image recipe with DDPM: err = %v, want a refusal that names flow_matching", err)
	}
	// A Z-Image recipe must size the grid.
	path := filepath.Join(dir, "nosize.toml")
	os.WriteFile(path, []byte("[base]\npath = "+strconv.Quote(zbase)+"\n[scaffold]\nnorm_groups = 8\n"+stage), 0o644)
	err = Run(&Options{IO: ios, Recipe: path, Out: filepath.Join(dir, "nosize"), upcycle: true, Quiet: true, GraftOnly: true})
	if err == nil || !strings.Contains(err.Error(), "base.latent_size") {
		t.Fatalf("err = %v, want base.latent_size named", err)
	}
}

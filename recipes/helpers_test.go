package recipes

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	_ "github.com/dcdit/dcdit/families" // the planner prices bases through the registry
	"github.com/dcdit/dcdit/internal/testckpt"
	"github.com/dcdit/dcdit/loaders/arch"
	"github.com/dcdit/dcdit/loaders/dtype"
	"github.com/dcdit/dcdit/loaders/safetensors"
)

// tinyDiT is the base checkpoint of the error tests: D = 64 gives E = 16
// and a router of 16, so the scaffold needs norm_groups 8.
func tinyDiT() *arch.DiTConfig {
	return &arch.DiTConfig{Depth: 2, HiddenSize: 64, NumHeads: 2, PatchSize: 2, InChannels: 4, InputSize: 8,
		LearnSigma: true, NumClasses: 10, MLPRatio: 4, FrequencySize: 256}
}

// writeBase writes a header-only DiT checkpoint (original naming) of c.
func writeBase(t testing.TB, path string, c *arch.DiTConfig) {
	t.Helper()
	if err := testckpt.WriteSparseFile(path, arch.ExpectedDiT(c, arch.Original), dtype.F32); err != nil {
		t.Fatal(err)
	}
}

// validRecipe is a small, valid upcycling recipe around base.safetensors.
const validRecipe = `name = "t"
seed = 1

[base]
path = "base.safetensors"

[scaffold]
norm_groups = 8

[data]
samples = 64
sampling_steps = 10

[[stage]]
kind = "distill"
steps = 10
batch_size = 16

[[stage]]
kind = "finetune"
steps = 20
batch_size = 16
rho = [0.0, 0.3, 0.6]
multi_budget_start = 5

[eval]
sampling_steps = 10
`

// recipeDir writes text as recipe.toml next to a tiny base checkpoint and
// returns the recipe's path.
func recipeDir(t testing.TB, text string) string {
	t.Helper()
	dir := t.TempDir()
	writeBase(t, filepath.Join(dir, "base.safetensors"), tinyDiT())
	p := filepath.Join(dir, "recipe.toml")
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// lineOf is the 1-based line of the n-th (1-based) occurrence of substr.
func lineOf(t testing.TB, text, substr string, n int) int {
	t.Helper()
	off := 0
	for i := 0; i < n; i++ {
		j := strings.Index(text[off:], substr)
		if j < 0 {
			t.Fatalf("%q occurs fewer than %d times in the recipe", substr, n)
		}
		off += j + len(substr)
	}
	return strings.Count(text[:off], "\n") + 1
}

// edit replaces the n-th (1-based) occurrence of old.
func edit(text, old, new string, n int) string {
	off := 0
	for i := 1; ; i++ {
		j := strings.Index(text[off:], old)
		if j < 0 {
			panic("edit: " + old + " not found")
		}
		if i == n {
			return text[:off+j] + new + text[off+j+len(old):]
		}
		off += j + len(old)
	}
}

// writeLatents writes a header-only data file with latents of shape and
// integer labels [shape[0]] unless noLabels.
func writeLatents(t testing.TB, path string, shape []int64, noLabels bool) {
	t.Helper()
	n := int64(1)
	for _, d := range shape {
		n *= d
	}
	ts := []safetensors.WriteTensor{{Name: "latents", DType: dtype.F32, Shape: shape, Data: make([]byte, 4*n)}}
	if !noLabels {
		ts = append(ts, safetensors.WriteTensor{Name: "labels", DType: dtype.I64, Shape: shape[:1], Data: make([]byte, 8*shape[0])})
	}
	if err := safetensors.Write(path, ts, nil); err != nil {
		t.Fatal(err)
	}
}

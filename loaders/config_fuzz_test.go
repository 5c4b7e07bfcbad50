package loaders

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dcdit/dcdit/loaders/arch"
)

// FuzzDiffusersConfig reads arbitrary bytes as a diffusers config.json
// (readJSONObject, as Open does for a model folder) and runs architecture
// detection with it beside the tensors of the bundled diffusers DiT and
// Z-Image checkpoints. Whatever the config says, detection must not panic
// and must not report a DiT whose latent size is outside arch's bounds
// (it sizes the position table that loading allocates).
func FuzzDiffusersConfig(f *testing.F) {
	var inputs []arch.Input
	for _, dir := range []string{"dit-diffusers", "zimage-diffusers"} {
		ck, err := Open(filepath.Join("..", "testdata", "checkpoints", dir))
		if err != nil {
			f.Fatal(err)
		}
		in := arch.Input{Metadata: ck.Metadata}
		for _, t := range ck.Tensors {
			in.Tensors = append(in.Tensors, arch.TensorMeta{Name: t.Name, DType: t.DType, Shape: t.Shape})
		}
		ck.Close()
		inputs = append(inputs, in)
		seed, err := os.ReadFile(filepath.Join("..", "testdata", "checkpoints", dir, "transformer", "config.json"))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(seed)
	}
	f.Add([]byte(`{"sample_size": 1e15, "num_attention_heads": 3, "attention_head_dim": 0}`))
	f.Add([]byte(`{"all_patch_size": [-2], "n_heads": 0, "axes_dims": [1e18]}`))
	path := filepath.Join(f.TempDir(), "config.json")
	f.Fuzz(func(t *testing.T, data []byte) {
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		cfg, err := readJSONObject(path)
		if err != nil {
			if !strings.Contains(err.Error(), path) {
				t.Fatalf("error does not name the file: %v", err)
			}
			return
		}
		for _, in := range inputs {
			in.Config = cfg
			rep := arch.Detect(in)
			if c, ok := rep.Config.(*arch.DiTConfig); ok && (c.InputSize < 0 || c.InputSize > arch.MaxInputSize) {
				t.Fatalf("detected a DiT with input_size %d, outside [0, %d]", c.InputSize, arch.MaxInputSize)
			}
			for _, w := range rep.Warnings {
				if strings.Contains(w, "\n") || len(w) > 4096 {
					t.Fatalf("warning is not one bounded line: %.200q", w)
				}
			}
		}
	})
}

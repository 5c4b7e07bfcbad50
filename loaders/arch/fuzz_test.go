package arch

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/dcdit/dcdit/loaders/safetensors"
)

// FuzzDiTConfigMetadata puts arbitrary text under the dcdit.dit_config
// metadata key of the bundled teacher's headers and runs detection (and,
// for a DiT it accepts, ValidateDiT): no panic, and every head count it
// reports either divides the hidden size or is refused by ValidateDiT.
func FuzzDiTConfigMetadata(f *testing.F) {
	file, err := safetensors.Open(filepath.Join("..", "..", "testdata", "teacher", "model.safetensors"))
	if err != nil {
		f.Fatal(err)
	}
	in := Input{Metadata: map[string]string{}}
	for _, t := range file.Tensors() {
		in.Tensors = append(in.Tensors, TensorMeta{Name: t.Name, DType: t.DType, Shape: t.Shape})
	}
	seed, ok := file.Metadata()[DiTConfigKey]
	file.Close()
	if !ok {
		f.Fatalf("the teacher has no %s metadata to seed with", DiTConfigKey)
	}
	f.Add(seed)
	f.Add(strings.Replace(seed, `"num_heads":`, `"num_heads":3,"x":`, 1))
	f.Add(`{"num_heads": 3}`)
	f.Add(`{"num_heads": -1, "depth": 100000}`)
	f.Add(`[]`)
	f.Fuzz(func(t *testing.T, text string) {
		in := in
		in.Metadata = map[string]string{DiTConfigKey: text}
		rep := Detect(in)
		c, ok := rep.Config.(*DiTConfig)
		if !ok {
			t.Fatalf("the teacher's tensors are detected as %T", rep.Config)
		}
		if err := c.Validate(); err == nil {
			if c.NumHeads < 1 || c.HiddenSize%c.NumHeads != 0 {
				t.Fatalf("Validate accepts %d heads for hidden size %d", c.NumHeads, c.HiddenSize)
			}
		} else if strings.Contains(err.Error(), "\n") || len(err.Error()) > 1024 {
			t.Fatalf("error is not one bounded line: %.200q", err)
		}
		for _, w := range rep.Warnings {
			if strings.Contains(w, "\n") || len(w) > 4096 {
				t.Fatalf("warning is not one bounded line: %.200q", w)
			}
		}
	})
}

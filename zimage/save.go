package zimage

import (
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"

	"github.com/dcdit/dcdit/loaders/arch"
	"github.com/dcdit/dcdit/loaders/atomicfile"
	"github.com/dcdit/dcdit/loaders/dtype"
	"github.com/dcdit/dcdit/loaders/safetensors"
)

// WeightsFile is the weights' file name in a folder Save writes.
const WeightsFile = "model.safetensors"

// Save writes the model as a folder at dir, atomically (an existing folder
// is replaced whole): the weights in ComfyUI's naming as one F32
// safetensors file with metadata added, and config.json in diffusers'
// keys, which Load reads for what the shapes do not tell (heads, RoPE
// axes, θ, t scale). values, when not nil, replaces the parameter arena's
// contents (an EMA of it, say).
func Save(dir string, m *Model, values []float32, metadata map[string]string) error {
	if len(m.bf16) > 0 {
		return fmt.Errorf("zimage: save %s: the model keeps %d matrices as bfloat16 outside its arena (LoadOptions.KeepBF16), for inference only; load the checkpoint without KeepBF16 to save it", dir, len(m.bf16))
	}
	if values != nil && len(values) != m.Params.Len() {
		return fmt.Errorf("zimage: save %s: %d values for %d parameters", dir, len(values), m.Params.Len())
	}
	exp := arch.ExpectedZImage(m.Config, arch.Comfy)
	var ts []safetensors.WriteTensor
	for i, name := range exp.Names() {
		lo, hi, ok := m.Params.Range(m.names + name)
		if !ok {
			return fmt.Errorf("zimage: save %s: the model lacks %q", dir, name)
		}
		v := m.Params.Data[lo:hi]
		if values != nil {
			v = values[lo:hi]
		}
		src, err := dtype.NewFloat32Reader(v, dtype.F32)
		if err != nil {
			return fmt.Errorf("zimage: save %s: %w", dir, err)
		}
		ts = append(ts, safetensors.WriteTensor{Name: name, DType: dtype.F32, Shape: exp.Shape(i), Src: src})
	}
	cfg, err := json.MarshalIndent(arch.ZImageDiffusersConfig(m.Config), "", "  ")
	if err != nil {
		return fmt.Errorf("zimage: save %s: %w", dir, err)
	}
	md := map[string]string{"format": "pt"}
	for k, v := range metadata {
		md[k] = v
	}
	err = atomicfile.WriteDir(dir, func(tmp string) error {
		if err := safetensors.Write(filepath.Join(tmp, WeightsFile), ts, md); err != nil {
			return err
		}
		return atomicfile.Write(filepath.Join(tmp, "config.json"), func(w io.Writer) error {
			_, err := w.Write(append(cfg, '\n'))
			return err
		})
	})
	if err != nil {
		return fmt.Errorf("zimage: save: %w", err)
	}
	return nil
}

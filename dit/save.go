package dit

import (
	"encoding/json"
	"fmt"

	"github.com/dcdit/dcdit/loaders/arch"
	"github.com/dcdit/dcdit/loaders/dtype"
	"github.com/dcdit/dcdit/loaders/safetensors"
)

// ConfigKey is the safetensors metadata key under which Save records the
// model config (DiT files otherwise do not store the head count); loading
// reads the head count back from it.
const ConfigKey = arch.DiTConfigKey

// Save writes the model as a safetensors file in DiT's original naming
// (pos_embed included, as facebookresearch/DiT's state_dict has it), F32,
// atomically. values, when not nil, replaces the parameter arena's
// contents (an EMA of it, say); metadata is added to the file's.
func Save(path string, m *Model, values []float32, metadata map[string]string) error {
	return SaveAs(path, m, values, metadata, dtype.F32)
}

// SaveAs is Save with the tensors stored as d: F32, BF16 or F16 (Load
// reads any of them back into float32).
func SaveAs(path string, m *Model, values []float32, metadata map[string]string, d dtype.DType) error {
	if _, err := dtype.NewFloat32Reader(nil, d); err != nil {
		return fmt.Errorf("dit: save %s: %w", path, err)
	}
	if values != nil && len(values) != m.Params.Len() {
		return fmt.Errorf("dit: save %s: %d values for %d parameters", path, len(values), m.Params.Len())
	}
	exp := arch.ExpectedDiT(m.Config, arch.Original)
	var ts []safetensors.WriteTensor
	for i, name := range exp.Names() {
		var v []float32
		if name == "pos_embed" {
			v = m.posEmbed
		} else {
			lo, hi, ok := m.Params.Range(m.names + name)
			if !ok {
				return fmt.Errorf("dit: save %s: the model lacks %q", path, name)
			}
			v = m.Params.Data[lo:hi]
			if values != nil {
				v = values[lo:hi]
			}
		}
		src, _ := dtype.NewFloat32Reader(v, d) // d was checked above
		ts = append(ts, safetensors.WriteTensor{Name: name, DType: d, Shape: exp.Shape(i), Src: src})
	}
	cfg, err := json.Marshal(m.Config)
	if err != nil {
		return err
	}
	md := map[string]string{"format": "pt", ConfigKey: string(cfg)}
	for k, v := range metadata {
		md[k] = v
	}
	if err := safetensors.Write(path, ts, md); err != nil {
		return fmt.Errorf("dit: save: %w", err)
	}
	return nil
}

package loaders

import (
	"fmt"

	"github.com/dcdit/dcdit/loaders/safetensors"
)

// Dense is one tensor decoded to float32 in row-major order: what a
// backbone's weight loader builds its parameters from.
type Dense struct {
	Shape []int
	Data  []float32
}

// ConcatRows stacks tensors along their first dimension (fusing q, k and
// v projections into one qkv matrix); one part is returned as is.
func ConcatRows(parts []*Dense) *Dense {
	if len(parts) == 1 {
		return parts[0]
	}
	shape := append([]int(nil), parts[0].Shape...)
	shape[0] = 0
	var data []float32
	for _, p := range parts {
		shape[0] += p.Shape[0]
		data = append(data, p.Data...)
	}
	return &Dense{Shape: shape, Data: data}
}

// ReadSafetensors reads every tensor of a safetensors file into float32
// (the data is copied out of the file), by name.
func ReadSafetensors(path string) (map[string]Dense, error) {
	f, err := safetensors.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string]Dense{}
	for _, info := range f.Tensors() {
		t, _ := f.Tensor(info.Name)
		v, err := t.Float32()
		if err != nil {
			return nil, fmt.Errorf("%s: tensor %q: %w", path, info.Name, err)
		}
		shape := make([]int, len(info.Shape))
		for i, d := range info.Shape {
			shape[i] = int(d)
		}
		out[info.Name] = Dense{Shape: shape, Data: append([]float32(nil), v...)}
	}
	return out, nil
}

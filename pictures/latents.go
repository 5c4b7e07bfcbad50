package pictures

import (
	"fmt"
	"math"

	"github.com/dcdit/dcdit/loaders/safetensors"
)

// LatentsKey is the tensor a latents file (`dcdit sample --out`, a data
// set) holds its samples in.
const LatentsKey = "latents"

// Latents are a file's samples, [N, C, H, W] row-major, as the models
// write them (scaled).
type Latents struct {
	N, C, H, W int
	Data       []float32
	// Metadata is the file's safetensors metadata.
	Metadata map[string]string
}

// Sample returns sample i, [C, H, W] (a view).
func (l *Latents) Sample(i int) []float32 {
	n := l.C * l.H * l.W
	return l.Data[i*n : (i+1)*n]
}

// ReadLatents reads the "latents" tensor of a safetensors file (F32, F16
// or BF16, rank 4). A non-finite value is an error naming the sample: it
// would decode to a black or garbage picture without saying why.
func ReadLatents(path string) (*Latents, error) {
	f, err := safetensors.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	t, ok := f.Tensor(LatentsKey)
	if !ok {
		return nil, fmt.Errorf("pictures: %s: no tensor %q (a latents file from `dcdit sample` or a data set holds one)", path, LatentsKey)
	}
	if len(t.Shape) != 4 {
		return nil, fmt.Errorf("pictures: %s: tensor %q has shape %v, want [N, C, H, W]", path, LatentsKey, t.Shape)
	}
	for _, d := range t.Shape {
		if d < 1 {
			return nil, fmt.Errorf("pictures: %s: tensor %q has shape %v, want every dimension ≥ 1", path, LatentsKey, t.Shape)
		}
	}
	view, err := t.Float32()
	if err != nil {
		return nil, fmt.Errorf("pictures: %s: tensor %q: %w", path, LatentsKey, err)
	}
	// F32 data may alias the file's memory map, which Close unmaps.
	data := append([]float32(nil), view...)
	l := &Latents{N: int(t.Shape[0]), C: int(t.Shape[1]), H: int(t.Shape[2]), W: int(t.Shape[3]), Data: data, Metadata: f.Metadata()}
	per := l.C * l.H * l.W
	for i, v := range data {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			return nil, fmt.Errorf("pictures: %s: tensor %q: sample %d holds %v (latents must be finite)", path, LatentsKey, i/per, v)
		}
	}
	return l, nil
}

package loaders

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

package loaders

// DecodeFloat32Chunked exposes DecodeFloat32 at a given read size, so that
// tests cross chunk boundaries on small tensors.
func (t *Tensor) DecodeFloat32Chunked(dst []float32, chunk int) error {
	return t.decodeFloat32(dst, chunk)
}

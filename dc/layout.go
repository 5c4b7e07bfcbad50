package dc

// ToTokens rearranges channel-major latents [B, C, H, W] into token-major
// rows [B·H·W, C] (token b·H·W + r·W + c, raster order): the layout of the
// scaffold's convolutions (patch size 1).
func ToTokens(x []float32, batch, channels, rows, cols int) []float32 {
	out := make([]float32, len(x))
	L := rows * cols
	for b := range batch {
		for ch := range channels {
			src := x[(b*channels+ch)*L : (b*channels+ch+1)*L]
			for l, v := range src {
				out[(b*L+l)*channels+ch] = v
			}
		}
	}
	return out
}

// FromTokens is the inverse of ToTokens: token-major [B·H·W, C] back to
// channel-major [B, C, H, W] (DiT's unpatchify with patch size 1).
func FromTokens(t []float32, batch, channels, rows, cols int) []float32 {
	out := make([]float32, len(t))
	L := rows * cols
	for b := range batch {
		for l := range L {
			for ch := range channels {
				out[(b*channels+ch)*L+l] = t[(b*L+l)*channels+ch]
			}
		}
	}
	return out
}

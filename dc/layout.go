package dc

// ToTokens rearranges channel-major latents [B, C, H, W] into the
// scaffold's cell-major rows [B·(H/p)·(W/p), C·p²]: cell b·L + r·(W/p) + c
// in raster order holds the p×p patch whose top-left latent is (r·p, c·p),
// its values ordered (channel, dy, dx) — so the first C·q·p² columns of a
// row are the first q channels. Patch size 1 is the official DC-DiT's
// token layout.
func ToTokens(x []float32, batch, channels, rows, cols, p int) []float32 {
	out := make([]float32, len(x))
	L, cr, cc, per := rows*cols, rows/p, cols/p, channels*p*p
	for b := range batch {
		for ch := range channels {
			src := x[(b*channels+ch)*L : (b*channels+ch+1)*L]
			for l, v := range src {
				r, c := l/cols, l%cols
				cell := b*cr*cc + (r/p)*cc + c/p
				out[cell*per+(ch*p+r%p)*p+c%p] = v
			}
		}
	}
	return out
}

// FromTokens is the inverse of ToTokens: cell-major [B·(H/p)·(W/p), C·p²]
// back to channel-major [B, C, H, W] (DiT's unpatchify at patch size 1).
func FromTokens(t []float32, batch, channels, rows, cols, p int) []float32 {
	out := make([]float32, len(t))
	L, cr, cc, per := rows*cols, rows/p, cols/p, channels*p*p
	for b := range batch {
		for ch := range channels {
			dst := out[(b*channels+ch)*L : (b*channels+ch+1)*L]
			for l := range dst {
				r, c := l/cols, l%cols
				cell := b*cr*cc + (r/p)*cc + c/p
				dst[l] = t[cell*per+(ch*p+r%p)*p+c%p]
			}
		}
	}
	return out
}

package shapes

// Colours reads the palette colours a latent [Channels, size, size] shows,
// as a prompt-following measure needs them from a generated sample: each
// position takes the palette colour whose latent is nearest (squared
// distance over the channels); the background is the commonest colour on
// the outermost ring of positions (a shape keeps a cell of margin), the
// foreground the commonest other colour inside it. fg is −1 when every
// position reads as the background.
func Colours(latent []float32, size int) (fg, bg int) {
	n := size * size
	nearest := func(l int) int {
		best, bestD := 0, float32(-1)
		for k, p := range paletteLatent {
			var d float32
			for c := range Channels {
				v := latent[c*n+l] - p[c]
				d += v * v
			}
			if bestD < 0 || d < bestD {
				best, bestD = k, d
			}
		}
		return best
	}
	ring, inner := make([]int, len(Palette)), make([]int, len(Palette))
	for i := range size {
		for j := range size {
			l := i*size + j
			if i == 0 || j == 0 || i == size-1 || j == size-1 {
				ring[nearest(l)]++
			} else {
				inner[nearest(l)]++
			}
		}
	}
	bg = mode(ring, -1)
	return mode(inner, bg), bg
}

// mode is the index of the largest count other than skip (ties to the
// lower index), or −1 when every other count is zero.
func mode(counts []int, skip int) int {
	best := -1
	for k, c := range counts {
		if k != skip && c > 0 && (best < 0 || c > counts[best]) {
			best = k
		}
	}
	return best
}

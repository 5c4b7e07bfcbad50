package cmdutil

import (
	"fmt"
	"strconv"
	"strings"
)

// DefaultZImageGrid is the latent grid Z-Image commands assume when none
// is given: Z-Image-Turbo's default 1024×1024 images, whose latents are
// 8× smaller.
const DefaultZImageGrid = "128x128"

// ParseGrid reads a latent grid written "HxW" (or "H×W") as two positive
// sizes.
func ParseGrid(s string) (h, w int, err error) {
	a, b, ok := strings.Cut(strings.ReplaceAll(strings.ToLower(s), "×", "x"), "x")
	if ok {
		h, err = strconv.Atoi(strings.TrimSpace(a))
		if err == nil {
			w, err = strconv.Atoi(strings.TrimSpace(b))
		}
	}
	if !ok || err != nil || h < 1 || w < 1 {
		return 0, 0, fmt.Errorf("want the latent grid as HxW, two positive integers (e.g. %s)", DefaultZImageGrid)
	}
	return h, w, nil
}

package upcycle

import (
	"fmt"

	"github.com/dcdit/dcdit/dc"
	"github.com/dcdit/dcdit/loaders/arch"
)

// zimagePatchEmbedding is Z-Image's patch embedding as EncoderPrior reads
// it: features (dy, dx, c), c fastest (zimage.Patchify).
func zimagePatchEmbedding(zc *arch.ZImageConfig, w, b []float32) PatchEmbedding {
	p, C := zc.PatchSize, zc.InChannels
	return PatchEmbedding{Patch: p, Weight: w, Bias: b, Index: func(c, dy, dx int) int { return (dy*p+dx)*C + c }}
}

// zimageScaffold is the config and initial tensors of the scaffold that
// GraftTeacher puts around a Z-Image of config zc, whose backbone widths
// are its dim and adaLN width; pe is its patch embedding, nil unless the
// encoder starts from it.
func zimageScaffold(zc *arch.ZImageConfig, pe *PatchEmbedding, s Scaffold, rows, cols int, seed uint64) (*dc.Config, map[string]dc.Tensor, error) {
	if zc.FPatchSize != 1 {
		return nil, nil, fmt.Errorf("upcycle: Z-Image with frame patches of %d: the scaffold grafts onto single-frame images (f_patch_size 1)", zc.FPatchSize)
	}
	return graftScaffold(zc.InChannels, zc.InChannels, zc.Dim, zc.AdaLNDim, pe, s, rows, cols, seed)
}

package zimage

import (
	"fmt"

	"github.com/dcdit/dcdit/loaders/arch"
)

// SeqMultiOf is the reference's SEQ_MULTI_OF: every item's image and
// caption sequences are padded to a multiple of it with learned pad tokens,
// which attend and are attended like any other token. A config may set
// another multiple (arch.ZImageConfig.SeqMultiOf).
const SeqMultiOf = arch.DefaultSeqMultiOf

// Latent is one item's latents [C, F, H, W] (channel-major, as the
// reference takes each list element).
type Latent struct {
	Data    []float32
	F, H, W int
}

// Layout is how a batch of items becomes token streams. Each item owns a
// padded image sequence (its Ft·Ht·Wt tokens, then x pad tokens up to a
// multiple of SeqMultiOf) and a padded caption sequence; the image stream
// packs the items' image sequences, the caption stream their caption
// sequences, and the unified stream, per item, [image sequence ; caption
// sequence]. Streams are packed: no item attends to another, and there is
// no batch padding.
type Layout struct {
	Grids                     [][3]int // token grid (Ft, Ht, Wt) per item (nil for Backbone's kept tokens)
	ImageLen, ImagePadded     []int    // real and padded image tokens per item
	CaptionLen, CaptionPadded []int    // real and padded caption tokens per item
	// Offsets of the streams (S+1 entries each).
	ImageOffsets, CaptionOffsets, UnifiedOffsets []int
	// ImagePos and CaptionPos are the position ids of every stream row,
	// three per row: image tokens (Lc_pad+1+f, h, w), image pad tokens
	// (0, 0, 0), caption tokens and caption pad tokens (1+k, 0, 0).
	ImagePos, CaptionPos []float64
	// UnifiedRows lists, for each row of the unified stream, its row in
	// [image stream ; caption stream].
	UnifiedRows []int
	// OutputRows lists the unified rows of the real image tokens, item by
	// item: the rows the final layer maps to patches.
	OutputRows []int
	// ImageRows and CaptionRows list, for each row of the image (caption)
	// stream, its row in [real tokens ; pad token]: real tokens are
	// embedded once and pad rows take the learned pad vector.
	ImageRows, CaptionRows []int
}

// padTo rounds n up to a multiple of m.
func padTo(n, m int) int { return n + (-n%m+m)%m }

// NewLayout plans the streams of items with the given token grids and
// caption lengths, each sequence padded to a multiple of multiple
// (arch.ZImageConfig.SeqMultiple).
func NewLayout(grids [][3]int, captionLen []int, multiple int) (*Layout, error) {
	if len(grids) != len(captionLen) {
		return nil, fmt.Errorf("zimage: %d images but %d captions", len(grids), len(captionLen))
	}
	imageLen := make([]int, len(grids))
	for s, g := range grids {
		imageLen[s] = g[0] * g[1] * g[2]
		if imageLen[s] <= 0 {
			return nil, fmt.Errorf("zimage: item %d has a token grid %v, want positive sizes", s, g)
		}
	}
	l, err := newLayout(imageLen, captionLen, multiple, multiple, func(s, i, lc int) [3]float64 {
		g := grids[s]
		f, h, w := i/(g[1]*g[2]), i/g[2]%g[1], i%g[2]
		return [3]float64{float64(lc + 1 + f), float64(h), float64(w)}
	})
	if err != nil {
		return nil, err
	}
	l.Grids = grids
	return l, nil
}

// newLayout plans the streams of items with imageLen[s] image tokens and
// captionLen[s] caption tokens each; imagePos(s, i, lc) is the position
// ids of item s's image token i, given the item's padded caption length lc
// (the first axis continues after the caption); image sequences are padded
// to multiples of imageMultiple, captions to multiples of captionMultiple.
// Grids is left nil.
func newLayout(imageLen, captionLen []int, imageMultiple, captionMultiple int, imagePos func(s, i, lc int) [3]float64) (*Layout, error) {
	if imageMultiple < 1 || captionMultiple < 1 {
		return nil, fmt.Errorf("zimage: sequences padded to multiples of %d (image) and %d (caption), want at least 1", imageMultiple, captionMultiple)
	}
	if len(imageLen) != len(captionLen) {
		return nil, fmt.Errorf("zimage: %d images but %d captions", len(imageLen), len(captionLen))
	}
	l := &Layout{CaptionLen: append([]int(nil), captionLen...)}
	l.ImageOffsets, l.CaptionOffsets, l.UnifiedOffsets = []int{0}, []int{0}, []int{0}
	realImg, realCap := 0, 0
	for s, n := range imageLen {
		if captionLen[s] < 1 {
			// The reference pads by repeating the last caption row, so an
			// empty caption has nothing to pad with.
			return nil, fmt.Errorf("zimage: item %d has an empty caption", s)
		}
		lc := padTo(captionLen[s], captionMultiple)
		lx := padTo(n, imageMultiple)
		l.ImageLen = append(l.ImageLen, n)
		l.ImagePadded = append(l.ImagePadded, lx)
		l.CaptionPadded = append(l.CaptionPadded, lc)
		for k := range lc {
			l.CaptionPos = append(l.CaptionPos, float64(1+k), 0, 0)
			if k < captionLen[s] {
				l.CaptionRows = append(l.CaptionRows, realCap+k)
			} else {
				l.CaptionRows = append(l.CaptionRows, -1)
			}
		}
		for i := range lx {
			if i < n {
				p := imagePos(s, i, lc)
				l.ImagePos = append(l.ImagePos, p[0], p[1], p[2])
				l.ImageRows = append(l.ImageRows, realImg+i)
			} else {
				l.ImagePos = append(l.ImagePos, 0, 0, 0)
				l.ImageRows = append(l.ImageRows, -1)
			}
		}
		realImg += n
		realCap += captionLen[s]
		l.ImageOffsets = append(l.ImageOffsets, l.ImageOffsets[s]+lx)
		l.CaptionOffsets = append(l.CaptionOffsets, l.CaptionOffsets[s]+lc)
		l.UnifiedOffsets = append(l.UnifiedOffsets, l.UnifiedOffsets[s]+lx+lc)
	}
	// The pad vector is the row after the real ones.
	for i, r := range l.ImageRows {
		if r < 0 {
			l.ImageRows[i] = realImg
		}
	}
	for i, r := range l.CaptionRows {
		if r < 0 {
			l.CaptionRows[i] = realCap
		}
	}
	imgRows := l.ImageOffsets[len(imageLen)]
	for s := range imageLen {
		for r := l.ImageOffsets[s]; r < l.ImageOffsets[s+1]; r++ {
			if r-l.ImageOffsets[s] < l.ImageLen[s] {
				l.OutputRows = append(l.OutputRows, len(l.UnifiedRows))
			}
			l.UnifiedRows = append(l.UnifiedRows, r)
		}
		for r := l.CaptionOffsets[s]; r < l.CaptionOffsets[s+1]; r++ {
			l.UnifiedRows = append(l.UnifiedRows, imgRows+r)
		}
	}
	return l, nil
}

// UnifiedPos returns the position ids of the unified stream's rows.
func (l *Layout) UnifiedPos() []float64 {
	all := append(append([]float64(nil), l.ImagePos...), l.CaptionPos...)
	out := make([]float64, 0, 3*len(l.UnifiedRows))
	for _, r := range l.UnifiedRows {
		out = append(out, all[3*r:3*r+3]...)
	}
	return out
}

// OutputOffsets are the offsets of the final layer's rows (the real image
// tokens of each item).
func (l *Layout) OutputOffsets() []int {
	out := []int{0}
	for s, n := range l.ImageLen {
		out = append(out, out[s]+n)
	}
	return out
}

// Grid returns the token grid of latents of F×H×W under c's patch sizes,
// or an error when they do not divide.
func Grid(c *arch.ZImageConfig, f, h, w int) ([3]int, error) {
	pf, p := c.FPatchSize, c.PatchSize
	if f <= 0 || h <= 0 || w <= 0 || f%pf != 0 || h%p != 0 || w%p != 0 {
		return [3]int{}, fmt.Errorf("zimage: latents of %d×%d×%d (F×H×W) do not split into %d×%d×%d patches", f, h, w, pf, p, p)
	}
	return [3]int{f / pf, h / p, w / p}, nil
}

// Patchify appends to dst the tokens of one item's latents x [C, F, H, W]:
// [Ft·Ht·Wt, pF·pH·pW·C] in (f, h, w) raster order, features (pf, ph, pw,
// c) with c fastest, as the reference's view/permute(1,3,5,2,4,6,0).
func Patchify(dst, x []float32, c, f, h, w, pf, p int) []float32 {
	ft, ht, wt := f/pf, h/p, w/p
	for i := range ft {
		for j := range ht {
			for k := range wt {
				for a := range pf {
					for b := range p {
						for d := range p {
							for ch := range c {
								dst = append(dst, x[((ch*f+i*pf+a)*h+j*p+b)*w+k*p+d])
							}
						}
					}
				}
			}
		}
	}
	return dst
}

// Unpatchify writes one item's token outputs tokens [Ft·Ht·Wt, pF·pH·pW·C]
// into x [C, F, H, W], the inverse of Patchify (the reference's
// view/permute(6,0,3,1,4,2,5)).
func Unpatchify(x, tokens []float32, c, f, h, w, pf, p int) {
	ft, ht, wt := f/pf, h/p, w/p
	n := 0
	for i := range ft {
		for j := range ht {
			for k := range wt {
				for a := range pf {
					for b := range p {
						for d := range p {
							for ch := range c {
								x[((ch*f+i*pf+a)*h+j*p+b)*w+k*p+d] = tokens[n]
								n++
							}
						}
					}
				}
			}
		}
	}
}

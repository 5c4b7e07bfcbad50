package pictures

import (
	"fmt"
	"path/filepath"

	"github.com/dcdit/dcdit/fid"
	"github.com/dcdit/dcdit/images"
)

// RowScorer scores the rows of an evaluation (eval.PictureScorer): each
// row's latents decoded by Codec, their FID against Ref and Inception
// Score by Scorer, and, with Dir set, the pictures saved as
// Dir/NAME.npz, a sample batch the ADM evaluator reads.
type RowScorer struct {
	Codec  *Codec
	Scorer *Scorer
	Ref    fid.Stats
	Dir    string
}

// Score implements eval.PictureScorer.
func (r *RowScorer) Score(name string, latents []float32, n, c, h, w int) (fidValue, is float64, err error) {
	pics := make([]*images.RGB, 0, n)
	produce := func(emit func(int, *images.RGB) error) error {
		return r.Codec.Decode(latents, n, c, h, w, func(i int, m *images.RGB) error {
			pics = append(pics, m)
			return emit(i, m)
		})
	}
	iw, ih := r.Codec.VAE.ImageSize(w), r.Codec.VAE.ImageSize(h)
	save := Save{}
	if r.Dir != "" {
		save.NPZ = filepath.Join(r.Dir, name+".npz")
	}
	if err := save.Stream(n, iw, ih, produce); err != nil {
		return 0, 0, err
	}
	sc := *r.Scorer
	sc.IS, sc.Progress = true, nil
	s, err := sc.Score(memorySet{name: name, pics: pics})
	if err != nil {
		return 0, 0, err
	}
	d, err := fid.FrechetDistance(s.Stats, r.Ref)
	if err != nil {
		return 0, 0, fmt.Errorf("%s: %w", name, err)
	}
	return d.FID, s.IS, nil
}

// memorySet is pictures already in memory, all of one size.
type memorySet struct {
	name string
	pics []*images.RGB
}

func (s memorySet) Len() int       { return len(s.pics) }
func (s memorySet) String() string { return s.name }

func (s memorySet) Each(max int, fn func(pix []uint8, n, h, w int) error) error {
	var buf []uint8
	for lo := 0; lo < len(s.pics); lo += max {
		hi := min(lo+max, len(s.pics))
		buf = buf[:0]
		for _, m := range s.pics[lo:hi] {
			buf = append(buf, m.Pix...)
		}
		if err := fn(buf, hi-lo, s.pics[lo].H, s.pics[lo].W); err != nil {
			return err
		}
	}
	return nil
}

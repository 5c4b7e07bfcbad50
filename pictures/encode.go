package pictures

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"strconv"
	"strings"
	"unicode"

	"github.com/dcdit/dcdit/datasets"
	"github.com/dcdit/dcdit/images"
)

// EncodeOptions configure Codec.EncodeFolder.
type EncodeOptions struct {
	// Size is the side of the square crop (ADM's center_crop_arr).
	Size int
	// NoUpscale refuses pictures smaller than the crop (ADM upscales them).
	NoUpscale bool
	// Flip adds a horizontally mirrored copy of every picture, right
	// after it.
	Flip bool
	// Sample draws each latent from the posterior (mean + std·ε, ε seeded
	// by Seed and the picture's index) instead of taking its mean.
	Sample bool
	Seed   uint64
	// Progress, when set, is called after each picture with the pictures
	// encoded and the total.
	Progress func(done, total int)
}

// DatasetName is the dcdit.dataset of encoded folders.
const DatasetName = "images/v1"

// EncodeFolder encodes every picture of f — decoded as PIL's
// convert("RGB"), centre-cropped to o.Size as ADM's center_crop_arr, read
// as 2·u/255 − 1 — into the model's scaled latents, a data set whose
// labels are f's classes (torchvision's ImageFolder order; a flat folder
// is one class) and whose captions, when f has them, are word indices
// into a vocabulary of the captions' lower-cased words.
func (c *Codec) EncodeFolder(f *images.Folder, o EncodeOptions) (*datasets.Set, error) {
	if o.Size < 1 {
		return nil, fmt.Errorf("pictures: crop size %d: want ≥ 1", o.Size)
	}
	if c.VAE.Config.InChannels != 3 {
		return nil, fmt.Errorf("pictures: the VAE encodes %d image channels, want 3 (RGB)", c.VAE.Config.InChannels)
	}
	lh, ok := c.VAE.LatentSize(o.Size)
	if !ok {
		return nil, fmt.Errorf("pictures: a %d-pixel crop is too small for the VAE (scale factor %d)", o.Size, c.VAE.Config.ScaleFactor())
	}
	copies := 1
	if o.Flip {
		copies = 2
	}
	n := len(f.Entries) * copies
	C := c.VAE.Config.LatentChannels
	per := C * lh * lh
	s := &datasets.Set{N: n, C: C, H: lh, W: lh, Latents: make([]float32, n*per), Labels: make([]int, n),
		Metadata: map[string]string{
			"dcdit.dataset": DatasetName, "dcdit.source": f.Root, "dcdit.size": strconv.Itoa(o.Size),
			"dcdit.flip": strconv.FormatBool(o.Flip), "dcdit.latents": "mean",
			"dcdit.scaling": strconv.FormatFloat(c.convention().ScalingFactor, 'g', -1, 64),
			"dcdit.shift":   strconv.FormatFloat(c.convention().ShiftFactor, 'g', -1, 64),
		}}
	if o.Sample {
		s.Metadata["dcdit.latents"] = "sample"
		s.Metadata["dcdit.seed"] = strconv.FormatUint(o.Seed, 10)
	}
	s.NumClasses, s.Classes = len(f.Classes), f.Classes
	if f.Classes == nil {
		s.NumClasses, s.Classes = 1, []string{"images"}
	}
	for _, name := range s.Classes {
		if strings.ContainsAny(name, ",\n") {
			return nil, fmt.Errorf("pictures: %s: class folder %q has a comma or a newline in its name, which the data set's class list cannot hold", f.Root, name)
		}
	}
	conv := c.convention()
	x := make([]float32, o.Size*o.Size*3)
	for i, e := range f.Entries {
		m, err := images.LoadCrop(e.Path, o.Size, images.CropOptions{NoUpscale: o.NoUpscale})
		if err != nil {
			return nil, err
		}
		for k := range copies {
			if k == 1 {
				if m, err = images.FlipH(m); err != nil {
					return nil, err
				}
			}
			idx := i*copies + k
			for p, u := range m.Pix {
				x[p] = 2*images.ToUnit(u) - 1
			}
			post, err := c.VAE.Encode(x, 1, o.Size, o.Size)
			if err != nil {
				return nil, fmt.Errorf("pictures: %s: %w", e.Path, err)
			}
			z := post.Mean
			if o.Sample {
				rng := rand.New(rand.NewPCG(o.Seed, uint64(idx)))
				eps := make([]float32, len(z))
				for j := range eps {
					eps[j] = float32(rng.NormFloat64())
				}
				if z, err = post.Sample(eps); err != nil {
					return nil, err
				}
			}
			conv.Scale(z)
			dst := s.Latents[idx*per : (idx+1)*per]
			for p := range lh * lh {
				for ch := range C {
					v := z[p*C+ch]
					if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
						return nil, fmt.Errorf("pictures: %s: the VAE encoded it to non-finite latents (its weights are broken)", e.Path)
					}
					dst[ch*lh*lh+p] = v
				}
			}
			s.Labels[idx] = max(e.Label, 0)
		}
		if o.Progress != nil {
			o.Progress(i+1, len(f.Entries))
		}
	}
	if hasCaptions(f) {
		s.Captions, s.Vocabulary = wordCaptions(f, copies)
		for i, c := range s.Captions {
			if len(c) == 0 {
				return nil, fmt.Errorf("pictures: %s: the caption of %s has no words", f.Root, f.Entries[i/copies].Rel)
			}
		}
	}
	return s, nil
}

func hasCaptions(f *images.Folder) bool {
	for _, e := range f.Entries {
		if e.Caption != "" {
			return true
		}
	}
	return false
}

// words splits a caption into lower-cased runs of letters and digits.
func words(caption string) []string {
	return strings.FieldsFunc(strings.ToLower(caption), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r)
	})
}

// wordCaptions indexes every entry's caption (repeated for its copies)
// into a sorted vocabulary of its words.
func wordCaptions(f *images.Folder, copies int) ([][]int, []string) {
	seen := map[string]bool{}
	for _, e := range f.Entries {
		for _, w := range words(e.Caption) {
			seen[w] = true
		}
	}
	vocab := make([]string, 0, len(seen))
	for w := range seen {
		vocab = append(vocab, w)
	}
	sort.Strings(vocab)
	index := make(map[string]int, len(vocab))
	for i, w := range vocab {
		index[w] = i
	}
	caps := make([][]int, 0, len(f.Entries)*copies)
	for _, e := range f.Entries {
		ws := words(e.Caption)
		c := make([]int, len(ws))
		for i, w := range ws {
			c[i] = index[w]
		}
		for range copies {
			caps = append(caps, c)
		}
	}
	return caps, vocab
}

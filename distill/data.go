package distill

import (
	"fmt"
	"math/rand/v2"
)

// Dataset is a set of training latents with their class labels, held in
// memory: Latents is [N, C, H, W] and Labels has N entries.
type Dataset struct {
	Latents []float32
	Labels  []int
	C, H, W int
	// Captions, if not nil, holds each sample's caption as vocabulary
	// indices (WithCaptions).
	Captions [][]int
	// EmptyCaption, when not nil, is the caption a sample dropped for
	// guidance takes: encoded captions laid out as rows of a feature table
	// give the empty prompt its own rows. Nil: the empty caption.
	EmptyCaption []int
	// Identity names the data in the run's fingerprint when it is cheaper
	// to say how it was made than to read it (a generator's version, seed
	// and size). Empty: a SHA-256 of the latents and labels, computed once.
	Identity string

	digest   string
	perms    map[int][]int
	permSeed uint64
}

// NewDataset checks the sizes and wraps the slices (no copy).
func NewDataset(latents []float32, labels []int, c, h, w int) (*Dataset, error) {
	n := len(labels)
	if n == 0 || c <= 0 || h <= 0 || w <= 0 {
		return nil, fmt.Errorf("distill: data set of %d samples of [%d %d %d]: want at least one sample of positive size", n, c, h, w)
	}
	if len(latents) != n*c*h*w {
		return nil, fmt.Errorf("distill: data set has %d latent values for %d labels, want %d ([%d %d %d %d])", len(latents), n, n*c*h*w, n, c, h, w)
	}
	return &Dataset{Latents: latents, Labels: labels, C: c, H: h, W: w}, nil
}

// WithCaptions attaches one caption per sample (vocabulary indices in
// [0, vocabulary), at least one word each), which the batches then carry.
func (d *Dataset) WithCaptions(caps [][]int, vocabulary int) error {
	if len(caps) != d.Len() {
		return fmt.Errorf("distill: %d captions for %d samples", len(caps), d.Len())
	}
	for i, c := range caps {
		if len(c) == 0 {
			return fmt.Errorf("distill: caption %d is empty", i)
		}
		for _, w := range c {
			if w < 0 || w >= vocabulary {
				return fmt.Errorf("distill: caption %d has word %d, outside the vocabulary of %d", i, w, vocabulary)
			}
		}
	}
	d.Captions, d.digest = caps, ""
	return nil
}

// Len is the number of samples.
func (d *Dataset) Len() int { return len(d.Labels) }

// Batch fills b (X0 [B, C, H, W], B labels and, when the data set has
// captions and b.Captions is not nil, B captions) with the samples that
// step takes: the data set is read in epochs, each in a fresh order drawn
// from (seed, epoch), and step s takes positions s·B … s·B+B−1 of that
// endless stream. The batch is a function of (seed, step) alone, so a
// resumed run reads exactly what the uninterrupted one would have. The
// captions are copies: an objective or a dropout may change them.
func (d *Dataset) Batch(b *Batch, seed uint64, step int) {
	B, n, per := len(b.Labels), d.Len(), d.C*d.H*d.W
	if d.perms == nil || d.permSeed != seed {
		d.perms, d.permSeed = map[int][]int{}, seed
	}
	for i := range B {
		k := step*B + i
		epoch, pos := k/n, k%n
		perm, ok := d.perms[epoch]
		if !ok {
			perm = rand.New(rand.NewPCG(seed, 0xe90c+uint64(epoch))).Perm(n)
			// Keep only the epochs a batch can straddle.
			clear(d.perms)
			d.perms[epoch] = perm
		}
		j := perm[pos]
		copy(b.X0[i*per:(i+1)*per], d.Latents[j*per:(j+1)*per])
		b.Labels[i] = d.Labels[j]
		if b.Captions != nil && d.Captions != nil {
			b.Captions[i] = append(b.Captions[i][:0], d.Captions[j]...)
		}
	}
}

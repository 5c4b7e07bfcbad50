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

// Len is the number of samples.
func (d *Dataset) Len() int { return len(d.Labels) }

// Batch fills x0 ([B, C, H, W]) and y (B labels) with the samples that
// step takes: the data set is read in epochs, each in a fresh order drawn
// from (seed, epoch), and step s takes positions s·B … s·B+B−1 of that
// endless stream. The batch is a function of (seed, step) alone, so a
// resumed run reads exactly what the uninterrupted one would have.
func (d *Dataset) Batch(x0 []float32, y []int, seed uint64, step int) {
	B, n, per := len(y), d.Len(), d.C*d.H*d.W
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
		copy(x0[i*per:(i+1)*per], d.Latents[j*per:(j+1)*per])
		y[i] = d.Labels[j]
	}
}

package featnet

import (
	"fmt"

	"github.com/dcdit/dcdit/datasets/shapes"
)

// FloorOptions choose the real data of DataFloor.
type FloorOptions struct {
	Num  int    // samples per half
	Seed uint64 // shapes seed (zero: DefaultHeldOutSeed)
	Size int    // latent side (zero: shapes.DefaultSize)
}

// Floor is what DataFloor measured.
type Floor struct {
	Num      int     `json:"num"` // samples per half
	Seed     uint64  `json:"seed"`
	Size     int     `json:"size"`
	FD       float64 `json:"fd"`       // between the two halves
	Accuracy float64 `json:"accuracy"` // over both halves (2·Num samples)
}

// DataFloor returns the Fréchet distance between two disjoint halves of
// real data (class-balanced shapes samples 0..Num−1 and Num..2·Num−1 of
// one seed, see RealData) and the network's accuracy on all of them. The FD of Num generated samples
// against Num real ones cannot be expected below this floor: it is what
// sampling noise alone costs at that count (FD is biased upwards at small
// counts, so compare FDs only at equal counts).
func DataFloor(net *Net, opts FloorOptions) (Floor, error) {
	if opts.Seed == 0 {
		opts.Seed = DefaultHeldOutSeed
	}
	if opts.Size == 0 {
		opts.Size = shapes.DefaultSize
	}
	if opts.Num < 2 {
		return Floor{}, fmt.Errorf("featnet: data floor: %d samples per half, want at least 2", opts.Num)
	}
	// Each half is drawn class-balanced on its own (RealData), so that the
	// floor measures within-class sampling noise rather than the luck of
	// the class counts.
	x, y, err := RealData(opts.Size, opts.Seed, opts.Num)
	if err != nil {
		return Floor{}, err
	}
	x2, y2, err := realData(opts.Size, opts.Seed, opts.Num, opts.Num)
	if err != nil {
		return Floor{}, err
	}
	x, y = append(x, x2...), append(y, y2...)
	c, s := shapes.Channels, opts.Size
	feat, err := net.Features(x, 2*opts.Num, c, s, s)
	if err != nil {
		return Floor{}, err
	}
	d := net.Dim()
	a, err := Stats(feat[:opts.Num*d], opts.Num, d)
	if err != nil {
		return Floor{}, err
	}
	b, err := Stats(feat[opts.Num*d:], opts.Num, d)
	if err != nil {
		return Floor{}, err
	}
	fd, err := Frechet(a, b)
	if err != nil {
		return Floor{}, err
	}
	acc, err := net.Accuracy(x, y, 2*opts.Num, c, s, s)
	if err != nil {
		return Floor{}, err
	}
	return Floor{Num: opts.Num, Seed: opts.Seed, Size: opts.Size, FD: fd, Accuracy: acc}, nil
}

// RealData returns n class-balanced samples of the shapes data of one seed
// at one size (latents [n, shapes.Channels, size, size] and labels; sample
// i has label i mod 10, drawn by shapes' SampleOf): the real side of an FD,
// from a seed no training used (DefaultHeldOutSeed, say).
//
// Balanced because the features cluster tightly by class: with labels
// drawn at random, the class counts of two sets of a few hundred samples
// differ by chance, and that alone moves FD more than the within-class
// differences it should see. Generated samples are drawn per class, so
// compare them with real data of the same class counts.
func RealData(size int, seed uint64, n int) (latents []float32, labels []int, err error) {
	return realData(size, seed, 0, n)
}

// realData is RealData for samples first..first+n−1.
func realData(size int, seed uint64, first, n int) (latents []float32, labels []int, err error) {
	if n < 1 {
		return nil, nil, fmt.Errorf("featnet: real data: %d samples, want ≥ 1", n)
	}
	g, err := shapes.New(size, seed)
	if err != nil {
		return nil, nil, err
	}
	k := len(shapes.Classes)
	per := shapes.Channels * size * size
	latents = make([]float32, n*per)
	labels = make([]int, n)
	for i := range n {
		s, err := g.SampleOf(first+i, (first+i)%k)
		if err != nil {
			return nil, nil, err
		}
		copy(latents[i*per:], s.Latent)
		labels[i] = s.Label
	}
	return latents, labels, nil
}

// Package shapes generates the procedural "shapes" data set: 4-channel
// latents of one flat-coloured shape on a flat background, with sharp
// edges — the kind of content DC-DiT's router should compress (flat
// regions) and keep (edges). One class per shape kind:
//
//	0 disc      1 square    2 triangle  3 ring      4 cross
//	5 diamond   6 frame     7 stripes   8 saltire   9 crescent
//
// Each sample draws, from its own PCG stream, the shape's size (radius
// 0.30–0.40 of the side), position (fully inside, one cell of margin) and
// two different colours from a 9-colour palette (red, orange, yellow,
// green, cyan, blue, magenta, white, black), each channel jittered by
// k/16, k ∈ {−2…2}. Every class has one orientation (triangles point up,
// crescents open to the right, stripes run vertically): version 1 drew
// one of 8 orientations and radii from 0.22, and a small DiT trained for
// an hour on 2 cores could not learn to draw it (docs/results.md); one
// orientation and larger shapes keep what the method needs — flat
// regions, sharp edges, ten classes that differ only in geometry — at a
// cost a toy teacher can learn. The palette's
// latent vectors render as those colours through preview.SD (the SD-VAE
// latent-to-RGB fit): they are the minimum-∞-norm solutions of the fit
// for the target RGB, so values stay in [−2, 2] with roughly unit
// variance, like VAE latents ×0.18215.
//
// Each sample can also be described in words (Caption: class and
// colour always, size, background and position by variant) over a fixed
// vocabulary whose embedding table (EmbeddingTable) stands in for a text
// encoder: the data of a text-conditioned toy model.
//
// Generation is exact integer geometry (shape membership is tested at the
// cell centres on an 8× sub-grid) and the colours are sums of float32
// constants and multiples of 1/16, so (seed, index, size) gives the same
// sample bit for bit on every machine and Go version.
package shapes

import (
	"fmt"
	"math/rand/v2"
	"strconv"

	"github.com/dcdit/dcdit/datasets"
)

// Version names the generator in data set files (dcdit.dataset); it
// changes whenever the samples for a given seed would.
const Version = "shapes/v2"

// Channels is the latent channel count (SD-VAE latents).
const Channels = 4

// MinSize is the smallest supported side length.
const MinSize = 8

// DefaultSize is the default side length (DiT's 16×16 latents of a 128 px
// image).
const DefaultSize = 16

// Classes names the classes in label order.
var Classes = []string{"disc", "square", "triangle", "ring", "cross", "diamond", "frame", "stripes", "saltire", "crescent"}

// Palette names the colours in palette order.
var Palette = []string{"red", "orange", "yellow", "green", "cyan", "blue", "magenta", "white", "black"}

// paletteLatent holds each palette colour's latent vector: the
// minimum-∞-norm x with preview.SD's map of x equal to 0.85× the target
// RGB (red (0.8, −0.6, −0.6), orange (0.8, 0.1, −0.7), yellow
// (0.7, 0.7, −0.7), green (−0.6, 0.6, −0.6), cyan (−0.6, 0.5, 0.6), blue
// (−0.5, −0.5, 0.7), magenta (0.7, −0.6, 0.6), white (0.8, 0.8, 0.8),
// black (−0.8, −0.8, −0.8)), rounded; TestPaletteRendersAsNamed checks
// the colours.
var paletteLatent = [][Channels]float32{
	{1.727, -0.934, -1.727, 0.526},  // red
	{1.119, 0.638, -1.119, 1.117},   // orange
	{0.957, 1.751, -0.215, 1.752},   // yellow
	{-0.734, 1.592, 1.592, 1.505},   // green
	{-1.354, 0.696, 1.354, -0.578},  // cyan
	{-0.543, -1.457, 0.246, -1.457}, // blue
	{1.037, -1.662, -1.662, -1.419}, // magenta
	{0.844, 0.844, -0.131, -0.341},  // white
	{-0.844, -0.844, 0.131, 0.341},  // black
}

// jitterStep is the colour jitter's unit; a power of two keeps k·step
// exact, so the sum base + k·step rounds the same everywhere.
const jitterStep = 1.0 / 16

// sub is the sub-grid resolution: geometry is integer in 1/sub cells, and
// cell (i, j) has its centre at (sub·i + sub/2, sub·j + sub/2).
const sub = 8

// Sample is one generated sample.
type Sample struct {
	Latent []float32 // [Channels, size, size]
	Label  int       // index into Classes
	// Edges marks the cells whose 4-neighbourhood holds the other region
	// (shape vs background), [size, size]: both sides of every boundary.
	Edges []bool
	// Mask marks the cells inside the shape, [size, size].
	Mask []bool
	// Background and Foreground are the palette indices used.
	Background, Foreground int
	// Radius and Centre are the shape's size and position in 1/8 cells
	// (cell (i, j) spans [8j, 8j+8) × [8i, 8i+8)): what a caption says
	// of it beyond its class and colours.
	Radius int
	Centre [2]int // x, y
	Side   int    // the grid side in 1/8 cells
}

// Generator draws samples of one size from one seed.
type Generator struct {
	Size int
	Seed uint64
}

// New returns a generator of size×size samples.
func New(size int, seed uint64) (*Generator, error) {
	if size < MinSize || size > 4096 {
		return nil, fmt.Errorf("shapes: size %d: want %d..4096", size, MinSize)
	}
	return &Generator{Size: size, Seed: seed}, nil
}

// splitmix64 is SplitMix64's finaliser, used to decorrelate the PCG seeds
// of neighbouring indices.
func splitmix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// stream draws integers from a PCG generator. Only PCG's Uint64 (a fixed
// algorithm) is used, never math/rand's derived helpers, whose streams are
// not promised to stay the same across Go versions.
type stream struct{ pcg *rand.PCG }

// intn returns a value in [0, n) (n ≥ 1; modulo bias is negligible for
// the small n used here).
func (s stream) intn(n int) int { return int(s.pcg.Uint64() % uint64(n)) }

// between returns a value in [lo, hi].
func (s stream) between(lo, hi int) int { return lo + s.intn(hi-lo+1) }

// Sample generates sample index (any index ≥ 0; training can draw
// endlessly). The label is drawn too, uniformly over Classes.
func (g *Generator) Sample(index int) Sample {
	rs := stream{rand.NewPCG(splitmix64(g.Seed), splitmix64(g.Seed^splitmix64(uint64(index)+0x632be59bd9b4e019)))}
	label := rs.intn(len(Classes))
	return g.draw(rs, label)
}

// SampleOf generates sample index with the given label (0 ≤ label <
// len(Classes)), from the same stream as Sample after its label draw.
func (g *Generator) SampleOf(index, label int) (Sample, error) {
	if label < 0 || label >= len(Classes) {
		return Sample{}, fmt.Errorf("shapes: label %d outside [0, %d)", label, len(Classes))
	}
	rs := stream{rand.NewPCG(splitmix64(g.Seed), splitmix64(g.Seed^splitmix64(uint64(index)+0x632be59bd9b4e019)))}
	rs.intn(len(Classes))
	return g.draw(rs, label), nil
}

func (g *Generator) draw(rs stream, label int) Sample {
	n := g.Size
	side := n * sub
	margin := sub
	// The largest radius leaves the margin and half a cell of room on
	// both sides, so small grids still have a valid position.
	r := rs.between(side*30/100, min(side*40/100, side/2-margin-sub/2))
	cx := rs.between(r+margin, side-r-margin)
	cy := rs.between(r+margin, side-r-margin)
	bg := rs.intn(len(Palette))
	fg := rs.intn(len(Palette) - 1)
	if fg >= bg {
		fg++
	}
	var jit [2][Channels]float32
	for k := range jit {
		for c := range Channels {
			jit[k][c] = float32(rs.between(-2, 2)) * jitterStep
		}
	}

	s := Sample{Label: label, Latent: make([]float32, Channels*n*n), Edges: make([]bool, n*n), Mask: make([]bool, n*n), Background: bg, Foreground: fg,
		Radius: r, Centre: [2]int{cx, cy}, Side: side}
	for i := range n {
		for j := range n {
			dx, dy := j*sub+sub/2-cx, i*sub+sub/2-cy
			s.Mask[i*n+j] = inside(label, dx, dy, r)
		}
	}
	for l, in := range s.Mask {
		col, k := bg, 0
		if in {
			col, k = fg, 1
		}
		for c := range Channels {
			s.Latent[c*n*n+l] = paletteLatent[col][c] + jit[k][c]
		}
	}
	EdgeMask(s.Edges, s.Mask, n, n)
	return s
}

// EdgeMask writes into edges ([h, w]) which cells have a 4-neighbour in
// the other region of mask ([h, w]); neighbours outside the grid do not
// count.
func EdgeMask(edges, mask []bool, h, w int) {
	for i := range h {
		for j := range w {
			m := mask[i*w+j]
			e := (i > 0 && mask[(i-1)*w+j] != m) || (i < h-1 && mask[(i+1)*w+j] != m) ||
				(j > 0 && mask[i*w+j-1] != m) || (j < w-1 && mask[i*w+j+1] != m)
			edges[i*w+j] = e
		}
	}
}

func abs(v int) int {
	if v < 0 {
		return -v
	}
	return v
}

// inside tests whether the offset (dx, dy) from the shape's centre (sub-grid
// units) lies in a shape of kind label and radius r.
func inside(label, dx, dy, r int) bool {
	ax, ay := abs(dx), abs(dy)
	d2 := dx*dx + dy*dy
	switch Classes[label] {
	case "disc":
		return d2 <= r*r
	case "square":
		s := r * 4 / 5
		return ax <= s && ay <= s
	case "triangle":
		// Apex at dy = −r, base at dy = 3r/4 with half-width r.
		return dy <= 3*r/4 && 7*ax <= 4*(dy+r)
	case "ring":
		in := r * 11 / 20
		return d2 <= r*r && d2 >= in*in
	case "cross":
		t := r / 3
		return (ax <= t && ay <= r) || (ay <= t && ax <= r)
	case "diamond":
		return ax+ay <= r
	case "frame":
		s, t := r*17/20, r*2/5
		m := max(ax, ay)
		return m <= s && m >= s-t
	case "stripes":
		// Five bands across a square of half-size r; the 1st, 3rd and 5th
		// are the shape.
		if ax > r || ay > r {
			return false
		}
		return ((dx+r)*5/(2*r+1))%2 == 0
	case "saltire":
		s, t := r*4/5, r*3/10
		return abs(ax-ay) <= t && max(ax, ay) <= s
	case "crescent":
		// The disc minus a disc of radius 4r/5 shifted right by r/2.
		ox, or := dx-r/2, r*4/5
		return d2 <= r*r && ox*ox+dy*dy > or*or
	}
	return false
}

// Set generates samples 0..n−1 as a data set with edge masks and the
// generator's metadata (dcdit.dataset, dcdit.seed, dcdit.size).
func (g *Generator) Set(n int) (*datasets.Set, error) {
	return g.set(n, false, false)
}

// CaptionedSet is Set with a caption per sample (Caption, the variant
// drawn per sample from the seed) over Vocabulary: the data of a
// text-conditioned model.
func (g *Generator) CaptionedSet(n int) (*datasets.Set, error) {
	return g.set(n, false, true)
}

// BalancedSet is Set with sample i drawn as class i mod len(Classes)
// (SampleOf), so every class has its share exactly: the reference for
// measures that compare class-balanced samples with the data.
func (g *Generator) BalancedSet(n int) (*datasets.Set, error) {
	return g.set(n, true, false)
}

// BalancedCaptionedSet is BalancedSet with a caption per sample, as
// CaptionedSet gives them.
func (g *Generator) BalancedCaptionedSet(n int) (*datasets.Set, error) {
	return g.set(n, true, true)
}

func (g *Generator) set(n int, balanced, captions bool) (*datasets.Set, error) {
	if n < 1 {
		return nil, fmt.Errorf("shapes: %d samples: want at least 1", n)
	}
	size := g.Size
	s := &datasets.Set{
		N: n, C: Channels, H: size, W: size,
		Latents: make([]float32, 0, n*Channels*size*size), Labels: make([]int, 0, n), Edges: make([]bool, 0, n*size*size),
		NumClasses: len(Classes), Classes: append([]string(nil), Classes...),
		Metadata: map[string]string{
			datasets.MetaDataset: Version,
			"dcdit.seed":         strconv.FormatUint(g.Seed, 10),
			"dcdit.size":         strconv.Itoa(size),
		},
	}
	for i := range n {
		smp := g.Sample(i)
		if balanced {
			// SampleOf fails only on a label outside the classes.
			smp, _ = g.SampleOf(i, i%len(Classes))
		}
		s.Latents = append(s.Latents, smp.Latent...)
		s.Labels = append(s.Labels, smp.Label)
		s.Edges = append(s.Edges, smp.Edges...)
		if captions {
			variant := int(splitmix64(g.Seed^splitmix64(uint64(i)+0x2545f4914f6cdd1d)) % CaptionVariants)
			words, err := Caption(smp, variant)
			if err != nil {
				return nil, err
			}
			toks, err := Tokens(words)
			if err != nil {
				return nil, err
			}
			s.Captions = append(s.Captions, toks)
		}
	}
	if captions {
		s.Vocabulary = append([]string(nil), Vocabulary...)
	}
	return s, nil
}

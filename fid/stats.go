// Package fid holds the statistics and the distance of the Fréchet
// Inception Distance exactly as pytorch-fid computes them: the streaming
// mean and covariance of feature vectors (np.mean, np.cov with N − 1),
// calculate_frechet_distance including its eps-offset fallback, and the
// .npz statistics files of pytorch-fid's --save-stats and of the ADM
// reference batches. The features themselves come from the Inception
// network (package inception).
package fid

import (
	"fmt"
	"math"
	"slices"

	"github.com/dcdit/dcdit/kernels/gemm"
)

// Stats are the moments of a feature set: Mu [D], Sigma [D×D] row-major
// (the unbiased covariance, N − 1), and the number N of feature vectors
// (0 when unknown, as for statistics read from a file).
type Stats struct {
	Mu    []float64
	Sigma []float64
	N     int
	D     int
}

// flushBytes sizes the Accumulator's buffer of pending rows: large enough
// that merging a batch is a GEMM of depth in the hundreds for D = 2048.
const flushBytes = 8 << 20

// Accumulator computes Stats of float32 feature vectors added in batches,
// without keeping them: pending rows are buffered in float64, and each
// full buffer is centred on its own mean, its scatter matrix added by a
// GEMM, and merged with the running moments by Chan, Golub & LeVeque's
// update (M2 += M2_b + δδᵀ·n_a·n_b/n), which is as accurate as the
// two-pass np.cov. A feature that is constant across the set keeps an
// exactly zero variance, as it has in NumPy (pytorch-fid's fallback
// depends on exact zeros).
type Accumulator struct {
	d    int
	n    int       // rows merged into mean and m2
	mean []float64 // [d]
	m2   []float64 // [d×d], upper triangle: Σ (x − mean)(x − mean)ᵀ
	buf  []float64 // pending rows
	rows int       // pending rows in buf
	bm   []float64 // scratch: the pending rows' mean
}

// NewAccumulator returns an empty Accumulator for d-dimensional features.
func NewAccumulator(d int) (*Accumulator, error) {
	if d < 1 {
		return nil, fmt.Errorf("fid: feature dimension %d, want at least 1", d)
	}
	rows := max(16, flushBytes/(8*d))
	return &Accumulator{d: d, mean: make([]float64, d), m2: make([]float64, d*d),
		buf: make([]float64, rows*d), bm: make([]float64, d)}, nil
}

// N is the number of feature vectors added so far.
func (a *Accumulator) N() int { return a.n + a.rows }

// Add adds a batch of feature vectors, row-major [rows, D].
func (a *Accumulator) Add(feats []float32) error {
	if len(feats)%a.d != 0 {
		return fmt.Errorf("fid: a batch of %d values is not a whole number of %d-dimensional features", len(feats), a.d)
	}
	for i, v := range feats {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			return fmt.Errorf("fid: feature vector %d (counting all added), element %d, is %v", a.N()+i/a.d, i%a.d, v)
		}
	}
	capRows := len(a.buf) / a.d
	for len(feats) > 0 {
		take := min(len(feats)/a.d, capRows-a.rows)
		dst := a.buf[a.rows*a.d : (a.rows+take)*a.d]
		for i, v := range feats[:take*a.d] {
			dst[i] = float64(v)
		}
		a.rows += take
		feats = feats[take*a.d:]
		if a.rows == capRows {
			a.flush()
		}
	}
	return nil
}

// flush merges the pending rows into the running moments.
func (a *Accumulator) flush() {
	b, d := a.rows, a.d
	if b == 0 {
		return
	}
	x := a.buf[:b*d]
	clear(a.bm)
	for i := range b {
		for j, v := range x[i*d : (i+1)*d] {
			a.bm[j] += v
		}
	}
	for j := range a.bm {
		a.bm[j] /= float64(b)
	}
	for i := range b {
		row := x[i*d : (i+1)*d]
		for j := range row {
			row[j] -= a.bm[j]
		}
	}
	// m2 += xᵀx over the upper triangle, one column block at a time:
	// block [j0, j1) needs rows 0…j1 only.
	const cols = 256
	for j0 := 0; j0 < d; j0 += cols {
		j1 := min(j0+cols, d)
		gemm.Gemm(true, false, j1, j1-j0, b, 1, x, d, x[j0:], d, 1, a.m2[j0:], d)
	}
	n := a.n + b
	w := float64(a.n) * float64(b) / float64(n)
	for i := range d {
		di := a.bm[i] - a.mean[i]
		if di != 0 && a.n > 0 {
			row := a.m2[i*d : (i+1)*d]
			for j := i; j < d; j++ {
				row[j] += w * di * (a.bm[j] - a.mean[j])
			}
		}
	}
	for i := range d {
		a.mean[i] += (a.bm[i] - a.mean[i]) * float64(b) / float64(n)
	}
	a.n, a.rows = n, 0
}

// Stats returns the statistics of every feature added so far, as
// np.mean(f, 0) and np.cov(f, rowvar=False); it needs at least two
// vectors. Adding more afterwards continues the same set.
func (a *Accumulator) Stats() (Stats, error) {
	if n := a.N(); n < 2 {
		return Stats{}, fmt.Errorf("fid: %d feature vectors; a covariance needs at least 2", n)
	}
	a.flush()
	d := a.d
	sigma := make([]float64, d*d)
	for i := range d {
		for j := i; j < d; j++ {
			v := a.m2[i*d+j] / float64(a.n-1)
			sigma[i*d+j], sigma[j*d+i] = v, v
		}
	}
	return Stats{Mu: slices.Clone(a.mean), Sigma: sigma, N: a.n, D: d}, nil
}

package fid

import (
	"math"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dcdit/dcdit/internal/fixtures"
	"github.com/dcdit/dcdit/loaders/dtype"
	"github.com/dcdit/dcdit/loaders/npy"
)

// twoPass is np.mean and np.cov(rowvar=False) written out: the mean, then
// the centred products.
func twoPass(x []float32, n, d int) (mu, sigma []float64) {
	mu = make([]float64, d)
	for i := range n {
		for j := range d {
			mu[j] += float64(x[i*d+j])
		}
	}
	for j := range mu {
		mu[j] /= float64(n)
	}
	sigma = make([]float64, d*d)
	for i := range n {
		for j := range d {
			cj := float64(x[i*d+j]) - mu[j]
			for k := range d {
				sigma[j*d+k] += cj * (float64(x[i*d+k]) - mu[k])
			}
		}
	}
	for i := range sigma {
		sigma[i] /= float64(n - 1)
	}
	return mu, sigma
}

// The streamed statistics equal the two-pass ones whatever the batching,
// also across buffer flushes and with a large common offset (where a
// one-pass Σx² would lose digits), and a constant feature has a variance
// of exactly zero.
func TestAccumulator(t *testing.T) {
	tests := []struct {
		name    string
		n, d    int
		batches []int
		offset  float64
	}{
		{"one batch", 50, 7, []int{50}, 0},
		{"single rows", 33, 5, []int{1}, 3},
		{"uneven", 101, 9, []int{3, 17, 1, 40}, -2},
		{"offset", 400, 6, []int{64}, 1e4},
		{"flushes", 3 * flushBytes / (8 * 256), 256, []int{1000, 7}, 1},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(i), 11))
			x := make([]float32, tt.n*tt.d)
			for r := range tt.n {
				common := rng.NormFloat64()
				for c := range tt.d {
					x[r*tt.d+c] = float32(tt.offset + common*float64(c%3) + rng.NormFloat64()*float64(1+c%4))
				}
				x[r*tt.d+1] = 0.7 // constant
			}
			acc, err := NewAccumulator(tt.d)
			if err != nil {
				t.Fatal(err)
			}
			for r, b := 0, 0; r < tt.n; b++ {
				k := min(tt.batches[b%len(tt.batches)], tt.n-r)
				if err := acc.Add(x[r*tt.d : (r+k)*tt.d]); err != nil {
					t.Fatal(err)
				}
				r += k
			}
			s, err := acc.Stats()
			if err != nil {
				t.Fatal(err)
			}
			mu, sigma := twoPass(x, tt.n, tt.d)
			if s.N != tt.n || s.D != tt.d {
				t.Errorf("N, D = %d, %d, want %d, %d", s.N, s.D, tt.n, tt.d)
			}
			if e := fixtures.RelErr(s.Mu, mu); !(e <= 1e-13) {
				t.Errorf("mu: relative error %g", e)
			}
			if e := fixtures.RelErr(s.Sigma, sigma); !(e <= 1e-12) {
				t.Errorf("sigma: relative error %g", e)
			}
			for c := range tt.d {
				if v := s.Sigma[1*tt.d+c]; v != 0 || s.Sigma[c*tt.d+1] != 0 {
					t.Fatalf("sigma[1][%d] = %v for the constant feature 1, want exactly 0", c, v)
				}
			}
			if s.Mu[1] != float64(float32(0.7)) {
				t.Errorf("mean of the constant feature %v, want %v", s.Mu[1], float32(0.7))
			}
			for r := range tt.d {
				for c := range r {
					if s.Sigma[r*tt.d+c] != s.Sigma[c*tt.d+r] {
						t.Fatalf("sigma not exactly symmetric at [%d][%d]", r, c)
					}
				}
			}
		})
	}
}

func TestAccumulatorErrors(t *testing.T) {
	if _, err := NewAccumulator(0); err == nil || !strings.Contains(err.Error(), "dimension 0") {
		t.Errorf("NewAccumulator(0): %v", err)
	}
	tests := []struct {
		name  string
		feats []float32
		want  string
	}{
		{"one vector", []float32{1, 2, 3}, "1 feature vectors; a covariance needs at least 2"},
		{"none", nil, "0 feature vectors"},
		{"ragged batch", []float32{1, 2, 3, 4}, "not a whole number of 3-dimensional features"},
		{"NaN", []float32{1, 2, 3, 4, float32(math.NaN()), 6}, "feature vector 1 (counting all added), element 1, is NaN"},
		{"Inf", []float32{1, 2, float32(math.Inf(-1))}, "element 2, is -Inf"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			acc, err := NewAccumulator(3)
			if err != nil {
				t.Fatal(err)
			}
			err = acc.Add(tt.feats)
			if err == nil {
				_, err = acc.Stats()
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %v, want one containing %q", err, tt.want)
			}
		})
	}
}

// writeNPZ writes the arrays to a stored .npz in a temporary folder.
func writeNPZ(t *testing.T, arrays map[string]*npy.Array) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "stats.npz")
	err := npy.WriteNPZ(path, false, func(w *npy.Writer) error {
		for _, name := range []string{"mu", "sigma", "mu_s", "sigma_s", "arr_0"} {
			if a, ok := arrays[name]; ok {
				if err := w.Add(name, a); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return path
}

func TestReadStats(t *testing.T) {
	mu := npy.FromFloat64([]int{2}, []float64{1, 2})
	sigma := npy.FromFloat64([]int{2, 2}, []float64{2, 0.5, 0.5, 1})
	tests := []struct {
		name   string
		arrays map[string]*npy.Array
		want   string // "" for success
	}{
		{"pytorch-fid", map[string]*npy.Array{"mu": mu, "sigma": sigma}, ""},
		{"ADM reference batch", map[string]*npy.Array{"mu": mu, "sigma": sigma,
			"mu_s": npy.FromFloat64([]int{3}, []float64{1, 2, 3}), "sigma_s": npy.FromFloat64([]int{1, 1}, []float64{1}),
			"arr_0": {DType: dtype.U8, Shape: []int{2, 2, 2, 3}, Data: make([]byte, 24)}}, ""},
		{"float32 mu", map[string]*npy.Array{"mu": npy.FromFloat32([]int{2}, []float32{1, 2}), "sigma": sigma}, `"mu" is <f4 (2,), want <f8 (D,)`},
		{"2-d mu", map[string]*npy.Array{"mu": npy.FromFloat64([]int{1, 2}, []float64{1, 2}), "sigma": sigma}, `"mu" is <f8 (1, 2), want <f8 (D,)`},
		{"sigma shape", map[string]*npy.Array{"mu": mu, "sigma": npy.FromFloat64([]int{2, 1}, []float64{1, 2})}, `"sigma" is <f8 (2, 1), want <f8 (2, 2)`},
		{"float32 sigma", map[string]*npy.Array{"mu": mu, "sigma": npy.FromFloat32([]int{2, 2}, []float32{1, 0, 0, 1})}, `"sigma" is <f4 (2, 2)`},
		{"no sigma", map[string]*npy.Array{"mu": mu}, `no array "sigma"`},
		{"NaN sigma", map[string]*npy.Array{"mu": mu, "sigma": npy.FromFloat64([]int{2, 2}, []float64{1, 0, 0, math.NaN()})}, "sigma[1][1] is NaN"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := writeNPZ(t, tt.arrays)
			s, err := ReadStats(path)
			if tt.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				if s.D != 2 || s.Mu[1] != 2 || s.Sigma[1] != 0.5 || s.N != 0 {
					t.Errorf("read %+v", s)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), path) {
				t.Errorf("error %v, want one naming %s and containing %q", err, path, tt.want)
			}
		})
	}
}

func TestWriteStatsRefusesBadStats(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.npz")
	err := WriteStats(path, Stats{Mu: []float64{1}, Sigma: []float64{1, 2}, D: 1})
	if err == nil || !strings.Contains(err.Error(), "sigma has 2 values") {
		t.Errorf("error %v", err)
	}
}

package fid

import (
	"path/filepath"
	"slices"
	"sort"
	"testing"

	"github.com/dcdit/dcdit/internal/fixtures"
)

// Tolerances of the fixture's README: statistics are float64 NumPy
// arithmetic redone in another order; distances come from an independent
// eigenvalue method (the README's measured agreement is ≤ 6e-9).
//
// The samples' covariance has rank N − 1 ≪ D: SciPy's trace also sums
// the square roots of the D×D product's round-off
// eigenvalues, about 1e-6 of it here, which FrechetDistance leaves out
// (TestFixtureSamplesTraceExact shows its value is the exact one), so that
// trace gets a bound of 1e-5; the distance stays within fidTol.
const (
	statsTol   = 1e-12
	fidTol     = 1e-6
	lowRankTol = 1e-5
	ioFile     = "io.safetensors"
)

// fidInputs are the tensors this package does not compute: the feature
// sets (inputs of the statistics) and the Inception network's tensors,
// which package inception compares; here they are only checked finite.
var fidInputs = []string{
	"feats_a", "feats_b", "*.feats_a", "*.feats_b", "samples_features",
	"images", "images299", "resized.0", "block1.0", "mixed_5d.0", "mixed_6e.0", "mixed_7c.0",
	"features", "features_d*", "features299", "logits", "logits_nobias", "logits299",
}

func cfgMap(t *testing.T, c fixtures.Case, m map[string]any, key string) map[string]any {
	t.Helper()
	v, ok := m[key].(map[string]any)
	if !ok {
		t.Fatalf("%s: config.json has no object %q", c.Dir, key)
	}
	return v
}

func cfgInt(t *testing.T, c fixtures.Case, m map[string]any, key string) int {
	t.Helper()
	v, ok := m[key].(float64)
	if !ok || v != float64(int(v)) {
		t.Fatalf("%s: config.json has no integer %q", c.Dir, key)
	}
	return int(v)
}

// statsOf accumulates the F64 feature set name ([rows, d], float32 values
// as pytorch-fid's activations) in batches of uneven size.
func statsOf(t *testing.T, io *fixtures.File, name string, rows, d int) Stats {
	t.Helper()
	if shape := io.Shape(name); len(shape) != 2 || shape[0] != int64(rows) || shape[1] != int64(d) {
		t.Fatalf("%s has shape %v, config.json says [%d, %d]", name, shape, rows, d)
	}
	f64 := io.F64(name)
	f32 := make([]float32, len(f64))
	for i, v := range f64 {
		f32[i] = float32(v)
		if float64(f32[i]) != v {
			t.Fatalf("%s[%d] = %v is not a float32 value", name, i, v)
		}
	}
	acc, err := NewAccumulator(d)
	if err != nil {
		t.Fatal(err)
	}
	for i, step := 0, 1; i < rows; i, step = i+step, step+2 {
		if err := acc.Add(f32[i*d : min(i+step, rows)*d]); err != nil {
			t.Fatal(err)
		}
	}
	s, err := acc.Stats()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func flag(b bool) []int {
	if b {
		return []int{1}
	}
	return []int{0}
}

// computeFID recomputes every Fréchet and statistics tensor of the case:
// for each of config.json's frechet_cases ("main" unprefixed, others as
// NAME.… with fid_NAME) the statistics of both feature sets, the
// zero-variance features, the distance, its trace and fallback flag; and
// for the sample batch the statistics of its stored features and the
// distance to the statistics file.
func computeFID(t *testing.T, c fixtures.Case) *fixtures.Got {
	t.Helper()
	io := c.Open(t, ioFile)
	got := fixtures.NewGot()
	cases := cfgMap(t, c, c.Config, "frechet_cases")
	names := make([]string, 0, len(cases))
	for name := range cases {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		cc := cfgMap(t, c, cases, name)
		prefix, fidName := name+".", "fid_"+name
		if name == "main" {
			prefix, fidName = "", "fid"
		}
		d := cfgInt(t, c, cc, "D")
		a := statsOf(t, io, prefix+"feats_a", cfgInt(t, c, cc, "N"), d)
		b := statsOf(t, io, prefix+"feats_b", cfgInt(t, c, cc, "M"), d)
		for side, s := range map[string]Stats{"a": a, "b": b} {
			got.F64(prefix+"mu_"+side, s.Mu, statsTol)
			got.F64(prefix+"sigma_"+side, s.Sigma, statsTol)
			if io.Has(prefix + "const_" + side) {
				got.Ints(prefix+"const_"+side, zeroVariance(s))
			}
		}
		r, err := FrechetDistance(a, b)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: FID %.17g, tr √(σ1σ2) %.17g, fallback %v", name, r.FID, r.TrCovmean, r.Fallback)
		got.F64(fidName, []float64{r.FID}, fidTol)
		got.F64(prefix+"tr_covmean", []float64{r.TrCovmean}, fidTol)
		got.Ints(prefix+"fallback", flag(r.Fallback))
	}

	shape := io.Shape("samples_features")
	if len(shape) != 2 {
		t.Fatalf("samples_features has shape %v, want [N, D]", shape)
	}
	n, d := int(shape[0]), int(shape[1])
	if sh, _ := cfgMap(t, c, c.Config, "samples")["shape"].([]any); len(sh) == 0 || sh[0] != float64(n) {
		t.Fatalf("samples_features holds %d feature vectors, config.json's sample batch has shape %v", n, sh)
	}
	acc, err := NewAccumulator(d)
	if err != nil {
		t.Fatal(err)
	}
	if err := acc.Add(io.F32("samples_features")); err != nil {
		t.Fatal(err)
	}
	s, err := acc.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if s.N != n {
		t.Fatalf("statistics of %d samples, want %d", s.N, n)
	}
	diag := make([]float64, d)
	for i := range diag {
		diag[i] = s.Sigma[i*d+i]
	}
	got.F64("samples_mu", s.Mu, statsTol)
	got.F64("samples_sigma_diag", diag, statsTol)
	statsFile, _ := cfgMap(t, c, c.Config, "stats")["file"].(string)
	ref, err := ReadStats(filepath.Join(c.Dir, statsFile))
	if err != nil {
		t.Fatal(err)
	}
	r, err := FrechetDistance(s, ref)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("samples: FID %.17g, tr √(σ1σ2) %.17g, fallback %v", r.FID, r.TrCovmean, r.Fallback)
	got.F64("fid_samples", []float64{r.FID}, fidTol)
	got.F64("samples.tr_covmean", []float64{r.TrCovmean}, lowRankTol)
	got.Ints("samples.fallback", flag(r.Fallback))
	return got
}

func compareFID(c fixtures.Case, got *fixtures.Got, logf func(string, ...any)) []error {
	return fixtures.Compare(filepath.Join(c.Dir, ioFile), fidInputs, got, logf)
}

func TestFixtureFID(t *testing.T) {
	fixtures.Run(t, "fid-inception", func(t *testing.T, c fixtures.Case) {
		fixtures.Report(t, compareFID(c, computeFID(t, c), t.Logf))
	})
}

// A corrupted expected tensor (NaN, or one element 10% off, or a flag or
// index changed) or a NaN input in a copy of the case fails the
// comparison of TestFixtureFID.
func TestFixtureFIDMutations(t *testing.T) {
	fixtures.Run(t, "fid-inception", func(t *testing.T, c fixtures.Case) {
		got := computeFID(t, c)
		fixtures.CheckMutations(t, c, ioFile, fidInputs, func(mc fixtures.Case) []error {
			return compareFID(mc, got, nil)
		})
	})
}

// stats.npz reads as config.json describes it: mu and sigma of the
// declared dimension, sigma symmetric, with positive variances and exact
// zeros off its diagonal blocks; writing it back and reading again gives
// the same bits.
func TestFixtureStatsFile(t *testing.T) {
	fixtures.Run(t, "fid-inception", func(t *testing.T, c fixtures.Case) {
		cfg := cfgMap(t, c, c.Config, "stats")
		name, _ := cfg["file"].(string)
		s, err := ReadStats(filepath.Join(c.Dir, name))
		if err != nil {
			t.Fatal(err)
		}
		d, bs := cfgInt(t, c, cfg, "dim"), cfgInt(t, c, cfg, "sigma_block_size")
		if s.D != d || len(s.Mu) != d || len(s.Sigma) != d*d {
			t.Fatalf("read D = %d (%d, %d values), config says %d", s.D, len(s.Mu), len(s.Sigma), d)
		}
		for i := range d {
			if !(s.Sigma[i*d+i] > 0) {
				t.Errorf("sigma[%d][%d] = %v, want a positive variance", i, i, s.Sigma[i*d+i])
			}
			for j := range d {
				v := s.Sigma[i*d+j]
				if v != s.Sigma[j*d+i] || (i/bs != j/bs && v != 0) {
					t.Fatalf("sigma[%d][%d] = %v, sigma[%d][%d] = %v: not symmetric block-diagonal in %d×%d blocks", i, j, v, j, i, s.Sigma[j*d+i], bs, bs)
				}
			}
		}
		path := filepath.Join(t.TempDir(), "stats.npz")
		if err := WriteStats(path, s); err != nil {
			t.Fatal(err)
		}
		back, err := ReadStats(path)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(back.Mu, s.Mu) || !slices.Equal(back.Sigma, s.Sigma) {
			t.Error("written and re-read statistics differ")
		}
	})
}

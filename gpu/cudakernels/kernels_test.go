package cudakernels

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/dcdit/dcdit/gpu/cuda"
	"github.com/dcdit/dcdit/internal/fixtures"
	cpu "github.com/dcdit/dcdit/kernels"
	"github.com/dcdit/dcdit/optim"
)

// tol bounds every kernel's error relative to the CPU reference.
const tol = 1e-5

// openKernels opens device 0 with a private kernel cache and compiles the
// kernels, or skips naming what is missing.
func openKernels(t testing.TB, cacheDir string) (*cuda.Runtime, *Set) {
	t.Helper()
	r, err := cuda.Open(cuda.Options{CacheDir: cacheDir})
	if err != nil {
		t.Skipf("no usable CUDA device: %v", err)
	}
	t.Cleanup(func() { r.Close() })
	if _, _, _, err := r.NVRTC(); err != nil {
		t.Skipf("no NVRTC: %v", err)
	}
	s, err := Load(r)
	if err != nil {
		t.Fatal(err)
	}
	return r, s
}

func randSlice(rng *rand.Rand, n int, scale, offset float64) []float32 {
	s := make([]float32, n)
	for i := range s {
		s[i] = float32(rng.NormFloat64()*scale + offset)
	}
	return s
}

func upload(t testing.TB, r *cuda.Runtime, x []float32) cuda.Buffer {
	t.Helper()
	b, err := cuda.Upload(r, x)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Free() })
	return b
}

func download(t *testing.T, b cuda.Buffer) []float32 {
	t.Helper()
	out, err := cuda.Download[float32](b)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// check compares got with want within tol and reports the error.
func check(t *testing.T, what string, got, want []float32) {
	t.Helper()
	checkTol(t, what, got, want, tol)
}

// checkTol is check with a bound other than tol (fixtures.Check, whose
// failure a device returning NaN cannot escape).
func checkTol(t *testing.T, what string, got, want []float32, bound float64) {
	t.Helper()
	if e, err := fixtures.Check(what, got, want, bound); err != nil {
		t.Error(err)
	} else {
		t.Logf("%s: relative error %.3g", what, e)
	}
}

// TestElementwise compares Add, Mul, Scale, GELU and SiLU with the CPU
// kernels over sizes that are not multiples of the block size, including
// one larger than the grid (so the grid-stride loop runs).
func TestElementwise(t *testing.T) {
	r, s := openKernels(t, testCacheDir)
	rng := rand.New(rand.NewPCG(5, 6))
	for _, n := range []int{1, 255, 1000, 1<<22 + 17} {
		a, b := randSlice(rng, n, 3, 0), randSlice(rng, n, 3, 0)
		// Activations over a wide range: saturation at both ends.
		a[0] = -30
		if n > 1 {
			a[1] = 30
		}
		da, db := upload(t, r, a), upload(t, r, b)
		y, err := r.Alloc(4 * n)
		if err != nil {
			t.Fatal(err)
		}
		defer y.Free()
		want := make([]float32, n)
		for _, tc := range []struct {
			name string
			gpu  func() error
			cpu  func()
		}{
			{"Add", func() error { return s.Add(y, da, db) }, func() { cpu.Add(want, a, b) }},
			{"Mul", func() error { return s.Mul(y, da, db) }, func() { cpu.Mul(want, a, b) }},
			{"Scale", func() error { return s.Scale(y, da, -0.37) }, func() { cpu.Scale(want, a, -0.37) }},
			{"GELU", func() error { return s.GELU(y, da) }, func() { cpu.GELUForward(want, a) }},
			{"SiLU", func() error { return s.SiLU(y, da) }, func() { cpu.SiLUForward(want, a) }},
		} {
			t.Run(fmt.Sprintf("%s/n=%d", tc.name, n), func(t *testing.T) {
				if err := tc.gpu(); err != nil {
					t.Fatal(err)
				}
				tc.cpu()
				check(t, tc.name, download(t, y), want)
			})
		}
	}
}

// layerNormRef is LayerNorm in float64, rounded once.
func layerNormRef(x []float32, rows, cols int, eps float32) []float32 {
	out := make([]float32, len(x))
	for r := 0; r < rows; r++ {
		row := x[r*cols : (r+1)*cols]
		var m, v float64
		for _, e := range row {
			m += float64(e)
		}
		m /= float64(cols)
		for _, e := range row {
			v += (float64(e) - m) * (float64(e) - m)
		}
		v /= float64(cols)
		rs := 1 / math.Sqrt(v+float64(eps))
		for i, e := range row {
			out[r*cols+i] = float32((float64(e) - m) * rs)
		}
	}
	return out
}

// TestLayerNorm compares LayerNorm (output, mean and rstd) with
// kernels.LayerNormForward, including a row width not a multiple of the
// block and one below the warp size. The ill-conditioned case (|mean| =
// 10⁴·std) is compared with a float64 reference instead: there the CPU
// kernel's own output is off by ~7e-4 (its float32 mean carries an error
// of about an ulp of 100, amplified 10⁴ times), which the GPU kernel avoids
// by working relative to the row's first element; the CPU's error is
// logged.
func TestLayerNorm(t *testing.T) {
	r, s := openKernels(t, testCacheDir)
	rng := rand.New(rand.NewPCG(7, 8))
	for _, tc := range []struct {
		rows, cols     int
		scale, offset  float64
		eps            float32
		withStatistics bool
		illConditioned bool
	}{
		{1, 1, 1, 0, 1e-6, true, false},
		{7, 20, 1, 0, 1e-6, true, false},
		{64, 1152, 2, 0.5, 1e-6, true, false},
		{33, 1000, 0.01, 100, 1e-5, true, true},
		{4096, 384, 1, 0, 1e-6, false, false},
	} {
		t.Run(fmt.Sprintf("%dx%d/offset%g", tc.rows, tc.cols, tc.offset), func(t *testing.T) {
			x := randSlice(rng, tc.rows*tc.cols, tc.scale, tc.offset)
			dx := upload(t, r, x)
			y, err := r.Alloc(4 * len(x))
			if err != nil {
				t.Fatal(err)
			}
			defer y.Free()
			var mean, rstd cuda.Buffer
			if tc.withStatistics {
				if mean, err = r.Alloc(4 * tc.rows); err != nil {
					t.Fatal(err)
				}
				defer mean.Free()
				if rstd, err = r.Alloc(4 * tc.rows); err != nil {
					t.Fatal(err)
				}
				defer rstd.Free()
			}
			if err := s.LayerNorm(y, mean, rstd, dx, tc.rows, tc.cols, tc.eps); err != nil {
				t.Fatal(err)
			}
			want := make([]float32, len(x))
			wm, wr := make([]float32, tc.rows), make([]float32, tc.rows)
			cpu.LayerNormForward(want, wm, wr, x, tc.rows, tc.cols, tc.eps)
			if tc.illConditioned {
				ref := layerNormRef(x, tc.rows, tc.cols, tc.eps)
				t.Logf("CPU kernel against float64: relative error %.3g", fixtures.RelErr(want, ref))
				check(t, "y against float64", download(t, y), ref)
			} else {
				check(t, "y", download(t, y), want)
			}
			if tc.withStatistics {
				check(t, "mean", download(t, mean), wm)
				check(t, "rstd", download(t, rstd), wr)
			}
		})
	}
}

// softmaxRef is the row softmax in float64, rounded once: the CPU package
// has no exported row softmax (attention's is internal to its kernel), so
// the reference is computed here.
func softmaxRef(x []float32, rows, cols int) []float32 {
	out := make([]float32, len(x))
	for r := 0; r < rows; r++ {
		row := x[r*cols : (r+1)*cols]
		m := math.Inf(-1)
		for _, v := range row {
			m = math.Max(m, float64(v))
		}
		var s float64
		for _, v := range row {
			s += math.Exp(float64(v) - m)
		}
		for i, v := range row {
			out[r*cols+i] = float32(math.Exp(float64(v)-m) / s)
		}
	}
	return out
}

// TestSoftmax compares Softmax with the float64 reference.
func TestSoftmax(t *testing.T) {
	r, s := openKernels(t, testCacheDir)
	rng := rand.New(rand.NewPCG(9, 10))
	for _, tc := range []struct {
		rows, cols int
		scale      float64
	}{
		{1, 1, 1}, {3, 31, 1}, {100, 257, 4}, {16, 4096, 8}, {2048, 64, 1},
	} {
		t.Run(fmt.Sprintf("%dx%d", tc.rows, tc.cols), func(t *testing.T) {
			x := randSlice(rng, tc.rows*tc.cols, tc.scale, 50) // offset: max subtraction matters
			dx := upload(t, r, x)
			if err := s.Softmax(dx, dx, tc.rows, tc.cols); err != nil { // in place
				t.Fatal(err)
			}
			check(t, "softmax", download(t, dx), softmaxRef(x, tc.rows, tc.cols))
		})
	}
}

// TestArgumentErrors checks that mismatched buffers are errors.
func TestArgumentErrors(t *testing.T) {
	r, s := openKernels(t, testCacheDir)
	a, err := r.Alloc(40)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Free()
	b, err := r.Alloc(44)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Free()
	for name, err := range map[string]error{
		"Add":       s.Add(a, a, b),
		"GELU":      s.GELU(b, a),
		"LayerNorm": s.LayerNorm(a, cuda.Buffer{}, cuda.Buffer{}, a, 3, 4, 1e-6),
		"Softmax":   s.Softmax(a, a, 2, 6),
	} {
		if err == nil {
			t.Errorf("%s with mismatched sizes: no error", name)
		}
	}
}

// TestCompileCache compiles the kernels into an empty cache (cold), loads
// them again (cached), damages the entry (recompiled and repaired), and
// logs the times.
func TestCompileCache(t *testing.T) {
	dir := t.TempDir()
	r, s := openKernels(t, dir)
	cold := s.Module()
	if cold.FromCache || cold.CacheErr != nil {
		t.Fatalf("first compile: FromCache=%v CacheErr=%v", cold.FromCache, cold.CacheErr)
	}
	s2, err := Load(r)
	if err != nil {
		t.Fatal(err)
	}
	warm := s2.Module()
	if !warm.FromCache {
		t.Errorf("second load did not come from the cache (CacheErr=%v)", warm.CacheErr)
	}
	t.Logf("target %s: cold %v (NVRTC %v), cached %v", cold.Target, cold.LoadTime, cold.CompileTime, warm.LoadTime)
	if cold.Log != "" {
		t.Logf("NVRTC log: %s", cold.Log)
	}

	files, err := filepath.Glob(filepath.Join(dir, "*.bin"))
	if err != nil || len(files) != 1 {
		t.Fatalf("cache holds %v (%v), want one entry", files, err)
	}
	if err := os.WriteFile(files[0], []byte("garbage"), 0o644); err != nil {
		t.Fatal(err)
	}
	s3, err := Load(r)
	if err != nil {
		t.Fatalf("load over a corrupt entry: %v", err)
	}
	if m := s3.Module(); m.FromCache || m.CacheErr == nil {
		t.Errorf("corrupt entry: FromCache=%v CacheErr=%v; want a recompile that reports the damage", m.FromCache, m.CacheErr)
	} else {
		t.Logf("corrupt entry recompiled: %v", m.CacheErr)
	}
	s4, err := Load(r)
	if err != nil {
		t.Fatal(err)
	}
	if !s4.Module().FromCache {
		t.Error("the entry was not repaired")
	}
	// The recompiled kernels work.
	x := []float32{1, 2, 3}
	dx := upload(t, r, x)
	if err := s3.Scale(dx, dx, 2); err != nil {
		t.Fatal(err)
	}
	if got := download(t, dx); got[2] != 6 {
		t.Errorf("Scale after recompile: %v", got)
	}
}

// TestNoDevice checks Load's error path on a runtime that cannot exist:
// with the search pointed at an empty folder, Open fails cleanly.
func TestNoDevice(t *testing.T) {
	_, err := cuda.Open(cuda.Options{LibDirs: []string{t.TempDir()}})
	var le *cuda.LoadError
	if !errors.As(err, &le) || le.Library != "libcuda" {
		t.Fatalf("Open = %v, want a libcuda *LoadError", err)
	}
}

// BenchmarkLaunch measures the host cost of one kernel launch (a
// one-element Scale) through purego, synchronising once at the end.
func BenchmarkLaunch(b *testing.B) {
	r, s := openKernels(b, testCacheDir)
	x, err := r.Alloc(4)
	if err != nil {
		b.Fatal(err)
	}
	defer x.Free()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := s.Scale(x, x, 1); err != nil {
			b.Fatal(err)
		}
	}
	if err := r.Synchronize(); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkKernels measures each kernel on a DiT-XL/2-sized activation
// (batch 32 × 256 tokens × 1152 features), in GB/s of memory traffic
// (bytes read and written once).
func BenchmarkKernels(b *testing.B) {
	r, s := openKernels(b, testCacheDir)
	const rows, cols = 32 * 256, 1152
	const n = rows * cols
	rng := rand.New(rand.NewPCG(11, 12))
	x := upload(b, r, randSlice(rng, n, 1, 0))
	z := upload(b, r, randSlice(rng, n, 1, 0))
	y, err := r.Alloc(4 * n)
	if err != nil {
		b.Fatal(err)
	}
	defer y.Free()
	w := upload(b, r, randSlice(rng, cols, 1, 1))
	vecs := upload(b, r, randSlice(rng, 32*cols, 0.1, 0)) // per-sample shift, scale, gate
	dshift, dscale := upload(b, r, make([]float32, 32*cols)), upload(b, r, make([]float32, 32*cols))
	stats := upload(b, r, make([]float32, 2*rows))
	mean, _ := stats.Slice(0, 4*rows)
	rstd, _ := stats.Slice(4*rows, 4*rows)
	offsets := make([]int, 33)
	for i := range offsets {
		offsets[i] = 256 * i
	}
	p, err := s.NewPacking(offsets)
	if err != nil {
		b.Fatal(err)
	}
	defer p.Free()
	m, v := upload(b, r, make([]float32, n)), upload(b, r, make([]float32, n))
	step := optim.NewAdamWScalars(optim.DefaultHyper(), 1)
	// GroupNorm+SiLU reads the activation as 32 images of 256 pixels ×
	// 1152 channels in 32 groups.
	for _, k := range []struct {
		name  string
		bytes int // per call
		run   func() error
	}{
		{"LayerNormBackward", 12 * n, func() error { return s.LayerNormBackward(y, z, x, mean, rstd, rows, cols) }},
		{"RMSNorm", 8 * n, func() error { return s.RMSNorm(y, rstd, x, w, rows, cols, 1e-6) }},
		{"RMSNormBackward", 12 * n, func() error { return s.RMSNormBackward(y, cuda.Buffer{}, z, x, w, rstd, rows, cols) }},
		{"GroupNormSiLU", 8 * n, func() error {
			return s.GroupNormSiLU(y, cuda.Buffer{}, cuda.Buffer{}, x, w, w, 32, 256, cols, 32, 1e-5)
		}},
		{"Modulate", 8 * n, func() error { return s.Modulate(y, x, vecs, vecs, p, cols) }},
		{"ModulateBackward", 16 * n, func() error { return s.ModulateBackward(y, dshift, dscale, z, x, vecs, p, cols) }},
		{"AdamW", 28 * n, func() error { return s.AdamW(y, x, m, v, step) }},
		{"Add", 12 * n, func() error { return s.Add(y, x, z) }},
		{"GELU", 8 * n, func() error { return s.GELU(y, x) }},
		{"SiLU", 8 * n, func() error { return s.SiLU(y, x) }},
		{"LayerNorm", 8 * n, func() error { return s.LayerNorm(y, cuda.Buffer{}, cuda.Buffer{}, x, rows, cols, 1e-6) }},
		{"Softmax", 8 * n, func() error { return s.Softmax(y, x, rows, cols) }},
	} {
		b.Run(k.name, func(b *testing.B) {
			if err := k.run(); err != nil {
				b.Fatal(err)
			}
			if err := r.Synchronize(); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			start := time.Now()
			for i := 0; i < b.N; i++ {
				if err := k.run(); err != nil {
					b.Fatal(err)
				}
			}
			if err := r.Synchronize(); err != nil {
				b.Fatal(err)
			}
			el := time.Since(start)
			b.StopTimer()
			b.ReportMetric(float64(k.bytes)*float64(b.N)/el.Seconds()/1e9, "GB/s")
		})
	}
}

// TestConcurrent runs kernels from several goroutines on one runtime (each
// goroutine's calls may land on different OS threads, so this exercises
// making the context current per call) and checks every result.
func TestConcurrent(t *testing.T) {
	r, s := openKernels(t, testCacheDir)
	const workers, iters, n = 8, 25, 10007
	errs := make(chan error, workers)
	for w := 0; w < workers; w++ {
		go func(w int) {
			errs <- func() error {
				rng := rand.New(rand.NewPCG(uint64(w), 13))
				for i := 0; i < iters; i++ {
					x := randSlice(rng, n, 2, 0)
					d, err := cuda.Upload(r, x)
					if err != nil {
						return err
					}
					err = s.GELU(d, d)
					var got []float32
					if err == nil {
						got, err = cuda.Download[float32](d)
					}
					d.Free()
					if err != nil {
						return err
					}
					want := make([]float32, n)
					cpu.GELUForward(want, x)
					if _, err := fixtures.Check("GELU", got, want, tol); err != nil {
						return fmt.Errorf("worker %d, iteration %d: %w", w, i, err)
					}
				}
				return nil
			}()
		}(w)
	}
	for w := 0; w < workers; w++ {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}

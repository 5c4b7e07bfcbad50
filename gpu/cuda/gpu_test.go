package cuda

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/dcdit/dcdit/internal/fixtures"
	"github.com/dcdit/dcdit/kernels/gemm"
)

// openGPU opens device 0 or skips the test, naming what is missing.
func openGPU(tb testing.TB) *Runtime {
	tb.Helper()
	r, err := Open(Options{CacheDir: "off"})
	if err != nil {
		var le *LoadError
		if errors.As(err, &le) {
			tb.Skipf("no CUDA driver: %v", err)
		}
		tb.Skipf("no usable CUDA device: %v", err)
	}
	tb.Cleanup(func() {
		if err := r.Close(); err != nil {
			tb.Errorf("Close: %v", err)
		}
	})
	return r
}

// blasOrSkip returns the runtime's cuBLAS handle or skips, naming the
// missing library.
func blasOrSkip(tb testing.TB, r *Runtime) *BLAS {
	tb.Helper()
	bl, err := r.BLAS()
	if err != nil {
		tb.Skipf("no cuBLAS: %v", err)
	}
	return bl
}

// TestGPUReport logs what was found: the device and the libraries' paths
// and versions (the GPU run's record of where CUDA lives).
func TestGPUReport(t *testing.T) {
	r := openGPU(t)
	d := r.Device()
	t.Logf("device %d: %s, %s, %d SMs, %.1f GiB, driver API %d, libcuda %s",
		d.Ordinal, d.Name, d.Arch(), d.Multiprocessor, float64(d.TotalMemory)/(1<<30), d.DriverVersion, r.DriverPath())
	if p, maj, min, err := r.NVRTC(); err != nil {
		t.Logf("NVRTC: %v", err)
	} else {
		t.Logf("NVRTC %d.%d: %s", maj, min, p)
	}
	if bl, err := r.BLAS(); err != nil {
		t.Logf("cuBLAS: %v", err)
	} else {
		t.Logf("cuBLAS %d: %s", bl.Version(), bl.Path())
	}
}

// TestBuffers checks allocation, the copies both ways (sync and async,
// host and device), Slice, Zero and the errors on mismatched sizes.
func TestBuffers(t *testing.T) {
	r := openGPU(t)
	const n = 1<<20 + 3
	src := make([]float32, n)
	for i := range src {
		src[i] = float32(i) * 0.5
	}
	a, err := Upload(r, src)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Free()
	b, err := r.Alloc(4 * n)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Free()
	if err := b.CopyFrom(a); err != nil {
		t.Fatal(err)
	}
	got, err := Download[float32](b)
	if err != nil {
		t.Fatal(err)
	}
	for i := range got {
		if got[i] != src[i] {
			t.Fatalf("element %d: %g after host→device→device→host, want %g", i, got[i], src[i])
		}
	}
	// Async copies on a second stream, and a slice of the buffer.
	s, err := r.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Destroy()
	tail, err := b.Slice(4*(n-3), 12)
	if err != nil {
		t.Fatal(err)
	}
	if err := CopyFromHostAsync(tail, []float32{-1, -2, -3}, s); err != nil {
		t.Fatal(err)
	}
	back := make([]float32, 3)
	if err := CopyToHostAsync(back, tail, s); err != nil {
		t.Fatal(err)
	}
	if err := s.Synchronize(); err != nil {
		t.Fatal(err)
	}
	if back[0] != -1 || back[1] != -2 || back[2] != -3 {
		t.Errorf("async round trip = %v", back)
	}
	if err := tail.Zero(); err != nil {
		t.Fatal(err)
	}
	if err := CopyToHost(back, tail); err != nil {
		t.Fatal(err)
	}
	if back[0] != 0 || back[2] != 0 {
		t.Errorf("after Zero: %v", back)
	}
	// Errors, never crashes.
	if err := CopyToHost(make([]float32, 2), tail); err == nil || !strings.Contains(err.Error(), "8 bytes, device buffer 12") {
		t.Errorf("size mismatch: err = %v", err)
	}
	if _, err := b.Slice(4*n-4, 8); err == nil {
		t.Error("Slice past the end: no error")
	}
	_, err = r.Alloc(1 << 50) // a petabyte: the driver refuses
	var ce *Error
	if !errors.As(err, &ce) || ce.Name != "CUDA_ERROR_OUT_OF_MEMORY" || ce.Library != "libcuda" {
		t.Errorf("Alloc(1 PiB): err = %v, want CUDA_ERROR_OUT_OF_MEMORY from libcuda", err)
	} else {
		t.Logf("Alloc(1 PiB) error, as expected: %v", err)
	}
}

// TestEvents checks event timing around a copy.
func TestEvents(t *testing.T) {
	r := openGPU(t)
	start, err := r.NewEvent()
	if err != nil {
		t.Fatal(err)
	}
	defer start.Destroy()
	end, err := r.NewEvent()
	if err != nil {
		t.Fatal(err)
	}
	defer end.Destroy()
	buf, err := r.Alloc(64 << 20)
	if err != nil {
		t.Fatal(err)
	}
	defer buf.Free()
	other, err := r.Alloc(64 << 20)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Free()
	if err := start.Record(r.Stream()); err != nil {
		t.Fatal(err)
	}
	if err := other.CopyFrom(buf); err != nil {
		t.Fatal(err)
	}
	if err := end.Record(r.Stream()); err != nil {
		t.Fatal(err)
	}
	if err := end.Synchronize(); err != nil {
		t.Fatal(err)
	}
	ms, err := ElapsedMs(start, end)
	if err != nil || !(ms > 0) {
		t.Fatalf("ElapsedMs = %g, %v", ms, err)
	}
	t.Logf("64 MiB device copy: %.3f ms (%.0f GB/s read+write)", ms, 2*64*(1<<20)/float64(ms)/1e6)
}

func randSlice(rng *rand.Rand, n int) []float32 {
	s := make([]float32, n)
	for i := range s {
		s[i] = float32(rng.NormFloat64())
	}
	return s
}

// toBF16 returns x rounded to bfloat16 bit patterns.
func toBF16(x []float32) []uint16 {
	out := make([]uint16, len(x))
	BF16FromFloat32(out, x)
	return out
}

// uploadAs uploads x in the storage p uses for A and B.
func uploadAs(t testing.TB, r *Runtime, p Precision, x []float32) Buffer {
	t.Helper()
	var b Buffer
	var err error
	if p == BF16 || p == BF16Out {
		b, err = Upload(r, toBF16(x))
	} else {
		b, err = Upload(r, x)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Free() })
	return b
}

// uploadC uploads C in p's output storage.
func uploadC(t testing.TB, r *Runtime, p Precision, c []float32) Buffer {
	if p == BF16Out {
		return uploadAs(t, r, BF16, c)
	}
	return uploadAs(t, r, FP32, c)
}

// downloadC reads C back as float32.
func downloadC(t testing.TB, p Precision, c Buffer) []float32 {
	t.Helper()
	if p == BF16Out {
		h, err := Download[uint16](c)
		if err != nil {
			t.Fatal(err)
		}
		out := make([]float32, len(h))
		Float32FromBF16(out, h)
		return out
	}
	out, err := Download[float32](c)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// gemmTol is each precision's bound on fixtures.RelErr against the CPU float32
// GEMM on the unrounded inputs.
var gemmTol = map[Precision]float64{FP32: 1e-5, TF32: 1e-2, BF16: 2e-2, BF16Out: 2e-2}

// TestGemmParity compares cuBLAS through BLAS.Gemm and GemmStridedBatched
// with the CPU kernel gemm.Gemm, over shapes that are not multiples of the
// tile sizes, all four transpose combinations, padded leading dimensions,
// alpha ≠ 1 and beta ≠ 0.
func TestGemmParity(t *testing.T) {
	r := openGPU(t)
	bl := blasOrSkip(t, r)
	rng := rand.New(rand.NewPCG(1, 2))
	type shape struct {
		m, n, k, pad, batch int
		alpha, beta         float32
	}
	shapes := []shape{
		{1, 1, 1, 0, 1, 1, 0},
		{17, 33, 65, 0, 1, 1, 0},
		{127, 255, 63, 3, 1, 0.5, 0.25},
		{256, 256, 256, 0, 1, 1, 1},
		{300, 129, 1000, 1, 1, 1, 0},
		{5, 1031, 7, 0, 1, -2, 0.5},
		{33, 47, 129, 2, 3, 1, 0},
		{64, 80, 96, 0, 5, 0.75, 0.5},
	}
	for _, p := range []Precision{FP32, TF32, BF16, BF16Out} {
		for _, s := range shapes {
			for _, tr := range [][2]bool{{false, false}, {true, false}, {false, true}, {true, true}} {
				ta, tb := tr[0], tr[1]
				name := fmt.Sprintf("%v/%dx%dx%d/pad%d/batch%d/tA=%v/tB=%v", p, s.m, s.n, s.k, s.pad, s.batch, ta, tb)
				t.Run(name, func(t *testing.T) {
					rowsA, colsA := s.m, s.k
					if ta {
						rowsA, colsA = s.k, s.m
					}
					rowsB, colsB := s.k, s.n
					if tb {
						rowsB, colsB = s.n, s.k
					}
					lda, ldb, ldc := colsA+s.pad, colsB+s.pad, s.n+s.pad
					sa, sb, sc := rowsA*lda+s.pad, rowsB*ldb, s.m*ldc+7
					a := randSlice(rng, s.batch*sa)
					b := randSlice(rng, s.batch*sb)
					c := randSlice(rng, s.batch*sc)
					if p == BF16Out {
						// C is read back in bfloat16: start from representable
						// values so beta·C carries no extra rounding.
						Float32FromBF16(c, toBF16(c))
					}
					want := append([]float32(nil), c...)
					for i := 0; i < s.batch; i++ {
						gemm.Gemm(ta, tb, s.m, s.n, s.k, s.alpha, a[i*sa:], lda, b[i*sb:], ldb, s.beta, want[i*sc:], ldc)
					}
					da, db, dc := uploadAs(t, r, p, a), uploadAs(t, r, p, b), uploadC(t, r, p, c)
					var err error
					if s.batch == 1 {
						err = bl.Gemm(p, ta, tb, s.m, s.n, s.k, s.alpha, da, lda, db, ldb, s.beta, dc, ldc)
					} else {
						err = bl.GemmStridedBatched(p, ta, tb, s.m, s.n, s.k, s.alpha, da, lda, int64(sa), db, ldb, int64(sb), s.beta, dc, ldc, int64(sc), s.batch)
					}
					if err != nil {
						t.Fatal(err)
					}
					got := downloadC(t, p, dc)
					// Elements of C outside the m×n windows must be untouched.
					for i := range got {
						row, col := (i%sc)/ldc, (i%sc)%ldc
						if (row >= s.m || col >= s.n) && got[i] != c[i] {
							t.Fatalf("element %d outside the product changed: %g → %g", i, c[i], got[i])
						}
					}
					e, err := fixtures.Check("C", got, want, gemmTol[p])
					if err != nil {
						t.Error(err)
					}
					if s.m*s.n*s.k >= 1<<20 && !ta && !tb {
						t.Logf("relative error %.3g (tolerance %.0g)", e, gemmTol[p])
					}
				})
			}
		}
	}
}

// TestGemmErrors checks that bad arguments are errors naming the call.
func TestGemmErrors(t *testing.T) {
	r := openGPU(t)
	bl := blasOrSkip(t, r)
	small, err := r.Alloc(16)
	if err != nil {
		t.Fatal(err)
	}
	defer small.Free()
	err = bl.Gemm(FP32, false, false, 4, 4, 4, 1, small, 4, small, 4, 0, small, 4)
	if err == nil || !strings.Contains(err.Error(), "GEMM FP32 m=4 n=4 k=4") || !strings.Contains(err.Error(), "A holds 4 elements") {
		t.Errorf("err = %v", err)
	}
	if err := bl.Gemm(Precision(9), false, false, 1, 1, 1, 1, small, 1, small, 1, 0, small, 1); err == nil {
		t.Error("unknown precision: no error")
	}
}

// BenchmarkGemm4096 measures a 4096³ product in each precision, in
// TFLOP/s (2·m·n·k per product).
func BenchmarkGemm4096(b *testing.B) {
	r := openGPU(b)
	bl := blasOrSkip(b, r)
	const n = 4096
	rng := rand.New(rand.NewPCG(3, 4))
	a := randSlice(rng, n*n)
	bm := randSlice(rng, n*n)
	for _, p := range []Precision{FP32, TF32, BF16, BF16Out} {
		b.Run(p.String(), func(b *testing.B) {
			da, db, dc := uploadAs(b, r, p, a), uploadAs(b, r, p, bm), uploadC(b, r, p, make([]float32, n*n))
			run := func() {
				if err := bl.Gemm(p, false, false, n, n, n, 1, da, n, db, n, 0, dc, n); err != nil {
					b.Fatal(err)
				}
			}
			run() // warm-up: cuBLAS picks and loads its kernel
			if err := r.Synchronize(); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			start := time.Now()
			for i := 0; i < b.N; i++ {
				run()
			}
			if err := r.Synchronize(); err != nil {
				b.Fatal(err)
			}
			el := time.Since(start)
			b.StopTimer()
			b.ReportMetric(2*float64(n)*n*n*float64(b.N)/el.Seconds()/1e12, "TFLOP/s")
		})
	}
}

package gemm

import (
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"slices"
	"testing"

	"github.com/dcdit/dcdit/loaders/dtype"
)

// bf16Func is the signature of GemmBF16.
type bf16Func func(transB bool, m, n, k int, alpha float32, a []float32, lda int, b []uint16, ldb int, beta float32, c []float32, ldc int)

// sgemmFunc is the signature of Gemm[float32].
type sgemmFunc func(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int)

// viaKernelsBF16 is viaKernels for GemmBF16.
func viaKernelsBF16(ks *kernelSet[float32], par bool) bf16Func {
	return func(tB bool, m, n, k int, alpha float32, a []float32, lda int, b []uint16, ldb int, beta float32, c []float32, ldc int) {
		gemmBF16(ks, par, tB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
	}
}

// viaTasksBF16 is viaTasks for GemmBF16.
func viaTasksBF16(ks *kernelSet[float32], workers, tasks int) bf16Func {
	return func(tB bool, m, n, k int, alpha float32, a []float32, lda int, b []uint16, ldb int, beta float32, c []float32, ldc int) {
		checkArgs(false, tB, m, n, k, len(a), lda, len(b), ldb, len(c), ldc)
		p := &args[float32]{transB: tB, m: m, n: n, k: k, alpha: alpha, beta: beta,
			a: a, bh: b, c: c, lda: lda, ldb: ldb, ldc: ldc}
		if m == 0 || n == 0 || k == 0 || alpha == 0 {
			ks.run(false, p)
			return
		}
		ks.parallel(p, workers, tasks)
	}
}

// bf16Cases are the GEMM suite's cases with A not transposed (GemmBF16
// has no transA): every tail of every tile width, m = 1, every alpha/beta
// pair, padded strides and each blocking boundary, with transB both ways.
func bf16Cases() []gemmCase {
	var out []gemmCase
	for _, tc := range cases() {
		if !tc.transA {
			out = append(out, tc)
		}
	}
	return out
}

// runBF16Case runs one product through bf and, with B widened to float32,
// through f, on the same random data, and requires the whole of C's
// guarded buffer to come out bit-identical, and A and B unchanged. f is
// checked against the float64 oracle elsewhere, so this also checks the
// result and that nothing outside C's window is written.
func runBF16Case(t *testing.T, tc gemmCase, rng *rand.Rand, bf bf16Func, f sgemmFunc) {
	t.Helper()
	_, colsA, rowsB, colsB := tc.shape()
	lda, ldb, ldc := colsA+tc.padA, colsB+tc.padB, tc.n+tc.padC
	a := randSlice[float32](rng, max(tc.m*lda, 0))
	bh := make([]uint16, max(rowsB*ldb, 0))
	for i := range bh {
		bh[i] = dtype.Float32ToBF16(float32(rng.Float64()*2 - 1))
	}
	bw := make([]float32, len(bh))
	for i, v := range bh {
		bw[i] = dtype.BF16ToFloat32(v)
	}
	cbuf := make([]float32, guardLead+tc.m*ldc+5)
	for i := range cbuf {
		cbuf[i] = guard
	}
	for i := 0; i < tc.m; i++ {
		for j := 0; j < tc.n; j++ {
			if tc.beta == 0 {
				cbuf[guardLead+i*ldc+j] = float32(math.NaN()) // must not leak into the result
			} else {
				cbuf[guardLead+i*ldc+j] = float32(rng.Float64()*2 - 1)
			}
		}
	}
	a0, bh0 := slices.Clone(a), slices.Clone(bh)
	want := slices.Clone(cbuf)
	f(false, tc.transB, tc.m, tc.n, tc.k, float32(tc.alpha), a, lda, bw, ldb, float32(tc.beta), want[guardLead:guardLead+tc.m*ldc], ldc)
	got := cbuf
	bf(tc.transB, tc.m, tc.n, tc.k, float32(tc.alpha), a, lda, bh, ldb, float32(tc.beta), got[guardLead:guardLead+tc.m*ldc], ldc)
	for i := range got {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			t.Fatalf("%v: element %d of C's buffer (C starts at %d) = %g, want %g as Gemm on the widened B",
				tc, i, guardLead, got[i], want[i])
		}
	}
	if !slices.Equal(a, a0) || !slices.Equal(bh, bh0) {
		t.Fatalf("%v: A or B was modified", tc)
	}
}

// TestGemmBF16Impls checks every implementation the CPU can run (the
// portable one included, whatever DCDIT_KERNELS selects) against its own
// float32 path on the widened B.
func TestGemmBF16Impls(t *testing.T) {
	cs := bf16Cases()
	for _, im := range sgemmImpls {
		t.Run(im.ks.name, func(t *testing.T) {
			if !im.available {
				t.Skipf("CPU lacks %s", im.ks.name)
			}
			t.Parallel()
			rng := rand.New(rand.NewPCG(21, 22))
			for i, tc := range cs {
				if raceEnabled && i%4 != 0 {
					continue
				}
				runBF16Case(t, tc, rng, viaKernelsBF16(im.ks, false), viaKernels(im.ks, false))
			}
		})
	}
}

// TestGemmBF16Parallel runs the parallel driver of every implementation
// on products large enough to split, with as many regions as workers and
// with more; run it with -race.
func TestGemmBF16Parallel(t *testing.T) {
	for _, im := range sgemmImpls {
		t.Run(im.ks.name, func(t *testing.T) {
			if !im.available {
				t.Skipf("CPU lacks %s", im.ks.name)
			}
			rng := rand.New(rand.NewPCG(23, 24))
			for i, tc := range parallelCases() {
				if tc.transA {
					continue
				}
				runBF16Case(t, tc, rng, viaKernelsBF16(im.ks, true), viaKernels(im.ks, true))
				workers, tasks := 2, 7
				if i%2 == 1 {
					workers, tasks = 3, 12
				}
				runBF16Case(t, tc, rng, viaTasksBF16(im.ks, workers, tasks), viaTasks(im.ks, workers, tasks))
			}
		})
	}
}

// TestGemmBF16Public checks the exported functions against Gemm and
// GemmSerial. Run with GEMM_TEST_CHILD set, it is the body of a child
// process started with DCDIT_KERNELS=generic, so that the public path is
// also checked with the kernels the environment forces.
func TestGemmBF16Public(t *testing.T) {
	rng := rand.New(rand.NewPCG(25, 26))
	var cs []gemmCase
	for _, tc := range parallelCases() {
		if !tc.transA {
			cs = append(cs, tc)
		}
	}
	cs = append(cs, bf16Cases()[:60]...)
	for _, tc := range cs {
		runBF16Case(t, tc, rng, GemmBF16, Gemm[float32])
		runBF16Case(t, tc, rng, GemmBF16Serial, GemmSerial[float32])
	}
	if os.Getenv("GEMM_TEST_CHILD") != "" {
		if sgemmKernels.name != os.Getenv(kernelsEnv) {
			t.Fatalf("%s=%q selected %q", kernelsEnv, os.Getenv(kernelsEnv), sgemmKernels.name)
		}
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestGemmBF16Public$")
	cmd.Env = append(os.Environ(), kernelsEnv+"=generic", "GEMM_TEST_CHILD=1")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("child with %s=generic: %v\n%s", kernelsEnv, err, out)
	}
}

// TestPackBF16AllPatterns packs a B holding every bfloat16 bit pattern
// (NaN payloads, infinities, subnormals, signed zeros) with each
// implementation's packers, both layouts, over a ragged block inside a
// larger matrix, and requires the packed floats' bits to match packB's on
// the widened B.
func TestPackBF16AllPatterns(t *testing.T) {
	const k, n = 300, 260 // k·n > 65536: every pattern occurs
	for _, im := range sgemmImpls {
		if !im.available {
			continue
		}
		ks := im.ks
		for _, trans := range []bool{false, true} {
			rows, cols := k, n
			if trans {
				rows, cols = n, k
			}
			ld := cols + 3
			bh := make([]uint16, rows*ld)
			bw := make([]float32, rows*ld)
			for i := range bh {
				bh[i] = uint16(i * 40503) // odd: cycles through all 65536 patterns
				bw[i] = dtype.BF16ToFloat32(bh[i])
			}
			for _, blk := range []struct{ p0, kb, j0, nb int }{
				{0, k, 0, n},
				{5, 257, 3, 243},       // ragged last panel, odd k
				{1, 3, 7, ks.nr - 1},   // one partial panel
				{2, 9, 1, 2*ks.nr + 5}, // k steps past packRows
			} {
				size := blk.kb*roundUp(blk.nb, ks.nr) + 4
				got, want := make([]float32, size), make([]float32, size)
				for i := range got {
					got[i], want[i] = guard, guard
				}
				ks.packB(want, trans, bw, ld, blk.p0, blk.kb, blk.j0, blk.nb, ks.nr)
				ks.packBF16(got, trans, bh, ld, blk.p0, blk.kb, blk.j0, blk.nb, ks.nr)
				for i := range got {
					if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
						t.Fatalf("%s trans=%v block %+v: packed[%d] bits %#x, want %#x",
							ks.name, trans, blk, i, math.Float32bits(got[i]), math.Float32bits(want[i]))
					}
				}
			}
		}
	}
}

func TestGemmBF16Panics(t *testing.T) {
	a, b, c := make([]float32, 12), make([]uint16, 12), make([]float32, 12)
	for _, tc := range []struct {
		name, want    string
		transB        bool
		m, n, k       int
		a             []float32
		b             []uint16
		c             []float32
		lda, ldb, ldc int
	}{
		{"m", badM, false, -1, 3, 4, a, b, c, 4, 3, 3},
		{"n", badN, false, 3, -1, 4, a, b, c, 4, 3, 3},
		{"k", badK, false, 3, 4, -1, a, b, c, 4, 3, 3},
		{"lda", badLdA, false, 3, 4, 4, a, b, c, 3, 4, 4},
		{"ldb", badLdB, false, 3, 4, 3, a, b, c, 3, 3, 4},
		{"ldbT", badLdB, true, 3, 4, 3, a, b, c, 3, 2, 4},
		{"ldc", badLdC, false, 3, 4, 3, a, b, c, 3, 4, 3},
		{"shortA", shortA, false, 3, 4, 5, a, b, make([]float32, 100), 5, 4, 4},
		{"shortB", shortB, false, 2, 4, 4, a, b, make([]float32, 100), 4, 4, 4},
		{"shortBT", shortB, true, 2, 4, 4, a, b, make([]float32, 100), 4, 4, 4},
		{"shortC", shortC, false, 3, 4, 3, a, b, c[:11], 3, 4, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, f := range []bf16Func{GemmBF16, GemmBF16Serial} {
				func() {
					defer func() {
						if r := recover(); r != tc.want {
							t.Errorf("panic %v, want %q", r, tc.want)
						}
					}()
					f(tc.transB, tc.m, tc.n, tc.k, 1, tc.a, tc.lda, tc.b, tc.ldb, 0, tc.c, tc.ldc)
				}()
			}
		})
	}
	// Empty products accept empty slices and zero strides; k = 0 scales C.
	GemmBF16(false, 0, 5, 3, 1, nil, 3, nil, 5, 0, nil, 5)
	GemmBF16(true, 4, 0, 3, 1, nil, 3, nil, 3, 0, nil, 0)
	c2 := []float32{1, 2, 3, float32(math.NaN())}
	GemmBF16(true, 2, 2, 0, 1, nil, 0, nil, 0, 0, c2, 2)
	if !slices.Equal(c2, make([]float32, 4)) {
		t.Errorf("k = 0, beta = 0 left C = %v, want zeros", c2)
	}
}

// TestGemmBF16NoAllocs checks that steady-state calls reuse the driver's
// packing buffers.
func TestGemmBF16NoAllocs(t *testing.T) {
	const m, n, k = 96, 80, 64
	a, b, c := make([]float32, m*k), make([]uint16, n*k), make([]float32, m*n)
	if got := testing.AllocsPerRun(20, func() { GemmBF16Serial(true, m, n, k, 1, a, k, b, k, 0, c, n) }); got != 0 {
		t.Errorf("GemmBF16Serial allocates %v times per call", got)
	}
}

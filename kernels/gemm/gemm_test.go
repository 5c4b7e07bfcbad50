package gemm

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"slices"
	"testing"

	"github.com/dcdit/dcdit/kernels/parallel"
)

// gemmCase is one product to check. Strides are the stored width plus the
// pad fields, so pad > 0 leaves gaps that must stay untouched.
type gemmCase struct {
	transA, transB   bool
	m, n, k          int
	alpha, beta      float64
	padA, padB, padC int
}

func (tc gemmCase) String() string {
	t := func(b bool) string {
		if b {
			return "T"
		}
		return "N"
	}
	return fmt.Sprintf("%s%s_%dx%dx%d_a%g_b%g_pad%d,%d,%d", t(tc.transA), t(tc.transB), tc.m, tc.k, tc.n,
		tc.alpha, tc.beta, tc.padA, tc.padB, tc.padC)
}

// shape returns the stored rows and columns of A and B.
func (tc gemmCase) shape() (rowsA, colsA, rowsB, colsB int) {
	rowsA, colsA = tc.m, tc.k
	if tc.transA {
		rowsA, colsA = tc.k, tc.m
	}
	rowsB, colsB = tc.k, tc.n
	if tc.transB {
		rowsB, colsB = tc.n, tc.k
	}
	return
}

// guard fills the parts of c outside the m×n window; any change to it is
// an out-of-window write.
const guard = -1234.5

// guardLead is how many guard elements precede C's first element.
const guardLead = 7

var scalars = []float64{0, 1, -0.5}

// cases returns the checked products: single-dimension sweeps over 0..70
// (covering every tail of every tile width), a small cross product of
// awkward sizes, every alpha/beta pair, padded strides, and sizes that
// cross each blocking boundary (k > kc, n > nc, m > mc).
func cases() []gemmCase {
	var out []gemmCase
	i := 0
	add := func(m, n, k int) {
		for _, tA := range []bool{false, true} {
			for _, tB := range []bool{false, true} {
				// Rotate alpha/beta and padding through the cases so the
				// sweeps exercise all of them without multiplying the count.
				ab := i % 9
				pad := i % 4
				out = append(out, gemmCase{tA, tB, m, n, k, []float64{1.5, 1, -0.5}[ab/3], scalars[ab%3],
					pad, (pad * 3) % 5, (pad * 2) % 3})
				i++
			}
		}
	}
	for s := 0; s <= 70; s++ {
		add(s, 37, 29)
		add(29, s, 37)
		add(27, 45, s)
	}
	small := []int{1, 2, 3, 5, 12, 13, 33}
	for _, m := range small {
		for _, n := range small {
			for _, k := range small {
				add(m, n, k)
			}
		}
	}
	for _, alpha := range scalars {
		for _, beta := range scalars {
			for _, tA := range []bool{false, true} {
				for _, tB := range []bool{false, true} {
					out = append(out, gemmCase{tA, tB, 19, 35, 23, alpha, beta, 2, 1, 3})
				}
			}
		}
	}
	add(53, 41, 800)  // several k blocks: beta applied once, then accumulate
	add(37, 1100, 21) // several n blocks and a ragged last one
	add(1600, 35, 19) // several m blocks
	return out
}

// runCase runs one product through f, on random data with guard-padded C,
// and checks it against naive in float64 with a k·eps error bound, the
// guards, and the inputs.
func runCase[T Float](t *testing.T, tc gemmCase, rng *rand.Rand, f func(transA, transB bool, m, n, k int, alpha T, a []T, lda int, b []T, ldb int, beta T, c []T, ldc int)) {
	t.Helper()
	rowsA, colsA, rowsB, colsB := tc.shape()
	lda, ldb, ldc := colsA+tc.padA, colsB+tc.padB, tc.n+tc.padC
	a := randSlice[T](rng, max(rowsA*lda, 0))
	b := randSlice[T](rng, max(rowsB*ldb, 0))
	cbuf := make([]T, guardLead+tc.m*ldc+5)
	for i := range cbuf {
		cbuf[i] = guard
	}
	c := cbuf[guardLead : guardLead+tc.m*ldc]
	for i := 0; i < tc.m; i++ {
		for j := 0; j < tc.n; j++ {
			if tc.beta == 0 {
				c[i*ldc+j] = T(math.NaN()) // must not leak into the result
			} else {
				c[i*ldc+j] = T(rng.Float64()*2 - 1)
			}
		}
	}
	a0, b0, c0 := slices.Clone(a), slices.Clone(b), slices.Clone(cbuf)

	f(tc.transA, tc.transB, tc.m, tc.n, tc.k, T(tc.alpha), a, lda, b, ldb, T(tc.beta), c, ldc)

	// Oracle and its error scale, both in float64.
	a64, b64, c64 := toF64(a0), toF64(b0), toF64(c0[guardLead:guardLead+len(c)])
	if tc.beta == 0 {
		clear(c64) // naive with beta = 0 ignores C too; keep NaN out of the bound
	}
	want := slices.Clone(c64)
	naive(tc.transA, tc.transB, tc.m, tc.n, tc.k, tc.alpha, a64, lda, b64, ldb, tc.beta, want, ldc)
	mag := absAll(c64)
	naive(tc.transA, tc.transB, tc.m, tc.n, tc.k, math.Abs(tc.alpha), absAll(a64), lda, absAll(b64), ldb, math.Abs(tc.beta), mag, ldc)
	eps := epsOf[T]()
	for i := 0; i < tc.m; i++ {
		for j := 0; j < tc.n; j++ {
			got, w := float64(c[i*ldc+j]), want[i*ldc+j]
			tol := 2*float64(tc.k+2)*eps*mag[i*ldc+j] + 1e-30
			if !(math.Abs(got-w) <= tol) {
				t.Fatalf("%v: c[%d,%d] = %g, want %g (tolerance %g)", tc, i, j, got, w, tol)
			}
		}
	}
	for i, v := range cbuf {
		r, col := (i-guardLead)/max(ldc, 1), (i-guardLead)%max(ldc, 1)
		inside := i >= guardLead && r < tc.m && col < tc.n
		if !inside && v != guard {
			t.Fatalf("%v: wrote %g outside C's window at offset %d", tc, v, i-guardLead)
		}
	}
	if !slices.Equal(a, a0) || !slices.Equal(b, b0) {
		t.Fatalf("%v: A or B was modified", tc)
	}
}

func randSlice[T Float](rng *rand.Rand, n int) []T {
	s := make([]T, n)
	for i := range s {
		s[i] = T(rng.Float64()*2 - 1)
	}
	return s
}

func toF64[T Float](s []T) []float64 {
	out := make([]float64, len(s))
	for i, v := range s {
		out[i] = float64(v)
	}
	return out
}

func absAll(s []float64) []float64 {
	out := make([]float64, len(s))
	for i, v := range s {
		out[i] = math.Abs(v)
	}
	return out
}

func epsOf[T Float]() float64 {
	var x T
	if _, ok := any(x).(float32); ok || float64(T(1)+T(1e-10)) == 1 {
		return 0x1p-23
	}
	return 0x1p-52
}

// viaTasks runs a product through kernel set ks in parallel over a grid of
// about tasks regions, whatever its size.
func viaTasks[E float32 | float64](ks *kernelSet[E], workers, tasks int) func(bool, bool, int, int, int, E, []E, int, []E, int, E, []E, int) {
	return func(tA, tB bool, m, n, k int, alpha E, a []E, lda int, b []E, ldb int, beta E, c []E, ldc int) {
		checkArgs(tA, tB, m, n, k, len(a), lda, len(b), ldb, len(c), ldc)
		if m == 0 || n == 0 || k == 0 || alpha == 0 {
			gemm(ks, false, tA, tB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
			return
		}
		ks.parallel(&args[E]{transA: tA, transB: tB, m: m, n: n, k: k, alpha: alpha, beta: beta,
			a: a, b: b, c: c, lda: lda, ldb: ldb, ldc: ldc}, workers, tasks)
	}
}

// viaKernels runs a product through kernel set ks directly, bypassing the
// process-wide selection, serially or in parallel.
func viaKernels[E float32 | float64](ks *kernelSet[E], par bool) func(bool, bool, int, int, int, E, []E, int, []E, int, E, []E, int) {
	return func(tA, tB bool, m, n, k int, alpha E, a []E, lda int, b []E, ldb int, beta E, c []E, ldc int) {
		checkArgs(tA, tB, m, n, k, len(a), lda, len(b), ldb, len(c), ldc)
		gemm(ks, par, tA, tB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
	}
}

// TestSgemmImpls checks every float32 implementation the CPU can run,
// whatever DCDIT_KERNELS selects for the process.
func TestSgemmImpls(t *testing.T) {
	cs := cases()
	for _, im := range sgemmImpls {
		t.Run(im.ks.name, func(t *testing.T) {
			if !im.available {
				t.Skipf("CPU lacks %s", im.ks.name)
			}
			t.Parallel()
			rng := rand.New(rand.NewPCG(1, 2))
			for i, tc := range cs {
				if raceEnabled && i%4 != 0 {
					continue
				}
				runCase(t, tc, rng, viaKernels(im.ks, false))
			}
		})
	}
}

func TestDgemm(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(3, 4))
	for i, tc := range cases() {
		if raceEnabled && i%4 != 0 {
			continue
		}
		runCase(t, tc, rng, GemmSerial[float64])
	}
}

// parallelCases are big enough to be split over workers; their shapes make
// the split go along m, along n, or both ways, with ragged edges.
func parallelCases() []gemmCase {
	var out []gemmCase
	for _, s := range [][3]int{{301, 77, 45}, {70, 517, 39}, {259, 263, 61}} {
		for i, tA := range []bool{false, true} {
			for j, tB := range []bool{false, true} {
				out = append(out, gemmCase{tA, tB, s[0], s[1], s[2], 0.75, scalars[(i+2*j)%3], i, j, 1})
			}
		}
	}
	return out
}

// TestSgemmParallel runs the parallel driver of every implementation, with
// as many regions as workers and with more; run it with -race to check
// that regions and workspaces are not shared.
func TestSgemmParallel(t *testing.T) {
	if m, n, k := 70, 517, 39; !(float64(m*n*k) >= 2*minParallelWork) {
		t.Fatalf("parallel cases too small to go parallel")
	}
	for _, im := range sgemmImpls {
		t.Run(im.ks.name, func(t *testing.T) {
			if !im.available {
				t.Skipf("CPU lacks %s", im.ks.name)
			}
			rng := rand.New(rand.NewPCG(5, 6))
			for i, tc := range parallelCases() {
				runCase(t, tc, rng, viaKernels(im.ks, true))
				if i%2 == 0 {
					runCase(t, tc, rng, viaTasks(im.ks, 2, 7))
				} else {
					runCase(t, tc, rng, viaTasks(im.ks, 3, 12))
				}
			}
		})
	}
	rng := rand.New(rand.NewPCG(9, 10))
	for _, tc := range parallelCases()[:4] {
		runCase(t, tc, rng, viaTasks(dgemmKernels, 2, 6))
	}
}

func TestGemmPublic(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, tc := range parallelCases() {
		runCase(t, tc, rng, Gemm[float32])
		runCase(t, tc, rng, GemmSerial[float32])
		runCase(t, tc, rng, Gemm[float64])
	}
	// Types defined on float32 take the same path.
	type f32 float32
	for _, tc := range cases()[:40:40] {
		runCase(t, tc, rng, Gemm[f32])
	}
}

func TestSplitGrid(t *testing.T) {
	for _, tc := range []struct{ m, n, w, tm, tn int }{
		{2048, 1152, 2, 2, 1},
		{256, 1152, 2, 1, 2},
		{2048, 384, 2, 2, 1},
		{12, 4096, 2, 1, 2},
		{4096, 32, 4, 4, 1},
		{2048, 2048, 4, 2, 2},
		{12, 32, 2, 1, 1}, // one tile: nothing to split
	} {
		tm, tn := splitGrid(tc.m, tc.n, 12, 32, tc.w)
		if tm != tc.tm || tn != tc.tn {
			t.Errorf("splitGrid(%d, %d, w=%d) = %d×%d, want %d×%d", tc.m, tc.n, tc.w, tm, tn, tc.tm, tc.tn)
		}
	}
	// Parts cover the range exactly, on tile boundaries.
	for _, n := range []int{1, 11, 12, 13, 100, 1000} {
		for parts := 1; parts <= 5; parts++ {
			next := 0
			for p := 0; p < parts; p++ {
				lo, hi := splitRange(n, 12, parts, p)
				if lo != next || hi < lo || (hi != n && hi%12 != 0) {
					t.Fatalf("splitRange(%d, 12, %d, %d) = [%d, %d), want start %d", n, parts, p, lo, hi, next)
				}
				next = hi
			}
			if next != n {
				t.Fatalf("splitRange(%d, 12, %d, ·) ends at %d", n, parts, next)
			}
		}
	}
}

func TestPanics(t *testing.T) {
	a, b, c := make([]float32, 12), make([]float32, 12), make([]float32, 12)
	for _, tc := range []struct {
		name, want     string
		transA, transB bool
		m, n, k        int
		a, b, c        []float32
		lda, ldb, ldc  int
	}{
		{"m", badM, false, false, -1, 3, 4, a, b, c, 4, 3, 3},
		{"n", badN, false, false, 3, -1, 4, a, b, c, 4, 3, 3},
		{"k", badK, false, false, 3, 4, -1, a, b, c, 4, 3, 3},
		{"lda", badLdA, false, false, 3, 4, 4, a, b, c, 3, 4, 4},
		{"ldaT", badLdA, true, false, 3, 4, 4, a, b, c, 2, 4, 4},
		{"ldb", badLdB, false, false, 3, 4, 3, a, b, c, 3, 3, 4},
		{"ldbT", badLdB, false, true, 3, 4, 3, a, b, c, 3, 2, 4},
		{"ldc", badLdC, false, false, 3, 4, 3, a, b, c, 3, 4, 3},
		{"shortA", shortA, false, false, 3, 4, 5, a, b, make([]float32, 100), 5, 4, 4},
		{"shortB", shortB, false, false, 2, 4, 4, a, b, make([]float32, 100), 4, 4, 4},
		{"shortC", shortC, false, false, 3, 4, 3, a, b, c[:11], 3, 4, 4},
		{"shortCstride", shortC, false, false, 2, 4, 3, a, b, make([]float32, 12), 3, 4, 9},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, f := range []func(bool, bool, int, int, int, float32, []float32, int, []float32, int, float32, []float32, int){Gemm[float32], GemmSerial[float32]} {
				func() {
					defer func() {
						if r := recover(); r != tc.want {
							t.Errorf("panic %v, want %q", r, tc.want)
						}
					}()
					f(tc.transA, tc.transB, tc.m, tc.n, tc.k, 1, tc.a, tc.lda, tc.b, tc.ldb, 0, tc.c, tc.ldc)
				}()
			}
		})
	}
	// Empty products accept empty slices and zero strides.
	Gemm[float32](false, false, 0, 5, 3, 1, nil, 3, nil, 5, 0, nil, 5)
	Gemm[float32](false, false, 4, 0, 3, 1, nil, 3, nil, 0, 0, nil, 0)
	Gemm[float32](false, false, 2, 2, 0, 1, nil, 0, nil, 2, 0, make([]float32, 4), 2)
}

// TestSelect checks the environment switch, including that the process
// reads it at start-up: a child test process runs with the variable set.
func TestSelect(t *testing.T) {
	if want := os.Getenv("GEMM_TEST_WANT"); want != "" {
		if sgemmKernels.name != want {
			t.Fatalf("%s=%q selected %q, want %q", kernelsEnv, os.Getenv(kernelsEnv), sgemmKernels.name, want)
		}
		return
	}
	best := ""
	for _, im := range sgemmImpls {
		if im.available {
			best = im.ks.name
			break
		}
	}
	if got := selectSgemm("").name; got != best {
		t.Errorf("default selection %q, want %q", got, best)
	}
	if got := selectSgemm("no-such-kernel").name; got != best {
		t.Errorf("unknown name selected %q, want %q", got, best)
	}
	for _, im := range sgemmImpls {
		want := best
		if im.available {
			want = im.ks.name
		}
		if got := selectSgemm(im.ks.name).name; got != want {
			t.Errorf("forcing %q selected %q, want %q", im.ks.name, got, want)
		}
	}
	for _, name := range []string{"generic", "avx2"} {
		want := best
		for _, im := range sgemmImpls {
			if im.ks.name == name && im.available {
				want = name
			}
		}
		cmd := exec.Command(os.Args[0], "-test.run=^TestSelect$")
		cmd.Env = append(os.Environ(), kernelsEnv+"="+name, "GEMM_TEST_WANT="+want)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("child with %s=%s: %v\n%s", kernelsEnv, name, err, out)
		}
	}
}

// TestNoAllocs checks that steady-state calls reuse their packing buffers.
// The parallel path may allocate only what parallel.For itself does.
func TestNoAllocs(t *testing.T) {
	const m, n, k = 96, 80, 64
	a, b, c := make([]float32, m*k), make([]float32, k*n), make([]float32, m*n)
	if got := testing.AllocsPerRun(20, func() { GemmSerial(false, false, m, n, k, 1, a, k, b, n, 0, c, n) }); got != 0 {
		t.Errorf("GemmSerial allocates %v times per call", got)
	}
	const pm, pn, pk = 256, 256, 256
	pa, pb, pc := make([]float32, pm*pk), make([]float32, pk*pn), make([]float32, pm*pn)
	body := func(lo, hi int) {}
	base := testing.AllocsPerRun(20, func() { parallel.For(2, 1, body) })
	if got := testing.AllocsPerRun(20, func() { Gemm(false, true, pm, pn, pk, 1, pa, pk, pb, pk, 1, pc, pn) }); !(got <= base) {
		t.Errorf("Gemm allocates %v times per call, parallel.For alone %v", got, base)
	}
}

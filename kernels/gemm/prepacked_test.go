package gemm

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/dcdit/dcdit/internal/fixtures"
)

// viaPacked runs a product through kernel set ks with B packed first (into
// a guard-padded buffer, which must stay untouched past the packed length).
func viaPacked[E float32 | float64](t *testing.T, ks *kernelSet[E]) func(bool, bool, int, int, int, E, []E, int, []E, int, E, []E, int) {
	return func(tA, tB bool, m, n, k int, alpha E, a []E, lda int, b []E, ldb int, beta E, c []E, ldc int) {
		size := packedLen(ks, k, n)
		buf := make([]E, size+3)
		for i := range buf {
			buf[i] = guard
		}
		pb := packWhole(ks, buf, tB, k, n, b, ldb)
		ks.gemmPacked(tA, m, alpha, a, lda, &pb, beta, c, ldc)
		for i, v := range buf[size:] {
			if v != guard {
				t.Fatalf("packing wrote past PackedBLen at %d", size+i)
			}
		}
	}
}

// Every implementation, on every case of the GEMM suite (all transposes,
// alpha/beta pairs, tails and blocking boundaries), gives the product
// through a prepacked B.
func TestPackedB(t *testing.T) {
	cs := cases()
	for _, im := range sgemmImpls {
		t.Run(im.ks.name, func(t *testing.T) {
			if !im.available {
				t.Skipf("CPU lacks %s", im.ks.name)
			}
			rng := rand.New(rand.NewPCG(11, 12))
			for i, tc := range cs {
				if raceEnabled && i%4 != 0 {
					continue
				}
				runCase(t, tc, rng, viaPacked(t, im.ks))
			}
		})
	}
	rng := rand.New(rand.NewPCG(13, 14))
	for i, tc := range cs {
		if i%3 == 0 {
			runCase(t, tc, rng, viaPacked(t, dgemmKernels))
		}
	}
}

// The public path: PackB then GemmPackedB, several A against one packed B,
// bit-identical to GemmSerial (the same blocks in the same order).
func TestGemmPackedBPublic(t *testing.T) {
	rng := rand.New(rand.NewPCG(15, 16))
	for _, s := range [][3]int{{144, 96, 864}, {37, 530, 400}, {5, 3, 2}, {0, 4, 4}, {4, 0, 4}, {4, 4, 0}} {
		m, n, k := s[0], s[1], s[2]
		for _, tB := range []bool{false, true} {
			ldb := n + 1
			rows := k
			if tB {
				ldb, rows = k+2, n
			}
			b := randSlice[float32](rng, rows*ldb)
			pb := PackB(make([]float32, PackedBLen[float32](k, n)), tB, k, n, b, ldb)
			if pb.K() != k || pb.N() != n {
				t.Fatalf("PackedB is %d×%d, want %d×%d", pb.K(), pb.N(), k, n)
			}
			for _, tA := range []bool{false, true} {
				lda := k + 3
				if tA {
					lda = m + 1
				}
				a := randSlice[float32](rng, max(k, m)*lda)
				c := randSlice[float32](rng, m*n)
				want := slices.Clone(c)
				GemmPackedB(tA, m, 0.5, a, lda, pb, 1.5, c, n)
				GemmSerial(tA, tB, m, n, k, 0.5, a, lda, b, ldb, 1.5, want, n)
				if !slices.Equal(c, want) {
					t.Errorf("%d×%d×%d tA %v tB %v: differs from GemmSerial", m, n, k, tA, tB)
				}
			}
		}
	}
	// float64 takes its own kernels.
	b := randSlice[float64](rng, 6*5)
	pb := PackB(make([]float64, PackedBLen[float64](6, 5)), false, 6, 5, b, 5)
	a, c, want := randSlice[float64](rng, 4*6), make([]float64, 4*5), make([]float64, 4*5)
	GemmPackedB(false, 4, 1, a, 6, pb, 0, c, 5)
	naive(false, false, 4, 5, 6, 1, a, 6, b, 5, 0, want, 5)
	for i := range c {
		if d := c[i] - want[i]; !fixtures.Within(math.Abs(d), 1e-12) {
			t.Fatalf("float64: c[%d] = %v, want %v", i, c[i], want[i])
		}
	}
}

func TestPackedBPanics(t *testing.T) {
	b := make([]float32, 8*8)
	cases := []struct {
		name string
		f    func()
		msg  string
	}{
		{"short buffer", func() { PackB(make([]float32, PackedBLen[float32](8, 8)-1), false, 8, 8, b, 8) }, shortPacked},
		{"short b", func() { PackB(make([]float32, PackedBLen[float32](8, 8)), false, 8, 8, b[:60], 8) }, shortB},
		{"bad ldb", func() { PackB(make([]float32, PackedBLen[float32](8, 8)), false, 8, 8, b, 7) }, badLdB},
		{"short c", func() {
			pb := PackB(make([]float32, PackedBLen[float32](8, 8)), false, 8, 8, b, 8)
			GemmPackedB(false, 8, 1, b, 8, pb, 0, make([]float32, 63), 8)
		}, shortC},
		{"other kernels", func() {
			pb := PackB(make([]float32, PackedBLen[float32](8, 8)), false, 8, 8, b, 8)
			pb.ks = nil
			GemmPackedB(false, 8, 1, b, 8, pb, 0, make([]float32, 64), 8)
		}, badPacked},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			defer func() {
				if r := recover(); r != c.msg {
					t.Errorf("panic %v, want %q", r, c.msg)
				}
			}()
			c.f()
		})
	}
}

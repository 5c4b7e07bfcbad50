package cuda

import (
	"math"
	"strings"
	"testing"
)

// TestGemmShape checks the argument checks that run before any cuBLAS call
// (so they are tested without a GPU): gemm.Gemm's rules, returned as errors.
func TestGemmShape(t *testing.T) {
	type args struct {
		ta, tb                 bool
		m, n, k, lda, ldb, ldc int
		la, lb, lc, batch      int
		sa, sb, sc             int64
	}
	ok := args{m: 3, n: 4, k: 5, lda: 5, ldb: 4, ldc: 4, la: 15, lb: 20, lc: 12, batch: 1}
	for _, tc := range []struct {
		name string
		a    args
		want string // "" for no error
	}{
		{"ok", ok, ""},
		{"transposed ok", args{ta: true, tb: true, m: 3, n: 4, k: 5, lda: 3, ldb: 5, ldc: 4, la: 15, lb: 20, lc: 12, batch: 1}, ""},
		{"padded rows ok", args{m: 3, n: 4, k: 5, lda: 8, ldb: 6, ldc: 7, la: 2*8 + 5, lb: 4*6 + 4, lc: 2*7 + 4, batch: 1}, ""},
		{"empty ok", args{m: 0, n: 4, k: 5, lda: 5, ldb: 4, ldc: 4, batch: 1}, ""},
		{"k=0 ok", args{m: 3, n: 4, k: 0, lda: 0, ldb: 4, ldc: 4, lc: 12, batch: 1}, ""},
		{"batched ok", args{m: 3, n: 4, k: 5, lda: 5, ldb: 4, ldc: 4, la: 15 + 2*16, lb: 20 + 2*20, lc: 12 + 2*12, batch: 3, sa: 16, sb: 20, sc: 12}, ""},
		{"negative m", args{m: -1, n: 4, k: 5, lda: 5, ldb: 4, ldc: 4, batch: 1}, "negative dimension"},
		{"lda", args{m: 3, n: 4, k: 5, lda: 4, ldb: 4, ldc: 4, la: 15, lb: 20, lc: 12, batch: 1}, "lda 4 < 5"},
		{"ldb transposed", args{tb: true, m: 3, n: 4, k: 5, lda: 5, ldb: 4, ldc: 4, la: 15, lb: 20, lc: 12, batch: 1}, "ldb 4 < 5"},
		{"ldc", args{m: 3, n: 4, k: 5, lda: 5, ldb: 4, ldc: 3, la: 15, lb: 20, lc: 12, batch: 1}, "ldc 3 < n 4"},
		{"short A", args{m: 3, n: 4, k: 5, lda: 5, ldb: 4, ldc: 4, la: 14, lb: 20, lc: 12, batch: 1}, "A holds 14 elements, the product needs 15"},
		{"short C", args{m: 3, n: 4, k: 5, lda: 5, ldb: 4, ldc: 4, la: 15, lb: 20, lc: 11, batch: 1}, "C holds 11"},
		{"short batch", args{m: 3, n: 4, k: 5, lda: 5, ldb: 4, ldc: 4, la: 15 + 2*16, lb: 20 + 2*20, lc: 12 + 12, batch: 3, sa: 16, sb: 20, sc: 12}, "C holds 24 elements, the product needs 36"},
		{"too big", args{m: math.MaxInt32 + 1, n: 1, k: 1, lda: 1, ldb: 1, ldc: 1, batch: 1}, "32-bit"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := tc.a
			err := gemmShape(a.ta, a.tb, a.m, a.n, a.k, a.lda, a.ldb, a.ldc, a.la, a.lb, a.lc, a.batch, a.sa, a.sb, a.sc)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("unexpected error %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("error = %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// TestBF16 checks the host conversions: exact values, ties to even, the
// carry into the exponent, NaN and the round trip.
func TestBF16(t *testing.T) {
	for _, tc := range []struct {
		in   float32
		want uint16
	}{
		{0, 0x0000},
		{1, 0x3F80},
		{-2, 0xC000},
		{math.Float32frombits(0x3F808000), 0x3F80}, // tie, even below
		{math.Float32frombits(0x3F818000), 0x3F82}, // tie, even above
		{math.Float32frombits(0x3F808001), 0x3F81}, // just above the tie
		{math.Float32frombits(0x7F7FFFFF), 0x7F80}, // max float32 rounds to Inf
		{float32(math.Inf(-1)), 0xFF80},
	} {
		var got [1]uint16
		BF16FromFloat32(got[:], []float32{tc.in})
		if got[0] != tc.want {
			t.Errorf("BF16(%g = %#08x) = %#04x, want %#04x", tc.in, math.Float32bits(tc.in), got[0], tc.want)
		}
	}
	var nan [1]uint16
	BF16FromFloat32(nan[:], []float32{float32(math.NaN())})
	var back [1]float32
	Float32FromBF16(back[:], nan[:])
	if back[0] == back[0] {
		t.Errorf("NaN became %g", back[0])
	}
	Float32FromBF16(back[:], []uint16{0x3F82})
	if back[0] != math.Float32frombits(0x3F820000) {
		t.Errorf("Float32FromBF16(0x3F82) = %g", back[0])
	}
}

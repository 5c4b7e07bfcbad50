//go:build amd64 && gc && !purego

package kernels

import "golang.org/x/sys/cpu"

// actAsm selects the AVX2 loops of GELU, sigmoid, SiLU and the softmax
// exponentials.
// DCDIT_KERNELS=generic (as for package gemm) keeps the Go loops, which
// compute the same values, so that tests and users can compare the two.
var actAsm = useAsm(cpu.X86.HasAVX2)

// geluAVX2 is, for n a multiple of 8 (the caller does the rest),
//
//	for i := 0; i < n; i++ {
//		f := x[i]
//		s, q := actExp2f(f * (geluA + geluB*f*f))
//		y[i] = f / (1 + s*(1+q))
//	}
//
// bit for bit, on the elements the pointers address (it checks nothing).
//
//go:noescape
func geluAVX2(y, x *float32, n int)

// sigmoidAVX2 is, for n a multiple of 8,
//
//	for i := 0; i < n; i++ {
//		s, q := actExp2f(-math.Log2E * x[i])
//		num := float32(1)
//		if silu {
//			num = x[i]
//		}
//		y[i] = num / (1 + s*(1+q))
//	}
//
// bit for bit (it checks nothing).
//
//go:noescape
func sigmoidAVX2(y, x *float32, n int, silu bool)

// geluBackOutAVX2 is, for n a multiple of 8,
//
//	for i := 0; i < n; i++ {
//		v, sg := x[i], float32(0.5)
//		if v != 0 {
//			sg = y[i] / v
//		}
//		dx[i] = dy[i] * (sg + 2*v*(1-sg)*sg*geluK*(1+3*geluC*v*v))
//	}
//
// bit for bit (it checks nothing).
//
//go:noescape
func geluBackOutAVX2(dx, dy, x, y *float32, n int)

// expShiftAVX2 is, for n a multiple of 8,
//
//	for i := 0; i < n; i++ {
//		row[i] = exp32(row[i] - shift)
//		acc[i%8] += row[i]
//	}
//
// with acc starting from zero; the values are exp32's bit for bit.
//
//go:noescape
func expShiftAVX2(row *float32, n int, shift float32, acc *[8]float32)

// rowMaxAVX2 returns the largest of row[0..n), n a positive multiple of 8
// (NaNs aside, which no score is).
//
//go:noescape
func rowMaxAVX2(row *float32, n int) float32

// softmaxGradAVX2 is, for n a multiple of 8,
//
//	for i := 0; i < n; i++ {
//		ds[i] = p[i] * (ds[i] - delta)
//	}
//
// bit for bit (it checks nothing).
//
//go:noescape
func softmaxGradAVX2(ds, p *float32, n int, delta float32)

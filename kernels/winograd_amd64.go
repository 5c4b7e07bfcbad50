//go:build amd64 && gc && !purego

package kernels

import "golang.org/x/sys/cpu"

// winoAsm selects the AVX transform loops of the Winograd convolution
// (not under DCDIT_KERNELS=generic).
var winoAsm = useAsm(cpu.X86.HasAVX)

// winoBT4AVX is, for n a multiple of 8 (the caller handles the rest),
//
//	for i := 0; i < n; i++ {
//		y0[i], y1[i], y2[i], y3[i] = x0[i]-x2[i], x1[i]+x2[i], x2[i]-x1[i], x1[i]-x3[i]
//	}
//
// on the n elements the pointers address (it checks nothing).
//
//go:noescape
func winoBT4AVX(y0, y1, y2, y3, x0, x1, x2, x3 *float32, n int)

// winoAT4AVX is, for n a multiple of 8,
//
//	for i := 0; i < n; i++ {
//		y0[i], y1[i] = x0[i]+x1[i]+x2[i]+b[i], x1[i]-x2[i]-x3[i]+b[i]
//	}
//
//go:noescape
func winoAT4AVX(y0, y1, x0, x1, x2, x3, b *float32, n int)

//go:build amd64 && gc && !purego

package kernels

import "golang.org/x/sys/cpu"

// siluAsm selects the AVX2 loop of GroupNormSiLUForward (not under
// DCDIT_KERNELS=generic).
var siluAsm = useAsm(cpu.X86.HasAVX2)

// siluAffineAVX2 is, for n a multiple of 8 (the caller does the rest),
//
//	for i := 0; i < n; i++ {
//		z := (x[i]-m[i])*s[i] + b[i]
//		e, q := actExp2f(-math.Log2E * z)
//		y[i] = z / (1 + e*(1+q))
//	}
//
// bit for bit, on the elements the pointers address (it checks nothing).
//
//go:noescape
func siluAffineAVX2(y, x, m, s, b *float32, n int)

//go:build amd64 && gc && !purego

package kernels

import "golang.org/x/sys/cpu"

// poolAsm selects the AVX loops of the pooling kernels (not under
// DCDIT_KERNELS=generic).
var poolAsm = useAsm(cpu.X86.HasAVX)

// poolMaxAVX is, for n a multiple of 8 (the caller does the rest),
//
//	for i := 0; i < n; i++ {
//		dst[i] = max(dst[i], src[i]) // a NaN on either side wins
//	}
//
// on the elements the pointers address (it checks nothing).
//
//go:noescape
func poolMaxAVX(dst, src *float32, n int)

// poolAddAVX is, for n a multiple of 8, dst[i] += src[i] for i < n.
//
//go:noescape
func poolAddAVX(dst, src *float32, n int)

// poolDivAVX is, for n a multiple of 8, dst[i] /= d for i < n.
//
//go:noescape
func poolDivAVX(dst *float32, d float32, n int)

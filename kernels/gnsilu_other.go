//go:build !amd64 || !gc || purego

package kernels

// siluAsm is false: GroupNormSiLUForward runs Go loops.
const siluAsm = false

func siluAffineAVX2(y, x, m, s, b *float32, n int) {
	panic("kernels: no AVX2 SiLU in this build")
}

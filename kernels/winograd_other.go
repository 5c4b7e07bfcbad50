//go:build !amd64 || !gc || purego

package kernels

// winoAsm is false: the transforms run as Go loops.
const winoAsm = false

func winoBT4AVX(y0, y1, y2, y3, x0, x1, x2, x3 *float32, n int) {
	panic("kernels: no AVX transform in this build")
}

func winoAT4AVX(y0, y1, x0, x1, x2, x3, b *float32, n int) {
	panic("kernels: no AVX transform in this build")
}

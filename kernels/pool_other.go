//go:build !amd64 || !gc || purego

package kernels

// poolAsm is false: the pooling kernels run Go loops.
const poolAsm = false

func poolMaxAVX(dst, src *float32, n int) {
	panic("kernels: no AVX pooling in this build")
}

func poolAddAVX(dst, src *float32, n int) {
	panic("kernels: no AVX pooling in this build")
}

func poolDivAVX(dst *float32, d float32, n int) {
	panic("kernels: no AVX pooling in this build")
}

//go:build !amd64 || !gc || purego

package kernels

// actAsm is false: activations and softmax run their Go loops.
var actAsm = false

func geluAVX2(y, x *float32, n int) { panic("kernels: no AVX2 GELU in this build") }
func sigmoidAVX2(y, x *float32, n int, silu bool) {
	panic("kernels: no AVX2 sigmoid in this build")
}
func geluBackOutAVX2(dx, dy, x, y *float32, n int) { panic("kernels: no AVX2 GELU in this build") }
func expShiftAVX2(row *float32, n int, shift float32, acc *[8]float32) {
	panic("kernels: no AVX2 exponential in this build")
}
func rowMaxAVX2(row *float32, n int) float32 { panic("kernels: no AVX2 row maximum in this build") }

func softmaxGradAVX2(ds, p *float32, n int, delta float32) {
	panic("kernels: no AVX2 softmax gradient in this build")
}

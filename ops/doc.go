// Package ops holds dcdit's differentiable operations as spago autograd
// functions over fast float32 kernels (GEMM, packed attention, convolutions,
// norms, modulation).
package ops

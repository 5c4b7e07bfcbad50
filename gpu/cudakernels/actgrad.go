package cudakernels

import (
	"github.com/dcdit/dcdit/gpu/cuda"
)

// Backward passes of GELU, SiLU and the row softmax, and the sigmoid and
// subtraction the DC router needs beside them (dc/router.go: conv1x1,
// conv3x3, GroupNorm+SiLU, then σ of the logit). The activation
// gradients follow the CPU's float32 formulas operation by operation
// (kernels/act.go): the exponent clamped at 100 (actBackClamp32) so that
// e^t·σ² stays finite, 1 − σ written as e^t·σ, and the products in Go's
// left-to-right order; the module's --fmad=false keeps each product
// rounded. The FromOutput forms are the ones the ops layer uses in
// training (σ = y/x replaces the exponential).

// GELUBackward sets dx = dy·GELU'(x) for the tanh approximation
// (kernels.GELUBackward). dx may alias dy.
func (sc *Scaffold) GELUBackward(dx, dy, x cuda.Buffer) error {
	n, err := sameLen("GELUBackward", []string{"dx", "dy", "x"}, dx, dy, x)
	if err != nil {
		return err
	}
	return sc.set.elementwise(sc.geluBwd, n, dx, dy, x)
}

// GELUBackwardFromOutput is GELUBackward given the forward output y as
// well: σ = y/x (½ at x = 0) (kernels.GELUBackwardFromOutput). dx may
// alias dy.
func (sc *Scaffold) GELUBackwardFromOutput(dx, dy, x, y cuda.Buffer) error {
	n, err := sameLen("GELUBackwardFromOutput", []string{"dx", "dy", "x", "y"}, dx, dy, x, y)
	if err != nil {
		return err
	}
	return sc.set.elementwise(sc.geluBwdOut, n, dx, dy, x, y)
}

// SiLUBackward sets dx = dy·σ(x)·(1 + x·(1 − σ(x))) (kernels.SiLUBackward).
// dx may alias dy.
func (sc *Scaffold) SiLUBackward(dx, dy, x cuda.Buffer) error {
	n, err := sameLen("SiLUBackward", []string{"dx", "dy", "x"}, dx, dy, x)
	if err != nil {
		return err
	}
	return sc.set.elementwise(sc.siluBwd, n, dx, dy, x)
}

// SiLUBackwardFromOutput is SiLUBackward given the forward output y as
// well (kernels.SiLUBackwardFromOutput). dx may alias dy.
func (sc *Scaffold) SiLUBackwardFromOutput(dx, dy, x, y cuda.Buffer) error {
	n, err := sameLen("SiLUBackwardFromOutput", []string{"dx", "dy", "x", "y"}, dx, dy, x, y)
	if err != nil {
		return err
	}
	return sc.set.elementwise(sc.siluBwdOut, n, dx, dy, x, y)
}

// Sigmoid sets y = σ(x) = 1/(1 + e^{−x}) (kernels.SigmoidForward). y may
// alias x.
func (sc *Scaffold) Sigmoid(y, x cuda.Buffer) error {
	n, err := sameLen("Sigmoid", []string{"y", "x"}, y, x)
	if err != nil {
		return err
	}
	return sc.set.elementwise(sc.sigmoid, n, y, x)
}

// SigmoidBackward sets dx = dy·y·(1 − y) from the forward output y
// (kernels.SigmoidBackward). dx may alias dy or y.
func (sc *Scaffold) SigmoidBackward(dx, dy, y cuda.Buffer) error {
	n, err := sameLen("SigmoidBackward", []string{"dx", "dy", "y"}, dx, dy, y)
	if err != nil {
		return err
	}
	return sc.set.elementwise(sc.sigmoidBwd, n, dx, dy, y)
}

// Sub sets y = a − b elementwise (kernels.Sub). y may alias a or b.
func (sc *Scaffold) Sub(y, a, b cuda.Buffer) error {
	n, err := sameLen("Sub", []string{"y", "a", "b"}, y, a, b)
	if err != nil {
		return err
	}
	return sc.set.elementwise(sc.sub, n, y, a, b)
}

// SoftmaxBackward sets each row of dx [rows, cols] to y∘(dy − <dy, y>),
// the gradient of Softmax given its output y. dx may alias dy.
func (sc *Scaffold) SoftmaxBackward(dx, dy, y cuda.Buffer, rows, cols int) error {
	if err := rowsCols("SoftmaxBackward", rows, cols); err != nil {
		return err
	}
	n := rows * cols
	if err := checkBufs("SoftmaxBackward", bufArg{"dx", dx, n, false}, bufArg{"dy", dy, n, false}, bufArg{"y", y, n, false}); err != nil {
		return err
	}
	if rows == 0 || cols == 0 {
		return nil
	}
	return sc.softmaxBwd.Launch(cuda.Dim3{X: rows}, cuda.Dim3{X: blockSize}, 0, dx, dy, y, int32(rows), int32(cols))
}

// actGradSource is the CUDA C of this file's kernels.
const actGradSource = `
// 3·0.044715 rounded once, as Go folds the constant 3*geluC.
#define GELU_C3 0.134145f

// GELU' (kernels.GELUBackward, float32 path).
extern "C" __global__ void act_gelu_bwd(float* dx, const float* dy, const float* x, long long n) {
	for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
		const float v = x[i];
		float z = v * (GELU_A + GELU_B * v * v);
		if (z > 100.0f) z = 100.0f;
		const float e = exp2f(clamp_exp2(z));
		const float sg = 1.0f / (1.0f + e);
		dx[i] = dy[i] * (sg + 2.0f * v * (e * sg) * sg * GELU_K * (1.0f + GELU_C3 * v * v));
	}
}

// GELU' from the output (kernels.GELUBackwardFromOutput).
extern "C" __global__ void act_gelu_bwd_out(float* dx, const float* dy, const float* x, const float* y, long long n) {
	for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
		const float v = x[i];
		const float sg = v != 0.0f ? y[i] / v : 0.5f;
		dx[i] = dy[i] * (sg + 2.0f * v * (1.0f - sg) * sg * GELU_K * (1.0f + GELU_C3 * v * v));
	}
}

// SiLU' (kernels.SiLUBackward, float32 path).
extern "C" __global__ void act_silu_bwd(float* dx, const float* dy, const float* x, long long n) {
	for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
		const float v = x[i];
		float z = -LOG2E * v;
		if (z > 100.0f) z = 100.0f;
		const float e = exp2f(clamp_exp2(z));
		const float sg = 1.0f / (1.0f + e);
		dx[i] = dy[i] * (sg * (1.0f + v * e * sg));
	}
}

// SiLU' from the output (kernels.SiLUBackwardFromOutput).
extern "C" __global__ void act_silu_bwd_out(float* dx, const float* dy, const float* x, const float* y, long long n) {
	for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
		const float v = x[i];
		const float sg = v != 0.0f ? y[i] / v : 0.5f;
		dx[i] = dy[i] * sg * (1.0f + v * (1.0f - sg));
	}
}

// σ(x) = 1/(1 + e^{-x}) (kernels.SigmoidForward).
extern "C" __global__ void act_sigmoid(float* y, const float* x, long long n) {
	for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
		y[i] = 1.0f / (1.0f + exp2f(clamp_exp2(-LOG2E * x[i])));
}

// dx = dy·y·(1 − y) (kernels.SigmoidBackward).
extern "C" __global__ void act_sigmoid_bwd(float* dx, const float* dy, const float* y, long long n) {
	for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
		const float v = y[i];
		dx[i] = dy[i] * v * (1.0f - v);
	}
}

extern "C" __global__ void ew_sub(float* y, const float* a, const float* b, long long n) {
	for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
		y[i] = a[i] - b[i];
}

// Row softmax backward, one block per row: δ = <dy, y>, dx = y·(dy − δ).
// dx may alias dy: each element is read, then written, by one thread.
extern "C" __global__ void softmax_rows_bwd(float* dx, const float* dy, const float* y, int rows, int cols) {
	__shared__ float sh[32];
	const long long r = blockIdx.x;
	const float* gr = dy + r * cols;
	const float* yr = y + r * cols;
	float d = 0.0f;
	for (int i = threadIdx.x; i < cols; i += blockDim.x) d += gr[i] * yr[i];
	d = block_reduce<false>(d, sh);
	float* dr = dx + r * cols;
	for (int i = threadIdx.x; i < cols; i += blockDim.x) dr[i] = yr[i] * (gr[i] - d);
}
`

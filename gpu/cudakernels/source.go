package cudakernels

// source is the CUDA C of every kernel in the package, compiled as one
// module. Each kernel mirrors a CPU kernel of package
// github.com/dcdit/dcdit/kernels (named beside it), which the tests use as
// the reference. Sizes are 64-bit where they count elements so that
// buffers over 2³¹ elements work; rows and columns of a matrix are 32-bit.
//
// No fast-math: expf/exp2f/sqrtf and division are the IEEE-accurate forms,
// so the results stay within a few float32 ulps of the CPU's.
const source = `
#define LOG2E 1.4426950408889634f
// NVRTC compiles without the C headers, so no INFINITY macro.
#define NEG_INF __int_as_float(0xff800000)

// GELU's exponent as the CPU computes it (kernels/act.go): e^{-2u} = 2^z,
// z = x·(GELU_A + GELU_B·x²), u = √(2/π)·(x + 0.044715·x³).
#define GELU_K 0.7978845608028654f
#define GELU_A (-2.0f * GELU_K * LOG2E)
#define GELU_B (-2.0f * GELU_K * 0.044715f * LOG2E)

// clamp_exp2 limits an exponent of 2 to ±126 as the CPU kernels do
// (actSplit2f): e^t then saturates at 2^126 instead of overflowing, so a
// saturated activation matches the CPU's (x/(1 + 2^126), not x/Inf = 0) and
// x = −Inf gives −Inf, not Inf/Inf. A NaN exponent becomes −126, but then x
// itself is NaN and so is the result.
__device__ __forceinline__ float clamp_exp2(float z) { return fminf(fmaxf(z, -126.0f), 126.0f); }

extern "C" __global__ void ew_add(float* y, const float* a, const float* b, long long n) {
	for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
		y[i] = a[i] + b[i];
}

extern "C" __global__ void ew_mul(float* y, const float* a, const float* b, long long n) {
	for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
		y[i] = a[i] * b[i];
}

extern "C" __global__ void ew_scale(float* y, const float* x, float alpha, long long n) {
	for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
		y[i] = alpha * x[i];
}

// GELU (tanh form) through ½(1 + tanh u) = σ(2u): y = x / (1 + e^{-2u}),
// as kernels.GELUForward; no cancellation for negative x.
extern "C" __global__ void act_gelu(float* y, const float* x, long long n) {
	for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
		float v = x[i];
		y[i] = v / (1.0f + exp2f(clamp_exp2(v * (GELU_A + GELU_B * v * v))));
	}
}

// SiLU: y = x·σ(x) = x / (1 + e^{-x}), as kernels.SiLUForward.
extern "C" __global__ void act_silu(float* y, const float* x, long long n) {
	for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
		float v = x[i];
		y[i] = v / (1.0f + exp2f(clamp_exp2(-LOG2E * v)));
	}
}

// block_reduce combines v over the block (blockDim.x a multiple of 32, at
// most 1024) with op: first within each warp by shuffles, then the warps'
// results in warp 0. Every thread gets the result. sh holds 32 floats.
template <bool MAX>
__device__ float block_reduce(float v, float* sh) {
	for (int o = 16; o > 0; o >>= 1) {
		float w = __shfl_xor_sync(0xffffffffu, v, o);
		v = MAX ? fmaxf(v, w) : v + w;
	}
	int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
	if (lane == 0) sh[warp] = v;
	__syncthreads();
	if (warp == 0) {
		int nw = blockDim.x >> 5;
		v = lane < nw ? sh[lane] : (MAX ? NEG_INF : 0.0f);
		for (int o = 16; o > 0; o >>= 1) {
			float w = __shfl_xor_sync(0xffffffffu, v, o);
			v = MAX ? fmaxf(v, w) : v + w;
		}
		if (lane == 0) sh[0] = v;
	}
	__syncthreads();
	v = sh[0];
	// The next reduction writes sh again: every thread must have read it.
	__syncthreads();
	return v;
}

// LayerNorm without affine transform, one block per row, as
// kernels.LayerNormForward (but with a shifted mean, below): two passes (mean, then the sum of squared
// deviations: E[x²] − E[x]² cancels when |mean| ≫ std), biased variance,
// rstd = 1/sqrt(var + eps). mean and rstd may be null.
extern "C" __global__ void layernorm_fwd(float* y, float* mean, float* rstd, const float* x, int rows, int cols, float eps) {
	__shared__ float sh[32];
	long long r = blockIdx.x;
	if (r >= rows) return;
	const float* xr = x + r * cols;
	float* yr = y + r * cols;
	// Everything is computed relative to the row's first element x₀: when
	// |mean| ≫ std, a float32 mean carries an absolute error of up to half
	// an ulp of |mean| (a plain sum more), which the normalised output
	// amplifies by mean/std. x − x₀ is exact for x near x₀ (Sterbenz) and
	// small, so the shifted mean ms = mean − x₀ keeps its low bits.
	float x0 = cols > 0 ? xr[0] : 0.0f;
	float s = 0.0f;
	for (int i = threadIdx.x; i < cols; i += blockDim.x) s += xr[i] - x0;
	s = block_reduce<false>(s, sh);
	float ms = cols > 0 ? s / (float)cols : 0.0f;
	float v = 0.0f;
	for (int i = threadIdx.x; i < cols; i += blockDim.x) {
		float d = (xr[i] - x0) - ms;
		v += d * d;
	}
	v = block_reduce<false>(v, sh);
	if (cols > 0) v /= (float)cols;
	float rs = 1.0f / sqrtf(v + eps);
	for (int i = threadIdx.x; i < cols; i += blockDim.x) yr[i] = ((xr[i] - x0) - ms) * rs;
	float m = x0 + ms;
	if (threadIdx.x == 0) {
		if (mean) mean[r] = m;
		if (rstd) rstd[r] = rs;
	}
}

// Softmax of each row, one block per row: subtract the row maximum (no
// overflow), exponentiate, divide by the sum.
extern "C" __global__ void softmax_rows(float* y, const float* x, int rows, int cols) {
	__shared__ float sh[32];
	long long r = blockIdx.x;
	if (r >= rows) return;
	const float* xr = x + r * cols;
	float* yr = y + r * cols;
	float m = NEG_INF;
	for (int i = threadIdx.x; i < cols; i += blockDim.x) m = fmaxf(m, xr[i]);
	m = block_reduce<true>(m, sh);
	float s = 0.0f;
	for (int i = threadIdx.x; i < cols; i += blockDim.x) s += expf(xr[i] - m);
	s = block_reduce<false>(s, sh);
	for (int i = threadIdx.x; i < cols; i += blockDim.x) yr[i] = expf(xr[i] - m) / s;
}
`

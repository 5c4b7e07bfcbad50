package cudakernels

import (
	"fmt"

	"github.com/dcdit/dcdit/gpu/cuda"
)

// Normalisation and modulation kernels beyond LayerNorm's forward pass:
// LayerNorm backward, RMSNorm, GroupNorm+SiLU (fused) and DiT's adaLN
// modulation and gated residual, each forward and backward, mirroring the
// CPU kernels named on each launcher.
//
// Row statistics use one block per row (or per sample and group);
// parameter gradients, which sum over rows, use one block per 32 columns
// that walks the rows with colThreadsY threads, in float64, so results do
// not depend on the grid and stay close to the CPU's float64 sums.

// colThreadsY is the row threads of a column-reduction block (32 columns
// wide): COL_TY in the source.
const colThreadsY = 16

// normFuncs are the kernels of this file.
type normFuncs struct {
	lnBwd, rmsFwd, rmsBwdDx, rmsBwdDw    cuda.Function
	gnsFwd, gnsBwdDx, gnsBwdDwDb         cuda.Function
	modFwd, modBwdDx, gateFwd, gateBwdDh cuda.Function
	perSampleSums                        cuda.Function
}

func (s *Set) loadNorm() error {
	for _, f := range []struct {
		dst  *cuda.Function
		name string
	}{
		{&s.norm.lnBwd, "layernorm_bwd"},
		{&s.norm.rmsFwd, "rmsnorm_fwd"}, {&s.norm.rmsBwdDx, "rmsnorm_bwd_dx"}, {&s.norm.rmsBwdDw, "rmsnorm_bwd_dw"},
		{&s.norm.gnsFwd, "gnsilu_fwd"}, {&s.norm.gnsBwdDx, "gnsilu_bwd_dx"}, {&s.norm.gnsBwdDwDb, "gnsilu_bwd_dwdb"},
		{&s.norm.modFwd, "modulate_fwd"}, {&s.norm.modBwdDx, "modulate_bwd_dx"},
		{&s.norm.gateFwd, "gated_fwd"}, {&s.norm.gateBwdDh, "gated_bwd_dh"},
		{&s.norm.perSampleSums, "per_sample_sums"},
	} {
		var err error
		if *f.dst, err = s.mod.Function(f.name); err != nil {
			return err
		}
	}
	return nil
}

// bufArg is a buffer argument, the float32 it must hold, and whether it
// may be empty (an optional output: the kernel then gets a null pointer).
type bufArg struct {
	name     string
	b        cuda.Buffer
	n        int
	optional bool
}

// checkBufs checks every buffer's size, skipping empty optional ones.
func checkBufs(kernel string, bufs ...bufArg) error {
	for _, b := range bufs {
		if b.optional && b.b.Len() == 0 {
			continue
		}
		if _, err := f32Len(kernel, b.name, b.b, b.n); err != nil {
			return err
		}
	}
	return nil
}

// colGrid is the grid and block of a column reduction over cols columns
// (times y, e.g. samples).
func colGrid(cols, y int) (cuda.Dim3, cuda.Dim3) {
	return cuda.Dim3{X: (cols + 31) / 32, Y: y}, cuda.Dim3{X: 32, Y: colThreadsY}
}

// LayerNormBackward computes dx from dy for LayerNorm, given x and the
// saved per-row mean and rstd: dx = rstd·(dy − mean(dy) − x̂·mean(dy·x̂))
// (kernels.LayerNormBackward). dx may alias dy.
func (s *Set) LayerNormBackward(dx, dy, x, mean, rstd cuda.Buffer, rows, cols int) error {
	if err := rowsCols("LayerNormBackward", rows, cols); err != nil {
		return err
	}
	n := rows * cols
	if err := checkBufs("LayerNormBackward", bufArg{"dx", dx, n, false}, bufArg{"dy", dy, n, false},
		bufArg{"x", x, n, false}, bufArg{"mean", mean, rows, false}, bufArg{"rstd", rstd, rows, false}); err != nil {
		return err
	}
	if rows == 0 || cols == 0 {
		return nil
	}
	return s.norm.lnBwd.Launch(cuda.Dim3{X: rows}, cuda.Dim3{X: blockSize}, 0, dx, dy, x, mean, rstd, int32(rows), int32(cols))
}

// RMSNorm sets y = x·rstd·w per row of x [rows, cols], rstd = 1/sqrt(mean(x²)
// + eps), w [cols], storing rstd [rows] unless that buffer is empty
// (kernels.RMSNormForward). y may alias x.
func (s *Set) RMSNorm(y, rstd, x, w cuda.Buffer, rows, cols int, eps float32) error {
	if err := rowsCols("RMSNorm", rows, cols); err != nil {
		return err
	}
	n := rows * cols
	if err := checkBufs("RMSNorm", bufArg{"y", y, n, false}, bufArg{"x", x, n, false},
		bufArg{"w", w, cols, false}, bufArg{"rstd", rstd, rows, true}); err != nil {
		return err
	}
	if rows == 0 {
		return nil
	}
	return s.norm.rmsFwd.Launch(cuda.Dim3{X: rows}, cuda.Dim3{X: blockSize}, 0, y, rstd.Ptr(), x, w, int32(rows), int32(cols), eps)
}

// RMSNormBackward computes RMSNorm's gradients from dy, given x, w and the
// saved rstd: dx = rstd·(w∘dy) − x·rstd³·mean(w∘dy∘x) and dw = Σ_rows
// dy∘x·rstd (kernels.RMSNormBackward). Either dx or dw may be empty.
func (s *Set) RMSNormBackward(dx, dw, dy, x, w, rstd cuda.Buffer, rows, cols int) error {
	if err := rowsCols("RMSNormBackward", rows, cols); err != nil {
		return err
	}
	n := rows * cols
	if err := checkBufs("RMSNormBackward", bufArg{"dx", dx, n, true}, bufArg{"dw", dw, cols, true},
		bufArg{"dy", dy, n, false}, bufArg{"x", x, n, false}, bufArg{"rstd", rstd, rows, false}); err != nil {
		return err
	}
	if dx.Len() > 0 && rows > 0 && cols > 0 {
		if err := checkBufs("RMSNormBackward", bufArg{"w", w, cols, false}); err != nil {
			return err
		}
		if err := s.norm.rmsBwdDx.Launch(cuda.Dim3{X: rows}, cuda.Dim3{X: blockSize}, 0, dx, dy, x, w, rstd, int32(rows), int32(cols)); err != nil {
			return err
		}
	}
	if dw.Len() > 0 && cols > 0 {
		g, b := colGrid(cols, 1)
		return s.norm.rmsBwdDw.Launch(g, b, 0, dw, dy, x, rstd, int32(rows), int32(cols))
	}
	return nil
}

// gnShape validates GroupNorm's dimensions.
func gnShape(kernel string, batch, tokens, channels, groups int) error {
	if batch < 0 || tokens < 0 || channels < 1 || groups < 1 || channels%groups != 0 {
		return fmt.Errorf("cudakernels: %s: batch %d, tokens %d, %d channels in %d groups: want channels a positive multiple of groups", kernel, batch, tokens, channels, groups)
	}
	if int64(batch)*int64(tokens)*int64(channels) > 1<<31-1 || int64(batch)*int64(groups) > 1<<31-1 {
		return fmt.Errorf("cudakernels: %s: shape too large", kernel)
	}
	return nil
}

// GroupNorm applies PyTorch's nn.GroupNorm(groups, channels, eps) with
// affine weight w and bias b [channels] to batch token-major grids x
// [batch·tokens, channels]: statistics per (sample, group) over tokens ×
// channels/groups values in float64 (biased variance), stored in mean and
// rstd [batch·groups] unless those are empty (kernels.GroupNormForward).
// y may alias x.
func (s *Set) GroupNorm(y, mean, rstd, x, w, b cuda.Buffer, batch, tokens, channels, groups int, eps float32) error {
	return s.groupNorm("GroupNorm", 0, y, mean, rstd, x, w, b, batch, tokens, channels, groups, eps)
}

// GroupNormSiLU sets y = SiLU(GroupNorm(x)·w + b), GroupNorm's statistics
// and then SiLU fused in one pass (kernels.GroupNormSiLUForward). y may
// alias x.
func (s *Set) GroupNormSiLU(y, mean, rstd, x, w, b cuda.Buffer, batch, tokens, channels, groups int, eps float32) error {
	return s.groupNorm("GroupNormSiLU", 1, y, mean, rstd, x, w, b, batch, tokens, channels, groups, eps)
}

func (s *Set) groupNorm(kernel string, silu int32, y, mean, rstd, x, w, b cuda.Buffer, batch, tokens, channels, groups int, eps float32) error {
	if err := gnShape(kernel, batch, tokens, channels, groups); err != nil {
		return err
	}
	n := batch * tokens * channels
	if err := checkBufs(kernel, bufArg{"y", y, n, false}, bufArg{"x", x, n, false},
		bufArg{"w", w, channels, false}, bufArg{"b", b, channels, false},
		bufArg{"mean", mean, batch * groups, true}, bufArg{"rstd", rstd, batch * groups, true}); err != nil {
		return err
	}
	if batch == 0 {
		return nil
	}
	return s.norm.gnsFwd.Launch(cuda.Dim3{X: batch * groups}, cuda.Dim3{X: blockSize}, 0,
		y, mean.Ptr(), rstd.Ptr(), x, w, b, int32(tokens), int32(channels), int32(groups), eps, silu)
}

// GroupNormBackward computes GroupNorm's gradients from dy, given x, w and
// the saved mean and rstd: per (sample, group), dx = rstd·(w∘dy −
// mean(w∘dy) − x̂·mean(w∘dy∘x̂)); dw = Σ dy∘x̂ and db = Σ dy over all rows
// (kernels.GroupNormBackward). Any of dx, dw, db may be empty.
func (s *Set) GroupNormBackward(dx, dw, db, dy, x, mean, rstd, w cuda.Buffer, batch, tokens, channels, groups int) error {
	return s.groupNormBackward("GroupNormBackward", 0, dx, dw, db, dy, x, mean, rstd, w, cuda.Buffer{}, batch, tokens, channels, groups)
}

// GroupNormSiLUBackward computes GroupNormSiLU's gradients from dy, given
// x, w, b and the saved mean and rstd: GroupNormBackward of dz = dy·σ(z)·
// (1 + z(1 − σ(z))), z recomputed (kernels.GroupNormSiLUBackward). Any of
// dx, dw, db may be empty; the others are overwritten.
func (s *Set) GroupNormSiLUBackward(dx, dw, db, dy, x, mean, rstd, w, b cuda.Buffer, batch, tokens, channels, groups int) error {
	return s.groupNormBackward("GroupNormSiLUBackward", 1, dx, dw, db, dy, x, mean, rstd, w, b, batch, tokens, channels, groups)
}

func (s *Set) groupNormBackward(kernel string, silu int32, dx, dw, db, dy, x, mean, rstd, w, b cuda.Buffer, batch, tokens, channels, groups int) error {
	if err := gnShape(kernel, batch, tokens, channels, groups); err != nil {
		return err
	}
	n := batch * tokens * channels
	if err := checkBufs(kernel, bufArg{"dx", dx, n, true}, bufArg{"dw", dw, channels, true},
		bufArg{"db", db, channels, true}, bufArg{"dy", dy, n, false}, bufArg{"x", x, n, false},
		bufArg{"mean", mean, batch * groups, false}, bufArg{"rstd", rstd, batch * groups, false},
		bufArg{"w", w, channels, false}); err != nil {
		return err
	}
	if silu != 0 {
		// Only SiLU's recomputed z = x̂·w + b needs the bias.
		if err := checkBufs(kernel, bufArg{"b", b, channels, false}); err != nil {
			return err
		}
	}
	if dx.Len() > 0 && batch > 0 {
		if err := s.norm.gnsBwdDx.Launch(cuda.Dim3{X: batch * groups}, cuda.Dim3{X: blockSize}, 0,
			dx, dy, x, mean, rstd, w, b.Ptr(), int32(tokens), int32(channels), int32(groups), silu); err != nil {
			return err
		}
	}
	if dw.Len() > 0 || db.Len() > 0 {
		g, bl := colGrid(channels, 1)
		return s.norm.gnsBwdDwDb.Launch(g, bl, 0, dw.Ptr(), db.Ptr(), dy, x, mean, rstd, w, b.Ptr(),
			int32(batch), int32(tokens), int32(channels), int32(groups), silu)
	}
	return nil
}

// modArgs checks a per-sample broadcast over x [rows, cols] packed by p
// with per-sample vectors [S, cols].
func modArgs(kernel string, p *Packing, cols int) (rows, samples int, err error) {
	if p == nil {
		return 0, 0, fmt.Errorf("cudakernels: %s: nil packing", kernel)
	}
	rows, samples = p.Rows(), p.Sequences()
	if cols < 1 || int64(rows)*int64(cols) > 1<<62 || samples > 65535 {
		return 0, 0, fmt.Errorf("cudakernels: %s: %d rows of %d columns in %d samples (want ≥ 1 column, ≤ 65535 samples)", kernel, rows, cols, samples)
	}
	return rows, samples, nil
}

// Modulate applies DiT's adaLN modulation y = x·(1 + scale_s) + shift_s to
// x [rows, cols] packed by p, with shift and scale [S, cols] per sample
// (kernels.ModulateForward). y may alias x.
func (s *Set) Modulate(y, x, shift, scale cuda.Buffer, p *Packing, cols int) error {
	rows, samples, err := modArgs("Modulate", p, cols)
	if err != nil {
		return err
	}
	if err := checkBufs("Modulate", bufArg{"y", y, rows * cols, false}, bufArg{"x", x, rows * cols, false},
		bufArg{"shift", shift, samples * cols, false}, bufArg{"scale", scale, samples * cols, false}); err != nil {
		return err
	}
	if rows == 0 {
		return nil
	}
	return s.norm.modFwd.Launch(cuda.Dim3{X: rows}, cuda.Dim3{X: blockSize}, 0, y, x, shift, scale, p.offs, int32(samples), int32(cols))
}

// ModulateBackward computes Modulate's gradients from dy: dx = dy·(1 +
// scale_s), dshift_s = Σ_{r in s} dy_r, dscale_s = Σ_{r in s} dy_r∘x_r
// (kernels.ModulateBackward). Any of dx, dshift, dscale may be empty.
func (s *Set) ModulateBackward(dx, dshift, dscale, dy, x, scale cuda.Buffer, p *Packing, cols int) error {
	rows, samples, err := modArgs("ModulateBackward", p, cols)
	if err != nil {
		return err
	}
	if err := checkBufs("ModulateBackward", bufArg{"dx", dx, rows * cols, true}, bufArg{"dshift", dshift, samples * cols, true},
		bufArg{"dscale", dscale, samples * cols, true}, bufArg{"dy", dy, rows * cols, false},
		bufArg{"scale", scale, samples * cols, false}); err != nil {
		return err
	}
	if dscale.Len() > 0 {
		if err := checkBufs("ModulateBackward", bufArg{"x", x, rows * cols, false}); err != nil {
			return err
		}
	}
	if dx.Len() > 0 && rows > 0 {
		if err := s.norm.modBwdDx.Launch(cuda.Dim3{X: rows}, cuda.Dim3{X: blockSize}, 0, dx, dy, scale, p.offs, int32(samples), int32(cols)); err != nil {
			return err
		}
	}
	return s.perSampleSums(dshift, dscale, dy, x, p, samples, cols)
}

// perSampleSums sets sum_s = Σ_{r in s} a_r and dot_s = Σ_{r in s} a_r∘b_r
// (either may be empty) for every sample s of p.
func (s *Set) perSampleSums(sum, dot, a, b cuda.Buffer, p *Packing, samples, cols int) error {
	if (sum.Len() == 0 && dot.Len() == 0) || samples == 0 {
		return nil
	}
	g, bl := colGrid(cols, samples)
	return s.norm.perSampleSums.Launch(g, bl, 0, sum.Ptr(), dot.Ptr(), a, b.Ptr(), p.offs, int32(cols))
}

// GatedResidual computes DiT's gated residual y = x + gate_s∘h for x, h
// [rows, cols] packed by p and gate [S, cols] (kernels.GatedResidualForward).
// y may alias x or h.
func (s *Set) GatedResidual(y, x, gate, h cuda.Buffer, p *Packing, cols int) error {
	rows, samples, err := modArgs("GatedResidual", p, cols)
	if err != nil {
		return err
	}
	if err := checkBufs("GatedResidual", bufArg{"y", y, rows * cols, false}, bufArg{"x", x, rows * cols, false},
		bufArg{"h", h, rows * cols, false}, bufArg{"gate", gate, samples * cols, false}); err != nil {
		return err
	}
	if rows == 0 {
		return nil
	}
	return s.norm.gateFwd.Launch(cuda.Dim3{X: rows}, cuda.Dim3{X: blockSize}, 0, y, x, gate, h, p.offs, int32(samples), int32(cols))
}

// GatedResidualBackward computes GatedResidual's gradients from dy: dx =
// dy, dgate_s = Σ_{r in s} dy_r∘h_r, dh = gate_s∘dy
// (kernels.GatedResidualBackward). Any of dx, dgate, dh may be empty
// (callers that can share dy's storage for dx should leave dx empty).
func (s *Set) GatedResidualBackward(dx, dgate, dh, dy, gate, h cuda.Buffer, p *Packing, cols int) error {
	rows, samples, err := modArgs("GatedResidualBackward", p, cols)
	if err != nil {
		return err
	}
	if err := checkBufs("GatedResidualBackward", bufArg{"dx", dx, rows * cols, true}, bufArg{"dgate", dgate, samples * cols, true},
		bufArg{"dh", dh, rows * cols, true}, bufArg{"dy", dy, rows * cols, false},
		bufArg{"gate", gate, samples * cols, false}); err != nil {
		return err
	}
	if dgate.Len() > 0 {
		if err := checkBufs("GatedResidualBackward", bufArg{"h", h, rows * cols, false}); err != nil {
			return err
		}
	}
	if dx.Len() > 0 && rows > 0 {
		if err := dx.CopyFrom(dy); err != nil {
			return fmt.Errorf("cudakernels: GatedResidualBackward: dx: %w", err)
		}
	}
	if dh.Len() > 0 && rows > 0 {
		if err := s.norm.gateBwdDh.Launch(cuda.Dim3{X: rows}, cuda.Dim3{X: blockSize}, 0, dh, dy, gate, p.offs, int32(samples), int32(cols)); err != nil {
			return err
		}
	}
	return s.perSampleSums(cuda.Buffer{}, dgate, dy, h, p, samples, cols)
}

// normSource is the CUDA C of this file's kernels.
const normSource = `
#define COL_TY 16

// block_sum_d is block_reduce's sum in float64 (sh: 32 doubles).
__device__ double block_sum_d(double v, double* sh) {
	for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
	int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
	if (lane == 0) sh[warp] = v;
	__syncthreads();
	if (warp == 0) {
		int nw = blockDim.x >> 5;
		v = lane < nw ? sh[lane] : 0.0;
		for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
		if (lane == 0) sh[0] = v;
	}
	__syncthreads();
	v = sh[0];
	__syncthreads();
	return v;
}

// col_sum sums v over the COL_TY row threads of a column-reduction block
// (blockDim = 32 × COL_TY); thread row 0 gets the result.
__device__ double col_sum(double v, double (*sh)[33]) {
	sh[threadIdx.y][threadIdx.x] = v;
	__syncthreads();
	for (int k = COL_TY / 2; k > 0; k >>= 1) {
		if (threadIdx.y < k) sh[threadIdx.y][threadIdx.x] += sh[threadIdx.y + k][threadIdx.x];
		__syncthreads();
	}
	v = sh[0][threadIdx.x];
	__syncthreads();
	return v;
}

// sample_of returns s with offs[s] ≤ r < offs[s+1] (offs: S+1 entries,
// non-decreasing): the last offset not above r.
__device__ __forceinline__ int sample_of(const int* offs, int S, long long r) {
	int lo = 0, hi = S; // offs[lo] ≤ r < offs[hi]
	while (hi - lo > 1) {
		int mid = (lo + hi) >> 1;
		if (offs[mid] <= r) lo = mid; else hi = mid;
	}
	return lo;
}

// LayerNorm backward (kernels.LayerNormBackward), one block per row.
extern "C" __global__ void layernorm_bwd(float* dx, const float* dy, const float* x, const float* mean, const float* rstd, int rows, int cols) {
	__shared__ float sh[32];
	long long r = blockIdx.x;
	const float* xr = x + r * cols;
	const float* gr = dy + r * cols;
	float* dr = dx + r * cols;
	const float m = mean[r], rs = rstd[r];
	float sdy = 0.0f, sdx = 0.0f;
	for (int i = threadIdx.x; i < cols; i += blockDim.x) {
		float g = gr[i];
		sdy += g;
		sdx += g * (xr[i] - m);
	}
	sdy = block_reduce<false>(sdy, sh);
	sdx = block_reduce<false>(sdx, sh);
	const float inv = 1.0f / (float)cols;
	const float a = sdy * inv, b = sdx * inv * rs;
	// dx may alias dy: each element is read, then written, by one thread.
	for (int i = threadIdx.x; i < cols; i += blockDim.x) {
		float xh = (xr[i] - m) * rs;
		dr[i] = rs * (gr[i] - a - xh * b);
	}
}

// RMSNorm forward (kernels.RMSNormForward); rstd rounded once from
// float64 as the CPU's normRsqrt does. rstd may be null.
extern "C" __global__ void rmsnorm_fwd(float* y, float* rstd, const float* x, const float* w, int rows, int cols, float eps) {
	__shared__ float sh[32];
	long long r = blockIdx.x;
	const float* xr = x + r * cols;
	float* yr = y + r * cols;
	float s = 0.0f;
	for (int i = threadIdx.x; i < cols; i += blockDim.x) s += xr[i] * xr[i];
	s = block_reduce<false>(s, sh);
	float ms = cols > 0 ? s / (float)cols : 0.0f;
	const float rs = (float)(1.0 / sqrt((double)(ms + eps)));
	for (int i = threadIdx.x; i < cols; i += blockDim.x) yr[i] = xr[i] * rs * w[i];
	if (rstd && threadIdx.x == 0) rstd[r] = rs;
}

// RMSNorm dx (kernels.RMSNormBackward), one block per row.
extern "C" __global__ void rmsnorm_bwd_dx(float* dx, const float* dy, const float* x, const float* w, const float* rstd, int rows, int cols) {
	__shared__ float sh[32];
	long long r = blockIdx.x;
	const float* xr = x + r * cols;
	const float* gr = dy + r * cols;
	float* dr = dx + r * cols;
	const float rs = rstd[r];
	float s = 0.0f;
	for (int i = threadIdx.x; i < cols; i += blockDim.x) s += w[i] * gr[i] * xr[i];
	s = block_reduce<false>(s, sh);
	const float c = rs * rs * rs * s * (1.0f / (float)cols);
	for (int i = threadIdx.x; i < cols; i += blockDim.x) dr[i] = rs * w[i] * gr[i] - c * xr[i];
}

// RMSNorm dw = Σ_rows dy∘x·rstd, 32 columns per block.
extern "C" __global__ void rmsnorm_bwd_dw(float* dw, const float* dy, const float* x, const float* rstd, int rows, int cols) {
	__shared__ double sh[COL_TY][33];
	int c = blockIdx.x * 32 + threadIdx.x;
	double acc = 0.0;
	if (c < cols)
		for (long long r = threadIdx.y; r < rows; r += COL_TY) acc += (double)(dy[r * cols + c] * x[r * cols + c] * rstd[r]);
	acc = col_sum(acc, sh);
	if (threadIdx.y == 0 && c < cols) dw[c] = (float)acc;
}

// gn_elem returns the offset of element idx of group g of sample s, the
// group's elements counted token by token (idx = t·cpg + c').
__device__ __forceinline__ long long gn_elem(long long idx, int s, int g, int tokens, int channels, int cpg) {
	long long t = idx / cpg;
	return ((long long)s * tokens + t) * channels + (long long)g * cpg + (idx - t * cpg);
}

__device__ __forceinline__ float sigmoid_f(float z) {
	return 1.0f / (1.0f + exp2f(clamp_exp2(-LOG2E * z)));
}

// GroupNorm, followed by SiLU when silu ≠ 0 (kernels.GroupNormForward,
// kernels.GroupNormSiLUForward), one block per (sample, group): float64
// statistics in two passes, then the output.
extern "C" __global__ void gnsilu_fwd(float* y, float* mean, float* rstd, const float* x, const float* w, const float* b,
		int tokens, int channels, int groups, float eps, int silu) {
	__shared__ double sh[32];
	const int item = blockIdx.x, s = item / groups, g = item % groups, cpg = channels / groups;
	const long long count = (long long)tokens * cpg;
	double sum = 0.0;
	for (long long i = threadIdx.x; i < count; i += blockDim.x) sum += (double)x[gn_elem(i, s, g, tokens, channels, cpg)];
	sum = block_sum_d(sum, sh);
	const double m = count > 0 ? sum / (double)count : 0.0;
	double ss = 0.0;
	for (long long i = threadIdx.x; i < count; i += blockDim.x) {
		double d = (double)x[gn_elem(i, s, g, tokens, channels, cpg)] - m;
		ss += d * d;
	}
	ss = block_sum_d(ss, sh);
	const double v = count > 0 ? ss / (double)count : 0.0;
	const float rt = (float)(1.0 / sqrt(v + (double)eps)), mt = (float)m;
	for (long long i = threadIdx.x; i < count; i += blockDim.x) {
		long long o = gn_elem(i, s, g, tokens, channels, cpg);
		int c = g * cpg + (int)(i % cpg);
		if (!silu) { // the CPU's association for each
			y[o] = (x[o] - mt) * rt * w[c] + b[c];
			continue;
		}
		float z = (x[o] - mt) * (rt * w[c]) + b[c];
		y[o] = z / (1.0f + exp2f(clamp_exp2(-LOG2E * z)));
	}
	if (threadIdx.x == 0) {
		if (mean) mean[item] = mt;
		if (rstd) rstd[item] = rt;
	}
}

// gns_dz is the gradient through SiLU at z = x̂·w + b: dy·σ(z)·(1 + z(1 − σ(z))).
__device__ __forceinline__ float gns_dz(float g, float xh, float w, float b) {
	float z = xh * w + b;
	float sg = sigmoid_f(z);
	return g * sg * (1.0f + z * (1.0f - sg));
}

// GroupNorm (+ SiLU when silu ≠ 0) dx (kernels.GroupNormBackward,
// kernels.GroupNormSiLUBackward), one block per (sample, group); dz is
// recomputed in the second pass, not stored. b is read only with SiLU.
extern "C" __global__ void gnsilu_bwd_dx(float* dx, const float* dy, const float* x, const float* mean, const float* rstd,
		const float* w, const float* b, int tokens, int channels, int groups, int silu) {
	__shared__ double sh[32];
	const int item = blockIdx.x, s = item / groups, g = item % groups, cpg = channels / groups;
	const long long count = (long long)tokens * cpg;
	const float m = mean[item], rs = rstd[item];
	double sa = 0.0, sax = 0.0;
	for (long long i = threadIdx.x; i < count; i += blockDim.x) {
		long long o = gn_elem(i, s, g, tokens, channels, cpg);
		int c = g * cpg + (int)(i % cpg);
		float xh = (x[o] - m) * rs;
		float d = silu ? gns_dz(dy[o], xh, w[c], b[c]) : dy[o];
		sa += (double)w[c] * (double)d;
		sax += (double)w[c] * ((double)d * (double)xh);
	}
	sa = block_sum_d(sa, sh);
	sax = block_sum_d(sax, sh);
	const float mg = count > 0 ? (float)(sa / (double)count) : 0.0f;
	const float sg = count > 0 ? (float)(sax / (double)count) : 0.0f;
	for (long long i = threadIdx.x; i < count; i += blockDim.x) {
		long long o = gn_elem(i, s, g, tokens, channels, cpg);
		int c = g * cpg + (int)(i % cpg);
		float xh = (x[o] - m) * rs;
		float d = silu ? gns_dz(dy[o], xh, w[c], b[c]) : dy[o];
		dx[o] = rs * (w[c] * d - mg - xh * sg);
	}
}

// GroupNorm (+ SiLU) dw = Σ dz∘x̂ and db = Σ dz over all rows (dz = dy
// without SiLU), 32 channels per block; dw or db may be null.
extern "C" __global__ void gnsilu_bwd_dwdb(float* dw, float* db, const float* dy, const float* x, const float* mean, const float* rstd,
		const float* w, const float* b, int batch, int tokens, int channels, int groups, int silu) {
	__shared__ double sh[COL_TY][33];
	const int c = blockIdx.x * 32 + threadIdx.x, cpg = channels / groups;
	double aw = 0.0, ab = 0.0;
	if (c < channels) {
		const int g = c / cpg;
		const float wc = w[c], bc = silu ? b[c] : 0.0f;
		const long long rows = (long long)batch * tokens;
		for (long long r = threadIdx.y; r < rows; r += COL_TY) {
			int item = (int)(r / tokens) * groups + g;
			long long o = r * channels + c;
			float xh = (x[o] - mean[item]) * rstd[item];
			float d = silu ? gns_dz(dy[o], xh, wc, bc) : dy[o];
			aw += (double)d * (double)xh;
			ab += (double)d;
		}
	}
	aw = col_sum(aw, sh);
	ab = col_sum(ab, sh);
	if (threadIdx.y == 0 && c < channels) {
		if (dw) dw[c] = (float)aw;
		if (db) db[c] = (float)ab;
	}
}

// adaLN modulation y = x·(1 + scale_s) + shift_s (kernels.ModulateForward),
// one block per row.
extern "C" __global__ void modulate_fwd(float* y, const float* x, const float* shift, const float* scale, const int* offs, int S, int cols) {
	long long r = blockIdx.x;
	long long s = sample_of(offs, S, r);
	const float* sh = shift + s * cols;
	const float* sc = scale + s * cols;
	for (int i = threadIdx.x; i < cols; i += blockDim.x) y[r * cols + i] = x[r * cols + i] * (1.0f + sc[i]) + sh[i];
}

// dx = dy·(1 + scale_s) (kernels.ModulateBackward).
extern "C" __global__ void modulate_bwd_dx(float* dx, const float* dy, const float* scale, const int* offs, int S, int cols) {
	long long r = blockIdx.x;
	const float* sc = scale + (long long)sample_of(offs, S, r) * cols;
	for (int i = threadIdx.x; i < cols; i += blockDim.x) dx[r * cols + i] = dy[r * cols + i] * (1.0f + sc[i]);
}

// Gated residual y = x + gate_s∘h (kernels.GatedResidualForward).
extern "C" __global__ void gated_fwd(float* y, const float* x, const float* gate, const float* h, const int* offs, int S, int cols) {
	long long r = blockIdx.x;
	const float* gs = gate + (long long)sample_of(offs, S, r) * cols;
	for (int i = threadIdx.x; i < cols; i += blockDim.x) y[r * cols + i] = x[r * cols + i] + gs[i] * h[r * cols + i];
}

// dh = gate_s∘dy (kernels.GatedResidualBackward).
extern "C" __global__ void gated_bwd_dh(float* dh, const float* dy, const float* gate, const int* offs, int S, int cols) {
	long long r = blockIdx.x;
	const float* gs = gate + (long long)sample_of(offs, S, r) * cols;
	for (int i = threadIdx.x; i < cols; i += blockDim.x) dh[r * cols + i] = gs[i] * dy[r * cols + i];
}

// Per-sample column sums over the rows of sample blockIdx.y:
// sum = Σ a and dot = Σ a∘b (either null), 32 columns per block; an empty
// sample gets zeros.
extern "C" __global__ void per_sample_sums(float* sum, float* dot, const float* a, const float* b, const int* offs, int cols) {
	__shared__ double sh[COL_TY][33];
	const int c = blockIdx.x * 32 + threadIdx.x;
	const long long s = blockIdx.y;
	double as = 0.0, ad = 0.0;
	if (c < cols) {
		for (long long r = offs[s] + threadIdx.y; r < offs[s + 1]; r += COL_TY) {
			float v = a[r * cols + c];
			as += (double)v;
			if (dot) ad += (double)(v * b[r * cols + c]);
		}
	}
	as = col_sum(as, sh);
	ad = col_sum(ad, sh);
	if (threadIdx.y == 0 && c < cols) {
		if (sum) sum[s * cols + c] = (float)as;
		if (dot) dot[s * cols + c] = (float)ad;
	}
}
`

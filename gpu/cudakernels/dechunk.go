package cudakernels

import (
	"fmt"

	"github.com/dcdit/dcdit/gpu/cuda"
)

// De-chunking (kernels.DeChunkForward/Backward): DC-DiT's
// confidence-weighted Gaussian smoothing over the kept tokens of each
// sample, packed as a Packing. With q_j = clamp(p_j, pmin, pmax) and K_ij
// the Gaussian of the grid distance between tokens i and j of one sample,
//
//	z_i = Σ_j K_ij·q_j + 1e-8
//	s_i = Σ_j K_ij·q_j·h_j / z_i
//	y_i = q_i·h_i + (1 − q_i)·s_i
//
// The CPU forms the m×m weight matrix per sample and multiplies it by h.
// Here K is recomputed on the fly, exactly as the CPU rounds it (squared
// distance and quotient in float32, the exponential in float64 rounded
// once), so the m×m matrix never exists: a block takes DC_TR rows of one
// sample and 256 columns, walks the sample's tokens in tiles of DC_JT,
// writes the tile's weights into shared memory and accumulates the rows'
// weighted sums (each weight serving 256 columns) and their denominators.
// s is divided by z at the end rather than the weights before the product
// (the CPU's order): a rounding difference of an ulp or so.
//
// Backward, with u_i = (1 − q_i)·dy_i / z_i and β_i = <u_i, s_i>:
//
//	dh_j = q_j·dy_j + q_j·(K·u)_j
//	dp_j = Σ_c dy_j(h_j − s_j) + <(K·u)_j, h_j> − Σ_i K_ji·β_i  (0 where clamped)
//
// in three kernels: u and β per row; K·u with the same tiles as the
// forward pass, writing dh and each column block's part of dp's sum; then
// dp from the parts in a fixed order (no atomics, deterministic).

// deChunkRows and deChunkCols are the rows and columns of a de-chunk
// block (DC_TR in the source, and the block size).
const (
	deChunkRows = 8
	deChunkCols = blockSize
)

// DeChunkWorkspaceBytes is the device scratch DeChunkBackward needs for
// rows packed tokens of cols columns: u [rows, cols], β and K·β [rows] and
// the per-column-block parts of dp [rows, ⌈cols/256⌉].
func DeChunkWorkspaceBytes(rows, cols int) int {
	return 4 * (rows*cols + 2*rows + rows*deChunkGroups(cols))
}

func deChunkGroups(cols int) int { return (cols + deChunkCols - 1) / deChunkCols }

// deChunkArgs checks the packing, width and positions and returns the
// rows, the samples and the grid.
func deChunkArgs(kernel string, pk *Packing, cols int, pos cuda.Buffer, sigma, pmin, pmax float64) (rows, samples int, grid cuda.Dim3, err error) {
	if pk == nil {
		return 0, 0, grid, fmt.Errorf("cudakernels: %s: nil packing", kernel)
	}
	rows, samples = pk.Rows(), pk.Sequences()
	if cols < 1 || int64(rows)*int64(cols) > 1<<62 || samples > 65535 || deChunkGroups(cols) > 65535 {
		return 0, 0, grid, fmt.Errorf("cudakernels: %s: %d rows of %d columns in %d samples (want ≥ 1 column, ≤ 65535 samples)", kernel, rows, cols, samples)
	}
	if !(sigma > 0) || !(pmin <= pmax) {
		return 0, 0, grid, fmt.Errorf("cudakernels: %s: σ = %v, clamp [%v, %v]: want σ > 0 and pmin ≤ pmax", kernel, sigma, pmin, pmax)
	}
	if pos.Len() != 16*rows {
		return 0, 0, grid, fmt.Errorf("cudakernels: %s: pos has %d bytes, want 2·%d float64 (row, column per token)", kernel, pos.Len(), rows)
	}
	maxM := 0
	for s := 1; s < len(pk.offsets); s++ {
		maxM = max(maxM, pk.offsets[s]-pk.offsets[s-1])
	}
	grid = cuda.Dim3{X: max(1, (maxM+deChunkRows-1)/deChunkRows), Y: samples, Z: deChunkGroups(cols)}
	return rows, samples, grid, nil
}

// deChunkDen is 2σ² rounded to float32, as the CPU's den.
func deChunkDen(sigma float64) float32 { return float32(2 * sigma * sigma) }

// DeChunkForward computes y [rows, cols] from the kept tokens h [rows,
// cols] and their boundary probabilities p [rows], packed by pk, with
// token positions pos (float64 grid row and column of each token, [2·rows])
// (kernels.DeChunkForward). It saves q = clamp(p) and z [rows] and s
// [rows, cols] for the backward pass.
func (sc *Scaffold) DeChunkForward(y, q, z, s, h, p, pos cuda.Buffer, pk *Packing, cols int, sigma, pmin, pmax float64) error {
	const kernel = "DeChunkForward"
	rows, _, grid, err := deChunkArgs(kernel, pk, cols, pos, sigma, pmin, pmax)
	if err != nil {
		return err
	}
	if err := checkBufs(kernel, bufArg{"y", y, rows * cols, false}, bufArg{"q", q, rows, false}, bufArg{"z", z, rows, false},
		bufArg{"s", s, rows * cols, false}, bufArg{"h", h, rows * cols, false}, bufArg{"p", p, rows, false}); err != nil {
		return err
	}
	if rows == 0 {
		return nil
	}
	return sc.dcFwd.Launch(grid, cuda.Dim3{X: deChunkCols}, 0, y, q, z, s, h, p, pos, pk.offs,
		int32(cols), deChunkDen(sigma), float32(pmin), float32(pmax))
}

// DeChunkBackward computes dh [rows, cols] and dp [rows] (either may be
// empty) from dy, given DeChunkForward's h, p, q, z and s
// (kernels.DeChunkBackward). dp is zero where the clamp is active (p
// outside [pmin, pmax]). ws holds DeChunkWorkspaceBytes(rows, cols).
func (sc *Scaffold) DeChunkBackward(dh, dp, dy, h, p, q, z, s, pos cuda.Buffer, pk *Packing, cols int, sigma, pmin, pmax float64, ws cuda.Buffer) error {
	const kernel = "DeChunkBackward"
	rows, _, grid, err := deChunkArgs(kernel, pk, cols, pos, sigma, pmin, pmax)
	if err != nil {
		return err
	}
	if err := checkBufs(kernel, bufArg{"dh", dh, rows * cols, true}, bufArg{"dp", dp, rows, true},
		bufArg{"dy", dy, rows * cols, false}, bufArg{"h", h, rows * cols, false}, bufArg{"p", p, rows, false},
		bufArg{"q", q, rows, false}, bufArg{"z", z, rows, false}, bufArg{"s", s, rows * cols, false}); err != nil {
		return err
	}
	if rows == 0 || (dh.Len() == 0 && dp.Len() == 0) {
		return nil
	}
	if need := DeChunkWorkspaceBytes(rows, cols); ws.Len() < need {
		return fmt.Errorf("cudakernels: %s: workspace has %d bytes, want %d", kernel, ws.Len(), need)
	}
	ng := deChunkGroups(cols)
	var u, beta, kb, part cuda.Buffer
	if u, err = f32Slice(ws, 0, rows*cols); err == nil {
		if beta, err = f32Slice(ws, rows*cols, rows); err == nil {
			if kb, err = f32Slice(ws, rows*cols+rows, rows); err == nil {
				part, err = f32Slice(ws, rows*cols+2*rows, rows*ng)
			}
		}
	}
	if err != nil {
		return fmt.Errorf("cudakernels: %s: %w", kernel, err)
	}
	if err := sc.dcBwdU.Launch(cuda.Dim3{X: rows}, cuda.Dim3{X: blockSize}, 0, u, beta, dy, q, z, s, int32(cols)); err != nil {
		return err
	}
	if err := sc.dcBwdK.Launch(grid, cuda.Dim3{X: deChunkCols}, 0, dh.Ptr(), part, kb, dy, h, q, s, u, beta, pos, pk.offs,
		int32(cols), deChunkDen(sigma)); err != nil {
		return err
	}
	if dp.Len() == 0 {
		return nil
	}
	return sc.set.elementwise(sc.dcBwdDp, rows, dp, part, kb, p, int32(ng), float32(pmin), float32(pmax))
}

// deChunkSource is the CUDA C of this file's kernels.
const deChunkSource = `
#define DC_TR 8
#define DC_JT 128

// dc_gauss is K between packed tokens a and b as the CPU rounds it
// (kernels.deChunkKernel): the differences rounded to float32, the
// squared distance and the quotient in float32, exp in float64 rounded
// once.
__device__ __forceinline__ float dc_gauss(const double* pos, long long a, long long b, float den) {
	float dr = (float)(pos[2 * a] - pos[2 * b]), dc = (float)(pos[2 * a + 1] - pos[2 * b + 1]);
	float d2 = dr * dr + dc * dc;
	return (float)exp((double)(-d2 / den));
}

__device__ __forceinline__ float dc_clamp(float v, float lo, float hi) { return fminf(fmaxf(v, lo), hi); }

// warp_sum is the sum of v over the warp, in every lane.
__device__ __forceinline__ float warp_sum(float v) {
	for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
	return v;
}

// De-chunk forward: block (row tile, sample, column block); blockDim =
// 256 ≥ 32·DC_TR, so warp r sums row r's weights.
extern "C" __global__ void dechunk_fwd(float* y, float* q, float* z, float* s, const float* h, const float* p,
		const double* pos, const int* offs, int cols, float den, float pmin, float pmax) {
	__shared__ float kq[DC_TR][DC_JT];
	__shared__ float zs[DC_TR];
	const long long o = offs[blockIdx.y];
	const int m = offs[blockIdx.y + 1] - offs[blockIdx.y];
	const int i0 = blockIdx.x * DC_TR;
	if (i0 >= m) return;
	const int nr = min(DC_TR, m - i0);
	const int c = blockIdx.z * blockDim.x + threadIdx.x;
	const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
	float acc[DC_TR];
	#pragma unroll
	for (int r = 0; r < DC_TR; r++) acc[r] = 0.0f;
	float zacc = 0.0f;
	for (int j0 = 0; j0 < m; j0 += DC_JT) {
		const int nj = min(DC_JT, m - j0);
		for (int e = threadIdx.x; e < DC_TR * DC_JT; e += blockDim.x) {
			int r = e / DC_JT, jj = e % DC_JT;
			float v = 0.0f;
			if (r < nr && jj < nj) {
				long long b = o + j0 + jj;
				v = dc_gauss(pos, o + i0 + r, b, den) * dc_clamp(p[b], pmin, pmax);
			}
			kq[r][jj] = v;
		}
		__syncthreads();
		if (warp < DC_TR) {
			float t = 0.0f;
			for (int jj = lane; jj < DC_JT; jj += 32) t += kq[warp][jj];
			zacc += warp_sum(t);
		}
		if (c < cols) {
			const float* hc = h + (o + j0) * cols + c;
			for (int jj = 0; jj < nj; jj++) {
				float hv = hc[(long long)jj * cols];
				#pragma unroll
				for (int r = 0; r < DC_TR; r++) acc[r] = fmaf(kq[r][jj], hv, acc[r]);
			}
		}
		__syncthreads();
	}
	if (warp < DC_TR && lane == 0) zs[warp] = zacc + 1e-8f;
	__syncthreads();
	#pragma unroll
	for (int r = 0; r < DC_TR; r++) {
		if (r >= nr) break;
		const long long row = o + i0 + r;
		const float qi = dc_clamp(p[row], pmin, pmax), zr = zs[r];
		if (c < cols) {
			const long long e = row * cols + c;
			const float sv = acc[r] / zr;
			s[e] = sv;
			y[e] = qi * h[e] + (1.0f - qi) * sv;
		}
		if (blockIdx.z == 0 && threadIdx.x == 0) {
			q[row] = qi;
			z[row] = zr;
		}
	}
}

// u_r = (1 − q_r)/z_r · dy_r and β_r = <u_r, s_r>, one block per row.
extern "C" __global__ void dechunk_bwd_u(float* u, float* beta, const float* dy, const float* q, const float* z, const float* s, int cols) {
	__shared__ float sh[32];
	const long long r = blockIdx.x;
	const float f = (1.0f - q[r]) / z[r];
	float b = 0.0f;
	for (int c = threadIdx.x; c < cols; c += blockDim.x) {
		const long long e = r * cols + c;
		float v = f * dy[e];
		u[e] = v;
		b += v * s[e];
	}
	b = block_reduce<false>(b, sh);
	if (threadIdx.x == 0) beta[r] = b;
}

// De-chunk backward, K·u by the forward pass's tiles: dh (may be null) =
// q·dy + q·(K·u); part[row·gridDim.z + column block] = this block's
// Σ_c dy(h − s) + (K·u)·h; kb[row] = Σ_i K_row,i·β_i.
extern "C" __global__ void dechunk_bwd_k(float* dh, float* part, float* kb, const float* dy, const float* h, const float* q,
		const float* s, const float* u, const float* beta, const double* pos, const int* offs, int cols, float den) {
	__shared__ float kt[DC_TR][DC_JT];
	__shared__ float sh[32];
	const long long o = offs[blockIdx.y];
	const int m = offs[blockIdx.y + 1] - offs[blockIdx.y];
	const int i0 = blockIdx.x * DC_TR;
	if (i0 >= m) return;
	const int nr = min(DC_TR, m - i0);
	const int c = blockIdx.z * blockDim.x + threadIdx.x;
	const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
	float acc[DC_TR];
	#pragma unroll
	for (int r = 0; r < DC_TR; r++) acc[r] = 0.0f;
	float kbacc = 0.0f;
	for (int j0 = 0; j0 < m; j0 += DC_JT) {
		const int nj = min(DC_JT, m - j0);
		for (int e = threadIdx.x; e < DC_TR * DC_JT; e += blockDim.x) {
			int r = e / DC_JT, jj = e % DC_JT;
			kt[r][jj] = (r < nr && jj < nj) ? dc_gauss(pos, o + i0 + r, o + j0 + jj, den) : 0.0f;
		}
		__syncthreads();
		if (warp < DC_TR) {
			float t = 0.0f;
			for (int jj = lane; jj < nj; jj += 32) t += kt[warp][jj] * beta[o + j0 + jj];
			kbacc += warp_sum(t);
		}
		if (c < cols) {
			const float* uc = u + (o + j0) * cols + c;
			for (int jj = 0; jj < nj; jj++) {
				float uv = uc[(long long)jj * cols];
				#pragma unroll
				for (int r = 0; r < DC_TR; r++) acc[r] = fmaf(kt[r][jj], uv, acc[r]);
			}
		}
		__syncthreads();
	}
	if (blockIdx.z == 0 && warp < nr && lane == 0) kb[o + i0 + warp] = kbacc;
	#pragma unroll
	for (int r = 0; r < DC_TR; r++) {
		if (r >= nr) break; // nr is the same for the whole block
		const long long row = o + i0 + r;
		float g = 0.0f;
		if (c < cols) {
			const long long e = row * cols + c;
			const float dv = dy[e], hv = h[e], qi = q[row];
			if (dh) dh[e] = qi * dv + qi * acc[r];
			g = dv * (hv - s[e]) + acc[r] * hv;
		}
		g = block_reduce<false>(g, sh);
		if (threadIdx.x == 0) part[row * gridDim.z + blockIdx.z] = g;
	}
}

// dp_r = Σ_g part[r·ng + g] − kb[r], zero where p is clamped. n = rows.
extern "C" __global__ void dechunk_bwd_dp(float* dp, const float* part, const float* kb, const float* p, int ng, float pmin, float pmax, long long n) {
	for (long long r = blockIdx.x * (long long)blockDim.x + threadIdx.x; r < n; r += (long long)gridDim.x * blockDim.x) {
		float g = 0.0f;
		for (int k = 0; k < ng; k++) g += part[r * ng + k];
		g -= kb[r];
		const float pv = p[r];
		dp[r] = (pv < pmin || pv > pmax) ? 0.0f : g;
	}
}
`

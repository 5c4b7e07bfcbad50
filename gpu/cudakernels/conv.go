package cudakernels

import (
	"fmt"

	"github.com/dcdit/dcdit/gpu/cuda"
)

// Convolutions over token-major grids, as kernels.Conv3x3Forward/Backward
// and kernels.Conv1x1Forward/Backward: x is [batch·height·width, cin]
// (sample b's token (i, j) is row b·H·W + i·W + j), w is PyTorch's
// [cout, cin, kh, kw], y is [batch·height·width, cout].
//
// The 3×3 convolution is im2col into a device buffer followed by a cuBLAS
// GEMM (package cuda), not a hand-written implicit GEMM. Why: cuBLAS's FP32
// GEMM already runs at the H100's FP32 peak (51.7 TFLOP/s measured) and
// its TF32 path at ~400 TFLOP/s, which a first implicit-GEMM kernel on the
// CUDA cores would not approach; the column panel costs one extra write
// and read of 9·C floats per token, a few percent of the product's time
// at DiT widths, and the caller bounds it (the workspace may be smaller
// than one panel of all tokens: the tokens then go through in chunks). A
// fused implicit GEMM on the tensor cores (TF32/BF16 mma with the
// neighbourhood gathered into shared memory) is the later optimisation.
//
// Column panels are channel-major (column c·9 + tap, tap = 3·(di+1) +
// (dj+1)), unlike the CPU's tap-major panels: that is PyTorch's weight
// order, so w is used as stored for y = col·wᵀ and the weight gradient
// comes out as dw = dyᵀ·col in PyTorch's layout, with no repacking. The
// input gradient is a 3×3 convolution of dy with the kernel rotated by
// 180° and its channel axes swapped (as on the CPU), so it too gathers
// instead of scattering (no atomics, deterministic); those weights are
// repacked into the workspace, 9·cin·cout floats.
//
// The bias is written into y first and the GEMM adds to it (beta = 1), as
// the CPU does; the bias gradient is a float64 column sum of dy.

// convPrecision accepts the GEMM precisions that read float32 storage.
func convPrecision(kernel string, p cuda.Precision) error {
	if p != cuda.FP32 && p != cuda.TF32 {
		return fmt.Errorf("cudakernels: %s: precision %v, want FP32 or TF32 (float32 storage)", kernel, p)
	}
	return nil
}

// convShape validates a batch of grids and returns its token count.
func convShape(kernel string, batch, height, width, cin, cout int) (int, error) {
	if batch < 0 || height < 1 || width < 1 || cin < 1 || cout < 1 {
		return 0, fmt.Errorf("cudakernels: %s: batch %d of %d×%d grids, %d → %d channels: want batch ≥ 0 and the rest ≥ 1", kernel, batch, height, width, cin, cout)
	}
	tokens := int64(batch) * int64(height) * int64(width)
	if tokens*9*int64(max(cin, cout)) > 1<<40 || tokens > 1<<31-1 || int64(height)*int64(width) > 1<<31-1 || 9*int64(cin)*int64(cout) > 1<<31-1 {
		return 0, fmt.Errorf("cudakernels: %s: batch %d of %d×%d grids, %d → %d channels is too large", kernel, batch, height, width, cin, cout)
	}
	return int(tokens), nil
}

// Conv3x3WorkspaceBytes is the workspace with which Conv3x3Forward and
// Conv3x3Backward run in one chunk: the flipped weights and a column panel
// of every token, 4·(9·cin·cout + tokens·9·max(cin, cout)) bytes. Any
// workspace of at least Conv3x3MinWorkspaceBytes works, in more chunks.
func Conv3x3WorkspaceBytes(batch, height, width, cin, cout int) int {
	return 4 * (9*cin*cout + batch*height*width*9*max(cin, cout))
}

// Conv3x3MinWorkspaceBytes is the smallest workspace Conv3x3Forward and
// Conv3x3Backward accept: the flipped weights and one token's panel row.
func Conv3x3MinWorkspaceBytes(cin, cout int) int { return 4 * (9*cin*cout + 9*max(cin, cout)) }

// convChunk returns how many tokens one panel of width k in the workspace
// ws, after reserved floats, holds (at most tokens).
func convChunk(kernel string, ws cuda.Buffer, reserved, k, tokens int) (int, error) {
	n := (ws.Len()/4 - reserved) / k
	if n < 1 {
		return 0, fmt.Errorf("cudakernels: %s: workspace of %d bytes holds no panel row (%d bytes reserved, %d a row)", kernel, ws.Len(), 4*reserved, 4*k)
	}
	return min(n, tokens), nil
}

// f32Slice is floats [off, off+n) of b.
func f32Slice(b cuda.Buffer, off, n int) (cuda.Buffer, error) { return b.Slice(4*off, 4*n) }

// fillBias sets every row of y [rows, cols] to bias.
func (sc *Scaffold) fillBias(y, bias cuda.Buffer, rows, cols int) error {
	return sc.biasFill.Launch(cuda.Dim3{X: rows}, cuda.Dim3{X: rowThreads(cols)}, 0, y, bias, int32(cols))
}

// rowThreads is the block size of a kernel with one block per row of n
// elements: n rounded up to whole warps, at most blockSize.
func rowThreads(n int) int { return min(blockSize, (n+31)/32*32) }

// im2col3x3 gathers the panel rows of tokens t0 … t0+n−1 of x (c
// channels) into col.
func (sc *Scaffold) im2col3x3(col, x cuda.Buffer, t0, n, height, width, c int) error {
	return sc.im2col.Launch(cuda.Dim3{X: n}, cuda.Dim3{X: rowThreads(9 * c)}, 0, col, x, int64(t0), int32(height), int32(width), int32(c))
}

// columnSums sets out[c] = Σ_rows x[r, c] (float64 sums, rounded once).
func (sc *Scaffold) columnSums(out, x cuda.Buffer, rows, cols int) error {
	g, b := colGrid(cols, 1)
	return sc.colSums.Launch(g, b, 0, out, x, int64(rows), int32(cols))
}

// Conv3x3Forward computes a 3×3 convolution, stride 1, zero padding 1
// (nn.Conv2d(cin, cout, 3, padding=1)), y = conv(x, w) + bias, over
// token-major grids (kernels.Conv3x3Forward). bias may be empty. ws is
// device scratch of at least Conv3x3MinWorkspaceBytes; with
// Conv3x3WorkspaceBytes the whole batch is one GEMM. prec is FP32 (the
// parity reference) or TF32.
func (sc *Scaffold) Conv3x3Forward(y, x, w, bias, ws cuda.Buffer, batch, height, width, cin, cout int, prec cuda.Precision) error {
	const kernel = "Conv3x3Forward"
	tokens, err := convShape(kernel, batch, height, width, cin, cout)
	if err != nil {
		return err
	}
	if err := convPrecision(kernel, prec); err != nil {
		return err
	}
	if err := checkBufs(kernel, bufArg{"y", y, tokens * cout, false}, bufArg{"x", x, tokens * cin, false},
		bufArg{"w", w, 9 * cout * cin, false}, bufArg{"bias", bias, cout, true}); err != nil {
		return err
	}
	if tokens == 0 {
		return nil
	}
	k := 9 * cin
	chunk, err := convChunk(kernel, ws, 0, k, tokens)
	if err != nil {
		return err
	}
	bl, err := sc.set.rt.BLAS()
	if err != nil {
		return fmt.Errorf("cudakernels: %s: %w", kernel, err)
	}
	var beta float32
	if bias.Len() > 0 {
		if err := sc.fillBias(y, bias, tokens, cout); err != nil {
			return err
		}
		beta = 1
	}
	for t0 := 0; t0 < tokens; t0 += chunk {
		n := min(chunk, tokens-t0)
		col, err := f32Slice(ws, 0, n*k)
		if err != nil {
			return err
		}
		yb, err := f32Slice(y, t0*cout, n*cout)
		if err != nil {
			return err
		}
		if err := sc.im2col3x3(col, x, t0, n, height, width, cin); err != nil {
			return err
		}
		if err := bl.Gemm(prec, false, true, n, cout, k, 1, col, k, w, k, beta, yb, cout); err != nil {
			return fmt.Errorf("cudakernels: %s: %w", kernel, err)
		}
	}
	return nil
}

// Conv3x3Backward writes Conv3x3Forward's gradients from dy: dx [tokens,
// cin], dw [cout, cin, 3, 3] and dbias [cout], any of which may be empty
// (kernels.Conv3x3Backward); they are overwritten, not accumulated. x is
// needed for dw, w for dx. ws and prec are as for Conv3x3Forward.
func (sc *Scaffold) Conv3x3Backward(dx, dw, dbias, dy, x, w, ws cuda.Buffer, batch, height, width, cin, cout int, prec cuda.Precision) error {
	const kernel = "Conv3x3Backward"
	tokens, err := convShape(kernel, batch, height, width, cin, cout)
	if err != nil {
		return err
	}
	if err := convPrecision(kernel, prec); err != nil {
		return err
	}
	if err := checkBufs(kernel, bufArg{"dx", dx, tokens * cin, true}, bufArg{"dw", dw, 9 * cout * cin, true},
		bufArg{"dbias", dbias, cout, true}, bufArg{"dy", dy, tokens * cout, false}); err != nil {
		return err
	}
	if dx.Len() > 0 {
		if err := checkBufs(kernel, bufArg{"w", w, 9 * cout * cin, false}); err != nil {
			return err
		}
	}
	if dw.Len() > 0 {
		if err := checkBufs(kernel, bufArg{"x", x, tokens * cin, false}); err != nil {
			return err
		}
	}
	if tokens == 0 {
		// Empty sums: zero, as on the CPU.
		if err := dw.Zero(); err != nil {
			return err
		}
		return dbias.Zero()
	}
	if dbias.Len() > 0 {
		if err := sc.columnSums(dbias, dy, tokens, cout); err != nil {
			return err
		}
	}
	if dw.Len() == 0 && dx.Len() == 0 {
		return nil
	}
	bl, err := sc.set.rt.BLAS()
	if err != nil {
		return fmt.Errorf("cudakernels: %s: %w", kernel, err)
	}
	kin, kout := 9*cin, 9*cout
	if dw.Len() > 0 {
		// dw [cout, 9·cin] = dyᵀ·col(x), summed over chunks of tokens by
		// the GEMM's beta.
		chunk, err := convChunk(kernel, ws, 0, kin, tokens)
		if err != nil {
			return err
		}
		for t0 := 0; t0 < tokens; t0 += chunk {
			n := min(chunk, tokens-t0)
			col, err := f32Slice(ws, 0, n*kin)
			if err != nil {
				return err
			}
			dyb, err := f32Slice(dy, t0*cout, n*cout)
			if err != nil {
				return err
			}
			if err := sc.im2col3x3(col, x, t0, n, height, width, cin); err != nil {
				return err
			}
			var beta float32
			if t0 > 0 {
				beta = 1
			}
			if err := bl.Gemm(prec, true, false, cout, kin, n, 1, dyb, cout, col, kin, beta, dw, kin); err != nil {
				return fmt.Errorf("cudakernels: %s: dw: %w", kernel, err)
			}
		}
	}
	if dx.Len() > 0 {
		// dx = col(dy)·wf with wf [9·cout, cin], row co·9 + tap holding
		// w[co, :, 8 − tap]; wf sits at the start of ws, the panels after.
		wf, err := f32Slice(ws, 0, kout*cin)
		if err != nil {
			return fmt.Errorf("cudakernels: %s: workspace of %d bytes cannot hold the flipped weights: %w", kernel, ws.Len(), err)
		}
		chunk, err := convChunk(kernel, ws, kout*cin, kout, tokens)
		if err != nil {
			return err
		}
		if err := sc.set.elementwise(sc.flipW, kout*cin, wf, w, int32(cin), int32(cout)); err != nil {
			return err
		}
		for t0 := 0; t0 < tokens; t0 += chunk {
			n := min(chunk, tokens-t0)
			col, err := f32Slice(ws, kout*cin, n*kout)
			if err != nil {
				return err
			}
			dxb, err := f32Slice(dx, t0*cin, n*cin)
			if err != nil {
				return err
			}
			if err := sc.im2col3x3(col, dy, t0, n, height, width, cout); err != nil {
				return err
			}
			if err := bl.Gemm(prec, false, false, n, cin, kout, 1, col, kout, wf, cin, 0, dxb, cin); err != nil {
				return fmt.Errorf("cudakernels: %s: dx: %w", kernel, err)
			}
		}
	}
	return nil
}

// conv1x1Shape validates a 1×1 convolution's dimensions.
func conv1x1Shape(kernel string, tokens, cin, cout int) error {
	if tokens < 0 || cin < 1 || cout < 1 || tokens > 1<<31-1 || int64(cin)*int64(cout) > 1<<31-1 {
		return fmt.Errorf("cudakernels: %s: %d tokens, %d → %d channels: want tokens ≥ 0 and channels ≥ 1", kernel, tokens, cin, cout)
	}
	return nil
}

// Conv1x1Forward computes the 1×1 convolution y = x·wᵀ + bias, x [tokens,
// cin], w [cout, cin, 1, 1], bias [cout] or empty (kernels.Conv1x1Forward):
// one GEMM.
func (sc *Scaffold) Conv1x1Forward(y, x, w, bias cuda.Buffer, tokens, cin, cout int, prec cuda.Precision) error {
	const kernel = "Conv1x1Forward"
	if err := conv1x1Shape(kernel, tokens, cin, cout); err != nil {
		return err
	}
	if err := convPrecision(kernel, prec); err != nil {
		return err
	}
	if err := checkBufs(kernel, bufArg{"y", y, tokens * cout, false}, bufArg{"x", x, tokens * cin, false},
		bufArg{"w", w, cout * cin, false}, bufArg{"bias", bias, cout, true}); err != nil {
		return err
	}
	if tokens == 0 {
		return nil
	}
	bl, err := sc.set.rt.BLAS()
	if err != nil {
		return fmt.Errorf("cudakernels: %s: %w", kernel, err)
	}
	var beta float32
	if bias.Len() > 0 {
		if err := sc.fillBias(y, bias, tokens, cout); err != nil {
			return err
		}
		beta = 1
	}
	if err := bl.Gemm(prec, false, true, tokens, cout, cin, 1, x, cin, w, cin, beta, y, cout); err != nil {
		return fmt.Errorf("cudakernels: %s: %w", kernel, err)
	}
	return nil
}

// Conv1x1Backward writes Conv1x1Forward's gradients from dy: dx = dy·w, dw
// = dyᵀ·x and dbias = Σ dy, any of which may be empty
// (kernels.Conv1x1Backward); they are overwritten.
func (sc *Scaffold) Conv1x1Backward(dx, dw, dbias, dy, x, w cuda.Buffer, tokens, cin, cout int, prec cuda.Precision) error {
	const kernel = "Conv1x1Backward"
	if err := conv1x1Shape(kernel, tokens, cin, cout); err != nil {
		return err
	}
	if err := convPrecision(kernel, prec); err != nil {
		return err
	}
	if err := checkBufs(kernel, bufArg{"dx", dx, tokens * cin, true}, bufArg{"dw", dw, cout * cin, true},
		bufArg{"dbias", dbias, cout, true}, bufArg{"dy", dy, tokens * cout, false}); err != nil {
		return err
	}
	if dx.Len() > 0 {
		if err := checkBufs(kernel, bufArg{"w", w, cout * cin, false}); err != nil {
			return err
		}
	}
	if dw.Len() > 0 {
		if err := checkBufs(kernel, bufArg{"x", x, tokens * cin, false}); err != nil {
			return err
		}
	}
	if tokens == 0 {
		if err := dw.Zero(); err != nil {
			return err
		}
		return dbias.Zero()
	}
	if dbias.Len() > 0 {
		if err := sc.columnSums(dbias, dy, tokens, cout); err != nil {
			return err
		}
	}
	if dx.Len() == 0 && dw.Len() == 0 {
		return nil
	}
	bl, err := sc.set.rt.BLAS()
	if err != nil {
		return fmt.Errorf("cudakernels: %s: %w", kernel, err)
	}
	if dx.Len() > 0 {
		if err := bl.Gemm(prec, false, false, tokens, cin, cout, 1, dy, cout, w, cin, 0, dx, cin); err != nil {
			return fmt.Errorf("cudakernels: %s: dx: %w", kernel, err)
		}
	}
	if dw.Len() > 0 {
		if err := bl.Gemm(prec, true, false, cout, cin, tokens, 1, dy, cout, x, cin, 0, dw, cin); err != nil {
			return fmt.Errorf("cudakernels: %s: dw: %w", kernel, err)
		}
	}
	return nil
}

// convSource is the CUDA C of this file's kernels.
const convSource = `
// im2col of a 3×3 neighbourhood, channel-major: col[t − t0][c·9 + tap] =
// x[neighbour (di, dj) of token t][c] (tap = 3·(di+1) + (dj+1)), zero
// where the neighbour falls outside its sample's H×W grid. One block per
// token of the chunk, its threads over the 9·C panel columns: the token's
// grid position is derived once per block, and the per-element index
// arithmetic stays 32-bit (64-bit division is emulated, and a flat
// grid-stride form spent most of its time in it). Tokens may span
// samples: each token's sample follows from its index.
extern "C" __global__ void conv_im2col3x3(float* col, const float* x, long long t0, int H, int W, int C) {
	const long long t = t0 + blockIdx.x, hw = (long long)H * W;
	const long long base = t / hw * hw;
	const int p = (int)(t - base), pi = p / W, pj = p - pi * W;
	const int k9 = 9 * C;
	float* dst = col + (long long)blockIdx.x * k9;
	for (int k = threadIdx.x; k < k9; k += blockDim.x) {
		const int c = k / 9, tap = k - 9 * c;
		const int i = pi + tap / 3 - 1, j = pj + tap % 3 - 1;
		dst[k] = (i >= 0 && i < H && j >= 0 && j < W) ? x[(base + (long long)i * W + j) * C + c] : 0.0f;
	}
}

// The kernel for the input gradient: wf[(co·9 + tap)·cin + c] =
// w[(co·cin + c)·9 + 8 − tap], rotated by 180° with its channel axes
// swapped. n = 9·cin·cout.
extern "C" __global__ void conv_flip_weights(float* wf, const float* w, int cin, int cout, long long n) {
	for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < n; e += (long long)gridDim.x * blockDim.x) {
		int c = (int)(e % cin);
		long long r = e / cin;
		int tap = (int)(r % 9), co = (int)(r / 9);
		wf[e] = w[((long long)co * cin + c) * 9 + 8 - tap];
	}
}

// Every row of y [gridDim.x, cols] set to bias, one block per row.
extern "C" __global__ void rows_fill_bias(float* y, const float* bias, int cols) {
	float* yr = y + (long long)blockIdx.x * cols;
	for (int c = threadIdx.x; c < cols; c += blockDim.x) yr[c] = bias[c];
}

// out[c] = Σ_r x[r][c] in float64, rounded once; 32 columns per block
// (blockDim 32 × COL_TY), so the sum's order depends on the shape alone.
extern "C" __global__ void col_sums(float* out, const float* x, long long rows, int cols) {
	__shared__ double sh[COL_TY][33];
	const int c = blockIdx.x * 32 + threadIdx.x;
	double acc = 0.0;
	if (c < cols)
		for (long long r = threadIdx.y; r < rows; r += COL_TY) acc += (double)x[r * cols + c];
	acc = col_sum(acc, sh);
	if (threadIdx.y == 0 && c < cols) out[c] = (float)acc;
}
`

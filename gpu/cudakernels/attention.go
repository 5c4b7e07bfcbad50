package cudakernels

import (
	"fmt"
	"sync"

	"github.com/dcdit/dcdit/gpu/cuda"
)

// Packed variable-length attention, flash-style (kernels.AttentionForward
// and kernels.AttentionBackward on the CPU). Sequences of different lengths
// lie back to back in one [N, ·] matrix and each attends only within
// itself; no padding enters the computation.
//
// Work is cut into tiles of attnRows rows of one sequence (the last tile
// of a sequence may be short) times one head. A block of 256 threads owns a
// tile, 4 threads per row, each holding every 4th pair of elements of
// the row's head dimension in registers. The forward pass and the dQ pass stream the
// sequence's keys and values through shared memory in tiles of 32 rows and
// keep a running maximum and sum per query row (online softmax), so the
// L×L scores never exist in memory. The dK/dV pass streams the queries and
// output gradients the same way past a tile of keys. Backward recomputes
// the probabilities from the log-sum-exp saved by the forward pass.

// attnRows is the rows of a tile (ATT_ROWS in the CUDA source).
const attnRows = 64

// attnThreads is the threads of an attention block (ATT_THREADS).
const attnThreads = 256

// attnWidth returns the register width ne that the attention kernels use
// for headDim, and its index in Set.attn: the smallest compiled width with
// 4·ne ≥ headDim (the rest of the row is zero padding in registers and
// shared memory). Widths must be even: the kernels move float pairs.
func attnWidth(headDim int) (i, ne int, ok bool) {
	for i, ne := range [attnNumWidths]int{4, 8, 16, 18, 24, 32} {
		if 4*ne >= headDim {
			return i, ne, true
		}
	}
	return 0, 0, false
}

// attnNumWidths is the number of register widths compiled.
const attnNumWidths = 6

// MaxHeadDim is the largest head dimension the attention kernels take.
const MaxHeadDim = 128

// attnKernels are the three attention kernels of one register width, in
// a module of their own compiled at the width's first use: the kernels
// are unrolled over the width, and compiling all six widths takes NVRTC
// about 12 s, where a model uses one width (and a conv-only model none).
type attnKernels struct {
	ne   int
	once sync.Once
	err  error
	mod  *cuda.Module

	fwd, dq, dkv cuda.Function
}

// attention returns the kernels for headDim, compiling them (or loading
// them from the disk cache) at their first use. A failed compile is
// remembered: NVRTC's result does not change.
func (s *Set) attention(kernel string, headDim int) (*attnKernels, error) {
	i, ne, ok := attnWidth(headDim)
	if !ok {
		return nil, fmt.Errorf("cudakernels: %s: no kernel for head dimension %d", kernel, headDim)
	}
	k := &s.attn[i]
	k.once.Do(func() { k.err = s.compileAttention(k, ne) })
	if k.err != nil {
		return nil, fmt.Errorf("cudakernels: %s: %w", kernel, k.err)
	}
	return k, nil
}

func (s *Set) compileAttention(k *attnKernels, ne int) error {
	mod, err := s.rt.Compile(fmt.Sprintf("dcdit_attention_%d.cu", ne), attnSource+fmt.Sprintf("ATT_INSTANCE(%d)\n", ne), fmadOff)
	if err != nil {
		return err
	}
	k.ne, k.mod = ne, mod
	for _, f := range []struct {
		dst  *cuda.Function
		name string
	}{
		{&k.fwd, fmt.Sprintf("attn_fwd_%d", ne)},
		{&k.dq, fmt.Sprintf("attn_bwd_dq_%d", ne)},
		{&k.dkv, fmt.Sprintf("attn_bwd_dkv_%d", ne)},
	} {
		if *f.dst, err = mod.Function(f.name); err != nil {
			return err
		}
	}
	return nil
}

// AttentionModule compiles (or loads from the cache) the attention kernels
// for headDim now rather than at their first launch, and returns their
// module (its target, whether it came from the cache, how long NVRTC took).
func (s *Set) AttentionModule(headDim int) (*cuda.Module, error) {
	if headDim < 1 || headDim > MaxHeadDim {
		return nil, fmt.Errorf("cudakernels: AttentionModule: head dimension %d, want 1..%d", headDim, MaxHeadDim)
	}
	k, err := s.attention("AttentionModule", headDim)
	if err != nil {
		return nil, err
	}
	return k.mod, nil
}

// Packing is a batch of variable-length sequences packed back to back,
// described by offsets as on the CPU (len S+1, offsets[0] = 0,
// non-decreasing; sequence s owns rows offsets[s]..offsets[s+1]−1). It
// holds the offsets and the attention tile table on the device, built once
// per batch and shared by every kernel that takes the packing.
type Packing struct {
	offsets []int
	buf     cuda.Buffer // int32: the offsets, then 3 per tile
	offs    cuda.Buffer
	tiles   cuda.Buffer
	ntiles  int
}

// NewPacking uploads offsets and the tile table derived from them. Free
// releases the device memory.
func (s *Set) NewPacking(offsets []int) (*Packing, error) {
	if len(offsets) < 1 || offsets[0] != 0 {
		return nil, fmt.Errorf("cudakernels: NewPacking: offsets %v must have at least one entry and start at 0", head(offsets))
	}
	for i := 1; i < len(offsets); i++ {
		if offsets[i] < offsets[i-1] {
			return nil, fmt.Errorf("cudakernels: NewPacking: offsets decrease at %d: %d < %d", i, offsets[i], offsets[i-1])
		}
	}
	if last := offsets[len(offsets)-1]; last > 1<<31-1 {
		return nil, fmt.Errorf("cudakernels: NewPacking: %d rows do not fit int32", last)
	}
	host := make([]int32, 0, len(offsets)+3*(offsets[len(offsets)-1]/attnRows+len(offsets)))
	for _, o := range offsets {
		host = append(host, int32(o))
	}
	ntiles := 0
	for i := 1; i < len(offsets); i++ {
		r0, l := offsets[i-1], offsets[i]-offsets[i-1]
		// A tile is (first row of the sequence, its length, first row of
		// the tile within it): blocks need the whole sequence's extent.
		for t0 := 0; t0 < l; t0 += attnRows {
			host = append(host, int32(r0), int32(l), int32(t0))
			ntiles++
		}
	}
	buf, err := cuda.Upload(s.rt, host)
	if err != nil {
		return nil, fmt.Errorf("cudakernels: NewPacking: %w", err)
	}
	p := &Packing{offsets: append([]int(nil), offsets...), buf: buf, ntiles: ntiles}
	nOff := 4 * len(offsets)
	if p.offs, err = buf.Slice(0, nOff); err == nil {
		p.tiles, err = buf.Slice(nOff, buf.Len()-nOff)
	}
	if err != nil {
		buf.Free()
		return nil, fmt.Errorf("cudakernels: NewPacking: %w", err)
	}
	return p, nil
}

// head returns at most the first 8 offsets, for error messages.
func head(o []int) []int { return o[:min(len(o), 8)] }

// Rows is the total number of rows, offsets[S].
func (p *Packing) Rows() int { return p.offsets[len(p.offsets)-1] }

// Sequences is the number of sequences S.
func (p *Packing) Sequences() int { return len(p.offsets) - 1 }

// Offsets returns a copy of the offsets.
func (p *Packing) Offsets() []int { return append([]int(nil), p.offsets...) }

// Free releases the packing's device memory.
func (p *Packing) Free() error { return p.buf.Free() }

// atLeast checks that b holds at least want float32 (and a whole number).
func atLeast(kernel, name string, b cuda.Buffer, want int) error {
	n, err := f32Len(kernel, name, b, -1)
	if err != nil {
		return err
	}
	if n < want {
		return fmt.Errorf("cudakernels: %s: %s has %d float32, want at least %d", kernel, name, n, want)
	}
	return nil
}

// attnBuf is a buffer argument and the float32 it must hold at least.
type attnBuf struct {
	name string
	b    cuda.Buffer
	n    int
}

// attnArgs validates the attention shape and the buffers and returns the
// kernels for headDim.
func (s *Set) attnArgs(kernel string, p *Packing, heads, headDim int, bufs ...attnBuf) (*attnKernels, error) {
	if p == nil {
		return nil, fmt.Errorf("cudakernels: %s: nil packing", kernel)
	}
	if heads < 1 || heads > 65535 || headDim < 1 || headDim > MaxHeadDim {
		return nil, fmt.Errorf("cudakernels: %s: %d heads of dimension %d; want 1..65535 heads of dimension 1..%d", kernel, heads, headDim, MaxHeadDim)
	}
	if int64(p.Rows())*3*int64(heads)*int64(headDim) > 1<<62 {
		return nil, fmt.Errorf("cudakernels: %s: shape too large", kernel)
	}
	for _, b := range bufs {
		if err := atLeast(kernel, b.name, b.b, b.n); err != nil {
			return nil, err
		}
	}
	return s.attention(kernel, headDim)
}

// AttentionForward computes softmax(scale·q·kᵀ)·v per head within each
// sequence of p, with the layouts of kernels.AttentionForward: qkv is
// [N, 3·heads·headDim] with columns [q | k | v], each head-major; out is
// [N, heads·headDim]; lse [N·heads] (token-major, then head) receives each
// row's log-sum-exp of the scaled scores for the backward pass.
func (s *Set) AttentionForward(out, lse, qkv cuda.Buffer, p *Packing, heads, headDim int, scale float32) error {
	n := 0
	if p != nil {
		n = p.Rows()
	}
	hd := heads * headDim
	k, err := s.attnArgs("AttentionForward", p, heads, headDim,
		attnBuf{"qkv", qkv, n * 3 * hd}, attnBuf{"out", out, n * hd}, attnBuf{"lse", lse, n * heads})
	if err != nil || p.ntiles == 0 {
		return err
	}
	return k.fwd.Launch(cuda.Dim3{X: p.ntiles, Y: heads}, cuda.Dim3{X: attnThreads}, 0,
		out, lse, qkv, p.tiles, int32(heads), int32(headDim), scale)
}

// AttentionBackward writes dqkv ([N, 3·heads·headDim], qkv's layout) from
// dout ([N, heads·headDim]), given the out and lse that AttentionForward
// produced, as kernels.AttentionBackward. delta is scratch of N·heads
// float32 (it receives Σ_d dout·out per row and head). Every element of
// dqkv is written.
func (s *Set) AttentionBackward(dqkv, delta, dout, out, lse, qkv cuda.Buffer, p *Packing, heads, headDim int, scale float32) error {
	n := 0
	if p != nil {
		n = p.Rows()
	}
	hd := heads * headDim
	k, err := s.attnArgs("AttentionBackward", p, heads, headDim,
		attnBuf{"qkv", qkv, n * 3 * hd}, attnBuf{"dqkv", dqkv, n * 3 * hd}, attnBuf{"out", out, n * hd},
		attnBuf{"dout", dout, n * hd}, attnBuf{"lse", lse, n * heads}, attnBuf{"delta", delta, n * heads})
	if err != nil || p.ntiles == 0 {
		return err
	}
	grid, block := cuda.Dim3{X: p.ntiles, Y: heads}, cuda.Dim3{X: attnThreads}
	// dQ first: it also writes delta, which the dK/dV pass reads for every
	// query row (launches on one stream run in order).
	if err := k.dq.Launch(grid, block, 0, dqkv, delta, dout, out, lse, qkv, p.tiles, int32(heads), int32(headDim), scale); err != nil {
		return err
	}
	return k.dkv.Launch(grid, block, 0, dqkv, dout, lse, delta, qkv, p.tiles, int32(heads), int32(headDim), scale)
}

// attnSource is the CUDA C of the attention kernels (see the comment at the
// top of this file). Threads 4r..4r+3 of a block own row r of the tile;
// thread 4r+t holds the float pairs t, t+4, t+8, … of the row's head
// slice, so a warp reads 4 consecutive pairs of a shared-memory row (one
// 64-bit load per thread, broadcast to the warp's 8 rows, no bank
// conflict) and a dot product is 4 partial sums combined by two shuffles. Rows past the sequence's end hold zeros and compute like the
// others (every lane must take part in the shuffles) but store nothing.
const attnSource = `
#define NEG_INF __int_as_float(0xff800000)
#define ATT_ROWS 64
#define ATT_THREADS 256
#define ATT_BK 32

__device__ __forceinline__ float quad_sum(float v) {
	v += __shfl_xor_sync(0xffffffffu, v, 1);
	v += __shfl_xor_sync(0xffffffffu, v, 2);
	return v;
}

// att_dim is the head-dimension index of a thread's register element e:
// the thread owns float pairs sub, sub+4, sub+8, … of the row, so that
// the 4 threads of a row read 4 consecutive pairs (32 bytes) of a shared
// row with one 64-bit load each, broadcast to the warp's 8 rows.
__device__ __forceinline__ int att_dim(int sub, int e) { return 2 * (sub + 4 * (e >> 1)) + (e & 1); }

// att_pair returns the pair c of thread sub's slice of a shared row.
__device__ __forceinline__ float2 att_pair(const float* row, int sub, int c) {
	return reinterpret_cast<const float2*>(row)[sub + 4 * c];
}

// att_load copies nt rows of a head's D columns (row j at base + j·ld)
// into sh[ATT_BK][DP], zero-filling rows ≥ nt and columns ≥ D.
template <int DP>
__device__ __forceinline__ void att_load(float (*sh)[DP], const float* base, long long ld, int nt, int D) {
	for (int idx = threadIdx.x; idx < ATT_BK * DP; idx += ATT_THREADS) {
		int j = idx / DP, e = idx - j * DP;
		sh[j][e] = (j < nt && e < D) ? base[(long long)j * ld + e] : 0.0f;
	}
}

// attn_fwd: a tile of query rows against all keys of its sequence.
template <int NE>
__device__ __forceinline__ void attn_fwd(float* out, float* lse, const float* qkv, const int* tiles, int heads, int D, float scale) {
	enum { DP = 4 * NE }; // an enum, not constexpr: NVRTC may default to C++03
	__shared__ __align__(16) float Ks[ATT_BK][DP];
	__shared__ __align__(16) float Vs[ATT_BK][DP];
	const long long r0 = tiles[3 * blockIdx.x];
	const int l = tiles[3 * blockIdx.x + 1], t0 = tiles[3 * blockIdx.x + 2];
	const int h = blockIdx.y, sub = threadIdx.x & 3;
	const int i = t0 + (threadIdx.x >> 2);
	const bool valid = i < l;
	const long long hd = (long long)heads * D, ld = 3 * hd;
	const float* qb = qkv + r0 * ld + (long long)h * D;
	float q[NE], o[NE];
#pragma unroll
	for (int e = 0; e < NE; e++) {
		int d = att_dim(sub, e);
		q[e] = (valid && d < D) ? qb[(long long)i * ld + d] : 0.0f;
		o[e] = 0.0f;
	}
	float m = NEG_INF, sum = 0.0f;
	for (int k0 = 0; k0 < l; k0 += ATT_BK) {
		const int nk = min(ATT_BK, l - k0);
		__syncthreads(); // the previous tile is no longer read
		att_load<DP>(Ks, qb + hd + k0 * ld, ld, nk, D);
		att_load<DP>(Vs, qb + 2 * hd + k0 * ld, ld, nk, D);
		__syncthreads();
		// Scores of the whole key tile first, so that the running output
		// is rescaled once per tile, not once per key.
		float s[ATT_BK];
		float mt = NEG_INF;
#pragma unroll
		for (int j = 0; j < ATT_BK; j++) {
			float a = 0.0f;
#pragma unroll
			for (int c = 0; c < NE / 2; c++) {
				const float2 kk = att_pair(Ks[j], sub, c);
				a = fmaf(q[2 * c], kk.x, a);
				a = fmaf(q[2 * c + 1], kk.y, a);
			}
			a = scale * quad_sum(a);
			s[j] = j < nk ? a : NEG_INF;
			mt = fmaxf(mt, s[j]);
		}
		const float mn = fmaxf(m, mt); // finite: the tile has a key
		const float alpha = expf(m - mn); // 0 on the first tile
		sum *= alpha;
#pragma unroll
		for (int e = 0; e < NE; e++) o[e] *= alpha;
#pragma unroll
		for (int j = 0; j < ATT_BK; j++) {
			const float p = expf(s[j] - mn);
			sum += p;
#pragma unroll
			for (int c = 0; c < NE / 2; c++) {
				const float2 vv = att_pair(Vs[j], sub, c);
				o[2 * c] = fmaf(p, vv.x, o[2 * c]);
				o[2 * c + 1] = fmaf(p, vv.y, o[2 * c + 1]);
			}
		}
		m = mn;
	}
	if (!valid) return;
	const float inv = 1.0f / sum;
	float* orow = out + (r0 + i) * hd + (long long)h * D;
#pragma unroll
	for (int e = 0; e < NE; e++) {
		int d = att_dim(sub, e);
		if (d < D) orow[d] = o[e] * inv;
	}
	if (sub == 0) lse[(r0 + i) * heads + h] = m + logf(sum);
}

// attn_bwd_dq: a tile of query rows; dq_i = scale·Σ_j P_ij(dP_ij − δ_i)·k_j
// with P recomputed from the saved lse and δ_i = dout_i·out_i, which it
// also stores for attn_bwd_dkv.
template <int NE>
__device__ __forceinline__ void attn_bwd_dq(float* dqkv, float* delta, const float* dout, const float* out, const float* lse,
		const float* qkv, const int* tiles, int heads, int D, float scale) {
	enum { DP = 4 * NE }; // an enum, not constexpr: NVRTC may default to C++03
	__shared__ __align__(16) float Ks[ATT_BK][DP];
	__shared__ __align__(16) float Vs[ATT_BK][DP];
	const long long r0 = tiles[3 * blockIdx.x];
	const int l = tiles[3 * blockIdx.x + 1], t0 = tiles[3 * blockIdx.x + 2];
	const int h = blockIdx.y, sub = threadIdx.x & 3;
	const int i = t0 + (threadIdx.x >> 2);
	const bool valid = i < l;
	const long long hd = (long long)heads * D, ld = 3 * hd;
	const float* qb = qkv + r0 * ld + (long long)h * D;
	const float* gr = dout + (r0 + i) * hd + (long long)h * D;
	const float* orow = out + (r0 + i) * hd + (long long)h * D;
	float q[NE], g[NE], acc[NE];
	float dl = 0.0f;
#pragma unroll
	for (int e = 0; e < NE; e++) {
		int d = att_dim(sub, e);
		bool in = valid && d < D;
		q[e] = in ? qb[(long long)i * ld + d] : 0.0f;
		g[e] = in ? gr[d] : 0.0f;
		if (in) dl = fmaf(g[e], orow[d], dl);
		acc[e] = 0.0f;
	}
	dl = quad_sum(dl);
	const float L = valid ? lse[(r0 + i) * heads + h] : 0.0f;
	if (valid && sub == 0) delta[(r0 + i) * heads + h] = dl;
	for (int k0 = 0; k0 < l; k0 += ATT_BK) {
		const int nk = min(ATT_BK, l - k0);
		__syncthreads();
		att_load<DP>(Ks, qb + hd + k0 * ld, ld, nk, D);
		att_load<DP>(Vs, qb + 2 * hd + k0 * ld, ld, nk, D);
		__syncthreads();
		for (int j = 0; j < nk; j++) { // nk is the same for the whole block
			float a = 0.0f, b = 0.0f;
#pragma unroll
			for (int c = 0; c < NE / 2; c++) {
				const float2 kk = att_pair(Ks[j], sub, c), vv = att_pair(Vs[j], sub, c);
				a = fmaf(q[2 * c], kk.x, a);
				a = fmaf(q[2 * c + 1], kk.y, a);
				b = fmaf(g[2 * c], vv.x, b);
				b = fmaf(g[2 * c + 1], vv.y, b);
			}
			a = quad_sum(a);
			b = quad_sum(b);
			const float p = expf(scale * a - L);
			const float ds = p * (b - dl);
#pragma unroll
			for (int c = 0; c < NE / 2; c++) {
				const float2 kk = att_pair(Ks[j], sub, c);
				acc[2 * c] = fmaf(ds, kk.x, acc[2 * c]);
				acc[2 * c + 1] = fmaf(ds, kk.y, acc[2 * c + 1]);
			}
		}
	}
	if (!valid) return;
	float* dq = dqkv + (r0 + i) * ld + (long long)h * D;
#pragma unroll
	for (int e = 0; e < NE; e++) {
		int d = att_dim(sub, e);
		if (d < D) dq[d] = scale * acc[e];
	}
}

// attn_bwd_dkv: a tile of key rows against all queries of its sequence:
// dv_j = Σ_i P_ij·dout_i and dk_j = scale·Σ_i P_ij(dP_ij − δ_i)·q_i.
template <int NE>
__device__ __forceinline__ void attn_bwd_dkv(float* dqkv, const float* dout, const float* lse, const float* delta,
		const float* qkv, const int* tiles, int heads, int D, float scale) {
	enum { DP = 4 * NE }; // an enum, not constexpr: NVRTC may default to C++03
	__shared__ __align__(16) float Qs[ATT_BK][DP];
	__shared__ __align__(16) float Gs[ATT_BK][DP];
	__shared__ float Ls[ATT_BK], Ds[ATT_BK];
	const long long r0 = tiles[3 * blockIdx.x];
	const int l = tiles[3 * blockIdx.x + 1], t0 = tiles[3 * blockIdx.x + 2];
	const int h = blockIdx.y, sub = threadIdx.x & 3;
	const int j = t0 + (threadIdx.x >> 2);
	const bool valid = j < l;
	const long long hd = (long long)heads * D, ld = 3 * hd;
	const float* qb = qkv + r0 * ld + (long long)h * D;
	const float* gb = dout + r0 * hd + (long long)h * D;
	float k[NE], v[NE], dk[NE], dv[NE];
#pragma unroll
	for (int e = 0; e < NE; e++) {
		int d = att_dim(sub, e);
		bool in = valid && d < D;
		k[e] = in ? qb[(long long)j * ld + hd + d] : 0.0f;
		v[e] = in ? qb[(long long)j * ld + 2 * hd + d] : 0.0f;
		dk[e] = 0.0f;
		dv[e] = 0.0f;
	}
	for (int i0 = 0; i0 < l; i0 += ATT_BK) {
		const int nq = min(ATT_BK, l - i0);
		__syncthreads();
		att_load<DP>(Qs, qb + i0 * ld, ld, nq, D);
		att_load<DP>(Gs, gb + i0 * hd, hd, nq, D);
		if (threadIdx.x < ATT_BK) {
			int t = threadIdx.x;
			long long r = (r0 + i0 + t) * heads + h;
			Ls[t] = t < nq ? lse[r] : 0.0f;
			Ds[t] = t < nq ? delta[r] : 0.0f;
		}
		__syncthreads();
		for (int ii = 0; ii < nq; ii++) {
			float a = 0.0f, b = 0.0f;
#pragma unroll
			for (int c = 0; c < NE / 2; c++) {
				const float2 qq = att_pair(Qs[ii], sub, c), gg = att_pair(Gs[ii], sub, c);
				a = fmaf(qq.x, k[2 * c], a);
				a = fmaf(qq.y, k[2 * c + 1], a);
				b = fmaf(gg.x, v[2 * c], b);
				b = fmaf(gg.y, v[2 * c + 1], b);
			}
			a = quad_sum(a);
			b = quad_sum(b);
			const float p = expf(scale * a - Ls[ii]);
			const float ds = p * (b - Ds[ii]);
#pragma unroll
			for (int c = 0; c < NE / 2; c++) {
				const float2 qq = att_pair(Qs[ii], sub, c), gg = att_pair(Gs[ii], sub, c);
				dv[2 * c] = fmaf(p, gg.x, dv[2 * c]);
				dv[2 * c + 1] = fmaf(p, gg.y, dv[2 * c + 1]);
				dk[2 * c] = fmaf(ds, qq.x, dk[2 * c]);
				dk[2 * c + 1] = fmaf(ds, qq.y, dk[2 * c + 1]);
			}
		}
	}
	if (!valid) return;
	float* dkr = dqkv + (r0 + j) * ld + hd + (long long)h * D;
	float* dvr = dkr + hd;
#pragma unroll
	for (int e = 0; e < NE; e++) {
		int d = att_dim(sub, e);
		if (d < D) {
			dkr[d] = scale * dk[e];
			dvr[d] = dv[e];
		}
	}
}

#define ATT_INSTANCE(NE) \
extern "C" __global__ void __launch_bounds__(ATT_THREADS) attn_fwd_##NE(float* out, float* lse, const float* qkv, \
		const int* tiles, int heads, int D, float scale) { \
	attn_fwd<NE>(out, lse, qkv, tiles, heads, D, scale); \
} \
extern "C" __global__ void __launch_bounds__(ATT_THREADS) attn_bwd_dq_##NE(float* dqkv, float* delta, const float* dout, \
		const float* out, const float* lse, const float* qkv, const int* tiles, int heads, int D, float scale) { \
	attn_bwd_dq<NE>(dqkv, delta, dout, out, lse, qkv, tiles, heads, D, scale); \
} \
extern "C" __global__ void __launch_bounds__(ATT_THREADS) attn_bwd_dkv_##NE(float* dqkv, const float* dout, \
		const float* lse, const float* delta, const float* qkv, const int* tiles, int heads, int D, float scale) { \
	attn_bwd_dkv<NE>(dqkv, dout, lse, delta, qkv, tiles, heads, D, scale); \
}

`

package cudakernels

import (
	"fmt"

	"github.com/dcdit/dcdit/gpu/cuda"
)

// Models is the fourth set of kernels: the small ops a whole DiT or DC-DiT
// forward and backward pass needs besides the blocks, the conv blocks and
// the router: per-row scaling (DC-DiT's straight-through confidence),
// per-sample broadcast adds (the conv blocks' conditioning), a constant
// fill (the straight-through estimator's ones), whole-tensor reductions to
// a scalar (Sum, Mean, MSE: the losses) with their backward passes, and
// per-sample row means (the ratio loss).
//
// It is a module of its own, like Scaffold, so that the tested modules and
// their cache entries stay as they were. Every formula follows the CPU
// kernel it mirrors (package kernels): the scalar reductions accumulate in
// float64 and round the sum to float32 before scaling it, as kernels.Sum
// and kernels.SumSquaredDiff return a float32 that ops then scales; the
// row means add in float32 in row order and multiply by 1/n, as
// kernels.MeanRows does, so they are bit-identical. The scalar backward
// passes read the upstream gradient from device memory, so nothing waits
// for the device.
type Models struct {
	set *Set
	mod *cuda.Module

	fill, scaleRows, rowDot, addPerSample  cuda.Function
	sumPartial, sumFinal, fillFrom, sqdBwd cuda.Function
	meanRows, meanRowsBwd                  cuda.Function
}

// ReduceWorkspaceFloats is the size, in float32, of the scratch Sum and
// SumSquaredDiff need: one float64 partial sum per block of the first pass.
const ReduceWorkspaceFloats = 2 * reduceBlocks

// reduceBlocks is the fixed grid of the first reduction pass: a fixed
// grid makes the order of the float64 additions, and so the result,
// independent of the device.
const reduceBlocks = 256

const modelsSource = `
extern "C" __global__ void mdl_fill(float* y, float v, long long n) {
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
    y[i] = v;
}

// y[r, c] = s[r]·x[r, c].
extern "C" __global__ void mdl_scale_rows(float* y, const float* x, const float* s, long long cols, long long n) {
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
    y[i] = s[i / cols] * x[i];
}

// ds[r] = <dy[r, :], x[r, :]>, one block of 256 threads per row, float64.
extern "C" __global__ void mdl_row_dot(float* ds, const float* dy, const float* x, int cols) {
  __shared__ double sh[256];
  const long long r = blockIdx.x;
  const float* a = dy + r * cols;
  const float* b = x + r * cols;
  double acc = 0;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) acc += (double)(a[c] * b[c]);
  sh[threadIdx.x] = acc;
  __syncthreads();
  for (int w = blockDim.x / 2; w > 0; w >>= 1) {
    if (threadIdx.x < w) sh[threadIdx.x] += sh[threadIdx.x + w];
    __syncthreads();
  }
  if (threadIdx.x == 0) ds[r] = (float)sh[0];
}

__device__ __forceinline__ int mdl_sample_of(const int* offs, int S, long long r) {
  int lo = 0, hi = S - 1;
  while (lo < hi) {
    int mid = (lo + hi + 1) / 2;
    if (offs[mid] <= r) lo = mid; else hi = mid - 1;
  }
  return lo;
}

// y[r, :] = x[r, :] + v[s, :] for the sample s owning row r; one block per row.
extern "C" __global__ void mdl_add_per_sample(float* y, const float* x, const float* v, const int* offs, int S, int cols) {
  const long long r = blockIdx.x;
  const float* vs = v + (long long)mdl_sample_of(offs, S, r) * cols;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) y[r * cols + c] = x[r * cols + c] + vs[c];
}

// First pass of Σ a (sq = 0) or Σ (a − b)² (sq = 1): a fixed grid, each
// block writes the float64 sum of its grid-stride share.
extern "C" __global__ void mdl_sum_partial(double* part, const float* a, const float* b, int sq, long long n) {
  __shared__ double sh[256];
  double acc = 0;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
    if (sq) {
      double d = (double)a[i] - (double)b[i];
      acc += d * d;
    } else {
      acc += (double)a[i];
    }
  }
  sh[threadIdx.x] = acc;
  __syncthreads();
  for (int w = blockDim.x / 2; w > 0; w >>= 1) {
    if (threadIdx.x < w) sh[threadIdx.x] += sh[threadIdx.x + w];
    __syncthreads();
  }
  if (threadIdx.x == 0) part[blockIdx.x] = sh[0];
}

// Second pass: out[0] = (float)((double)(float)Σ part · factor), the
// CPU's rounding (the kernel's float32 sum, then ops' scaling in float64).
extern "C" __global__ void mdl_sum_final(float* out, const double* part, int nparts, double factor) {
  __shared__ double sh[256];
  double acc = 0;
  for (int i = threadIdx.x; i < nparts; i += blockDim.x) acc += part[i];
  sh[threadIdx.x] = acc;
  __syncthreads();
  for (int w = blockDim.x / 2; w > 0; w >>= 1) {
    if (threadIdx.x < w) sh[threadIdx.x] += sh[threadIdx.x + w];
    __syncthreads();
  }
  if (threadIdx.x == 0) out[0] = (float)((double)(float)sh[0] * factor);
}

// y[i] = (float)((double)g[0]·factor): Sum's and Mean's backward pass.
extern "C" __global__ void mdl_fill_from(float* y, const float* g, double factor, long long n) {
  const float v = (float)((double)g[0] * factor);
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
    y[i] = v;
}

// MSE's backward pass: alpha = (float)(2·g[0]·factor), da = alpha·(a − b),
// db = −da (either may be null).
extern "C" __global__ void mdl_sqdiff_bwd(float* da, float* db, const float* a, const float* b, const float* g, double factor, long long n) {
  const float alpha = (float)(2.0 * ((double)g[0] * factor));
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
    const float d = alpha * (a[i] - b[i]);
    if (da) da[i] = d;
    if (db) db[i] = -d;
  }
}

// y[s, c] = (Σ_{r in s} x[r, c])·(1/n_s) in float32, rows in order; one
// thread per (sample, column).
extern "C" __global__ void mdl_mean_rows(float* y, const float* x, const int* offs, int S, int cols) {
  const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= (long long)S * cols) return;
  const int s = (int)(i / cols), c = (int)(i - (long long)s * cols);
  float acc = 0.0f;
  for (int r = offs[s]; r < offs[s + 1]; r++) acc += x[(long long)r * cols + c];
  const int n = offs[s + 1] - offs[s];
  if (n > 0) acc *= 1.0f / (float)n;
  y[i] = acc;
}

// dx[r, c] = dy[s, c]·(1/n_s) for the sample s owning row r.
extern "C" __global__ void mdl_mean_rows_bwd(float* dx, const float* dy, const int* offs, int S, int cols, long long n) {
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
    const long long r = i / cols;
    const int c = (int)(i - r * cols);
    const int s = mdl_sample_of(offs, S, r);
    const float inv = 1.0f / (float)(offs[s + 1] - offs[s]);
    dx[i] = dy[(long long)s * cols + c] * inv;
  }
}
`

// LoadModels compiles (or loads from the cache) the model kernels for s's
// device.
func LoadModels(s *Set) (*Models, error) {
	if s == nil {
		return nil, fmt.Errorf("cudakernels: LoadModels: nil kernel set")
	}
	mod, err := s.rt.Compile("dcdit_models.cu", modelsSource, fmadOff)
	if err != nil {
		return nil, err
	}
	m := &Models{set: s, mod: mod}
	for _, f := range []struct {
		dst  *cuda.Function
		name string
	}{
		{&m.fill, "mdl_fill"}, {&m.scaleRows, "mdl_scale_rows"}, {&m.rowDot, "mdl_row_dot"},
		{&m.addPerSample, "mdl_add_per_sample"}, {&m.sumPartial, "mdl_sum_partial"}, {&m.sumFinal, "mdl_sum_final"},
		{&m.fillFrom, "mdl_fill_from"}, {&m.sqdBwd, "mdl_sqdiff_bwd"},
		{&m.meanRows, "mdl_mean_rows"}, {&m.meanRowsBwd, "mdl_mean_rows_bwd"},
	} {
		if *f.dst, err = mod.Function(f.name); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// Module is the model kernels' loaded module.
func (m *Models) Module() *cuda.Module { return m.mod }

// Fill sets every float32 of y to v (kernels.Fill).
func (m *Models) Fill(y cuda.Buffer, v float32) error {
	n, err := f32Len("Fill", "y", y, -1)
	if err != nil {
		return err
	}
	return m.set.elementwise(m.fill, n, y, v)
}

// ScaleRows sets y[r, :] = s[r]·x[r, :] for x, y [rows, cols] and s
// [rows] (kernels.ScaleRows). y may alias x.
func (m *Models) ScaleRows(y, x, s cuda.Buffer, rows, cols int) error {
	if err := rowsCols("ScaleRows", rows, cols); err != nil {
		return err
	}
	if err := checkBufs("ScaleRows", bufArg{"y", y, rows * cols, false}, bufArg{"x", x, rows * cols, false}, bufArg{"s", s, rows, false}); err != nil {
		return err
	}
	return m.set.elementwise(m.scaleRows, rows*cols, y, x, s, int64(max(cols, 1)))
}

// ScaleRowsBackward computes ScaleRows' gradients: dx = s[r]·dy[r, :] and
// ds[r] = ⟨dy[r, :], x[r, :]⟩ (accumulated in float64; the CPU uses four
// float32 accumulators). Either of dx and ds may be empty.
func (m *Models) ScaleRowsBackward(dx, ds, dy, x, s cuda.Buffer, rows, cols int) error {
	if err := rowsCols("ScaleRowsBackward", rows, cols); err != nil {
		return err
	}
	if err := checkBufs("ScaleRowsBackward", bufArg{"dx", dx, rows * cols, true}, bufArg{"ds", ds, rows, true},
		bufArg{"dy", dy, rows * cols, false}, bufArg{"x", x, rows * cols, false}, bufArg{"s", s, rows, false}); err != nil {
		return err
	}
	if dx.Len() > 0 {
		if err := m.set.elementwise(m.scaleRows, rows*cols, dx, dy, s, int64(max(cols, 1))); err != nil {
			return err
		}
	}
	if ds.Len() > 0 && rows > 0 {
		return m.rowDot.Launch(cuda.Dim3{X: rows}, cuda.Dim3{X: blockSize}, 0, ds, dy, x, int32(cols))
	}
	return nil
}

// AddPerSample sets y[r, :] = x[r, :] + v[s, :] for x, y [rows, cols]
// packed by p and v [S, cols] (kernels.AddPerSample). y may alias x.
func (m *Models) AddPerSample(y, x, v cuda.Buffer, p *Packing, cols int) error {
	rows, samples, err := modArgs("AddPerSample", p, cols)
	if err != nil {
		return err
	}
	if err := checkBufs("AddPerSample", bufArg{"y", y, rows * cols, false}, bufArg{"x", x, rows * cols, false},
		bufArg{"v", v, samples * cols, false}); err != nil {
		return err
	}
	if rows == 0 {
		return nil
	}
	return m.addPerSample.Launch(cuda.Dim3{X: rows}, cuda.Dim3{X: blockSize}, 0, y, x, v, p.offs, int32(samples), int32(cols))
}

// SumRows sets out[s, :] = Σ_{r in s} x[r, :] over the samples of p, in
// float64 (kernels.SumRows adds in float32): AddPerSample's backward pass.
func (m *Models) SumRows(out, x cuda.Buffer, p *Packing, cols int) error {
	rows, samples, err := modArgs("SumRows", p, cols)
	if err != nil {
		return err
	}
	if err := checkBufs("SumRows", bufArg{"out", out, samples * cols, false}, bufArg{"x", x, rows * cols, false}); err != nil {
		return err
	}
	return m.set.perSampleSums(out, cuda.Buffer{}, x, cuda.Buffer{}, p, samples, cols)
}

// Sum sets out [1] to factor·Σ a (squared = false) or factor·Σ (a − b)²
// (squared = true), the sum taken in float64 in a fixed order and rounded
// to float32 before the scaling, as kernels.Sum and kernels.SumSquaredDiff
// with ops' Sum, Mean and MSE. ws holds ReduceWorkspaceFloats float32.
func (m *Models) Sum(out, a, b cuda.Buffer, squared bool, factor float64, ws cuda.Buffer) error {
	n, err := f32Len("Sum", "a", a, -1)
	if err != nil {
		return err
	}
	sq := int32(0)
	if squared {
		sq = 1
		if _, err := f32Len("Sum", "b", b, n); err != nil {
			return err
		}
	}
	if err := checkBufs("Sum", bufArg{"out", out, 1, false}, bufArg{"ws", ws, ReduceWorkspaceFloats, false}); err != nil {
		return err
	}
	if err := m.sumPartial.Launch(cuda.Dim3{X: reduceBlocks}, cuda.Dim3{X: blockSize}, 0, ws, a, b.Ptr(), sq, int64(n)); err != nil {
		return err
	}
	return m.sumFinal.Launch(cuda.Dim3{X: 1}, cuda.Dim3{X: blockSize}, 0, out, ws, int32(reduceBlocks), factor)
}

// FillFrom sets every float32 of y to float32(g[0]·factor), g a device
// scalar: the backward pass of Sum (factor 1) and Mean (1/n).
func (m *Models) FillFrom(y, g cuda.Buffer, factor float64) error {
	n, err := f32Len("FillFrom", "y", y, -1)
	if err != nil {
		return err
	}
	if _, err := f32Len("FillFrom", "g", g, 1); err != nil {
		return err
	}
	return m.set.elementwise(m.fillFrom, n, y, g, factor)
}

// SquaredDiffBackward sets da = α·(a − b) and db = −da with α =
// float32(2·g[0]·factor), g a device scalar (kernels.SquaredDiffBackward
// with ops' MSE). Either of da and db may be empty.
func (m *Models) SquaredDiffBackward(da, db, a, b, g cuda.Buffer, factor float64) error {
	n, err := f32Len("SquaredDiffBackward", "a", a, -1)
	if err != nil {
		return err
	}
	if err := checkBufs("SquaredDiffBackward", bufArg{"da", da, n, true}, bufArg{"db", db, n, true},
		bufArg{"b", b, n, false}, bufArg{"g", g, 1, false}); err != nil {
		return err
	}
	if da.Len() == 0 && db.Len() == 0 {
		return nil
	}
	return m.set.elementwise(m.sqdBwd, n, da.Ptr(), db.Ptr(), a, b, g, factor)
}

// MeanRows sets y [S, cols] to each sample's mean row of x packed by p
// (kernels.MeanRows, bit-identical; an empty sample gives 0).
func (m *Models) MeanRows(y, x cuda.Buffer, p *Packing, cols int) error {
	rows, samples, err := modArgs("MeanRows", p, cols)
	if err != nil {
		return err
	}
	if err := checkBufs("MeanRows", bufArg{"y", y, samples * cols, false}, bufArg{"x", x, rows * cols, false}); err != nil {
		return err
	}
	n := samples * cols
	if n == 0 {
		return nil
	}
	return m.meanRows.Launch(cuda.Dim3{X: (n + blockSize - 1) / blockSize}, cuda.Dim3{X: blockSize}, 0, y, x, p.offs, int32(samples), int32(cols))
}

// MeanRowsBackward sets dx[r, :] = dy[s, :]·(1/n_s) (kernels.MeanRowsBackward).
func (m *Models) MeanRowsBackward(dx, dy cuda.Buffer, p *Packing, cols int) error {
	rows, samples, err := modArgs("MeanRowsBackward", p, cols)
	if err != nil {
		return err
	}
	if err := checkBufs("MeanRowsBackward", bufArg{"dx", dx, rows * cols, false}, bufArg{"dy", dy, samples * cols, false}); err != nil {
		return err
	}
	return m.set.elementwise(m.meanRowsBwd, rows*cols, dx, dy, p.offs, int32(samples), int32(cols))
}

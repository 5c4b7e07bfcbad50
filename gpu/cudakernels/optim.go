package cudakernels

import (
	"fmt"
	"math"

	"github.com/dcdit/dcdit/gpu/cuda"
	"github.com/dcdit/dcdit/optim"
)

// Optimiser kernels over flat float32 buffers: AdamW, global-norm gradient
// clipping and the EMA of the weights, mirroring package optim (whose
// generic loops are the definitions). Each operation is rounded separately
// with the _rn intrinsics, which the compiler never contracts into an FMA,
// so that the GPU computes the same bits as optim's generic loops (and
// PyTorch's float32 ops).

// clipParts is the number of partial sums of the gradient norm: fixed, so
// that the result does not depend on the device.
const clipParts = 1024

// ClipWorkBytes is the size of the device scratch that GradNorm and
// ClipGradNorm take: the norm (float64) at offset 0, then the partial
// sums.
const ClipWorkBytes = 8 * (1 + clipParts)

// optimFuncs are the kernels of this file.
type optimFuncs struct {
	adamw, ema, sumsq, normFinish, clipScale cuda.Function
}

func (s *Set) loadOptim() error {
	for _, f := range []struct {
		dst  *cuda.Function
		name string
	}{
		{&s.opt.adamw, "adamw_step"}, {&s.opt.ema, "ema_update"}, {&s.opt.sumsq, "sumsq_partial"},
		{&s.opt.normFinish, "norm_finish"}, {&s.opt.clipScale, "clip_scale"},
	} {
		var err error
		if *f.dst, err = s.mod.Function(f.name); err != nil {
			return err
		}
	}
	return nil
}

// sameLen checks that every buffer holds the same number of float32 as the
// first and returns it.
func sameLen(kernel string, names []string, bufs ...cuda.Buffer) (int, error) {
	n, err := f32Len(kernel, names[0], bufs[0], -1)
	if err != nil {
		return 0, err
	}
	for i := 1; i < len(bufs); i++ {
		if _, err := f32Len(kernel, names[i], bufs[i], n); err != nil {
			return 0, err
		}
	}
	return n, nil
}

// AdamW applies one AdamW update (optim.AdamW.Step for a buffer whose
// elements are all trainable) to params from grads, with the moments m and
// v (optim.State's M and V), all of the same length. Masks and parameter
// groups are the caller's: slice the buffers (cuda.Buffer.Slice) and call
// once per range with that group's constants.
func (s *Set) AdamW(params, grads, m, v cuda.Buffer, k optim.AdamWScalars) error {
	n, err := sameLen("AdamW", []string{"params", "grads", "m", "v"}, params, grads, m, v)
	if err != nil {
		return err
	}
	return s.elementwise(s.opt.adamw, n, params, grads, m, v,
		k.Decay, k.Beta1, k.C1, k.Beta2, k.C2, k.SqrtBc2, k.Eps, k.NegStep)
}

// EMA folds params into the average ema: ema = decay·ema + (1−decay)·p,
// with decay and 1−decay each rounded once to float32 (optim.EMA.Update).
func (s *Set) EMA(ema, params cuda.Buffer, decay float64) error {
	if !(decay >= 0 && decay <= 1) {
		return fmt.Errorf("cudakernels: EMA: decay %v, want 0 ≤ decay ≤ 1", decay)
	}
	n, err := sameLen("EMA", []string{"ema", "params"}, ema, params)
	if err != nil {
		return err
	}
	return s.elementwise(s.opt.ema, n, ema, params, float32(decay), float32(1-decay))
}

// GradNorm computes the L2 norm of grads in float64 into work (ClipWorkBytes
// of device memory; the norm is its first float64, ReadNorm fetches it).
// The sum of squares runs in a fixed number of partial sums added in a
// fixed order, so the result does not depend on the device or the run.
func (s *Set) GradNorm(work, grads cuda.Buffer) error {
	if work.Len() < ClipWorkBytes {
		return fmt.Errorf("cudakernels: GradNorm: work has %d bytes, want %d", work.Len(), ClipWorkBytes)
	}
	n, err := f32Len("GradNorm", "grads", grads, -1)
	if err != nil {
		return err
	}
	// Empty grads still get a (zero) norm: the partial sums are written
	// by every block whatever n is.
	if err := s.opt.sumsq.Launch(cuda.Dim3{X: clipParts}, cuda.Dim3{X: blockSize}, 0, work, grads, int64(n)); err != nil {
		return err
	}
	return s.opt.normFinish.Launch(cuda.Dim3{X: 1}, cuda.Dim3{X: 1024}, 0, work, int32(clipParts))
}

// ClipGradNorm computes the norm of grads as GradNorm does and, when
// maxNorm/(norm + 1e-6) is below 1, multiplies grads by it rounded to
// float32 (optim.GradClipper.Clip, torch.nn.utils.clip_grad_norm_). The
// norm stays on the device, so the step needs no round trip to the host;
// a NaN or infinite norm leaves grads untouched, and the caller learns of
// it by ReadNorm, when it reads the norm for its logs.
func (s *Set) ClipGradNorm(work, grads cuda.Buffer, maxNorm float64) error {
	if !(maxNorm > 0) || math.IsInf(maxNorm, 1) {
		return fmt.Errorf("cudakernels: ClipGradNorm: max norm %v, want a positive finite number", maxNorm)
	}
	if err := s.GradNorm(work, grads); err != nil {
		return err
	}
	n := grads.Len() / 4
	return s.elementwise(s.opt.clipScale, n, grads, work, maxNorm)
}

// ReadNorm copies the norm that GradNorm or ClipGradNorm left in work to
// the host (waiting for them). A NaN or infinite norm is returned with an
// error wrapping optim.ErrNonFiniteNorm.
func ReadNorm(work cuda.Buffer) (float64, error) {
	head, err := work.Slice(0, 8)
	if err != nil {
		return 0, fmt.Errorf("cudakernels: ReadNorm: %w", err)
	}
	v := make([]float64, 1)
	if err := cuda.CopyToHost(v, head); err != nil {
		return 0, fmt.Errorf("cudakernels: ReadNorm: %w", err)
	}
	if math.IsNaN(v[0]) || math.IsInf(v[0], 0) {
		return v[0], fmt.Errorf("cudakernels: %w (%v)", optim.ErrNonFiniteNorm, v[0])
	}
	return v[0], nil
}

// optimSource is the CUDA C of this file's kernels.
const optimSource = `
// AdamW, one element per iteration, in optim's order (adamwGeneric).
extern "C" __global__ void adamw_step(float* p, const float* g, float* m, float* v,
		float decay, float beta1, float c1, float beta2, float c2, float sqrtBc2, float eps, float negStep, long long n) {
	for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
		float gi = g[i];
		float mi = __fadd_rn(__fmul_rn(beta1, m[i]), __fmul_rn(c1, gi));
		float vi = __fadd_rn(__fmul_rn(beta2, v[i]), __fmul_rn(__fmul_rn(c2, gi), gi));
		m[i] = mi;
		v[i] = vi;
		float d = __fadd_rn(__fdiv_rn(__fsqrt_rn(vi), sqrtBc2), eps);
		p[i] = __fadd_rn(__fmul_rn(p[i], decay), __fdiv_rn(__fmul_rn(negStep, mi), d));
	}
}

// EMA e = decay·e + rest·p (emaGeneric).
extern "C" __global__ void ema_update(float* e, const float* p, float decay, float rest, long long n) {
	for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
		e[i] = __fadd_rn(__fmul_rn(e[i], decay), __fmul_rn(rest, p[i]));
}

// Partial sums of squares in float64: block b writes work[1 + b].
extern "C" __global__ void sumsq_partial(double* work, const float* x, long long n) {
	__shared__ double sh[32];
	double s = 0.0;
	for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
		double f = (double)x[i];
		s += f * f;
	}
	s = block_sum_d(s, sh);
	if (threadIdx.x == 0) work[1 + blockIdx.x] = s;
}

// work[0] = sqrt(Σ work[1..parts]), one block.
extern "C" __global__ void norm_finish(double* work, int parts) {
	__shared__ double sh[32];
	double s = 0.0;
	for (int i = threadIdx.x; i < parts; i += blockDim.x) s += work[1 + i];
	s = block_sum_d(s, sh);
	if (threadIdx.x == 0) work[0] = sqrt(s);
}

// x *= maxNorm/(norm + 1e-6) rounded to float32 when that is below 1 and
// the norm is finite (optim.GradClipper.Clip).
extern "C" __global__ void clip_scale(float* x, const double* work, double maxNorm, long long n) {
	const double norm = work[0];
	if (!(norm <= 1.7976931348623157e308)) return; // NaN or +Inf
	const double coef = maxNorm / (norm + 1e-6);
	if (!(coef < 1.0)) return;
	const float c = (float)coef;
	for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
		x[i] = __fmul_rn(x[i], c);
}
`

// Package cudakernels holds the project's CUDA C kernels and typed launchers
// for them (package kernels holds the CPU kernels they mirror). The sources (source.go, and the *Source constants beside their
// launchers in the other files) are Go strings compiled by NVRTC for the
// device at first use, through cuda.Runtime.Compile and its disk cache, so
// the package needs no CUDA toolkit at build time.
//
// Each kernel mirrors a CPU kernel of package github.com/dcdit/dcdit/kernels
// with the same semantics (float32, row-major), and the tests compare the
// two. The launchers queue work on the runtime's stream and return without
// waiting; reading a result back (cuda.CopyToHost) waits for it.
package cudakernels

import (
	"fmt"

	"github.com/dcdit/dcdit/gpu/cuda"
)

// fmadOff is NVRTC's option for every module. --fmad=false: the
// CPU kernels (Go on amd64) round every product, so a product and sum
// that NVRTC contracted into an FMA would differ from them in the last
// bit, which the normalisation backward passes amplify through their
// cancellations. Kernels that want FMAs (attention's dot products) call
// fmaf, which the option leaves alone.
const fmadOff = "--fmad=false"

// blockSize is the threads per block of every kernel: a multiple of the
// warp size that keeps one row's reduction within one block.
const blockSize = 256

// Set is the compiled kernels, bound to one runtime.
type Set struct {
	rt  *cuda.Runtime
	mod *cuda.Module
	// maxBlocks bounds a grid-stride kernel's grid: enough blocks to fill
	// every SM several times over, no more (each thread loops instead).
	maxBlocks int

	add, mul, scale, gelu, silu, layerNorm, softmax cuda.Function

	attn [attnNumWidths]attnKernels // by register width, compiled at first use
	norm normFuncs
	opt  optimFuncs
}

// Load compiles (or loads from the cache) the kernels for rt's device.
func Load(rt *cuda.Runtime) (*Set, error) {
	// One module for every kernel but attention (attention.go): one NVRTC
	// run and one cache entry.
	mod, err := rt.Compile("dcdit_kernels.cu", source+normSource+optimSource, fmadOff)
	if err != nil {
		return nil, err
	}
	s := &Set{rt: rt, mod: mod, maxBlocks: max(rt.Device().Multiprocessor, 1) * 32}
	for _, f := range []struct {
		dst  *cuda.Function
		name string
	}{
		{&s.add, "ew_add"}, {&s.mul, "ew_mul"}, {&s.scale, "ew_scale"},
		{&s.gelu, "act_gelu"}, {&s.silu, "act_silu"},
		{&s.layerNorm, "layernorm_fwd"}, {&s.softmax, "softmax_rows"},
	} {
		if *f.dst, err = mod.Function(f.name); err != nil {
			return nil, err
		}
	}
	for _, load := range []func() error{s.loadNorm, s.loadOptim} {
		if err := load(); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// Module is the loaded module of every kernel but attention's (see
// AttentionModule): its target, whether it came from the cache and how
// long compiling took.
func (s *Set) Module() *cuda.Module { return s.mod }

// f32Len returns the number of float32 elements in b, or an error naming
// the kernel and operand when b does not hold want of them (want < 0: any
// whole number).
func f32Len(kernel, name string, b cuda.Buffer, want int) (int, error) {
	if b.Len()%4 != 0 {
		return 0, fmt.Errorf("cudakernels: %s: %s has %d bytes, not a whole number of float32", kernel, name, b.Len())
	}
	n := b.Len() / 4
	if want >= 0 && n != want {
		return 0, fmt.Errorf("cudakernels: %s: %s has %d float32, want %d", kernel, name, n, want)
	}
	return n, nil
}

// elementwise launches a grid-stride kernel over n elements.
func (s *Set) elementwise(f cuda.Function, n int, args ...any) error {
	if n == 0 {
		return nil
	}
	blocks := min((n+blockSize-1)/blockSize, s.maxBlocks)
	return f.Launch(cuda.Dim3{X: blocks}, cuda.Dim3{X: blockSize}, 0, append(args, int64(n))...)
}

// binary checks y, a, b have the same float32 length and launches f.
func (s *Set) binary(kernel string, f cuda.Function, y, a, b cuda.Buffer) error {
	n, err := f32Len(kernel, "y", y, -1)
	if err != nil {
		return err
	}
	if _, err := f32Len(kernel, "a", a, n); err != nil {
		return err
	}
	if _, err := f32Len(kernel, "b", b, n); err != nil {
		return err
	}
	return s.elementwise(f, n, y, a, b)
}

// unary checks y and x have the same float32 length and launches f with
// the extra arguments between x and the length.
func (s *Set) unary(kernel string, f cuda.Function, y, x cuda.Buffer, extra ...any) error {
	n, err := f32Len(kernel, "y", y, -1)
	if err != nil {
		return err
	}
	if _, err := f32Len(kernel, "x", x, n); err != nil {
		return err
	}
	return s.elementwise(f, n, append([]any{y, x}, extra...)...)
}

// Add sets y = a + b elementwise (kernels.Add). y may alias a or b.
func (s *Set) Add(y, a, b cuda.Buffer) error { return s.binary("Add", s.add, y, a, b) }

// Mul sets y = a·b elementwise (kernels.Mul). y may alias a or b.
func (s *Set) Mul(y, a, b cuda.Buffer) error { return s.binary("Mul", s.mul, y, a, b) }

// Scale sets y = alpha·x (kernels.Scale). y may alias x.
func (s *Set) Scale(y, x cuda.Buffer, alpha float32) error {
	return s.unary("Scale", s.scale, y, x, alpha)
}

// GELU sets y = GELU(x), PyTorch's tanh approximation
// (kernels.GELUForward). y may alias x.
func (s *Set) GELU(y, x cuda.Buffer) error { return s.unary("GELU", s.gelu, y, x) }

// SiLU sets y = x·σ(x) (kernels.SiLUForward). y may alias x.
func (s *Set) SiLU(y, x cuda.Buffer) error { return s.unary("SiLU", s.silu, y, x) }

// rowsCols checks a [rows, cols] float32 matrix's arguments.
func rowsCols(kernel string, rows, cols int) error {
	if rows < 0 || cols < 0 || rows > 1<<31-1 || cols > 1<<31-1 {
		return fmt.Errorf("cudakernels: %s: bad shape [%d, %d]", kernel, rows, cols)
	}
	return nil
}

// LayerNorm normalises each row of x [rows, cols] to zero mean and unit
// variance without affine transform, storing each row's mean and rstd when
// those buffers are not empty (kernels.LayerNormForward). y may alias x.
func (s *Set) LayerNorm(y, mean, rstd, x cuda.Buffer, rows, cols int, eps float32) error {
	if err := rowsCols("LayerNorm", rows, cols); err != nil {
		return err
	}
	for _, b := range []struct {
		name string
		buf  cuda.Buffer
		n    int
	}{{"x", x, rows * cols}, {"y", y, rows * cols}, {"mean", mean, rows}, {"rstd", rstd, rows}} {
		if (b.name == "mean" || b.name == "rstd") && b.buf.Len() == 0 {
			continue
		}
		if _, err := f32Len("LayerNorm", b.name, b.buf, b.n); err != nil {
			return err
		}
	}
	if rows == 0 {
		return nil
	}
	// An empty statistics buffer has a zero pointer: the kernel skips it.
	return s.layerNorm.Launch(cuda.Dim3{X: rows}, cuda.Dim3{X: blockSize}, 0,
		y, mean.Ptr(), rstd.Ptr(), x, int32(rows), int32(cols), eps)
}

// Softmax sets each row of y [rows, cols] to the softmax of x's row:
// exp(x − max) / Σ exp(x − max). y may alias x.
func (s *Set) Softmax(y, x cuda.Buffer, rows, cols int) error {
	if err := rowsCols("Softmax", rows, cols); err != nil {
		return err
	}
	if _, err := f32Len("Softmax", "x", x, rows*cols); err != nil {
		return err
	}
	if _, err := f32Len("Softmax", "y", y, rows*cols); err != nil {
		return err
	}
	if rows == 0 || cols == 0 {
		return nil
	}
	return s.softmax.Launch(cuda.Dim3{X: rows}, cuda.Dim3{X: blockSize}, 0, y, x, int32(rows), int32(cols))
}

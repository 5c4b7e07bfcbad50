// Package accel chooses where a command's models run: on the CPU, or on a
// CUDA GPU with their parameters held there. The commands and
// pipelines open one Accelerator from the user's --device (or a recipe's
// device key) and attach each model's parameter set to it; the model code
// itself is unchanged, since the ops dispatch on where their operands
// live.
//
// On the CPU every method is a no-op, so callers need no branches: a nil
// *Accelerator is the CPU.
package accel

import (
	"errors"
	"fmt"

	"github.com/dcdit/dcdit/gpu/cuda"
	"github.com/dcdit/dcdit/gpu/device"
	"github.com/dcdit/dcdit/optim"
	"github.com/dcdit/dcdit/params"
)

// Names of the devices Open accepts.
const (
	CPU  = "cpu"
	CUDA = "cuda"
)

// Precisions of a CUDA device's matrix products.
const (
	FP32 = "fp32" // TF32 off: the CPU's parity reference
	TF32 = "tf32" // tensor cores with 10-bit mantissas, FP32 accumulation
)

// Accelerator is an open GPU: its runtime and the device the ops use. A
// nil *Accelerator is the CPU.
type Accelerator struct {
	rt        *cuda.Runtime
	dev       *device.Device
	precision string
}

// Check validates a device name and precision without opening anything,
// so that a recipe or flags are refused before any work starts.
func Check(name, precision string) error {
	switch name {
	case "", CPU:
		if precision != "" && precision != FP32 {
			return fmt.Errorf("precision %q applies to a CUDA device; the CPU computes in FP32", precision)
		}
		return nil
	case CUDA:
		switch precision {
		case "", FP32, TF32:
			return nil
		}
		return fmt.Errorf("precision %q, want %s or %s (BF16 storage is not built yet)", precision, FP32, TF32)
	}
	return fmt.Errorf("device %q, want %s or %s", name, CPU, CUDA)
}

// Open opens the named device: "cpu" (or "") gives nil, the CPU; "cuda"
// loads the CUDA driver, NVRTC and cuBLAS at run time and compiles the
// kernels (cached on disk after the first time). Without a usable GPU the
// error names the library and where it was looked for.
func Open(name, precision string) (*Accelerator, error) {
	if err := Check(name, precision); err != nil {
		return nil, err
	}
	if name == "" || name == CPU {
		return nil, nil
	}
	if precision == "" {
		precision = FP32
	}
	rt, err := cuda.Open(cuda.Options{})
	if err != nil {
		return nil, fmt.Errorf("accel: opening the CUDA device: %w", err)
	}
	prec := cuda.FP32
	if precision == TF32 {
		prec = cuda.TF32
	}
	dev, err := device.Open(rt, device.Options{Precision: prec})
	if err != nil {
		rt.Close()
		return nil, fmt.Errorf("accel: opening the CUDA device: %w", err)
	}
	return &Accelerator{rt: rt, dev: dev, precision: precision}, nil
}

// String describes the device for logs: "cpu", or the GPU's name,
// architecture and precision.
func (a *Accelerator) String() string {
	if a == nil {
		return CPU
	}
	d := a.rt.Device()
	return fmt.Sprintf("cuda: %s (%s, %.0f GiB), %s", d.Name, d.Arch(), float64(d.TotalMemory)/(1<<30), a.precision)
}

// Synchronize waits for the work queued on the device (timings); the CPU
// has none.
func (a *Accelerator) Synchronize() error {
	if a == nil {
		return nil
	}
	return a.rt.Synchronize()
}

// Close releases the device. Every Binding must be closed first.
func (a *Accelerator) Close() error {
	if a == nil {
		return nil
	}
	return errors.Join(a.dev.Close(), a.rt.Close())
}

// Binding is parameter sets held on the accelerator: while it is open,
// their parameters read their device copies, and the ops run there. The
// host arenas keep the values they had when bound (a training stage's
// Optimizer brings them up to date). On the CPU (a nil *Binding) every
// method does nothing.
type Binding struct {
	arenas []*device.Arena
}

// Attach uploads each set's values to the device and binds its parameters
// there until Binding.Close. Nil sets are skipped (a backbone without
// parameters of its own).
func (a *Accelerator) Attach(sets ...*params.Set) (*Binding, error) {
	if a == nil {
		return nil, nil
	}
	b := &Binding{}
	for _, set := range sets {
		if set == nil {
			continue
		}
		ar, err := device.NewArena(a.dev, set)
		if err != nil {
			return nil, errors.Join(err, b.Close())
		}
		b.arenas = append(b.arenas, ar)
	}
	return b, nil
}

// Close unbinds the parameters (they read the host arenas again) and frees
// their device memory.
func (b *Binding) Close() error {
	if b == nil {
		return nil
	}
	var errs []error
	for _, ar := range b.arenas {
		errs = append(errs, ar.Close())
	}
	b.arenas = nil
	return errors.Join(errs...)
}

// NewOptimizer puts a training stage's optimiser on the device beside the
// binding's arena (device.Arena.NewOptimizer). The binding must hold one
// parameter set, the one opt and ema describe.
func (b *Binding) NewOptimizer(opt *optim.AdamW, maxNorm float64, ema *optim.EMA) (*device.Optimizer, error) {
	if b == nil || len(b.arenas) != 1 {
		return nil, errors.New("accel: NewOptimizer: the binding must hold exactly one parameter set")
	}
	return b.arenas[0].NewOptimizer(opt, maxNorm, ema)
}

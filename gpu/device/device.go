package device

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/dcdit/dcdit/gpu/cuda"
	"github.com/dcdit/dcdit/gpu/cudakernels"
)

// Options configure a Device.
type Options struct {
	// Precision is the GEMM precision of the device ops (Linear): cuda.FP32
	// (the zero value; TF32 off, the parity reference) or cuda.TF32.
	Precision cuda.Precision
}

// Device is a GPU as the ops see it: the runtime, its compiled kernels,
// the GEMM precision, a pool of freed buffers and the packings of the
// offsets seen so far. It is safe for use from several goroutines.
type Device struct {
	rt   *cuda.Runtime
	set  *cudakernels.Set
	sc   *cudakernels.Scaffold
	mdl  *cudakernels.Models
	prec cuda.Precision

	mu     sync.Mutex
	free   map[int][]cuda.Buffer // by length in bytes
	packs  map[string]*cudakernels.Packing
	closed bool
}

// Open compiles (or loads from the cache) the kernels for rt and returns
// the device. rt stays the caller's: Close releases what the Device
// allocated, not the runtime.
func Open(rt *cuda.Runtime, opts Options) (*Device, error) {
	if rt == nil {
		return nil, errors.New("device: Open: nil runtime")
	}
	if opts.Precision != cuda.FP32 && opts.Precision != cuda.TF32 {
		return nil, fmt.Errorf("device: Open: precision %v, want FP32 or TF32 (tensors hold float32)", opts.Precision)
	}
	set, err := cudakernels.Load(rt)
	if err != nil {
		return nil, fmt.Errorf("device: loading kernels: %w", err)
	}
	sc, err := cudakernels.LoadScaffold(set)
	if err != nil {
		return nil, fmt.Errorf("device: loading scaffold kernels: %w", err)
	}
	mdl, err := cudakernels.LoadModels(set)
	if err != nil {
		return nil, fmt.Errorf("device: loading model kernels: %w", err)
	}
	return &Device{rt: rt, set: set, sc: sc, mdl: mdl, prec: opts.Precision,
		free: make(map[int][]cuda.Buffer), packs: make(map[string]*cudakernels.Packing)}, nil
}

// Runtime is the device's CUDA runtime.
func (d *Device) Runtime() *cuda.Runtime { return d.rt }

// Kernels is the device's main kernel set.
func (d *Device) Kernels() *cudakernels.Set { return d.set }

// Scaffold is the device's second kernel set (activation backward passes,
// 1×1 convolutions that serve as Linear, column slices, …).
func (d *Device) Scaffold() *cudakernels.Scaffold { return d.sc }

// Models is the device's fourth kernel set (per-row scaling, per-sample
// adds, scalar reductions and losses, row means).
func (d *Device) Models() *cudakernels.Models { return d.mdl }

// Precision is the GEMM precision of the device ops.
func (d *Device) Precision() cuda.Precision { return d.prec }

// Alloc returns a buffer of n float32, from the pool when one of that size
// was handed back, with unspecified contents.
func (d *Device) Alloc(n int) (cuda.Buffer, error) {
	if n < 0 {
		return cuda.Buffer{}, fmt.Errorf("device: Alloc: %d floats", n)
	}
	if n == 0 {
		return cuda.Buffer{}, nil
	}
	bytes := 4 * n
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return cuda.Buffer{}, errors.New("device: Alloc: the device is closed")
	}
	if list := d.free[bytes]; len(list) > 0 {
		b := list[len(list)-1]
		d.free[bytes] = list[:len(list)-1]
		d.mu.Unlock()
		return b, nil
	}
	d.mu.Unlock()
	b, err := d.rt.Alloc(bytes)
	if err != nil {
		return cuda.Buffer{}, fmt.Errorf("device: allocating %d floats: %w", n, err)
	}
	return b, nil
}

// Recycle hands b, from Alloc, back to the pool. Work already queued that
// reads or writes b stays valid: later users of b run after it on the
// same stream.
func (d *Device) Recycle(b cuda.Buffer) {
	if b.Len() == 0 {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		// Close freed the pool; a tensor released afterwards frees its own.
		b.Free()
		return
	}
	d.free[b.Len()] = append(d.free[b.Len()], b)
}

// Packing returns the device form of packed-sample offsets, uploaded at
// its first use and kept until Close: a training run sees few distinct
// offsets (one per batch shape), and every op of a step shares them.
// (DC-DiT's ragged kept-token counts will want a packing per batch whose
// lifetime the trainer owns; see docs/gpu.md.)
func (d *Device) Packing(offsets []int) (*cudakernels.Packing, error) {
	var key strings.Builder
	for _, o := range offsets {
		key.WriteString(strconv.Itoa(o))
		key.WriteByte(',')
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil, errors.New("device: Packing: the device is closed")
	}
	if p, ok := d.packs[key.String()]; ok {
		return p, nil
	}
	p, err := d.set.NewPacking(offsets)
	if err != nil {
		return nil, fmt.Errorf("device: packing offsets: %w", err)
	}
	d.packs[key.String()] = p
	return p, nil
}

// Synchronize waits for the work queued on the device and reports its
// first error.
func (d *Device) Synchronize() error { return d.rt.Synchronize() }

// Close frees the pooled buffers and the packings. Tensors still alive
// stay usable only for Release (their buffers are freed, not pooled).
func (d *Device) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil
	}
	d.closed = true
	var errs []error
	for _, list := range d.free {
		for _, b := range list {
			errs = append(errs, b.Free())
		}
	}
	for _, p := range d.packs {
		errs = append(errs, p.Free())
	}
	d.free, d.packs = nil, nil
	return errors.Join(errs...)
}

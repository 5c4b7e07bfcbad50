package device

import (
	"errors"
	"fmt"
	"slices"
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
	// PoolBytes is the most freed memory the pool keeps for reuse; 0 means
	// a sixteenth of the device's memory. Beyond it the pool is emptied,
	// and an allocation the driver refuses for lack of memory empties it
	// and tries once more: a DC model's kept-token counts change every
	// step, so freed buffers come in many sizes that may never repeat.
	PoolBytes int64
}

// maxPackings is how many packings the device keeps before it frees the
// least recently used half: kept-token counts make a new one almost every
// forward pass.
const maxPackings = 512

// Device is a GPU as the ops see it: the runtime, its compiled kernels,
// the GEMM precision, a pool of freed buffers and the packings of the
// offsets seen so far. It is safe for use from several goroutines.
type Device struct {
	rt   *cuda.Runtime
	set  *cudakernels.Set
	sc   *cudakernels.Scaffold
	mdl  *cudakernels.Models
	prec cuda.Precision

	mu      sync.Mutex
	free    map[int][]cuda.Buffer // by length in bytes
	pooled  int64                 // the bytes in free
	poolCap int64
	packs   map[string]*packing
	lastUse uint64 // the clock of the packings' uses
	closed  bool
}

// packing is a device packing and when it was last asked for.
type packing struct {
	p    *cudakernels.Packing
	used uint64
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
	poolCap := opts.PoolBytes
	if poolCap <= 0 {
		poolCap = 1 << 30
		if _, total, err := rt.MemInfo(); err == nil && total > 0 {
			poolCap = int64(total / 16)
		}
	}
	return &Device{rt: rt, set: set, sc: sc, mdl: mdl, prec: opts.Precision, poolCap: poolCap,
		free: make(map[int][]cuda.Buffer), packs: make(map[string]*packing)}, nil
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
		d.pooled -= int64(bytes)
		d.mu.Unlock()
		return b, nil
	}
	d.mu.Unlock()
	b, err := d.rt.Alloc(bytes)
	if outOfMemory(err) {
		d.mu.Lock()
		ferr := d.flushLocked()
		d.mu.Unlock()
		if ferr != nil {
			return cuda.Buffer{}, fmt.Errorf("device: allocating %d floats: %w; emptying the pool: %w", n, err, ferr)
		}
		b, err = d.rt.Alloc(bytes)
	}
	if err != nil {
		return cuda.Buffer{}, fmt.Errorf("device: allocating %d floats: %w", n, err)
	}
	return b, nil
}

// outOfMemory reports whether err is the driver's refusal for lack of
// device memory.
func outOfMemory(err error) bool {
	var ce *cuda.Error
	return errors.As(err, &ce) && ce.Name == "CUDA_ERROR_OUT_OF_MEMORY"
}

// flushLocked frees every pooled buffer; d.mu is held.
func (d *Device) flushLocked() error {
	var errs []error
	for _, list := range d.free {
		for _, b := range list {
			errs = append(errs, b.Free())
		}
	}
	clear(d.free)
	d.pooled = 0
	return errors.Join(errs...)
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
	if d.pooled+int64(b.Len()) > d.poolCap {
		// A failed free leaves the memory with the context; the next
		// allocation reports any shortage.
		_ = d.flushLocked()
	}
	d.free[b.Len()] = append(d.free[b.Len()], b)
	d.pooled += int64(b.Len())
}

// Packing returns the device form of packed-sample offsets, uploaded at
// its first use and kept while it is among the maxPackings most recently
// used: every op of a step shares them, and a DC model's kept-token counts
// make new ones every step. Ops ask for it at each Forward and Backward
// rather than holding it.
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
	d.lastUse++
	if p, ok := d.packs[key.String()]; ok {
		p.used = d.lastUse
		return p.p, nil
	}
	if len(d.packs) >= maxPackings {
		if err := d.evictPackingsLocked(); err != nil {
			return nil, err
		}
	}
	p, err := d.set.NewPacking(offsets)
	if err != nil {
		return nil, fmt.Errorf("device: packing offsets: %w", err)
	}
	d.packs[key.String()] = &packing{p, d.lastUse}
	return p, nil
}

// evictPackingsLocked frees the least recently used half of the packings,
// once the work queued (which may read them) is done; d.mu is held.
func (d *Device) evictPackingsLocked() error {
	if err := d.rt.Synchronize(); err != nil {
		return fmt.Errorf("device: freeing packings: %w", err)
	}
	uses := make([]uint64, 0, len(d.packs))
	for _, p := range d.packs {
		uses = append(uses, p.used)
	}
	slices.Sort(uses)
	cut := uses[len(uses)/2]
	var errs []error
	for k, p := range d.packs {
		if p.used < cut {
			errs = append(errs, p.p.Free())
			delete(d.packs, k)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("device: freeing packings: %w", err)
	}
	return nil
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
		errs = append(errs, p.p.Free())
	}
	d.free, d.packs = nil, nil
	return errors.Join(errs...)
}

package cuda

import (
	"fmt"
	"unsafe"
)

// Elem is the element types that host slices copied to and from the device
// may have (uint16 holds BF16 and F16 bit patterns).
type Elem interface {
	~float32 | ~float64 | ~uint16 | ~int16 | ~uint32 | ~int32 | ~uint64 | ~int64 | ~uint8 | ~int8
}

// Buffer is a span of device memory: a device pointer and a length in
// bytes, with the runtime that owns it. The zero Buffer is empty. A Buffer
// is a value; copies of it name the same memory, which Free releases.
type Buffer struct {
	rt  *Runtime
	ptr uint64
	n   int
}

// Ptr returns the device address (for kernel arguments).
func (b Buffer) Ptr() uint64 { return b.ptr }

// Len returns the length in bytes.
func (b Buffer) Len() int { return b.n }

// Runtime returns the runtime that allocated the buffer.
func (b Buffer) Runtime() *Runtime { return b.rt }

// Slice returns the bytes [off, off+n) of b as a Buffer sharing its memory
// (which must not be freed through the slice).
func (b Buffer) Slice(off, n int) (Buffer, error) {
	if off < 0 || n < 0 || off+n > b.n {
		return Buffer{}, fmt.Errorf("cuda: Buffer.Slice(%d, %d) of a %d-byte buffer", off, n, b.n)
	}
	return Buffer{rt: b.rt, ptr: b.ptr + uint64(off), n: n}, nil
}

// Alloc allocates n bytes of device memory (uninitialised).
func (r *Runtime) Alloc(n int) (Buffer, error) {
	if n < 0 {
		return Buffer{}, fmt.Errorf("cuda: Alloc(%d): negative size", n)
	}
	if n == 0 {
		return Buffer{rt: r}, nil
	}
	var p uint64
	err := r.do(func() error { return r.drv.check(r.drv.cuMemAlloc(&p, uint64(n)), "cuMemAlloc_v2(%d bytes)", n) })
	if err != nil {
		return Buffer{}, err
	}
	return Buffer{rt: r, ptr: p, n: n}, nil
}

// Free releases the buffer's memory. Freeing the zero or an empty Buffer is
// a no-op. cuMemFree synchronises with the device first, so work already
// queued that uses the buffer completes; it also makes Free a
// synchronisation point, to keep out of hot loops (a caching allocator is
// future work).
func (b Buffer) Free() error {
	if b.ptr == 0 {
		return nil
	}
	return b.rt.do(func() error { return b.rt.drv.check(b.rt.drv.cuMemFree(b.ptr), "cuMemFree_v2(%d bytes)", b.n) })
}

// Zero sets every byte of b to 0, in order with the runtime's stream.
func (b Buffer) Zero() error {
	if b.n == 0 {
		return nil
	}
	r := b.rt
	return r.do(func() error {
		return r.drv.check(r.drv.cuMemsetD8Async(b.ptr, 0, uint64(b.n), r.stream.h), "cuMemsetD8Async(%d bytes)", b.n)
	})
}

// hostBytes returns the address of s's first element and its size in bytes.
func hostBytes[T Elem](s []T) (unsafe.Pointer, int) {
	var z T
	return unsafe.Pointer(unsafe.SliceData(s)), len(s) * int(unsafe.Sizeof(z))
}

// needSameSize reports a length mismatch between a host slice and a buffer.
func needSameSize(call string, host, dev int) error {
	if host != dev {
		return fmt.Errorf("cuda: %s: host slice has %d bytes, device buffer %d", call, host, dev)
	}
	return nil
}

// CopyFromHost copies src into dst, whose length must equal src's size in
// bytes. It returns once the copy is complete; it waits for the work
// already queued on the runtime's stream first (a blocking stream orders
// after the legacy default stream's synchronous copies and vice versa).
func CopyFromHost[T Elem](dst Buffer, src []T) error {
	p, n := hostBytes(src)
	if err := needSameSize("CopyFromHost", n, dst.n); err != nil || n == 0 {
		return err
	}
	r := dst.rt
	return r.do(func() error {
		return r.drv.check(r.drv.cuMemcpyHtoD(dst.ptr, p, uint64(n)), "cuMemcpyHtoD_v2(%d bytes)", n)
	})
}

// CopyToHost copies src into dst, whose size in bytes must equal src's
// length, after the work queued before it on the runtime's stream.
func CopyToHost[T Elem](dst []T, src Buffer) error {
	p, n := hostBytes(dst)
	if err := needSameSize("CopyToHost", n, src.n); err != nil || n == 0 {
		return err
	}
	r := src.rt
	return r.do(func() error {
		return r.drv.check(r.drv.cuMemcpyDtoH(p, src.ptr, uint64(n)), "cuMemcpyDtoH_v2(%d bytes)", n)
	})
}

// CopyFromHostAsync queues a copy of src into dst on stream s. src is Go
// (pageable) memory, so the driver stages it before returning: src may be
// reused as soon as the call returns.
func CopyFromHostAsync[T Elem](dst Buffer, src []T, s Stream) error {
	p, n := hostBytes(src)
	if err := needSameSize("CopyFromHostAsync", n, dst.n); err != nil || n == 0 {
		return err
	}
	r := dst.rt
	return r.do(func() error {
		return r.drv.check(r.drv.cuMemcpyHtoDAsync(dst.ptr, p, uint64(n), s.h), "cuMemcpyHtoDAsync_v2(%d bytes)", n)
	})
}

// CopyToHostAsync copies src into dst in order with stream s. dst is Go
// (pageable) memory, for which the driver returns only once the copy is
// complete.
func CopyToHostAsync[T Elem](dst []T, src Buffer, s Stream) error {
	p, n := hostBytes(dst)
	if err := needSameSize("CopyToHostAsync", n, src.n); err != nil || n == 0 {
		return err
	}
	r := src.rt
	return r.do(func() error {
		return r.drv.check(r.drv.cuMemcpyDtoHAsync(p, src.ptr, uint64(n), s.h), "cuMemcpyDtoHAsync_v2(%d bytes)", n)
	})
}

// CopyFrom copies src into b (same length) on the device, in order with the
// runtime's stream.
func (b Buffer) CopyFrom(src Buffer) error {
	if err := needSameSize("Buffer.CopyFrom", src.n, b.n); err != nil || b.n == 0 {
		return err
	}
	r := b.rt
	return r.do(func() error {
		return r.drv.check(r.drv.cuMemcpyDtoDAsync(b.ptr, src.ptr, uint64(b.n), r.stream.h), "cuMemcpyDtoDAsync_v2(%d bytes)", b.n)
	})
}

// Upload allocates a buffer holding a copy of src.
func Upload[T Elem](r *Runtime, src []T) (Buffer, error) {
	_, n := hostBytes(src)
	b, err := r.Alloc(n)
	if err != nil {
		return Buffer{}, err
	}
	if err := CopyFromHost(b, src); err != nil {
		b.Free()
		return Buffer{}, err
	}
	return b, nil
}

// Download returns the buffer's contents as a new slice of T; the buffer's
// length must be a multiple of T's size.
func Download[T Elem](b Buffer) ([]T, error) {
	var z T
	sz := int(unsafe.Sizeof(z))
	if b.n%sz != 0 {
		return nil, fmt.Errorf("cuda: Download: %d bytes is not a whole number of %d-byte elements", b.n, sz)
	}
	out := make([]T, b.n/sz)
	return out, CopyToHost(out, b)
}

// Stream is a CUDA stream: work queued on it runs in order.
type Stream struct {
	rt *Runtime
	h  uintptr
}

// NewStream creates a stream that orders with the legacy default stream
// (CU_STREAM_DEFAULT), so the synchronous copies need no extra
// synchronisation with it.
func (r *Runtime) NewStream() (Stream, error) {
	s := Stream{rt: r}
	err := r.do(func() error { return r.drv.check(r.drv.cuStreamCreate(&s.h, cuStreamDefault), "cuStreamCreate") })
	return s, err
}

// Synchronize waits until the stream's work is done and reports its first
// error.
func (s Stream) Synchronize() error {
	return s.rt.do(func() error { return s.rt.drv.check(s.rt.drv.cuStreamSynchronize(s.h), "cuStreamSynchronize") })
}

// Destroy releases the stream once its work is done.
func (s Stream) Destroy() error {
	return s.rt.do(func() error { return s.rt.drv.check(s.rt.drv.cuStreamDestroy(s.h), "cuStreamDestroy_v2") })
}

// Event is a CUDA event, for timing work on a stream.
type Event struct {
	rt *Runtime
	h  uintptr
}

// NewEvent creates an event (with timing enabled).
func (r *Runtime) NewEvent() (Event, error) {
	e := Event{rt: r}
	err := r.do(func() error { return r.drv.check(r.drv.cuEventCreate(&e.h, cuEventDefault), "cuEventCreate") })
	return e, err
}

// Record records the event on stream s.
func (e Event) Record(s Stream) error {
	return e.rt.do(func() error { return e.rt.drv.check(e.rt.drv.cuEventRecord(e.h, s.h), "cuEventRecord") })
}

// Synchronize waits until the event has happened.
func (e Event) Synchronize() error {
	return e.rt.do(func() error { return e.rt.drv.check(e.rt.drv.cuEventSynchronize(e.h), "cuEventSynchronize") })
}

// ElapsedMs returns the time in milliseconds between start and end, both
// recorded and complete.
func ElapsedMs(start, end Event) (float32, error) {
	var ms float32
	err := start.rt.do(func() error {
		return start.rt.drv.check(start.rt.drv.cuEventElapsedTime(&ms, start.h, end.h), "cuEventElapsedTime")
	})
	return ms, err
}

// Destroy releases the event.
func (e Event) Destroy() error {
	return e.rt.do(func() error { return e.rt.drv.check(e.rt.drv.cuEventDestroy(e.h), "cuEventDestroy_v2") })
}

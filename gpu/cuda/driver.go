package cuda

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"unsafe"

	"github.com/ebitengine/purego"
)

// Options configures Open. The zero value searches the usual places and
// caches compiled kernels under os.UserCacheDir()/dcdit/cuda.
type Options struct {
	// Device is the ordinal of the GPU to use.
	Device int
	// LibDirs, when not nil, replaces the whole library search (loader path
	// and default folders) with these folders. DCDIT_CUDA_LIB_PATH does the
	// same when LibDirs is nil.
	LibDirs []string
	// CacheDir is the folder of the compiled-kernel cache; empty means
	// os.UserCacheDir()/dcdit/cuda. "off" disables the cache.
	CacheDir string
}

// Result is a CUresult, the driver API's status code.
type Result int32

// Error is a failed call into a CUDA library: which library and call, the
// status code and its name and description as the library gives them.
type Error struct {
	Library string // "libcuda", "libnvrtc" or "libcublas"
	Call    string // the function, with its salient arguments
	Code    int    // the status code
	Name    string // e.g. "CUDA_ERROR_OUT_OF_MEMORY"
	Message string // the library's description, when it has one
}

// Error reads "cuda: LIBRARY: CALL: NAME (CODE): MESSAGE".
func (e *Error) Error() string {
	s := fmt.Sprintf("cuda: %s: %s: %s (%d)", e.Library, e.Call, e.Name, e.Code)
	if e.Message != "" && e.Message != e.Name {
		s += ": " + e.Message
	}
	return s
}

// Driver API constants (cuda.h).
const (
	cuDevAttrMultiprocessorCount = 16
	cuDevAttrComputeCapMajor     = 75
	cuDevAttrComputeCapMinor     = 76
	cuStreamDefault              = 0 // blocking with respect to the legacy default stream
	cuEventDefault               = 0
)

// driver holds libcuda's functions. Handles (contexts, streams, modules,
// functions, events) are opaque pointers kept as uintptr: they point into
// the driver's memory, never Go's.
type driver struct {
	path string

	cuInit                    func(flags uint32) Result
	cuDriverGetVersion        func(v *int32) Result
	cuDeviceGetCount          func(n *int32) Result
	cuDeviceGet               func(dev *int32, ordinal int32) Result
	cuDeviceGetName           func(name *byte, n int32, dev int32) Result
	cuDeviceGetAttribute      func(v *int32, attr int32, dev int32) Result
	cuDeviceTotalMem          func(bytes *uint64, dev int32) Result
	cuDevicePrimaryCtxRetain  func(ctx *uintptr, dev int32) Result
	cuDevicePrimaryCtxRelease func(dev int32) Result
	symCtxSetCurrent          uintptr // cuCtxSetCurrent(CUcontext), called through SyscallN
	cuCtxSynchronize          func() Result
	cuMemAlloc                func(dptr *uint64, size uint64) Result
	cuMemFree                 func(dptr uint64) Result
	cuMemGetInfo              func(free, total *uint64) Result
	cuMemsetD8                func(dptr uint64, v uint8, n uint64) Result
	cuMemsetD8Async           func(dptr uint64, v uint8, n uint64, stream uintptr) Result
	cuMemcpyHtoD              func(dst uint64, src unsafe.Pointer, n uint64) Result
	cuMemcpyDtoH              func(dst unsafe.Pointer, src uint64, n uint64) Result
	cuMemcpyDtoD              func(dst, src uint64, n uint64) Result
	cuMemcpyHtoDAsync         func(dst uint64, src unsafe.Pointer, n uint64, stream uintptr) Result
	cuMemcpyDtoHAsync         func(dst unsafe.Pointer, src uint64, n uint64, stream uintptr) Result
	cuMemcpyDtoDAsync         func(dst, src uint64, n uint64, stream uintptr) Result
	cuStreamCreate            func(s *uintptr, flags uint32) Result
	cuStreamSynchronize       func(s uintptr) Result
	cuStreamDestroy           func(s uintptr) Result
	cuEventCreate             func(e *uintptr, flags uint32) Result
	cuEventRecord             func(e, s uintptr) Result
	cuEventSynchronize        func(e uintptr) Result
	cuEventElapsedTime        func(ms *float32, start, end uintptr) Result
	cuEventDestroy            func(e uintptr) Result
	cuModuleLoadData          func(m *uintptr, image unsafe.Pointer) Result
	cuModuleUnload            func(m uintptr) Result
	cuModuleGetFunction       func(f *uintptr, m uintptr, name string) Result
	symLaunchKernel           uintptr // cuLaunchKernel, called through SyscallN
	cuGetErrorName            func(r Result, s **byte) Result
	cuGetErrorString          func(r Result, s **byte) Result
}

func loadDriver(dirs []string) (*driver, error) {
	h, path, err := openLibrary(libCUDA, dirs)
	if err != nil {
		return nil, err
	}
	d := &driver{path: path}
	b := &binder{path: path, handle: h}
	b.bind(&d.cuInit, "cuInit")
	b.bind(&d.cuDriverGetVersion, "cuDriverGetVersion")
	b.bind(&d.cuDeviceGetCount, "cuDeviceGetCount")
	b.bind(&d.cuDeviceGet, "cuDeviceGet")
	b.bind(&d.cuDeviceGetName, "cuDeviceGetName")
	b.bind(&d.cuDeviceGetAttribute, "cuDeviceGetAttribute")
	b.bind(&d.cuDeviceTotalMem, "cuDeviceTotalMem_v2")
	b.bind(&d.cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain")
	b.bind(&d.cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2")
	d.symCtxSetCurrent = b.sym("cuCtxSetCurrent")
	b.bind(&d.cuCtxSynchronize, "cuCtxSynchronize")
	b.bind(&d.cuMemAlloc, "cuMemAlloc_v2")
	b.bind(&d.cuMemFree, "cuMemFree_v2")
	b.bind(&d.cuMemGetInfo, "cuMemGetInfo_v2")
	b.bind(&d.cuMemsetD8, "cuMemsetD8_v2")
	b.bind(&d.cuMemsetD8Async, "cuMemsetD8Async")
	b.bind(&d.cuMemcpyHtoD, "cuMemcpyHtoD_v2")
	b.bind(&d.cuMemcpyDtoH, "cuMemcpyDtoH_v2")
	b.bind(&d.cuMemcpyDtoD, "cuMemcpyDtoD_v2")
	b.bind(&d.cuMemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2")
	b.bind(&d.cuMemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2")
	b.bind(&d.cuMemcpyDtoDAsync, "cuMemcpyDtoDAsync_v2")
	b.bind(&d.cuStreamCreate, "cuStreamCreate")
	b.bind(&d.cuStreamSynchronize, "cuStreamSynchronize")
	b.bind(&d.cuStreamDestroy, "cuStreamDestroy_v2")
	b.bind(&d.cuEventCreate, "cuEventCreate")
	b.bind(&d.cuEventRecord, "cuEventRecord")
	b.bind(&d.cuEventSynchronize, "cuEventSynchronize")
	b.bindFirst(&d.cuEventElapsedTime, "cuEventElapsedTime_v2", "cuEventElapsedTime")
	b.bind(&d.cuEventDestroy, "cuEventDestroy_v2")
	b.bind(&d.cuModuleLoadData, "cuModuleLoadData")
	b.bind(&d.cuModuleUnload, "cuModuleUnload")
	b.bind(&d.cuModuleGetFunction, "cuModuleGetFunction")
	d.symLaunchKernel = b.sym("cuLaunchKernel")
	b.bind(&d.cuGetErrorName, "cuGetErrorName")
	b.bind(&d.cuGetErrorString, "cuGetErrorString")
	if b.err != nil {
		return nil, b.err
	}
	return d, nil
}

// check turns a CUresult into nil or an *Error naming the call.
func (d *driver) check(r Result, call string, args ...any) error {
	if r == 0 {
		return nil
	}
	if len(args) > 0 {
		call = fmt.Sprintf(call, args...)
	}
	e := &Error{Library: "libcuda", Call: call, Code: int(r), Name: fmt.Sprintf("CUresult %d", r)}
	var s *byte
	if d.cuGetErrorName(r, &s) == 0 && s != nil {
		e.Name = goString(s)
	}
	s = nil
	if d.cuGetErrorString(r, &s) == 0 && s != nil {
		e.Message = goString(s)
	}
	return e
}

// goString copies a NUL-terminated C string.
func goString(p *byte) string {
	if p == nil {
		return ""
	}
	n := 0
	for *(*byte)(unsafe.Add(unsafe.Pointer(p), n)) != 0 {
		n++
	}
	return string(unsafe.Slice(p, n))
}

// Device describes the GPU a Runtime uses.
type Device struct {
	Ordinal        int
	Name           string
	Major, Minor   int // compute capability
	Multiprocessor int // number of SMs
	TotalMemory    uint64
	DriverVersion  int // e.g. 13000 for CUDA 13.0
}

// Arch returns the device's architecture as NVRTC names it, e.g. "sm_90".
func (d Device) Arch() string { return fmt.Sprintf("sm_%d%d", d.Major, d.Minor) }

// Runtime is one GPU's CUDA state: the loaded libraries, the device's
// primary context and the stream its operations run on. Its methods are
// safe for concurrent use; operations on its stream run in issue order.
type Runtime struct {
	drv      *driver
	opts     Options
	dev      Device
	cuDev    int32
	ctx      uintptr
	stream   Stream
	cacheDir string // "" when the cache is off

	nvrtcOnce sync.Once
	nvrtc     *nvrtcLib
	nvrtcErr  error

	blasOnce sync.Once
	blas     *BLAS
	blasErr  error

	closeOnce sync.Once
}

// Open loads libcuda, initialises the driver and retains the primary
// context of opts.Device. Without a usable driver it returns an error (a
// *LoadError when the library is missing, an *Error when a call fails),
// never panics.
func Open(opts Options) (*Runtime, error) {
	drv, err := loadDriver(opts.LibDirs)
	if err != nil {
		return nil, err
	}
	if err := drv.check(drv.cuInit(0), "cuInit"); err != nil {
		return nil, err
	}
	var n int32
	if err := drv.check(drv.cuDeviceGetCount(&n), "cuDeviceGetCount"); err != nil {
		return nil, err
	}
	if opts.Device < 0 || opts.Device >= int(n) {
		return nil, fmt.Errorf("cuda: device %d requested, %d present (driver %s)", opts.Device, n, drv.path)
	}
	r := &Runtime{drv: drv, opts: opts}
	if err := drv.check(drv.cuDeviceGet(&r.cuDev, int32(opts.Device)), "cuDeviceGet(%d)", opts.Device); err != nil {
		return nil, err
	}
	if r.dev, err = r.queryDevice(); err != nil {
		return nil, err
	}
	if err := drv.check(drv.cuDevicePrimaryCtxRetain(&r.ctx, r.cuDev), "cuDevicePrimaryCtxRetain(%d)", opts.Device); err != nil {
		return nil, err
	}
	if r.cacheDir, err = cacheDir(opts.CacheDir); err != nil {
		r.Close()
		return nil, err
	}
	if r.stream, err = r.NewStream(); err != nil {
		r.Close()
		return nil, err
	}
	return r, nil
}

func (r *Runtime) queryDevice() (Device, error) {
	d := r.drv
	dev := Device{Ordinal: r.opts.Device}
	name := make([]byte, 256)
	if err := d.check(d.cuDeviceGetName(&name[0], int32(len(name)), r.cuDev), "cuDeviceGetName"); err != nil {
		return dev, err
	}
	dev.Name = goString(&name[0])
	attrs := []struct {
		attr int32
		dst  *int
		name string
	}{
		{cuDevAttrComputeCapMajor, &dev.Major, "COMPUTE_CAPABILITY_MAJOR"},
		{cuDevAttrComputeCapMinor, &dev.Minor, "COMPUTE_CAPABILITY_MINOR"},
		{cuDevAttrMultiprocessorCount, &dev.Multiprocessor, "MULTIPROCESSOR_COUNT"},
	}
	for _, a := range attrs {
		var v int32
		if err := d.check(d.cuDeviceGetAttribute(&v, a.attr, r.cuDev), "cuDeviceGetAttribute(%s)", a.name); err != nil {
			return dev, err
		}
		*a.dst = int(v)
	}
	if err := d.check(d.cuDeviceTotalMem(&dev.TotalMemory, r.cuDev), "cuDeviceTotalMem_v2"); err != nil {
		return dev, err
	}
	var v int32
	if err := d.check(d.cuDriverGetVersion(&v), "cuDriverGetVersion"); err != nil {
		return dev, err
	}
	dev.DriverVersion = int(v)
	return dev, nil
}

// Device describes the runtime's GPU.
func (r *Runtime) Device() Device { return r.dev }

// DriverPath is the libcuda file (or soname) that was loaded.
func (r *Runtime) DriverPath() string { return r.drv.path }

// Stream is the stream the runtime's own operations (kernels, GEMMs,
// device-to-device copies, Zero) run on.
func (r *Runtime) Stream() Stream { return r.stream }

// do runs f on a thread where the runtime's context is current. The CUDA
// context is per OS thread, so the goroutine stays on its thread until f
// returns.
func (r *Runtime) do(f func() error) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	// CUresult is a C int: only the low 32 bits of the return register count.
	res, _, _ := purego.SyscallN(r.drv.symCtxSetCurrent, r.ctx)
	if err := r.drv.check(Result(int32(res)), "cuCtxSetCurrent"); err != nil {
		return err
	}
	return f()
}

// Synchronize waits for all work on the device to finish and reports the
// first asynchronous error, if any.
func (r *Runtime) Synchronize() error {
	return r.do(func() error { return r.drv.check(r.drv.cuCtxSynchronize(), "cuCtxSynchronize") })
}

// MemInfo returns the device's free and total memory in bytes.
func (r *Runtime) MemInfo() (free, total uint64, err error) {
	err = r.do(func() error { return r.drv.check(r.drv.cuMemGetInfo(&free, &total), "cuMemGetInfo_v2") })
	return free, total, err
}

// Close releases the cuBLAS handle, the stream and the primary context. The
// runtime and its buffers must not be used afterwards; buffers not freed
// before are released with the context once no other user retains it.
func (r *Runtime) Close() error {
	var errs []error
	r.closeOnce.Do(func() {
		if r.blas != nil {
			errs = append(errs, r.blas.close())
		}
		if r.stream.h != 0 {
			errs = append(errs, r.stream.Destroy())
		}
		if r.ctx != 0 {
			errs = append(errs, r.drv.check(r.drv.cuDevicePrimaryCtxRelease(r.cuDev), "cuDevicePrimaryCtxRelease_v2"))
		}
	})
	return errors.Join(errs...)
}

package cuda

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"slices"
	"strings"
	"time"
	"unsafe"

	"github.com/ebitengine/purego"
)

// nvrtcLib holds libnvrtc's functions.
type nvrtcLib struct {
	path         string
	major, minor int
	archs        []int // the real architectures it can compile for, e.g. 90 for sm_90

	nvrtcGetErrorString       func(r int32) string
	nvrtcVersion              func(major, minor *int32) int32
	nvrtcGetNumSupportedArchs func(n *int32) int32
	nvrtcGetSupportedArchs    func(a *int32) int32
	nvrtcCreateProgram        func(prog *uintptr, src, name string, nHeaders int32, headers, includeNames unsafe.Pointer) int32
	nvrtcDestroyProgram       func(prog *uintptr) int32
	nvrtcCompileProgram       func(prog uintptr, nOpts int32, opts unsafe.Pointer) int32
	nvrtcGetProgramLogSize    func(prog uintptr, n *uint64) int32
	nvrtcGetProgramLog        func(prog uintptr, log *byte) int32
	nvrtcGetPTXSize           func(prog uintptr, n *uint64) int32
	nvrtcGetPTX               func(prog uintptr, ptx *byte) int32
	nvrtcGetCUBINSize         func(prog uintptr, n *uint64) int32
	nvrtcGetCUBIN             func(prog uintptr, cubin *byte) int32
}

func loadNVRTC(dirs []string) (*nvrtcLib, error) {
	h, path, err := openLibrary(libNVRTC, dirs)
	if err != nil {
		return nil, err
	}
	n := &nvrtcLib{path: path}
	b := &binder{path: path, handle: h}
	b.bind(&n.nvrtcGetErrorString, "nvrtcGetErrorString")
	b.bind(&n.nvrtcVersion, "nvrtcVersion")
	b.bind(&n.nvrtcCreateProgram, "nvrtcCreateProgram")
	b.bind(&n.nvrtcDestroyProgram, "nvrtcDestroyProgram")
	b.bind(&n.nvrtcCompileProgram, "nvrtcCompileProgram")
	b.bind(&n.nvrtcGetProgramLogSize, "nvrtcGetProgramLogSize")
	b.bind(&n.nvrtcGetProgramLog, "nvrtcGetProgramLog")
	b.bind(&n.nvrtcGetPTXSize, "nvrtcGetPTXSize")
	b.bind(&n.nvrtcGetPTX, "nvrtcGetPTX")
	if b.err != nil {
		return nil, b.err
	}
	// Cubins (NVRTC ≥ 11.1) load without a JIT step; without them we fall
	// back to PTX.
	if !b.bindOptional(&n.nvrtcGetCUBINSize, "nvrtcGetCUBINSize") || !b.bindOptional(&n.nvrtcGetCUBIN, "nvrtcGetCUBIN") {
		n.nvrtcGetCUBINSize, n.nvrtcGetCUBIN = nil, nil
	}
	var maj, min int32
	if err := n.check(n.nvrtcVersion(&maj, &min), "nvrtcVersion"); err != nil {
		return nil, err
	}
	n.major, n.minor = int(maj), int(min)
	if b.bindOptional(&n.nvrtcGetNumSupportedArchs, "nvrtcGetNumSupportedArchs") && b.bindOptional(&n.nvrtcGetSupportedArchs, "nvrtcGetSupportedArchs") {
		var cnt int32
		if err := n.check(n.nvrtcGetNumSupportedArchs(&cnt), "nvrtcGetNumSupportedArchs"); err != nil {
			return nil, err
		}
		if cnt > 0 {
			a := make([]int32, cnt)
			if err := n.check(n.nvrtcGetSupportedArchs(&a[0]), "nvrtcGetSupportedArchs"); err != nil {
				return nil, err
			}
			for _, v := range a {
				n.archs = append(n.archs, int(v))
			}
			slices.Sort(n.archs)
		}
	}
	return n, nil
}

func (n *nvrtcLib) check(r int32, call string) error {
	if r == 0 {
		return nil
	}
	return &Error{Library: "libnvrtc", Call: call, Code: int(r), Name: n.nvrtcGetErrorString(r)}
}

// target picks what to compile for a device of compute capability cc
// (major·10 + minor): its own cubin when NVRTC knows the architecture,
// else PTX for the newest virtual architecture not above it, which the
// driver compiles at load time.
func (n *nvrtcLib) target(cc int) (arch string, cubin bool, err error) {
	if n.nvrtcGetCUBIN != nil && (len(n.archs) == 0 || slices.Contains(n.archs, cc)) {
		return fmt.Sprintf("sm_%d", cc), true, nil
	}
	best := -1
	for _, a := range n.archs {
		if a <= cc {
			best = a
		}
	}
	if best < 0 {
		if len(n.archs) == 0 {
			return fmt.Sprintf("compute_%d", cc), false, nil
		}
		return "", false, fmt.Errorf("cuda: %s (NVRTC %d.%d) supports architectures %v, none at or below the device's sm_%d", n.path, n.major, n.minor, n.archs, cc)
	}
	return fmt.Sprintf("compute_%d", best), false, nil
}

// CompileError is a kernel source that NVRTC rejected; Log is its
// compiler output.
type CompileError struct {
	Name    string   // the source's name
	Options []string // the options it was compiled with
	Err     error    // the NVRTC status
	Log     string
}

// Error gives the source, the options, the status and the compiler log.
func (e *CompileError) Error() string {
	return fmt.Sprintf("cuda: compiling %s with %s: %v\n%s", e.Name, strings.Join(e.Options, " "), e.Err, e.Log)
}

// Unwrap returns the NVRTC status error.
func (e *CompileError) Unwrap() error { return e.Err }

// compile runs NVRTC over src and returns the image (a cubin, or PTX with
// its terminating NUL) and the compiler log.
func (n *nvrtcLib) compile(name, src string, opts []string, cubin bool) ([]byte, string, error) {
	var prog uintptr
	if err := n.check(n.nvrtcCreateProgram(&prog, src, name, 0, nil, nil), "nvrtcCreateProgram("+name+")"); err != nil {
		return nil, "", err
	}
	defer n.nvrtcDestroyProgram(&prog)

	// NVRTC reads the options as a C array of C strings.
	cstrs := make([][]byte, len(opts))
	ptrs := make([]*byte, len(opts)+1)
	for i, o := range opts {
		cstrs[i] = append([]byte(o), 0)
		ptrs[i] = &cstrs[i][0]
	}
	res := n.nvrtcCompileProgram(prog, int32(len(opts)), unsafe.Pointer(&ptrs[0]))
	runtime.KeepAlive(cstrs)
	log := n.programLog(prog)
	if err := n.check(res, "nvrtcCompileProgram("+name+")"); err != nil {
		return nil, log, &CompileError{Name: name, Options: opts, Err: err, Log: log}
	}
	getSize, get, what := n.nvrtcGetPTXSize, n.nvrtcGetPTX, "PTX"
	if cubin {
		getSize, get, what = n.nvrtcGetCUBINSize, n.nvrtcGetCUBIN, "CUBIN"
	}
	var size uint64
	if err := n.check(getSize(prog, &size), "nvrtcGet"+what+"Size("+name+")"); err != nil {
		return nil, log, err
	}
	if size == 0 {
		return nil, log, fmt.Errorf("cuda: %s: NVRTC produced an empty %s", name, what)
	}
	img := make([]byte, size)
	if err := n.check(get(prog, &img[0]), "nvrtcGet"+what+"("+name+")"); err != nil {
		return nil, log, err
	}
	return img, log, nil
}

func (n *nvrtcLib) programLog(prog uintptr) string {
	var size uint64
	if n.nvrtcGetProgramLogSize(prog, &size) != 0 || size <= 1 {
		return ""
	}
	buf := make([]byte, size)
	if n.nvrtcGetProgramLog(prog, &buf[0]) != 0 {
		return ""
	}
	return strings.TrimRight(string(buf), "\x00\n ")
}

// NVRTC loads libnvrtc at its first call and reports the file loaded and
// its version.
func (r *Runtime) NVRTC() (path string, major, minor int, err error) {
	n, err := r.loadNVRTC()
	if err != nil {
		return "", 0, 0, err
	}
	return n.path, n.major, n.minor, nil
}

func (r *Runtime) loadNVRTC() (*nvrtcLib, error) {
	r.nvrtcOnce.Do(func() { r.nvrtc, r.nvrtcErr = loadNVRTC(r.opts.LibDirs) })
	return r.nvrtc, r.nvrtcErr
}

// Module is a compiled and loaded set of kernels.
type Module struct {
	rt *Runtime
	h  uintptr

	// Name is the source's name given to Compile.
	Name string
	// Target is the architecture compiled for, e.g. "sm_90" (a cubin) or
	// "compute_90" (PTX, compiled by the driver at load).
	Target string
	// FromCache tells whether the image came from the disk cache.
	FromCache bool
	// CompileTime is the time NVRTC took (zero when cached).
	CompileTime time.Duration
	// LoadTime is the time the whole of Compile took.
	LoadTime time.Duration
	// Log is NVRTC's output (warnings), empty when cached.
	Log string
	// CacheErr is why the cache could not be read or written, if it could
	// not (the module is still good).
	CacheErr error
}

// Compile compiles the CUDA C source src (named name in messages) for the
// runtime's device with NVRTC and loads it, or loads the image a previous
// compile left in the disk cache. The options are NVRTC's (e.g.
// "--use_fast_math"); the architecture option is added here. A corrupt or
// unloadable cache entry is compiled again and replaced. Kernels to be
// looked up by name should be declared extern "C".
func (r *Runtime) Compile(name, src string, opts ...string) (*Module, error) {
	start := time.Now()
	n, err := r.loadNVRTC()
	if err != nil {
		return nil, err
	}
	cc := r.dev.Major*10 + r.dev.Minor
	arch, cubin, err := n.target(cc)
	if err != nil {
		return nil, err
	}
	all := append([]string{"--gpu-architecture=" + arch}, opts...)
	kind := "ptx"
	if cubin {
		kind = "cubin"
	}
	key := cacheKey(name, src, strings.Join(all, "\x00"), kind, fmt.Sprintf("nvrtc %d.%d", n.major, n.minor))
	m := &Module{rt: r, Name: name, Target: arch}

	if r.cacheDir != "" {
		img, err := readCache(r.cacheDir, key)
		switch {
		case err != nil:
			m.CacheErr = err
		case img != nil:
			lerr := r.loadModule(m, img)
			if lerr == nil {
				m.FromCache = true
				m.LoadTime = time.Since(start)
				return m, nil
			}
			// A well-formed entry the driver rejects (a driver downgrade,
			// say) is replaced by a fresh compile.
			m.CacheErr = fmt.Errorf("cuda: kernel cache %s: %w", cachePath(r.cacheDir, key), lerr)
		}
	}

	t0 := time.Now()
	img, log, err := n.compile(name, src, all, cubin)
	m.CompileTime, m.Log = time.Since(t0), log
	if err != nil {
		return nil, err
	}
	if err := r.loadModule(m, img); err != nil {
		return nil, err
	}
	if r.cacheDir != "" {
		if err := writeCache(r.cacheDir, key, img); err != nil {
			m.CacheErr = errors.Join(m.CacheErr, err)
		}
	}
	m.LoadTime = time.Since(start)
	return m, nil
}

func (r *Runtime) loadModule(m *Module, img []byte) error {
	return r.do(func() error {
		err := r.drv.check(r.drv.cuModuleLoadData(&m.h, unsafe.Pointer(&img[0])), "cuModuleLoadData(%s, %s)", m.Name, m.Target)
		runtime.KeepAlive(img)
		return err
	})
}

// Function looks up the kernel name (an extern "C" __global__ function).
func (m *Module) Function(name string) (Function, error) {
	f := Function{rt: m.rt, Name: name}
	err := m.rt.do(func() error {
		return m.rt.drv.check(m.rt.drv.cuModuleGetFunction(&f.h, m.h, name), "cuModuleGetFunction(%s, %q)", m.Name, name)
	})
	return f, err
}

// Unload releases the module; its functions must not be launched after.
func (m *Module) Unload() error {
	return m.rt.do(func() error { return m.rt.drv.check(m.rt.drv.cuModuleUnload(m.h), "cuModuleUnload(%s)", m.Name) })
}

// Function is a kernel of a loaded module.
type Function struct {
	rt   *Runtime
	h    uintptr
	Name string
}

// Dim3 is a grid or block size; a zero Y or Z counts as 1.
type Dim3 struct{ X, Y, Z int }

func (d Dim3) norm() (x, y, z uint32, ok bool) {
	y0, z0 := max(d.Y, 1), max(d.Z, 1)
	if d.X < 1 || d.X > math.MaxUint32 || y0 > 65535 || z0 > 65535 {
		return 0, 0, 0, false
	}
	return uint32(d.X), uint32(y0), uint32(z0), true
}

// Launch queues the kernel on the runtime's stream with the given grid,
// block and dynamic shared memory. Each argument is passed as the kernel
// parameter at its position and must have the parameter's exact C type: a
// Buffer or uint64 (a pointer), int32, uint32, int64, float32 or float64.
// Plain int is refused because its C width is ambiguous.
func (f Function) Launch(grid, block Dim3, shared int, args ...any) error {
	return f.LaunchOn(f.rt.stream, grid, block, shared, args...)
}

// LaunchOn is Launch on stream s.
func (f Function) LaunchOn(s Stream, grid, block Dim3, shared int, args ...any) error {
	gx, gy, gz, ok1 := grid.norm()
	bx, by, bz, ok2 := block.norm()
	if !ok1 || !ok2 || shared < 0 {
		return fmt.Errorf("cuda: launch %s: bad grid %v, block %v or shared memory %d", f.Name, grid, block, shared)
	}
	// Each parameter gets an 8-byte slot holding its value in its low bytes
	// (little-endian); the driver reads as many bytes as the parameter has.
	vals := make([]uint64, len(args)+1)
	ptrs := make([]unsafe.Pointer, len(args)+1)
	for i, a := range args {
		switch v := a.(type) {
		case Buffer:
			vals[i] = v.ptr
		case uint64:
			vals[i] = v
		case int64:
			vals[i] = uint64(v)
		case int32:
			vals[i] = uint64(uint32(v))
		case uint32:
			vals[i] = uint64(v)
		case float32:
			vals[i] = uint64(math.Float32bits(v))
		case float64:
			vals[i] = math.Float64bits(v)
		default:
			return fmt.Errorf("cuda: launch %s: argument %d has type %T; want Buffer, uint64, int64, int32, uint32, float32 or float64", f.Name, i, a)
		}
		ptrs[i] = unsafe.Pointer(&vals[i])
	}
	err := f.rt.do(func() error {
		res, _, _ := purego.SyscallN(f.rt.drv.symLaunchKernel, f.h,
			uintptr(gx), uintptr(gy), uintptr(gz), uintptr(bx), uintptr(by), uintptr(bz),
			uintptr(shared), s.h, uintptr(unsafe.Pointer(&ptrs[0])), 0)
		return f.rt.drv.check(Result(int32(res)), "cuLaunchKernel(%s, grid %v, block %v)", f.Name, grid, block)
	})
	runtime.KeepAlive(vals)
	runtime.KeepAlive(ptrs)
	return err
}

package cuda

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/ebitengine/purego"
)

// LibPathEnv names the environment variable that, when set, replaces the
// library search with its folders alone (separated by ':'), like
// Options.LibDirs.
const LibPathEnv = "DCDIT_CUDA_LIB_PATH"

// loaderSearch is how the error message names the dynamic loader's own search.
const loaderSearch = "the dynamic loader's search path (LD_LIBRARY_PATH, /etc/ld.so.cache)"

// library describes one shared library to find.
type library struct {
	// name is the library's name without suffix ("libnvrtc"); files matching
	// name+".so*" in a searched folder are candidates.
	name string
	// sonames are the file names tried first, newest first: the names the
	// CUDA packages install.
	sonames []string
	// companions are libraries (names without suffix) that must be loaded
	// from the same folder first, because the library needs them and the
	// folder may not be on the loader's path (libcublas needs libcublasLt).
	companions []string
}

var (
	libCUDA   = library{name: "libcuda", sonames: []string{"libcuda.so.1", "libcuda.so"}}
	libNVRTC  = library{name: "libnvrtc", sonames: []string{"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so.11.2", "libnvrtc.so"}, companions: []string{"libnvrtc-builtins"}}
	libCUBLAS = library{name: "libcublas", sonames: []string{"libcublas.so.13", "libcublas.so.12", "libcublas.so.11", "libcublas.so"}, companions: []string{"libcublasLt"}}
)

// LoadError reports that a shared library could not be loaded: which one,
// the file names tried, every place searched and, for files that exist but
// did not load, why.
type LoadError struct {
	Library  string   // e.g. "libnvrtc"
	Names    []string // the file names tried by name (sonames)
	Places   []string // the places searched, in order
	Failures []string // "path: reason" for candidates that exist but failed to load
}

// Error names the library, the names tried, the places searched and the
// failures.
func (e *LoadError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "cuda: cannot load %s: looked for %s", e.Library, strings.Join(e.Names, ", "))
	if len(e.Places) > 0 {
		fmt.Fprintf(&b, " (and %s.so*) in: %s", e.Library, strings.Join(e.Places, "; "))
	}
	if len(e.Failures) > 0 {
		fmt.Fprintf(&b, "; found but failed to load: %s", strings.Join(e.Failures, "; "))
	} else {
		b.WriteString("; found none")
	}
	return b.String()
}

// searchDirs returns the folders to search after the loader's own search,
// and whether the loader's search applies at all. Explicit folders (the
// option, else the environment variable) replace the whole default search so
// that a caller, or a test, controls exactly where libraries come from.
func searchDirs(explicit []string) (dirs []string, useLoader bool) {
	if explicit != nil {
		return explicit, false
	}
	if v, ok := os.LookupEnv(LibPathEnv); ok {
		return filepath.SplitList(v), false
	}
	for _, env := range []string{"CUDA_PATH", "CUDA_HOME"} {
		if v := os.Getenv(env); v != "" {
			dirs = append(dirs, filepath.Join(v, "lib64"), filepath.Join(v, "lib"))
		}
	}
	dirs = append(dirs,
		"/usr/local/cuda/lib64",
		"/usr/local/cuda/targets/x86_64-linux/lib",
		"/usr/local/nvidia/lib64",
		"/usr/local/nvidia/lib",
		"/usr/lib/x86_64-linux-gnu",
		"/usr/lib64",
		"/usr/lib/wsl/lib",
	)
	// NVIDIA's pip wheels put each library in site-packages/nvidia/<pkg>/lib
	// (CUDA 12: nvidia/cublas/lib; CUDA 13: nvidia/cu13/lib).
	var roots []string
	if v := os.Getenv("VIRTUAL_ENV"); v != "" {
		roots = append(roots, v)
	}
	roots = append(roots, "/opt/torch/.venv", "/usr/local", "/usr")
	if h, err := os.UserHomeDir(); err == nil {
		roots = append(roots, filepath.Join(h, ".local"))
	}
	for _, r := range roots {
		for _, sp := range []string{"site-packages", "dist-packages"} {
			m, _ := filepath.Glob(filepath.Join(r, "lib", "python3*", sp, "nvidia", "*", "lib"))
			dirs = append(dirs, m...)
		}
	}
	return dirs, true
}

// openLibrary loads lib: first by its sonames through the loader's search
// (unless explicit folders are given), then from each folder in turn. It
// returns the handle and the path (or soname) that loaded.
func openLibrary(lib library, explicit []string) (uintptr, string, error) {
	dirs, useLoader := searchDirs(explicit)
	e := &LoadError{Library: lib.name, Names: lib.sonames}
	if useLoader {
		e.Places = append(e.Places, loaderSearch)
		for _, so := range lib.sonames {
			h, err := purego.Dlopen(so, purego.RTLD_NOW|purego.RTLD_GLOBAL)
			if err == nil {
				return h, so, nil
			}
			// A soname that is simply absent is the common case and says
			// nothing; a present one that fails (wrong architecture, missing
			// dependency) is worth reporting.
			if msg := err.Error(); !strings.Contains(msg, "No such file") && !strings.Contains(msg, "cannot open shared object file") {
				e.Failures = append(e.Failures, so+": "+msg)
			}
		}
	}
	for _, dir := range dirs {
		e.Places = append(e.Places, dir)
		for _, path := range candidates(dir, lib) {
			for _, c := range lib.companions {
				// Best effort: when the companion is missing, the library's
				// own load below reports the unresolved dependency.
				for _, cp := range candidates(dir, library{name: c}) {
					if _, err := purego.Dlopen(cp, purego.RTLD_NOW|purego.RTLD_GLOBAL); err == nil {
						break
					}
				}
			}
			h, err := purego.Dlopen(path, purego.RTLD_NOW|purego.RTLD_GLOBAL)
			if err == nil {
				return h, path, nil
			}
			e.Failures = append(e.Failures, path+": "+err.Error())
		}
	}
	return 0, "", e
}

// candidates lists the files in dir that may be lib: its sonames first, then
// any other name+".so*" file, highest version first.
func candidates(dir string, lib library) []string {
	var out []string
	seen := map[string]bool{}
	for _, so := range lib.sonames {
		p := filepath.Join(dir, so)
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() {
			out = append(out, p)
			seen[p] = true
		}
	}
	more, _ := filepath.Glob(filepath.Join(dir, lib.name+".so*"))
	slices.SortFunc(more, func(a, b string) int { return compareVersions(b, a) })
	for _, p := range more {
		if !seen[p] {
			out = append(out, p)
			seen[p] = true
		}
	}
	return out
}

// compareVersions orders library paths by the numeric version after ".so"
// ("libx.so.12.4" > "libx.so.12" > "libx.so"), then by name.
func compareVersions(a, b string) int {
	va, vb := soVersion(a), soVersion(b)
	for i := 0; i < len(va) && i < len(vb); i++ {
		if va[i] != vb[i] {
			return va[i] - vb[i]
		}
	}
	if len(va) != len(vb) {
		return len(va) - len(vb)
	}
	return strings.Compare(a, b)
}

// soVersion returns the numeric components after ".so." in path.
func soVersion(path string) []int {
	_, v, ok := strings.Cut(filepath.Base(path), ".so.")
	if !ok {
		return nil
	}
	var out []int
	for _, f := range strings.Split(v, ".") {
		n, err := strconv.Atoi(f)
		if err != nil {
			break
		}
		out = append(out, n)
	}
	return out
}

// binder resolves a library's symbols into typed Go functions, keeping the
// first failure so that a run of bindings needs one error check.
type binder struct {
	path   string // the library as loaded, for messages
	handle uintptr
	err    error
}

// bind sets *fptr (a pointer to a func variable) to the C function name.
func (b *binder) bind(fptr any, name string) {
	if b.err != nil {
		return
	}
	sym, err := purego.Dlsym(b.handle, name)
	if err != nil {
		b.err = fmt.Errorf("cuda: %s has no symbol %s (too old a version?): %w", b.path, name, err)
		return
	}
	purego.RegisterFunc(fptr, sym)
}

// sym returns the address of the C function name, for the hot paths that
// call it through purego.SyscallN: a RegisterFunc'd function goes through
// reflection, which costs about a microsecond a call.
func (b *binder) sym(name string) uintptr {
	if b.err != nil {
		return 0
	}
	s, err := purego.Dlsym(b.handle, name)
	if err != nil {
		b.err = fmt.Errorf("cuda: %s has no symbol %s (too old a version?): %w", b.path, name, err)
	}
	return s
}

// bindFirst binds the first of names the library has: newer versions add
// "_v2" forms whose old names the headers no longer reach.
func (b *binder) bindFirst(fptr any, names ...string) {
	for _, n := range names[:len(names)-1] {
		if b.bindOptional(fptr, n) {
			return
		}
	}
	b.bind(fptr, names[len(names)-1])
}

// bindOptional is bind for a symbol that older versions lack; it reports
// whether the symbol was found.
func (b *binder) bindOptional(fptr any, name string) bool {
	sym, err := purego.Dlsym(b.handle, name)
	if err != nil {
		return false
	}
	purego.RegisterFunc(fptr, sym)
	return true
}

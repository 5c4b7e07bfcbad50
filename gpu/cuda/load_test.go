package cuda

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestOpenMissingLibrary checks that, with the search pointed at a folder
// without CUDA, every library fails with a *LoadError naming the library,
// the names it tried and every place it looked, and never panics.
func TestOpenMissingLibrary(t *testing.T) {
	empty := t.TempDir()
	other := t.TempDir()
	for _, tc := range []struct {
		name string
		lib  library
		dirs []string
	}{
		{"libcuda", libCUDA, []string{empty}},
		{"libnvrtc", libNVRTC, []string{empty, other}},
		{"libcublas", libCUBLAS, []string{other}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := openLibrary(tc.lib, tc.dirs)
			var le *LoadError
			if !errors.As(err, &le) {
				t.Fatalf("openLibrary: err = %v, want a *LoadError", err)
			}
			msg := err.Error()
			wants := append([]string{tc.name, tc.lib.sonames[0], "found none"}, tc.dirs...)
			for _, w := range wants {
				if !strings.Contains(msg, w) {
					t.Errorf("message %q does not mention %q", msg, w)
				}
			}
			if strings.Contains(msg, loaderSearch) {
				t.Errorf("explicit folders must replace the loader's search, message: %q", msg)
			}
			if !slices.Equal(le.Places, tc.dirs) {
				t.Errorf("Places = %q, want %q", le.Places, tc.dirs)
			}
		})
	}
}

// TestOpenNoDriver checks Open itself, through the option and through the
// environment variable.
func TestOpenNoDriver(t *testing.T) {
	dir := t.TempDir()
	t.Run("option", func(t *testing.T) {
		r, err := Open(Options{LibDirs: []string{dir}})
		var le *LoadError
		if r != nil || !errors.As(err, &le) || le.Library != "libcuda" {
			t.Fatalf("Open = %v, %v; want nil and a libcuda *LoadError", r, err)
		}
		if !strings.Contains(err.Error(), dir) || !strings.Contains(err.Error(), "libcuda.so.1") {
			t.Errorf("error %q should name libcuda.so.1 and %s", err, dir)
		}
	})
	t.Run("env", func(t *testing.T) {
		t.Setenv(LibPathEnv, dir+string(os.PathListSeparator)+"/nonexistent/cuda")
		_, err := Open(Options{})
		var le *LoadError
		if !errors.As(err, &le) {
			t.Fatalf("Open: err = %v, want a *LoadError", err)
		}
		if want := []string{dir, "/nonexistent/cuda"}; !slices.Equal(le.Places, want) {
			t.Errorf("Places = %q, want %q", le.Places, want)
		}
	})
}

// TestOpenBrokenLibrary checks that a file that is present but does not
// load is reported with its path and the loader's reason.
func TestOpenBrokenLibrary(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "libcuda.so.1")
	if err := os.WriteFile(bad, []byte("not an ELF file"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Open(Options{LibDirs: []string{dir}})
	var le *LoadError
	if !errors.As(err, &le) {
		t.Fatalf("Open: err = %v, want a *LoadError", err)
	}
	if len(le.Failures) != 1 || !strings.HasPrefix(le.Failures[0], bad+": ") {
		t.Errorf("Failures = %q, want one entry for %s", le.Failures, bad)
	}
	if !strings.Contains(err.Error(), "found but failed to load") {
		t.Errorf("message %q should say the file failed to load", err)
	}
}

// TestCandidates checks the order in which a folder's files are tried:
// the sonames (newest first), then other versions, newest first; other
// libraries sharing the prefix are not candidates.
func TestCandidates(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"libnvrtc.so", "libnvrtc.so.12", "libnvrtc.so.12.4.99", "libnvrtc.so.13", "libnvrtc.so.13.0.48", "libnvrtc-builtins.so.13", "libnvrtc.alt"} {
		if err := os.WriteFile(filepath.Join(dir, f), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got := candidates(dir, libNVRTC)
	for i := range got {
		got[i] = filepath.Base(got[i])
	}
	want := []string{"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so", "libnvrtc.so.13.0.48", "libnvrtc.so.12.4.99"}
	if !slices.Equal(got, want) {
		t.Errorf("candidates = %q, want %q", got, want)
	}
}

// TestSearchDirsDefault checks the default search covers the documented
// places and honours $CUDA_PATH first.
func TestSearchDirsDefault(t *testing.T) {
	t.Setenv(LibPathEnv, "")
	os.Unsetenv(LibPathEnv)
	t.Setenv("CUDA_PATH", "/opt/mycuda")
	dirs, loader := searchDirs(nil)
	if !loader {
		t.Error("the default search must include the dynamic loader's")
	}
	if len(dirs) == 0 || dirs[0] != "/opt/mycuda/lib64" {
		t.Errorf("dirs = %q, want $CUDA_PATH/lib64 first", dirs)
	}
	for _, w := range []string{"/usr/local/cuda/lib64", "/usr/local/nvidia/lib64", "/usr/lib/x86_64-linux-gnu"} {
		if !slices.Contains(dirs, w) {
			t.Errorf("dirs = %q, missing %s", dirs, w)
		}
	}
}

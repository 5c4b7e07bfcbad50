package cudakernels

import (
	"fmt"
	"os"
	"testing"
)

// testCacheDir is a kernel cache shared by the tests of one run, set by
// TestMain before any test starts and never changed: compiling the whole
// module cold takes NVRTC seconds (the attention kernels are unrolled for
// six head widths), so tests other than TestCompileCache compile it once
// and load it from this cache afterwards.
var testCacheDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "dcdit-kernels-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "kernel cache for the tests:", err)
		os.Exit(1)
	}
	testCacheDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

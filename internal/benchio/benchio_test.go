package benchio

import (
	"runtime"
	"testing"
)

// The peak covers at least what the process touched.
func TestPeakMB(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("VmHWM is Linux's")
	}
	b := make([]byte, 64<<20)
	for i := range b {
		b[i] = 1
	}
	mb, ok := PeakMB()
	if !ok || !(mb >= 64) {
		t.Fatalf("peak RSS %g MiB (ok %v) after touching 64 MiB", mb, ok)
	}
	runtime.KeepAlive(b)
}

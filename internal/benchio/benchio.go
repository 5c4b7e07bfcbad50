// Package benchio holds what the large-I/O benchmarks (conversion, the
// streamed graft) measure alike: a timed write from a clean disk state and
// the process's peak resident set size.
package benchio

import (
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Timed runs f, which writes out, and returns how long it took. Before
// the clock starts, out is removed and everything synced (untimed):
// whichever run follows another large write otherwise pays for its
// writeback. An error from f fails the benchmark.
func Timed(b *testing.B, out string, f func() error) time.Duration {
	b.Helper()
	os.RemoveAll(out)
	b.StopTimer()
	syscall.Sync()
	b.StartTimer()
	start := time.Now()
	if err := f(); err != nil {
		b.Fatal(err)
	}
	return time.Since(start)
}

// PeakMB returns the process's peak resident set size in MiB (VmHWM),
// and false where /proc/self/status does not say it (not Linux).
func PeakMB() (float64, bool) {
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, false
	}
	for _, line := range strings.Split(string(status), "\n") {
		if kb, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			v, err := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(kb), "kB")), 64)
			return v / 1024, err == nil
		}
	}
	return 0, false
}

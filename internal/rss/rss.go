// Package rss reads the process's peak resident set size, which the
// memory benchmarks report.
package rss

import (
	"os"
	"strconv"
	"strings"
)

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

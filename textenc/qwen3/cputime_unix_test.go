//go:build unix

package qwen3

import "syscall"

// cpuSeconds is the CPU time this process has used. On a shared machine
// tokens per CPU-second show the forward pass's speed through the time
// slices other processes take.
func cpuSeconds() float64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}

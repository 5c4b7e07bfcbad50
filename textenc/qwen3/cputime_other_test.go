//go:build !unix

package qwen3

// cpuSeconds is unavailable here; the CPU-time metric reads 0.
func cpuSeconds() float64 { return 0 }

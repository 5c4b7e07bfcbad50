//go:build !unix

package gemm

// cpuSeconds is unknown here; benchmarks then report no per-CPU figure.
func cpuSeconds() float64 { return 0 }

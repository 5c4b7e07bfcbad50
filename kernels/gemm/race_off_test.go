//go:build !race

package gemm

// raceEnabled thins the serial sweeps under the race detector.
const raceEnabled = false

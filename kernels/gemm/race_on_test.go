//go:build race

package gemm

// raceEnabled thins the serial sweeps under the race detector, which slows
// them tenfold and has nothing to find there: they run on one goroutine.
const raceEnabled = true

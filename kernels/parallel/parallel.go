// Package parallel splits loops over the machine's cores. Kernels call it
// instead of starting goroutines themselves, so that nested parallel
// regions do not oversubscribe the CPU.
package parallel

import (
	"runtime"
	"sync"
)

// For runs body over [0, n) in contiguous chunks on up to GOMAXPROCS
// goroutines. grain is the smallest chunk worth a goroutine of its own; with
// n ≤ grain (or one core) body runs once on the calling goroutine.
func For(n, grain int, body func(lo, hi int)) {
	if n <= 0 {
		return
	}
	workers := Workers(n, grain)
	if workers == 1 {
		body(0, n)
		return
	}
	var wg sync.WaitGroup
	chunk := (n + workers - 1) / workers
	for lo := chunk; lo < n; lo += chunk {
		wg.Add(1)
		go func(lo, hi int) {
			defer wg.Done()
			body(lo, hi)
		}(lo, min(lo+chunk, n))
	}
	body(0, min(chunk, n))
	wg.Wait()
}

// Workers is how many goroutines For would use for n items of the given grain.
func Workers(n, grain int) int {
	w := runtime.GOMAXPROCS(0)
	if grain < 1 {
		grain = 1
	}
	if m := (n + grain - 1) / grain; m < w {
		w = m
	}
	return max(w, 1)
}

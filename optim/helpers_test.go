package optim

import (
	"math"
	"math/rand/v2"
	"testing"
)

// unitRoundoff is float32's unit roundoff, 2⁻²⁴.
const unitRoundoff = 1.0 / (1 << 24)

// useKernels makes k the active kernel set for the rest of the test.
func useKernels(t testing.TB, k *kernelSet) {
	t.Helper()
	prev := active
	active = k
	t.Cleanup(func() { active = prev })
}

// eachKernels runs f as a subtest once per kernel set this CPU has.
func eachKernels(t *testing.T, f func(t *testing.T)) {
	for _, k := range kernelSets {
		t.Run(k.name, func(t *testing.T) {
			useKernels(t, k)
			f(t)
		})
	}
}

func randn(r *rand.Rand, n int, scale float64) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(r.NormFloat64() * scale)
	}
	return x
}

func sameBits(a, b []float32) int {
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return i
		}
	}
	return -1
}

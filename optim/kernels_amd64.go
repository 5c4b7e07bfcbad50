//go:build amd64 && gc && !purego

package optim

import "golang.org/x/sys/cpu"

var avx2Kernels = kernelSet{
	name:       "avx2",
	adamw:      adamwAVX2Go,
	ema:        emaAVX2Go,
	scale:      scaleAVX2Go,
	sumSquares: sumSquaresAVX2Go,
}

var avx512Kernels = kernelSet{
	name:       "avx512",
	adamw:      adamwAVX512Go,
	ema:        emaAVX512Go,
	scale:      scaleAVX512Go,
	sumSquares: sumSquaresAVX512Go,
}

func init() {
	// x/sys/cpu reports AVX2 and AVX-512 only when the OS saves their
	// registers, so these flags are safe to act on.
	if cpu.X86.HasAVX2 && cpu.X86.HasFMA {
		kernelSets = append(kernelSets, &avx2Kernels)
	}
	if cpu.X86.HasAVX512F {
		kernelSets = append(kernelSets, &avx512Kernels)
	}
	selectKernels()
}

// The wrappers hand the assembly whole vectors (16 floats for AVX-512, 8
// for AVX2) and finish the tail with the generic loop; the re-slicing
// checks the lengths once so the assembly need not.

func adamwAVX512Go(p, g, m, v []float32, k *AdamWScalars) {
	g, m, v = g[:len(p)], m[:len(p)], v[:len(p)]
	n := len(p) &^ 15
	if n > 0 {
		adamwAVX512(&p[0], &g[0], &m[0], &v[0], n, k)
	}
	adamwGeneric(p[n:], g[n:], m[n:], v[n:], k)
}

func adamwAVX2Go(p, g, m, v []float32, k *AdamWScalars) {
	g, m, v = g[:len(p)], m[:len(p)], v[:len(p)]
	n := len(p) &^ 7
	if n > 0 {
		adamwAVX2(&p[0], &g[0], &m[0], &v[0], n, k)
	}
	adamwGeneric(p[n:], g[n:], m[n:], v[n:], k)
}

func emaAVX512Go(e, p []float32, decay, rest float32) {
	p = p[:len(e)]
	n := len(e) &^ 15
	if n > 0 {
		emaAVX512(&e[0], &p[0], n, decay, rest)
	}
	emaGeneric(e[n:], p[n:], decay, rest)
}

func emaAVX2Go(e, p []float32, decay, rest float32) {
	p = p[:len(e)]
	n := len(e) &^ 7
	if n > 0 {
		emaAVX2(&e[0], &p[0], n, decay, rest)
	}
	emaGeneric(e[n:], p[n:], decay, rest)
}

func scaleAVX512Go(x []float32, s float32) {
	n := len(x) &^ 15
	if n > 0 {
		scaleAVX512(&x[0], n, s)
	}
	scaleGeneric(x[n:], s)
}

func scaleAVX2Go(x []float32, s float32) {
	n := len(x) &^ 7
	if n > 0 {
		scaleAVX2(&x[0], n, s)
	}
	scaleGeneric(x[n:], s)
}

func sumSquaresAVX512Go(x []float32) float64 {
	var acc [8]float64
	n := len(x) &^ 31
	if n > 0 {
		sumSquaresAVX512(&x[0], n, &acc)
	}
	return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7])) + sumSquaresGeneric(x[n:])
}

func sumSquaresAVX2Go(x []float32) float64 {
	var acc [8]float64
	n := len(x) &^ 15
	if n > 0 {
		sumSquaresAVX2(&x[0], n, &acc)
	}
	return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7])) + sumSquaresGeneric(x[n:])
}

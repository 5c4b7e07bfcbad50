//go:build amd64 && gc && !purego

package optim

// Each stub computes, over n elements (a multiple of the vector width: 16
// for AVX512, 8 for AVX2; 32 and 16 for sumSquares), exactly what the named
// generic loop computes; see kernels.go.

// adamwAVX512 is adamwGeneric(p[:n], grad[:n], m[:n], v[:n], k).
//
//go:noescape
func adamwAVX512(p, grad, m, v *float32, n int, k *AdamWScalars)

// adamwAVX2 is adamwGeneric(p[:n], grad[:n], m[:n], v[:n], k).
//
//go:noescape
func adamwAVX2(p, grad, m, v *float32, n int, k *AdamWScalars)

// emaAVX512 is for i := range n { e[i] = e[i]*decay + rest*p[i] }.
//
//go:noescape
func emaAVX512(e, p *float32, n int, decay, rest float32)

// emaAVX2 is for i := range n { e[i] = e[i]*decay + rest*p[i] }.
//
//go:noescape
func emaAVX2(e, p *float32, n int, decay, rest float32)

// scaleAVX512 is for i := range n { x[i] *= s }.
//
//go:noescape
func scaleAVX512(x *float32, n int, s float32)

// scaleAVX2 is for i := range n { x[i] *= s }.
//
//go:noescape
func scaleAVX2(x *float32, n int, s float32)

// sumSquaresAVX512 adds float64(x[i])² for i < n into the eight lanes of
// acc (lane i%8 of four interleaved accumulators, then summed per lane).
//
//go:noescape
func sumSquaresAVX512(x *float32, n int, acc *[8]float64)

// sumSquaresAVX2 adds float64(x[i])² for i < n into the first four lanes of acc.
//
//go:noescape
func sumSquaresAVX2(x *float32, n int, acc *[8]float64)

//go:build amd64 && gc && !purego

package gemm

import "golang.org/x/sys/cpu"

// Blocking of the assembly kernels for a core with 32 KiB L1D and 1 MiB L2
// (Zen 4, measured there):
//   - kc = 384: the 12×384 A sliver (18 KiB), which every kernel call of a
//     row of tiles re-reads, sits in L1/L2 while 48 KiB B panels stream
//     past it, and the C tile is read and written once per 384 k steps;
//     k = 384, 1152 and 1536 are whole blocks. 256 measured within noise,
//     192 and 512 slower.
//   - nc = 384: the 384×384 B block (576 KiB) stays in L2 next to the A
//     slivers and C tiles passing through; 512 (768 KiB) measured a few
//     percent slower on m = 256 products, 256 on n = 1152 ones.
//   - mc = 1536: the A block only bounds memory (2.25 MiB, from L3) and how
//     often a B block is re-packed, so it is large.
//
// The AVX2 kernel's 6×384 sliver is smaller still; the same blocks serve.
const (
	avx512MR, avx512NR           = 12, 32
	avx512KC, avx512MC, avx512NC = 384, 1536, 384
	avx2MR, avx2NR               = 6, 16
	avx2KC, avx2MC, avx2NC       = 384, 1536, 384
)

// registerPlatform adds the assembly kernels, best first. x/sys/cpu only
// reports AVX-512 and AVX2 when the OS saves their registers; the packing
// routines need AVX, those widening bfloat16 AVX2.
func registerPlatform() {
	k512 := newKernelSet("avx512", avx512MR, avx512NR, avx512KC, avx512MC, avx512NC, sgemmKernel12x32AVX512)
	k512.transpose4, k512.copy2D = transpose4AVX, copy2DAVX
	if cpu.X86.HasAVX2 {
		k512.transpose4BF16, k512.copy2DBF16 = transpose4BF16AVX2, copy2DBF16AVX2
	}
	k512.tails = []tailKernel[float32]{{4, sgemmKernel4of12x32AVX512}, {8, sgemmKernel8of12x32AVX512}}
	registerSgemm(k512, cpu.X86.HasAVX512F && cpu.X86.HasAVX)
	k2 := newKernelSet("avx2", avx2MR, avx2NR, avx2KC, avx2MC, avx2NC, sgemmKernel6x16AVX2)
	k2.transpose4, k2.copy2D = transpose4AVX, copy2DAVX
	k2.transpose4BF16, k2.copy2DBF16 = transpose4BF16AVX2, copy2DBF16AVX2
	k2.tails = []tailKernel[float32]{{2, sgemmKernel2of6x16AVX2}, {4, sgemmKernel4of6x16AVX2}}
	registerSgemm(k2, cpu.X86.HasAVX2 && cpu.X86.HasFMA && cpu.X86.HasAVX)
}
